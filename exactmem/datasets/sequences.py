"""Sequence datasets for next-token memorization: tokens, multisets, consistency, generators.

A Transformer without positional encoding is permutation-equivariant, so at the last position
it can only see (last token, multiset of tokens). Labels must be a function of that key
(Kajitsuka & Sato 2025, eq. (5)); a dataset that violates it cannot be memorized and is rejected
with the conflicting sequences named. Appending a position coordinate to every token
(:func:`with_positions`) removes the constraint for real text.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, groupby
from typing import Any

import numpy as np
from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.core.exact_arrays import first_seen_ids, index_type, int_array, multiset_ids
from exactmem.core.wording import plural
from exactmem.datasets import vocab_arrays as dataset_arrays
from exactmem.datasets.dataset import Dataset, with_positions
from exactmem.datasets.token_rows import token_matrix
from exactmem.runtime.progress import counter, ignore

__all__ = [
    "SequenceView",
    "check_consistency",
    "check_next_token_consistency",
    "canonical_tokens",
    "multiset_of",
    "sequence_tokens",
    "token_geometry",
    "random_sequences",
    "random_token_arrays",
    "TokenArrays",
    "token_array",
    "view",
    "with_positions",
    "zen_of_python",
]

Multiset = tuple[tuple[int, int], ...]  # sorted (canonical token, count)


@dataclass(frozen=True, eq=False)
class SequenceView:
    """Canonical tokens (equal vectors share the smallest vocab index) and multisets, as arrays.

    A multiset is a sequence's sorted row of canonical tokens; ``multiset_ids`` number the
    distinct ones in order of first appearance. The tuple form (:attr:`multisets`) is built
    only when asked for (a million of them cost a gigabyte)."""

    canonical: tuple[int, ...]  # vocab index → canonical index
    tokens: tuple[int, ...]  # canonical tokens used, in increasing order
    sorted_tokens: np.ndarray  # (N, n): each sequence's canonical tokens, sorted (narrow ints)
    last: np.ndarray  # (N,): canonical last token per sequence
    multiset_ids: np.ndarray  # (N,): equal ids ↔ equal multisets, first-seen order
    first_of_multiset: np.ndarray  # per multiset id, its first sequence
    # (N, n): each sequence's canonical tokens in order (narrow ints; the checks read it
    # instead of converting the dataset's tuples again, a second or more at 10⁶ sequences)
    canonical_sequences: np.ndarray | None = None

    @cached_property
    def multisets(self) -> tuple[Multiset, ...]:
        """Per sequence, its multiset as sorted (canonical token, count) pairs."""
        return tuple(multiset_of(row) for row in self.sorted_tokens.tolist())

    def multiset(self, i: int) -> Multiset:
        return multiset_of(self.sorted_tokens[i].tolist())

    def key(self, i: int) -> tuple[int, Multiset]:
        return int(self.last[i]), self.multiset(i)


def multiset_of(row: list[int]) -> Multiset:
    """The multiset of a sorted row of tokens, as (token, count) pairs."""
    return tuple((t, len(list(run))) for t, run in groupby(row))


def view(ds: Dataset, *, by_index: bool = False) -> SequenceView:
    """Canonical tokens and multisets. ``by_index``: tokens are vocabulary indices (token-id
    inputs, Theorem E.1), so equal vectors at different indices stay different tokens."""
    canonical = tuple(range(len(ds.vocab))) if by_index else _canonical(ds)
    # narrow ints from here on: a quarter of int64's memory, and radix sorts (made narrow: at
    # N = 10⁷ an int64 copy of the tokens is 1.3 GB)
    narrow = index_type(len(canonical))
    tokens = token_array(ds, index_type(len(ds.vocab)))
    if canonical == tuple(range(len(canonical))):  # no two tokens equal: the indices themselves
        canon = tokens.astype(narrow, copy=False)
    else:
        canon = np.asarray(canonical, narrow)[tokens]
    ordered = np.sort(canon, axis=1)
    ids, firsts = multiset_ids(canon, sorted_rows=ordered)
    last = canon[:, -1].astype(np.int64) if canon.shape[1] else np.zeros(len(canon), np.int64)
    present = np.zeros(len(canonical), bool)  # (bincount would copy the tokens into int64)
    present[canon.reshape(-1)] = True
    used = np.flatnonzero(present).tolist()
    return SequenceView(canonical, tuple(used), ordered, last, ids, firsts, canon)


def _canonical(ds: Dataset) -> tuple[int, ...]:
    """Per vocabulary index, the least index of an equal vector: on the numerators and
    denominators as integer rows (rationals are kept in lowest terms, so equal vectors have
    equal rows; hashing a thousand fresh rationals costs more than the whole view), or on the
    vectors themselves when a part does not fit int64."""
    arrays = dataset_arrays.vocab_arrays(ds)
    if arrays is None:
        first: dict[tuple, int] = {}
        return tuple(first.setdefault(tuple(v), i) for i, v in enumerate(ds.vocab))
    ids, firsts = first_seen_ids(np.concatenate(arrays, axis=1))
    return tuple(firsts[ids].tolist())


def token_geometry(ds: Dataset, sv: SequenceView) -> tuple[mpq, mpq | None]:
    """(r², δ²) of the distinct tokens the sequences use
    (:func:`exactmem.datasets.dataset.radius_and_separation` of ``ds.vocab`` at ``sv.tokens``),
    measured
    once per view: the certificate's geometry and Lemma C.2's range both read them. Callers
    check :data:`exactmem.datasets.dataset.SEPARATION_LIMIT` first."""
    known = sv.__dict__.get("_geometry")  # the frozen view's cache, as cached_property's
    if known is None or known[0] is not ds.vocab:
        known = (ds.vocab, _token_geometry(ds, sv.tokens))
        sv.__dict__["_geometry"] = known
    return known[1]


def _token_geometry(ds: Dataset, tokens: tuple[int, ...]) -> tuple[mpq, mpq | None]:
    from exactmem.datasets.dataset import integer_geometry, radius_and_separation

    arrays = dataset_arrays.vocab_arrays(ds)
    if arrays is not None and (arrays[1][list(tokens)] == 1).all():  # integer tokens
        X = arrays[0][list(tokens)]
        r2, delta2 = integer_geometry(X.reshape(-1), len(X), X.shape[1])
        return mpq(r2), None if delta2 is None else mpq(delta2)
    return radius_and_separation([ds.vocab[t] for t in tokens])


def sequence_tokens(ds: Dataset, sv: SequenceView) -> np.ndarray:
    """The (N, n) canonical tokens of ``ds`` in order: the view's array when it has one."""
    if sv.canonical_sequences is not None:
        return sv.canonical_sequences
    return canonical_tokens(ds, sv.canonical)


