"""Lemma B.2 (Kajitsuka & Sato 2025): the statement holds by a union bound; the printed
construction (shift by K) fails on multisets of different sizes."""

import itertools
import math
import random

import mpmath
import numpy as np
import pytest
from gmpy2 import mpq
from support import certify_built

from exactmem.claims.proofs import GENERATORS
from exactmem.constructions import ks25
from exactmem.datasets.sequences import random_sequences


def rows_of(multisets):
    """Multisets as rows of sorted tokens, padded with a token outside every support."""
    pad = 1 + max(t for ms in multisets for t, _ in ms)
    width = max(sum(c for _, c in ms) for ms in multisets)
    rows = np.full((len(multisets), width), pad, np.int64)
    for i, ms in enumerate(multisets):
        flat = [t for t, c in ms for _ in range(c)]
        rows[i, : len(flat)] = flat
    return rows


def statement_holds(multisets, f):
    """(4MN²|S|√π, √|S|)-separated sums and f: S → [⌈4N²|S|√π⌉], in 50-digit mpmath."""
    N, S = len(multisets), len({t for ms in multisets for t, _ in ms})
    M = max(sum(c for _, c in ms) for ms in multisets)
    sums = ks25.sequence_sums(multisets, f)
    with mpmath.workdps(50):
        top = mpmath.ceil(4 * N**2 * S * mpmath.sqrt(mpmath.pi))
        in_range = all(1 <= v <= top for v in f.values())
        bounded = all(abs(s) <= 4 * M * N**2 * S * mpmath.sqrt(mpmath.pi) for s in sums)
        apart = all(abs(a - b) >= mpmath.sqrt(S) for a, b in itertools.combinations(sums, 2))
    return in_range and bounded and apart


# {a}, {b, b}: the printed construction's counterexample (sizes 1 and 2)
PAIR = [((0, 1),), ((1, 2),)]


def test_printed_construction_fails_where_the_statement_holds():
    printed = ks25.paper_weights(PAIR, [0, 1], 2, (mpq(4, 5), mpq(-3, 5)))
    assert ks25.sequence_sums(PAIR, printed) == [40, 40]
    assert not statement_holds(PAIR, printed)
    union = ks25.union_bound_weights(rows_of(PAIR), [0, 1], random.Random(0))
    assert statement_holds(PAIR, union)
    assert all(v % 2 == 0 for v in union.values())  # f = ⌈√|S|⌉·g = 2g


@pytest.mark.parametrize("seed", range(40))
def test_union_bound_construction_meets_the_statement(seed):
    """Random multisets of different sizes over supports of 1–12 tokens."""
    rng = random.Random(seed)
    tokens = rng.randint(1, 12)
    multisets = set()
    while len(multisets) < rng.randint(2, 30):
        row = sorted(rng.randrange(tokens) for _ in range(rng.randint(1, 6)))
        multisets.add(tuple((t, row.count(t)) for t in sorted(set(row))))
    multisets = sorted(multisets)
    S = sorted({t for ms in multisets for t, _ in ms})
    f = ks25.union_bound_weights(rows_of(multisets), S, random.Random(seed))
    assert set(f) == set(S)
    assert statement_holds(multisets, f)


def test_the_union_bound_itself_exhaustively():
    """Over every g ∈ [N²]^S, a pair of distinct multisets collides for at most N^(2|S|−2)
    choices of g, so fewer than half of all g have any collision (N = 3 multisets of the
    Transformer counterexample restricted to A: {a}, {b, b}, {a, b})."""
    multisets = [((0, 1),), ((1, 2),), ((0, 1), (1, 1))]
    N, S = len(multisets), 2
    bad = 0
    for g in itertools.product(range(1, N * N + 1), repeat=S):
        sums = ks25.sequence_sums(multisets, dict(enumerate(g)))
        bad += len(set(sums)) < len(sums)
    pairs = N * (N - 1) // 2
    assert bad <= pairs * (N * N) ** (S - 1)  # the union bound, counted
    assert bad < (N * N) ** S / 2


def test_union_weights_are_seeded():
    rows = rows_of([((0, 1),), ((1, 2),), ((0, 1), (1, 1))])
    draws = [ks25.union_bound_weights(rows, [0, 1], random.Random(s)) for s in (5, 5, 6)]
    assert draws[0] == draws[1]
    assert ks25.union_bound_weights(rows, [], random.Random(0)) == {}


def test_union_construction_certifies_where_the_printed_one_is_refuted():
    bad = GENERATORS["lemma_b2_counterexample"]({})
    printed, _ = ks25.build(
        bad, {"sequence_weights": "paper", "paper_direction": "380/461,-261/461"}
    )
    assert certify_built(printed, bad).verdict == "refuted"
    model, w = ks25.build(bad, {"sequence_weights": "union", "seed": 0})
    cert = certify_built(model, bad)
    assert cert.verdict == "verified"
    checks = {c.name: c for c in cert.checks}
    # f = ⌈√2⌉·g: the evaluated sums are at least ⌈√|A|⌉ = 2 apart
    assert mpq(checks["ks25.sequence_sums"].figures["min_sum_gap"]) >= 2
    assert checks["ks25.phi_range"].passed


def test_union_construction_on_random_sequences():
    ds = random_sequences(120, 6, 3, 30, 5, seed=4)
    model, w = ks25.build(ds, {"sequence_weights": "union", "seed": 4})
    scale = math.isqrt(len(w.witness_tokens) - 1) + 1
    assert all(v % scale == 0 and v <= scale * w.distinct_multisets**2 for v in w.weights)
    cert = certify_built(model, ds)
    assert cert.verdict == "verified"
    gap = mpq(next(c for c in cert.checks if c.name == "ks25.sequence_sums").figures["min_sum_gap"])
    assert gap >= scale
