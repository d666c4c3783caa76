"""The bound on every value an evaluation makes (exactmem.evaluate.value_bits): never below a
value the reference evaluator computes, on random models of every IR feature the exact
evaluators run, and close to the values of the constructions (within a few bits on Lemma C.1
memorizers, whose steps interval arithmetic alone would double at every layer)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.core import limits
from exactmem.core.errors import InconclusiveError
from exactmem.core.exact_arrays import top
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    LayerNorm,
    PositionalEncoding,
    Probe,
    Transformer,
)
from exactmem.evaluate import reference
from exactmem.evaluate.value_bits import _step_sup, value_bits


def _affine(rng: random.Random, rows: int, cols: int, *, bias=True, steps=False) -> Affine:
    """A random map; with ``steps`` some rows repeat an earlier row's weights with another
    bias (the σ(z + b₁), σ(z + b₂) pairs the bound reads through zero-sum coefficients)."""
    matrix, biases = [], []
    for i in range(rows):
        if steps and i and rng.random() < 0.5:
            matrix.append(list(matrix[rng.randrange(i)]))
        else:
            matrix.append(
                [rng.choice([0, 0, 1, -1, rng.randint(-(2**12), 2**12)]) for _ in range(cols)]
            )
        biases.append(rng.randint(-(2**10), 2**10) if bias else 0)
    return Affine.from_dense(matrix, biases, rng.choice([1, 1, 2, 3, 4]), in_dim=cols)


def _mlp(rng: random.Random, width: int) -> MLP:
    residual = rng.random() < 0.5
    depth = rng.randint(1, 4)
    dims = [width] + [rng.randint(1, 5) for _ in range(depth - 1)]
    dims.append(width if residual or rng.random() < 0.7 else rng.randint(1, 4))
    layers = tuple(_affine(rng, dims[i + 1], dims[i], steps=True) for i in range(depth))
    if depth > 1 and rng.random() < 0.5:  # a zero-sum read of the first layer's units
        first = layers[0]
        same = [i for i in range(first.out_dim) if first.rows[i] in first.rows[:i]]
        if same:
            i = same[0]
            j = first.rows.index(first.rows[i])
            w = rng.randint(1, 2**8)
            rows = list(layers[1].rows)
            rows[0] = tuple(sorted({j: w, i: -w}.items()))
            layers = (first, Affine(first.out_dim, tuple(rows), layers[1].bias, 1), *layers[2:])
    probes = ()
    if depth > 1:
        units = layers[0].out_dim
        terms = tuple((u, rng.choice([1, -1, 3])) for u in range(units) if rng.random() < 0.6)
        probes = (Probe("p", 0, terms or ((0, 1),)),)
    return MLP(layers, residual=residual, probes=probes)


def _attention(rng: random.Random, width: int) -> Attention:
    heads = []
    for _ in range(rng.randint(1, 2)):
        inner = rng.randint(1, 3)
        heads.append(
            AttentionHead(
                query=_affine(rng, inner, width, bias=False),
                key=_affine(rng, inner, width, bias=False),
                value=_affine(rng, inner, width, bias=False),
                output=_affine(rng, width, inner, bias=False),
            )
        )
    return Attention(
        tuple(heads),
        score=rng.choice(["uniform", "hardmax"]),
        mask=rng.choice(["none", "context", "causal"]),
    )


def random_model(rng: random.Random, n: int) -> tuple[Transformer, int]:
    d = rng.randint(1, 3)
    tokens = rng.random() < 0.2  # token ids read by the embedding table (one-hot)
    if tokens:
        d = 5
    embed = _affine(rng, rng.randint(1, 4), d) if tokens or rng.random() < 0.5 else None
    width = embed.out_dim if embed else d
    subs = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.5:
            sub = _mlp(rng, width)
            width = sub.out_dim
        elif kind < 0.85:
            sub = _attention(rng, width)
        else:
            sub = PositionalEncoding(
                tuple(
                    tuple(mpq(rng.randint(-50, 50), rng.randint(1, 6)) for _ in range(width))
                    for _ in range(n)
                )
            )
        subs.append(sub)
    unembed = _affine(rng, rng.randint(1, 3), width) if rng.random() < 0.5 else None
    return Transformer(d, tuple(subs), embed, unembed, token_inputs=tokens), d


def _bits(values) -> int:
    return max((int(v).bit_length() for v in values), default=0)


@pytest.mark.parametrize("seed", range(80))
def test_the_bound_is_never_below_a_value_the_reference_computes(seed, monkeypatch):
    """Every affine output (pre-activations included), denominator, stream, probe, output and
    statistic of the reference evaluation has at most the bound's bits."""
    rng = random.Random(seed)
    n = rng.randint(1, 4)
    model, d = random_model(rng, n)
    vocab = [
        tuple(mpq(rng.randint(-(2**20), 2**20), rng.randint(1, 9)) for _ in range(d))
        for _ in range(5)
    ]
    sequences = [[rng.randrange(5) for _ in range(n)] for _ in range(6)]
    _check_against_reference(model, vocab, sequences, monkeypatch)