def canonical_tokens(ds: Dataset, canonical: tuple[int, ...]) -> np.ndarray:
    """The (N, n) array of canonical tokens of the sequences."""
    return np.asarray(canonical, np.int64)[token_array(ds)]


def token_array(ds: Dataset, dtype=np.int64) -> np.ndarray:
    """The sequences as an (N, n) array of vocabulary indices (int64, or ``dtype``): the
    dataset's own array when it keeps one (:class:`~exactmem.datasets.token_rows.TokenRows`)."""
    return token_matrix(ds.sequences, dtype)


def restrict(ms: Multiset, A: set[int]) -> Multiset:
    """The multiset restricted to A (counts outside A set to 0; Kajitsuka & Sato, Def. B.1)."""
    return tuple((t, c) for t, c in ms if t in A)


def describe_multiset(ms: Multiset) -> str:
    return "{" + ", ".join(f"vocab[{t}]" + (f"×{c}" if c > 1 else "") for t, c in ms) + "}"


CONSISTENCY = {
    "sequence": "the same tokens in the same order",
    "next-token": "the same last token and the same multiset of tokens",
    "seq2seq": "the same token and the same multiset of tokens",
    "multiset": "the same multiset of tokens",
}


def check_consistency(
    ds: Dataset,
    mode: str = "next-token",
    sv: SequenceView | None = None,
    *,
    position_advice: bool = True,
) -> SequenceView:
    """Reject labels that a permutation-equivariant model cannot produce: exit 2 naming both.

    ``next-token``: labels are a function of (last token, multiset) (Kajitsuka & Sato 2025,
    eq. (5)); ``seq2seq``: of (token, multiset) at every position (eq. (10)); ``multiset``: of
    the multiset alone (deep sets, Theorem D.1). Identical inputs with different labels are
    named as such (no model memorizes them); the advice to append positions is given only for
    inputs that differ as sequences, and only when ``position_advice`` holds and the dataset
    does not carry positions already (token-id inputs take no positions).
    """
    expected_task = {"seq2seq": "seq2seq"}.get(mode, "next-token")
    if mode == "sequence" and ds.task == "seq2seq":
        expected_task = "seq2seq"  # positions encoded: labels a function of (sequence, position)
    if ds.task != expected_task:
        raise InputError(f"expected task {expected_task!r}, the dataset has {ds.task!r}")
    sv = sv or view(ds)
    width = sv.sorted_tokens.shape[1]
    if mode == "seq2seq":  # one key per (sequence, position)
        canon = sequence_tokens(ds, sv).astype(np.int64)
        keys = np.stack([canon.reshape(-1), np.repeat(sv.multiset_ids, width)], axis=1)
    elif mode == "sequence" and ds.task == "seq2seq":
        ids, _ = first_seen_ids(canonical_tokens(ds, sv.canonical))
        keys = np.stack([np.repeat(ids, width), np.tile(np.arange(width), len(ids))], axis=1)
    elif mode == "sequence":
        keys = sequence_tokens(ds, sv).astype(np.int64)
    elif mode == "next-token":
        keys = np.stack([sv.last, sv.multiset_ids], axis=1)
    else:
        keys = sv.multiset_ids

    def where(m: int) -> str:
        if ds.task == "seq2seq":
            return f"sequences[{m // width}][{m % width}]"
        return f"sequences[{m}]"

    labels = int_array(ds.labels).reshape(-1)
    ids, firsts = first_seen_ids(keys)
    owner = firsts[ids]
    clash = np.nonzero(labels != labels[owner])[0]
    conflicts = [
        (where(int(owner[m])), where(int(m)), labels[owner[m]], labels[m]) for m in clash[:5]
    ]
    total = len(clash)
    if conflicts:
        shown = "; ".join(f"{a} and {b} (labels {x} and {y})" for a, b, x, y in conflicts[:5])
        more = f" and {total - 5} more" if total > 5 else ""
        same = _identical(ds, sv, clash, owner[clash], width if ds.task == "seq2seq" else 0)
        parts = [f"{plural(total, 'label conflict')}: {shown}{more}."]
        if same.any():
            m = int(clash[same][0])
            parts.append(
                f"{where(int(owner[m]))} and {where(m)} are identical but labelled differently"
                f" ({_such_pairs(int(same.sum()))}): identical inputs cannot be memorized by any "
                "model, fix the labels."
            )
        if not same.all():
            m = int(clash[~same][0])
            advise = position_advice and not ds.meta.get("position_aware")
            parts.append(
                f"{where(int(owner[m]))} and {where(m)} differ but have {CONSISTENCY[mode]} "
                f"({_such_pairs(int((~same).sum()))}): a Transformer without positional "
                "encoding cannot tell them apart; "
                + (
                    "append positions to the tokens (--set position_aware=true) or fix the labels"
                    if advise
                    else "fix the labels"
                )
            )
        raise InputError(" ".join(parts))
    return sv


