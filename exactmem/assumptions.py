"""The linear-independence assumptions of Mahdavi, Liao & Thrampoulidis 2024, checked exactly.

* A1 (queries): the query family {e^(1), …, e^(T)} has Kruskal rank ≥ n — every n of them are
  linearly independent. Computing a Kruskal rank is NP-hard; the check is exhaustive when the
  number of n-subsets is at most ``max_subsets``, otherwise it tries that many random subsets
  and says so (the paper also samples; attention_memorization_papers.md §A.2).
* A2 (contexts): every context E^(t) ∈ Q^{n×d} has rank n.

Ranks are exact (python-flint ``fmpq_mat``); violations are reported per example.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from flint import fmpq, fmpq_mat
from gmpy2 import mpq

__all__ = ["KruskalReport", "context_rank_violations", "kruskal_rank_at_least", "rank"]


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
        return f"Kruskal rank < {self.k}: the queries {list(self.violation)} are dependent"


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
