"""The rank-one shortcut (exactmem.checks.rank_one) against the ball evaluator it stands in for,
over
the IR features it can meet: softmax and uniform scores, masks none/causal/context, ReLU and
GELU FFNs (GELU refused), plain and residual FFNs of two and three layers. Where the scores are
equal the exact reference value must lie in the shortcut's enclosure."""

import random

import pytest
from gmpy2 import mpq

from exactmem.checks.rank_one import shortcut
from exactmem.checks.seq2seq_balls import _LAST_RUN, _balls
from exactmem.core.balls import ball_bounds
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.evaluate.reference import run
from exactmem.evaluate.softmax import run_balls


def _model(rng, d, score, mask, activation, residual, depth):
    w = [rng.choice([-3, -1, 1, 2]) for _ in range(d)]
    K = 6
    first = Affine.from_dense(
        [[f * x for x in w] for f in (rng.choice([-2, -1, 1, 3]) for _ in range(K))],
        [rng.randint(-20, 20) for _ in range(K)],
        2,
    )
    layers = [first]
    width = K
    for j in range(depth - 1):
        out = d if (j == depth - 2 and residual) else (1 if j == depth - 2 else 4)
        layers.append(
            Affine.from_dense(
                [[rng.randint(-3, 3) for _ in range(width)] for _ in range(out)],
                [rng.randint(-4, 4) for _ in range(out)],
                rng.choice([1, 2]),
            )
        )
        width = out
    row = [[rng.randint(-2, 2) for _ in range(d)]]
    head = AttentionHead(
        Affine.from_dense(row, None, 4),
        Affine.from_dense([[rng.randint(-2, 2) for _ in range(d)]], None, 1),
        Affine.from_dense([[rng.randint(-2, 2) for _ in range(d)]], None, 1),
        Affine.from_dense([[rng.randint(-1, 1)] for _ in range(d)], None, 2),
    )
    ffn = MLP(tuple(layers), residual=residual, activation=activation)
    unembed = Affine(d, (((0, 1),),), (0,)) if residual else None
    return Transformer(d, (Attention((head,), score, "", mask), ffn), None, unembed)


def _data(rng, d):
    vocab = tuple(tuple(mpq(rng.randint(-5, 5)) for _ in range(d)) for _ in range(6))
    seqs = tuple(tuple(rng.randrange(6) for _ in range(3)) for _ in range(4))
    return Dataset("seq2seq", tuple((1, 1, 1) for _ in seqs), 1, vocab=vocab, sequences=seqs)


def _overlap(a, b) -> bool:
    (lo1, hi1), (lo2, hi2) = ball_bounds(a), ball_bounds(b)
    return lo1 <= hi2 and lo2 <= hi1


FEATURES = [
    (score, mask, activation, residual, depth)
    for score in ("softmax", "uniform")
    for mask in ("none", "causal", "context")
    for activation in ("relu", "gelu")
    for residual in (False, True)
    for depth in (2, 3)
]


@pytest.mark.parametrize("features", FEATURES, ids=lambda f: "-".join(map(str, f)))
def test_the_shortcut_agrees_with_the_ball_evaluator_or_refuses(features):
    score, mask, activation, residual, depth = features
    rng = random.Random(hash(features) % 1000)
    for _ in range(3):
        d = rng.choice([2, 3])
        model = _model(rng, d, score, mask, activation, residual, depth)
        ds = _data(rng, d)
        fast = shortcut(model)
        if activation == "gelu":
            assert fast is None  # not piecewise linear: the ball evaluator runs it
        else:
            assert fast is not None
        _LAST_RUN.clear()
        got = _balls(model, ds, 128).outputs
        _LAST_RUN.clear()
        want = run_balls(model, ds.vocab, ds.sequences, precision=128).outputs
        for gs, ws in zip(got, want, strict=True):
            for g, w in zip(gs, ws, strict=True):
                assert len(g) == len(w)
                assert all(_overlap(a, b) for a, b in zip(g, w, strict=True))
        if score == "uniform" and activation == "relu":
            exact = run(model, ds.vocab, ds.sequences).outputs
            for gs, es in zip(got, exact, strict=True):
                for g, e in zip(gs, es, strict=True):
                    for a, x in zip(g, e, strict=True):
                        lo, hi = ball_bounds(a)
                        assert lo <= x <= hi