def _such_pairs(count: int) -> str:
    return "the only such pair" if count == 1 else f"{count} such pairs"


def _identical(
    ds: Dataset, sv: SequenceView, items: np.ndarray, owners: np.ndarray, width: int
) -> np.ndarray:
    """Per conflicting item, whether it and its owner are the same input: equal canonical
    sequences (and, for seq-to-seq items, ``width`` > 0, the same position)."""
    canon = canonical_tokens(ds, sv.canonical)
    if not width:
        return (canon[items] == canon[owners]).all(axis=1)
    rows, owner_rows = items // width, owners // width
    same_place = items % width == owners % width
    return same_place & (canon[rows] == canon[owner_rows]).all(axis=1)


def check_next_token_consistency(ds: Dataset, sv: SequenceView | None = None) -> SequenceView:
    """Reject labels that are not a function of (last token, multiset): exit 2 naming both."""
    return check_consistency(ds, "next-token", sv)


# --------------------------------------------------------------------------- generators


def _vocab(
    rng: random.Random,
    size: int,
    d: int,
    bound: int,
    denominator: int = 1,
    drawn: Callable[[int], None] = ignore,
) -> list:
    if (2 * bound + 1) ** d < size:
        raise InputError(f"cannot draw {size} distinct tokens from [−{bound}, {bound}]^{d}")
    seen: set = set()
    out = []
    while len(out) < size:
        v = tuple(rng.randint(-bound, bound) for _ in range(d))
        if v not in seen:
            seen.add(v)
            out.append(tuple(mpq(x, denominator) for x in v))
            drawn(len(out))
    return out