def test_an_exact_layer_norm_is_bounded(monkeypatch):
    """A layer norm whose σ² + eps is a square ((a − b)²/4 + 16 = 25 for a − b = ±6) runs
    exactly; the bound covers its squares and its quotient."""
    model = Transformer(
        2,
        (
            MLP((Affine.from_dense([[3, 1], [1, 3]], [5, -7], 2),), residual=True),
            LayerNorm((mpq(3, 2), mpq(-5)), (mpq(1, 3), mpq(7)), mpq(16)),
            MLP((Affine.from_dense([[9, 1], [1, 9]], [1, 1], 1),), residual=False),
        ),
    )
    vocab = [(mpq(a), mpq(a + 6)) for a in (-40, 0, 13)] + [(mpq(9), mpq(3))]
    _check_against_reference(model, vocab, [[0], [1], [2], [3]], monkeypatch)


def _check_against_reference(model, vocab, sequences, monkeypatch) -> None:
    seen = [0]
    affine = reference._affine

    def recording(a, X, den, size):
        out, new_den = affine(a, X, den, size)
        seen[0] = max(seen[0], new_den.bit_length(), *(_bits(col) for col in out))
        return out, new_den

    got = {}

    def bound(model, inputs, den, n, limit):
        got["bound"] = value_bits(model, inputs, den, n)
        return got["bound"]

    monkeypatch.setattr(reference, "_affine", recording)
    monkeypatch.setattr("exactmem.evaluate.value_bits.check_value_bits", bound)
    try:
        trace = reference.run(model, vocab, sequences)
    except InconclusiveError:
        pytest.skip("an evaluation the exact evaluators do not run")
    for stream in trace.streams:
        seen[0] = max(seen[0], stream.den.bit_length(), *(_bits(c) for c in stream.columns))
    for name in trace._lanes:
        values, den, _ = trace.lane_raw(name)
        seen[0] = max(seen[0], _bits(values), int(den).bit_length())
    for stat in trace.stats:
        if stat.min_nonzero is not None:
            seen[0] = max(seen[0], int(stat.min_nonzero.numerator).bit_length())
    cols, den = trace.outputs.columns, trace.outputs.den
    seen[0] = max(seen[0], den.bit_length(), *(_bits(c) for c in cols))
    assert got["bound"].bits >= seen[0], (got["bound"], seen[0])


@pytest.mark.parametrize("seed", range(200))
def test_a_step_group_is_bounded_by_its_breakpoints(seed):
    """``_step_sup`` bounds |Σ cₖ·σ(z + bₖ)| over every z (checked on a grid through every
    breakpoint and beyond) by S·A + sup|g| with A the least unit bound."""
    rng = random.Random(seed)
    k = rng.randint(2, 6)
    biases = [rng.randint(-50, 50) for _ in range(k)]
    layer = Affine(1, tuple(((0, 1),) for _ in range(k)), tuple(biases), 1)
    terms = [(u, rng.randint(-9, 9) or 1) for u in sorted(rng.sample(range(k), rng.randint(2, k)))]
    zmax = rng.randint(0, 200)
    A = [mpq(max(zmax + b, 0)) for b in biases]  # σ(z + b) ≤ zmax + b for |z| ≤ zmax
    import gmpy2

    with gmpy2.context(gmpy2.context(precision=64, round=gmpy2.RoundUp)):
        sup = _step_sup(terms, list(range(k)), [gmpy2.mpfr(a) for a in A], layer)
    for z in range(-zmax, zmax + 1):
        value = sum(w * max(z + biases[u], 0) for u, w in terms)
        assert abs(value) <= sup, (z, value, sup)


def test_lemma_c1_memorizers_are_bounded_within_a_few_bits(monkeypatch):
    """On a ks25 next-token model (Stage III reads hi − lo plus the carried integer) the bound
    stays within a few bits of the largest value: interval arithmetic alone gave 4 007 bits
    where the values have 88 (N = 300), and the shipped claims would not have passed."""
    from exactmem.constructions import ks25
    from exactmem.datasets.sequences import random_sequences

    ds = random_sequences(300, 8, 4, 60, 10, seed=1)
    model, _ = ks25.build(ds, {}, "ks25-next-token")
    seen = [0]
    affine = reference._affine

    def recording(a, X, den, size):
        out, new_den = affine(a, X, den, size)
        seen[0] = max(seen[0], *(_bits(col) for col in out))
        return out, new_den

    monkeypatch.setattr(reference, "_affine", recording)
    reference.run(model, ds.vocab, ds.sequences, positions="last")
    X, den = reference._to_batch([tuple(v) for v in ds.vocab], model.input_dim)
    bound = value_bits(model, [top(np.asarray(c)) for c in X], den, 8)
    assert seen[0] <= bound.bits <= seen[0] + 16, (bound, seen[0])


def test_the_default_admits_the_shipped_shapes():
    """The default limit leaves a factor of at least 20 over the largest shipped model's
    bound (18 000 bits, the full tier's tent gadget; a 10⁷ ks25 model's values have ≈ 20 000
    bits at 10⁷, 6 400 at 10⁶)."""
    assert limits.DEFAULT.max_value_bits >= 20 * 18_000
