"""The derived models the attention checklists evaluate (exactmem.checks.mixtures): their outputs
are
the quantities the checklists read, computed here by hand from the weights for small hardmax
and uniform models (exact), so a checklist reading them reads the model as its file defines it."""

from __future__ import annotations

import random

import pytest
from gmpy2 import mpq

from exactmem.checks.mixtures import attention_inputs_model, gelu_features_model, mixture_model
from exactmem.core.model import Affine, Attention, AttentionHead, PositionalEncoding, Transformer
from exactmem.evaluate.reference import run


def _rand_affine(rng, rows, cols):
    return Affine.from_dense([[rng.randint(-3, 3) for _ in range(cols)] for _ in range(rows)])


def _apply(a: Affine, x):
    return [
        (sum((x[j] * c for j, c in row), mpq(0)) + b) / a.denominator
        for row, b in zip(a.rows, a.bias, strict=True)
    ]


def _model(score, mask, seed=0, w=3, H=2):
    rng = random.Random(seed)
    heads = tuple(
        AttentionHead(
            _rand_affine(rng, 2, w),
            _rand_affine(rng, 2, w),
            _rand_affine(rng, 2, w),
            _rand_affine(rng, w, 2),
        )
        for _ in range(H)
    )
    pos = PositionalEncoding(tuple(tuple(mpq(k * (i + 1), 3) for i in range(w)) for k in range(4)))
    embed = _rand_affine(rng, w, 2)
    return Transformer(2, (pos, Attention(heads, score, "a", mask)), embed)


def _by_hand(model, x_cols, values: bool):
    """Per head, the attention-weighted mixture at the last position, from the weights."""
    pos, att = model.sublayers
    cols = [
        [a + b for a, b in zip(_apply(model.embed, x), pos.table[k], strict=True)]
        for k, x in enumerate(x_cols)
    ]
    n = len(cols)
    keys = range(n - 1) if att.mask == "context" else range(n)
    out = []
    for h in att.heads:
        q = _apply(h.query, cols[-1])
        scores = [
            sum((a * b for a, b in zip(_apply(h.key, cols[j]), q, strict=True)), mpq(0))
            for j in keys
        ]
        if att.score == "uniform":
            tied = list(keys)
        else:
            tied = [j for j, s in zip(keys, scores, strict=True) if s == max(scores)]
        read = [(_apply(h.value, cols[j]) if values else cols[j]) for j in tied]
        out += [sum((r[i] for r in read), mpq(0)) / len(tied) for i in range(len(read[0]))]
    return cols[-1], out


@pytest.mark.parametrize("score", ["hardmax", "uniform"])
@pytest.mark.parametrize("mask", ["none", "context", "causal"])
@pytest.mark.parametrize("values", [False, True])
def test_mixtures_are_what_the_heads_mix(score, mask, values):
    model = _model(score, mask)
    att = model.sublayers[1]
    rng = random.Random(1)
    vocab = [tuple(mpq(rng.randint(-5, 5)) for _ in range(2)) for _ in range(6)]
    seqs = [[rng.randrange(6) for _ in range(4)] for _ in range(5)]
    derived = mixture_model(model, att, values=values, keep_stream=True)
    trace = run(derived, vocab, seqs, positions="last")
    for i, seq in enumerate(seqs):
        skip, mixed = _by_hand(model, [vocab[t] for t in seq], values)
        assert list(trace.outputs[i][-1]) == skip + mixed
    inputs = run(attention_inputs_model(model, att), vocab, seqs)
    assert list(inputs.outputs[0][-1]) == _by_hand(model, [vocab[t] for t in seqs[0]], values)[0]


def test_the_features_model_keeps_the_files_activation():
    """The FNN's first layer and *its* activation, read out by the identity (ReLU exact here)."""
    model = _model("hardmax", "causal")
    w1 = Affine.from_dense([[1, -1, 0], [0, 2, -1]], [1, -3])
    derived = gelu_features_model(model, w1, "relu")
    assert derived.sublayers[-1].activation == "relu"
    vocab = [(mpq(1), mpq(2)), (mpq(-1), mpq(0))]
    base = run(model, vocab, [[0, 1, 0, 1]], positions="last").outputs[0][-1]
    got = run(derived, vocab, [[0, 1, 0, 1]], positions="last").outputs[0][-1]
    assert list(got) == [max(v, mpq(0)) for v in _apply(w1, list(base))]