def random_sequences(
    N: int,
    n: int,
    d: int,
    vocab_size: int,
    C: int,
    seed: int = 0,
    *,
    family: str = "random",
    coord_bound: int = 1000,
    task: str = "next-token",
    labels_by: str = "key",
    progress: Callable[..., Any] | None = None,
) -> Dataset:
    """N sequences of n tokens with consistent next-token labels in 1..C.

    Families (the test families of the Theorem 4.1 checklist, docs/theorem-4-1.md):

    * ``random`` — tokens drawn with repeats;
    * ``permuted`` — half the sequences are permutations of earlier ones (same multiset; a
      shared last token forces the same label);
    * ``same_multiset`` — sequences share a multiset but differ in the last token, with
      different labels;
    * ``near_delta`` — tokens on a rational grid of spacing 1/1000 (δ ≈ 10⁻³).

    * ``distinct`` — all nN tokens pairwise distinct (the hypothesis of Theorem 4.3).

    Labels are random; a key seen before keeps its first label, so the data are consistent.
    The key is (last token, multiset), or the multiset alone with ``labels_by="multiset"``
    (deep sets); with ``task="seq2seq"`` every position gets a label keyed by (token,
    multiset). ``progress`` hears the tokens, sequences and labels drawn
    (:func:`exactmem.runtime.progress.counter`).
    """
    if family == "random":  # drawn as arrays (the same numbers), then tuples
        return random_token_arrays(
            N,
            n,
            d,
            vocab_size,
            C,
            seed,
            coord_bound=coord_bound,
            task=task,
            labels_by=labels_by,
            progress=progress,
        ).dataset()
    if min(N, n, d, vocab_size, C) < 1:
        raise InputError("random_sequences needs N, n, d, vocab_size, C ≥ 1")
    rng = random.Random(seed)
    if family == "distinct":  # all nN tokens pairwise distinct (Theorem 4.3's hypothesis)
        vocab_size = N * n
    draws = N * n if task == "seq2seq" else N  # the labels: one draw per item
    drawn = counter(progress, "generating sequences", vocab_size + N + draws)
    if family == "near_delta":
        vocab = _vocab(rng, vocab_size, d, max(coord_bound, vocab_size), 1000, drawn)
    elif family in ("random", "permuted", "same_multiset", "distinct"):
        vocab = _vocab(rng, vocab_size, d, coord_bound, drawn=drawn)
    else:
        raise InputError(f"unknown family {family!r}")
    seqs: list[tuple[int, ...]] = []
    token = list(range(vocab_size))  # one int object per token, shared by all sequences
    while len(seqs) < N:
        if family == "distinct":
            seqs.append(tuple(range(len(seqs) * n, (len(seqs) + 1) * n)))
        elif family == "permuted" and seqs and rng.random() < 0.5:
            base = list(rng.choice(seqs))
            rng.shuffle(base)
            seqs.append(tuple(base))
        elif family == "same_multiset" and seqs and rng.random() < 0.5:
            base = list(rng.choice(seqs))
            k = rng.randrange(n)
            base[k], base[-1] = base[-1], base[k]
            seqs.append(tuple(base))
        else:
            seqs.append(tuple(token[rng.randrange(vocab_size)] for _ in range(n)))
        drawn(vocab_size + len(seqs))
    labels = _random_labels(seqs, task, labels_by, C, rng, lambda k: drawn(vocab_size + N + k))
    drawn(vocab_size + N + draws)
    return Dataset(
        task=task,
        labels=labels,
        num_classes=C,
        vocab=tuple(vocab),
        sequences=tuple(seqs),
        meta=_generator_meta(family, seed, labels_by),
    )


