"""The linear-independence assumptions of Mahdavi, Liao & Thrampoulidis 2024, checked exactly.

* A1 (queries): the query family {e^(1), …, e^(T)} has Kruskal rank ≥ n — every n of them are
  linearly independent. Computing a Kruskal rank is NP-hard; the check is exhaustive when the
  number of n-subsets is at most ``max_subsets``, otherwise it tries that many random subsets
  and says so (the paper also samples random n-subsets).
* A2 (contexts): every context E^(t) ∈ Q^{n×d} has rank n.

Ranks are exact (python-flint ``fmpq_mat``); violations are reported per example.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flint import fmpq, fmpq_mat
from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset

__all__ = [
    "KruskalReport",
    "context_rank_violations",
    "kruskal_rank_at_least",
    "mahdavi_assumptions",
    "mahdavi_capacity",
    "mahdavi_examples",
    "rank",
    "rank_of",
    "shared_context_rank_ceiling",
]

Vec = tuple[mpq, ...]


def rank(vectors: Sequence[Sequence[mpq]]) -> int:
    """Exact rank over Q of the matrix whose rows are ``vectors``."""
    if not vectors:
        return 0
    rows = [[fmpq(int(mpq(x).numerator), int(mpq(x).denominator)) for x in v] for v in vectors]
    return fmpq_mat(rows).rank()


def context_rank_violations(contexts: Sequence[Sequence[Sequence[mpq]]]) -> list[tuple[int, int]]:
    """A2: (example index, rank) of every context whose n tokens are linearly dependent."""
    return [(t, r) for t, ctx in enumerate(contexts) if (r := rank(ctx)) != len(ctx)]


@dataclass(frozen=True)
class KruskalReport:
    """Whether every k-subset tried is linearly independent."""

    holds: bool
    k: int
    exhaustive: bool
    subsets_tried: int
    subsets_total: int
    violation: tuple[int, ...] | None = None  # indices of a dependent k-subset

    def describe(self) -> str:
        how = "all" if self.exhaustive else "randomly sampled"
        if self.holds:
            return (
                f"Kruskal rank ≥ {self.k}: {how} {self.subsets_tried} of {self.subsets_total}"
                f" {self.k}-subsets are independent"
            )
        return f"Kruskal rank < {self.k}: the queries {list(self.violation or ())} are dependent"


def kruskal_rank_at_least(
    vectors: Sequence[Sequence[mpq]], k: int, *, max_subsets: int = 20_000, seed: int = 0
) -> KruskalReport:
    """A1: are all k-subsets of ``vectors`` linearly independent? Exhaustive when C(T, k) ≤
    ``max_subsets``, otherwise ``max_subsets`` random subsets (the report says which)."""
    T = len(vectors)
    total = math.comb(T, k)
    if k > T:
        return KruskalReport(False, k, True, 0, 0, tuple(range(T)))
    exhaustive = total <= max_subsets
    subsets: Iterable[tuple[int, ...]]
    if exhaustive:
        subsets = itertools.combinations(range(T), k)
    else:
        rng = random.Random(seed)
        subsets = (tuple(sorted(rng.sample(range(T), k))) for _ in range(max_subsets))
    tried = 0
    for subset in subsets:
        tried += 1
        if rank([vectors[i] for i in subset]) < k:
            return KruskalReport(False, k, exhaustive, tried, total, subset)
    return KruskalReport(True, k, exhaustive, tried, total)


def rank_of(rows: Sequence[Sequence[mpq]]) -> int:
    """Exact rank over Q of a matrix given by its rows (0 for no rows)."""
    return rank(rows)


def mahdavi_capacity(H: int, n: int, d_h: int) -> int:
    """Mahdavi et al. 2024, Theorem 1: H heads of dimension d_h memorize
    T = H(min(n, d_h) − 1) + 1 examples of n context tokens."""
    return H * (min(n, d_h) - 1) + 1


def mahdavi_examples(ds: Dataset) -> tuple[list[Vec], list[list[Vec]]]:
    """(queries, contexts) of a next-token dataset: the last token of each sequence is the
    query, the others its context."""
    if ds.task != "next-token":
        raise InputError(f"mahdavi24 needs task 'next-token', the dataset has {ds.task!r}")
    n1 = len(ds.sequences[0])
    if n1 < 3:
        raise InputError("mahdavi24 needs sequences of n ≥ 2 context tokens and a query")
    queries = [tuple(ds.vocab[s[-1]]) for s in ds.sequences]
    contexts = [[tuple(ds.vocab[t]) for t in s[:-1]] for s in ds.sequences]
    return queries, contexts


def mahdavi_assumptions(
    queries: Sequence[Vec],
    contexts: Sequence[Sequence[Vec]],
    *,
    max_subsets: int = 20_000,
    seed: int = 0,
) -> KruskalReport:
    """n < d, then A2 and A1, exact; violations are input errors naming the examples."""
    n, d = len(contexts[0]), len(queries[0])
    if n >= d:
        raise InputError(f"Mahdavi et al. assume n < d; the contexts have n = {n} tokens in Q^{d}")
    bad = context_rank_violations(contexts)
    if bad:
        shown = ", ".join(f"sequences[{t}] (rank {r})" for t, r in bad[:5])
        raise InputError(f"A2 fails: {len(bad)} contexts are not of rank n = {n}: {shown}")
    report = kruskal_rank_at_least(
        list(queries), min(n, len(queries)), max_subsets=max_subsets, seed=seed
    )
    if not report.holds:
        raise InputError(
            f"A1 fails: the queries of sequences {list(report.violation or ())} are "
            f"linearly dependent (Kruskal rank < n = {n})"
        )
    return report


def shared_context_rank_ceiling(contexts: Sequence[Sequence[Vec]], H: int) -> int | None:
    """Mahdavi et al. 2024, Proposition 2 (shared context): every attention vector lies in the
    simplex, so Eᵀa ranges over an affine set of dimension rank([x_j − x_1]_j) and the T rows of
    Z lie in an affine space of dimension H·that: rank Z ≤ H·dim + 1 whatever the weights.
    Returns the ceiling when all contexts are equal (None otherwise)."""
    if any(c != contexts[0] for c in contexts):
        return None
    E = contexts[0]
    diffs = [[a - b for a, b in zip(x, E[0], strict=True)] for x in E[1:]]
    return H * rank_of(diffs) + 1
