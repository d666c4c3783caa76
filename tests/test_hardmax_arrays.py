"""Hardmax attention with unequal scores on whole arrays (exactmem.evaluate.hardmax): the same
values, stream rows, row order and tie statistics as the reference's sequence-by-sequence
evaluation, on random heads with rational maps, ties, context masks and last-position runs."""

import random

import pytest
from gmpy2 import mpq
from support import both

from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer


def _map(rng, rows, cols, den, dense=False):
    entries = tuple(
        tuple(
            (j, rng.choice([-3, -2, -1, 1, 2, 3]))
            for j in range(cols)
            if dense or rng.random() < 0.6
        )
        for _ in range(rows)
    )
    return Affine(cols, entries, (0,) * rows, den)


def _model(rng, width, heads, mask):
    atts = []
    for _ in range(2):
        hs = []
        for _ in range(heads):
            s = rng.randint(1, 2)
            hs.append(
                AttentionHead(
                    _map(rng, s, width, rng.choice([1, 2]), dense=True),
                    _map(rng, s, width, 1, dense=True),
                    _map(rng, s, width, rng.choice([1, 3])),
                    _map(rng, width, s, rng.choice([1, 2])),
                )
            )
        atts.append(Attention(tuple(hs), "hardmax", mask=mask))
    relu = MLP((_map(rng, 3, width, 1), _map(rng, width, 3, 1)), True)
    return Transformer(width, (atts[0], relu, atts[1]))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mask", ["none", "context"])
@pytest.mark.parametrize("positions", ["all", "last"])
def test_arrays_match_the_reference(seed, mask, positions):
    rng = random.Random(seed)
    width = rng.randint(1, 3)
    vocab = [tuple(mpq(rng.randint(-2, 2), rng.choice([1, 2])) for _ in range(width))
             for _ in range(4)]  # fmt: skip
    n = rng.randint(3, 5)
    sequences = [tuple(rng.randrange(4) for _ in range(n)) for _ in range(12)]
    model = _model(rng, width, rng.randint(1, 2), mask)
    trace = both(model, vocab, sequences, positions=positions)
    assert sum(a.unequal_columns for a in trace.attention) > 0  # the arrays path ran