def _generator_meta(family: str, seed: int, labels_by: str) -> dict:
    return {"generator": "random_sequences", "family": family, "seed": seed, "labels_by": labels_by}


TUPLE_CHUNK = 1 << 18  # sequences turned into tuples at a time (bounds the lists in between)


@dataclass(frozen=True, eq=False)
class TokenArrays:
    """A generated sequence dataset as arrays — what a container file stores — without the
    tuple per sequence a :class:`~exactmem.datasets.dataset.Dataset` holds (10⁷ of them cost
    gigabytes)."""

    task: str
    num_classes: int
    vocab: tuple  # of exact vectors
    tokens: np.ndarray  # (N, n) vocabulary indices
    labels: np.ndarray  # (N,), or (N, n) for seq2seq
    meta: dict

    @property
    def size(self) -> int:
        return len(self.tokens)

    @property
    def dim(self) -> int:
        return len(self.vocab[0]) if self.vocab else 0

    def dataset(self) -> Dataset:
        """The same data as a :class:`~exactmem.datasets.dataset.Dataset` (one int object per token,
        shared by all sequences)."""
        shared = np.array(range(len(self.vocab)), dtype=object)
        seqs: list[tuple[int, ...]] = []
        for start in range(0, self.size, TUPLE_CHUNK):
            seqs.extend(map(tuple, shared[self.tokens[start : start + TUPLE_CHUNK]].tolist()))
        labels = self.labels.tolist()
        return Dataset(
            task=self.task,
            labels=tuple(map(tuple, labels) if self.task == "seq2seq" else labels),
            num_classes=self.num_classes,
            vocab=self.vocab,
            sequences=tuple(seqs),
            meta=self.meta,
        )


def random_token_arrays(
    N: int,
    n: int,
    d: int,
    vocab_size: int,
    C: int,
    seed: int = 0,
    *,
    coord_bound: int = 1000,
    task: str = "next-token",
    labels_by: str = "key",
    progress: Callable[..., Any] | None = None,
) -> TokenArrays:
    """:func:`random_sequences` of the ``random`` family as arrays: the same draws
    (:mod:`exactmem.datasets.mt_draws` replays ``random.Random``), the same dataset."""
    if min(N, n, d, vocab_size, C) < 1:
        raise InputError("random_sequences needs N, n, d, vocab_size, C ≥ 1")
    rng = random.Random(seed)
    draws = N * n if task == "seq2seq" else N
    drawn = counter(progress, "generating sequences", vocab_size + N + draws)
    vocab = _vocab(rng, vocab_size, d, coord_bound, drawn=drawn)
    tokens = _random_tokens(rng, N, n, vocab_size, lambda k: drawn(vocab_size + k))
    labels = _label_array(tokens, task, labels_by, C, rng)
    drawn(vocab_size + N + draws)
    return TokenArrays(
        task, C, tuple(vocab), tokens, labels, _generator_meta("random", seed, labels_by)
    )


