"""The dataset generators a claim file's instances name (``generator = "random_points"``, …),
with the parameters each takes: the data side of the proof regression
(:mod:`exactmem.claims.proofs`).
Some generators are a construction's own (an adversarial family it is built for), so this module
sits on the untrusted side beside the builders; nothing trusted imports it."""

from __future__ import annotations

from collections.abc import Callable

# each generator takes the instance's parameters and a progress reporter (None: silent)


def _gen_random_points(p: dict, progress=None):
    from exactmem.datasets.dataset import random_points

    return random_points(
        p["N"],
        p["d"],
        p["C"],
        p.get("seed", 0),
        coord_bound=p.get("coord_bound", 1000),
        denominator=p.get("denominator", 1),
        progress=progress,
    )


def _gen_label_extremes(p: dict, progress=None):
    """Random points whose labels are all C (C = 2^c − 1 or 2^c exercises the label width)."""
    from dataclasses import replace

    ds = _gen_random_points(p, progress)
    return replace(ds, labels=(p["C"],) * ds.size)


def _gen_random_sequences(p: dict, progress=None):
    from exactmem.datasets.sequences import random_sequences

    return random_sequences(
        p["N"],
        p["n"],
        p["d"],
        p.get("vocab", 1),
        p["C"],
        p.get("seed", 0),
        family=p.get("family", "random"),
        coord_bound=p.get("coord_bound", 1000),
        task=p.get("task", "next-token"),
        labels_by=p.get("labels_by", "key"),
        progress=progress,
    )


def _gen_lemma_b2_counterexample(p: dict, progress=None):
    """Three sequences whose restricted multisets are {a}, {b, b}, {a, b} (Lemma B.1 picks
    A = {a, b}); the first two share the last token e and differ in label."""
    from gmpy2 import mpq

    from exactmem.datasets.dataset import Dataset

    vocab = ((mpq(1), mpq(0)), (mpq(0), mpq(1)), (mpq(2), mpq(2)), (mpq(-1), mpq(3)))
    if p.get("task", "next-token") == "seq2seq":  # the same collision at the last position
        labels: tuple = ((1, 1, 1), (1, 1, 2), (1, 1, 1))
    else:
        labels = (1, 2, 1)
    return Dataset(
        "seq2seq" if p.get("task") == "seq2seq" else "next-token",
        labels,
        2,
        vocab=vocab,
        sequences=((0, 2, 3), (1, 1, 3), (0, 1, 3)),
        meta={"generator": "lemma_b2_counterexample"},
    )


def _gen_zen(p: dict, progress=None):
    from exactmem.datasets.sequences import zen_of_python

    return zen_of_python(p.get("n", 32), unit=p.get("unit", "char"), limit=p.get("limit"))


def _gen_attention(p: dict, progress=None):
    from exactmem.constructions.mahdavi24 import random_instance

    return random_instance(
        p["T"],
        p["n"],
        p["d"],
        p["C"],
        p.get("seed", 0),
        shared_context=p.get("shared_context", False),
        progress=progress,
    )


def _gen_associations(p: dict, progress=None):
    from exactmem.constructions.dana25 import random_associations

    return random_associations(p["vocab"], p["S"], p["T"], p.get("seed", 0), progress=progress)


def _gen_ks24(p: dict, progress=None):
    from exactmem.constructions.ks24 import random_instance

    return random_instance(
        p["N"], p["n"], p["d"], p["vocab"], p["C"], p.get("seed", 0), repeats=p.get("repeats", 0)
    )


def _gen_contexts(p: dict, progress=None):
    from exactmem.constructions.madden24 import random_contexts

    return random_contexts(
        p["N"], p["n"], p["vocab"], p.get("seed", 0), targets=p.get("targets", True)
    )


GENERATORS: dict[str, Callable] = {
    "ks24": _gen_ks24,
    "contexts": _gen_contexts,
    "attention": _gen_attention,
    "associations": _gen_associations,
    "random_points": _gen_random_points,
    "label_extremes": _gen_label_extremes,
    "random_sequences": _gen_random_sequences,
    "lemma_b2_counterexample": _gen_lemma_b2_counterexample,
    "zen": _gen_zen,
}


_POINTS = {"N": int, "d": int, "C": int, "seed": int, "coord_bound": int, "denominator": int}
GENERATOR_PARAMS: dict[str, dict[str, type | tuple[str, ...]]] = {
    "random_points": _POINTS,
    "label_extremes": _POINTS,
    "random_sequences": {
        "N": int,
        "n": int,
        "d": int,
        "C": int,
        "vocab": int,
        "seed": int,
        "coord_bound": int,
        "family": ("random", "permuted", "same_multiset", "near_delta", "distinct"),
        "task": ("next-token", "seq2seq"),
        "labels_by": ("key", "multiset"),
    },
    "lemma_b2_counterexample": {"seed": int, "task": ("next-token", "seq2seq")},  # fixed data
    "zen": {"n": int, "unit": ("char", "word"), "limit": int, "seed": int},
    "attention": {"T": int, "n": int, "d": int, "C": int, "seed": int, "shared_context": bool},
    "associations": {"vocab": int, "S": int, "T": int, "seed": int},
    "ks24": {"N": int, "n": int, "d": int, "vocab": int, "C": int, "seed": int, "repeats": int},
    "contexts": {"N": int, "n": int, "vocab": int, "seed": int, "targets": bool},
}
REQUIRED_PARAMS = {
    "random_points": ("N", "d", "C"),
    "label_extremes": ("N", "d", "C"),
    "random_sequences": ("N", "n", "d", "C"),
    "lemma_b2_counterexample": (),
    "zen": (),
    "attention": ("T", "n", "d", "C"),
    "associations": ("vocab", "S", "T"),
    "ks24": ("N", "n", "d", "vocab", "C"),
    "contexts": ("N", "n", "vocab"),
}


def generated_size(gen: str, p: dict) -> dict[str, int]:
    """The token indices and rational coordinates generator ``gen`` makes for parameters
    ``p`` (:func:`exactmem.core.limits.generated_size_problem` bounds them)."""
    N, n, d = p.get("N", p.get("T", 0)), p.get("n", 1), p.get("d", 1)
    vocab = p.get("vocab", 1)
    if gen in ("random_points", "label_extremes"):
        return {"coordinates": N * d}
    if gen == "attention":  # n context vectors and the query, each in Q^d
        return {"coordinates": N * (n + 1) * d}
    if gen == "associations":
        return {"tokens": N * p.get("S", 1), "coordinates": vocab}
    if gen == "contexts":
        return {"tokens": N * n, "coordinates": vocab}
    if gen in ("random_sequences", "ks24"):
        return {"tokens": 2 * N * n, "coordinates": vocab * d}  # seq2seq: a label per token
    if gen == "zen":
        return {"tokens": p.get("limit", 0) * n}
    return {}