def _random_tokens(rng: random.Random, N: int, n: int, vocab_size: int, drawn=ignore) -> np.ndarray:
    """(N, n) tokens, each ``rng.randrange(vocab_size)`` in order
    (:mod:`exactmem.datasets.mt_draws`);
    ``drawn`` hears the sequences drawn."""
    from exactmem.datasets.mt_draws import randbelow

    out = np.empty((N, n), index_type(vocab_size))
    step = max(1, (1 << 22) // max(n, 1))
    for start in range(0, N, step):
        stop = min(N, start + step)
        out[start:stop] = randbelow(rng, vocab_size, (stop - start) * n).reshape(-1, n)
        drawn(stop)
    return out


def _random_labels(
    seqs, task: str, labels_by: str, C: int, rng: random.Random, drawn=ignore
) -> tuple:
    """One draw in 1..C per sequence (per position for seq-to-seq), in order; an item keeps the
    draw of the first item with its key: (last token, multiset), the multiset, or (token,
    multiset) at a position. Keys are compared as arrays (a million multisets as tuples would
    cost a gigabyte)."""
    if not seqs:
        return ()
    N, n = len(seqs), len(seqs[0])
    tokens = np.fromiter(chain.from_iterable(seqs), np.int64, N * n).reshape(N, n)
    labels = _label_array(tokens, task, labels_by, C, rng).tolist()
    drawn(len(labels))
    if task == "seq2seq":
        return tuple(map(tuple, labels))
    return tuple(labels)


def _label_array(
    tokens: np.ndarray, task: str, labels_by: str, C: int, rng: random.Random
) -> np.ndarray:
    """:func:`_random_labels` of the (N, n) ``tokens``: (N,) labels, (N, n) for seq2seq."""
    N, n = tokens.shape
    ms_ids, _ = first_seen_ids(np.sort(tokens, axis=1))
    if task == "seq2seq":
        keys = np.stack([tokens.reshape(-1), np.repeat(ms_ids, n)], axis=1)
    elif labels_by == "multiset":
        keys = ms_ids
    else:
        keys = np.stack([tokens[:, -1], ms_ids], axis=1)
    from exactmem.datasets.mt_draws import randbelow

    draws = randbelow(rng, C, len(keys), index_type(C + 1)) + 1  # rng.randint(1, C) per key
    ids, first = first_seen_ids(keys)
    labels = draws[first[ids]]
    return labels.reshape(N, n) if task == "seq2seq" else labels


def zen_text() -> str:
    """The Zen of Python: the text of the standard ``this`` module (importing it prints)."""
    import codecs

    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return codecs.decode(this.s, "rot13")


def zen_of_python(n: int = 32, *, unit: str = "char", limit: int | None = None) -> Dataset:
    """Next-token prediction on the Zen of Python: each window of n characters (or words) is a
    sequence, the following one its label. Symbol s is the token (id(s),) ∈ Q¹; labels are
    symbol ids 1..V."""
    text = zen_text()
    if unit == "char":
        symbols: list[str] = list(text)
    elif unit == "word":
        symbols = re.findall(r"[a-z']+", text.lower())
    else:
        raise InputError(f"unit must be 'char' or 'word', got {unit!r}")
    ids: dict[str, int] = {}
    for sym in symbols:
        ids.setdefault(sym, len(ids) + 1)
    vocab = tuple((mpq(i),) for i in range(1, len(ids) + 1))
    seqs, labels = [], []
    for k in range(len(symbols) - n):
        seqs.append(tuple(ids[sym] - 1 for sym in symbols[k : k + n]))
        labels.append(ids[symbols[k + n]])
        if limit and len(seqs) == limit:
            break
    return Dataset(
        task="next-token",
        labels=tuple(labels),
        num_classes=len(ids),
        vocab=vocab,
        sequences=tuple(seqs),
        meta={"generator": "zen_of_python", "n": n, "unit": unit, "symbols": list(ids)},
    )
