"""Block maps (:mod:`exactmem.core.weight_rows`) against the IR's tuples: the same model, the same
values on every evaluator, the same resources and the same hash, on random models over every IR
feature (the generator of tests/test_one_semantics.py); and what a block refuses."""

from __future__ import annotations

import copy
import json
import pickle
import random
from dataclasses import replace

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.checkpoints.architectures import affine_of
from exactmem.checkpoints.safetensors_io import DyadicTensor
from exactmem.core.exact import parameter_bits, to_hex
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    Transformer,
    resources,
    validate,
)
from exactmem.core.weight_rows import BlockRows, block_bits, block_of, read_only, rows_text
from exactmem.evaluate.floats import float_logits
from exactmem.evaluate.softmax import run_balls
from exactmem.files.model_files import canonical_hash, model_hash, model_to_json
from tests.test_one_semantics import agree, random_model


def _random_block(rng: np.random.Generator) -> BlockRows:
    r, c = rng.integers(0, 6, 2)
    count = int(r + rng.integers(0, 3))
    rows_at = np.sort(rng.choice(count, r, replace=False)) if count else np.zeros(0, int)
    cols_at = np.sort(rng.choice(20, c, replace=False))
    kind = rng.integers(0, 3)
    if kind == 0:  # small integers, many zeros
        block = rng.integers(-3, 3, (r, c)).astype(float)
    elif kind == 1:  # float32-like significands shifted far (coefficients beyond 2^62)
        block = np.ldexp(
            rng.integers(-(2**24), 2**24, (r, c)).astype(float), rng.integers(0, 120, (r, c))
        )
    else:  # 53-bit significands
        block = np.ldexp(
            rng.integers(-(2**53) + 1, 2**53, (r, c)).astype(float), rng.integers(0, 60, (r, c))
        )
        block[rng.random((r, c)) < 0.3] = 0
    return BlockRows(block, rows_at, cols_at, count)


def test_a_block_reads_as_its_tuples_with_their_text_and_bits():
    rng = np.random.default_rng(0)
    for _ in range(300):
        rows = _random_block(rng)
        tuples = tuple(rows)
        assert rows == tuples and tuples == rows and hash(rows) == hash(tuples)
        assert all(rows[i] == tuples[i] for i in range(-len(tuples), len(tuples)))
        assert rows[1:3] == tuples[1:3] and ((),) + rows == ((),) + tuples
        assert all(type(c) is int for row in rows for pair in row for c in pair)
        text = json.dumps(
            [[[j, to_hex(v)] for j, v in row] for row in tuples], separators=(",", ":")
        )
        assert rows_text(rows) == text.encode()
        for den in (1, 2, 1 << 40, 1 << 100):
            bits = [parameter_bits(mpq(v, den)) for row in tuples for _, v in row]
            assert block_bits(rows, den) == (len(bits), sum(bits), max(bits, default=0))
        assert block_bits(rows, 3) is None  # lowest terms beyond a shift: the tuples count
        assert block_of(tuples) == tuples
        for copied in (pickle.loads(pickle.dumps(rows)), copy.deepcopy(rows)):
            assert copied == rows and not copied.block.flags.writeable


def test_a_block_refuses_what_is_not_an_exact_integer():
    with pytest.raises(ValueError, match="finite integers"):
        BlockRows([[0.5]], [0], [0], 1)
    with pytest.raises(ValueError, match="finite integers"):
        BlockRows([[np.inf]], [0], [0], 1)
    with pytest.raises(ValueError, match="strictly increasing"):
        BlockRows([[1.0, 2.0]], [0], [1, 0], 1)
    with pytest.raises(ValueError, match="row 1 of a map with 1 rows"):
        BlockRows([[1.0]], [1], [0], 1)
    with pytest.raises(ValueError, match="column 3 for in_dim 2"):
        Affine(2, BlockRows([[1.0]], [0], [3], 1), (0,))
    assert block_of((((0, 2**53 + 1),),)) is None  # 54 significant bits: no double holds it
    assert block_of((((0, 2**1100),),)) is None


def test_a_checkpoint_whose_weights_leave_the_doubles_keeps_tuples():
    # float64 weights 2^-1074 and 2^1023 in one map: the common denominator makes the large
    # coefficient 2^2097, beyond a double — the import keeps the tuples, exactly
    m = np.array([1, 1 << 52], np.int64)
    e = np.array([-1074, 1023 - 52], np.int64)
    a = affine_of(DyadicTensor("w", "F64", (1, 2), m, e))
    assert type(a.rows) is tuple
    assert a.rows == (((0, 1), (1, 2**2097)),) and a.denominator == 2**1074
    b = affine_of(DyadicTensor("w", "F32", (1, 2), np.array([3, -5]), np.array([-30, 2])))
    assert type(b.rows) is BlockRows and b.rows == (((0, 3), (1, -5 << 32)),)


def _blocked(a: Affine, power: bool) -> Affine:
    # (a map scaled beyond int64, over 2^63 + 1, keeps its denominator: its values stay small)
    den = 1 << (a.denominator.bit_length() % 5) if power and a.denominator < 64 else a.denominator
    rows = block_of(a.rows)
    return replace(a, rows=rows if rows is not None else a.rows, denominator=den)


def _both(model: Transformer, power: bool) -> tuple[Transformer, Transformer]:
    """(the model with tuple rows, the same with every map a block) — over power-of-two
    denominators with ``power`` (where the float64 shortcut applies)."""
    tuples = (lambda a: replace(a, denominator=_blocked(a, power).denominator)) if power else None

    def maps(f, m: Transformer) -> Transformer:
        subs = []
        for s in m.sublayers:
            if isinstance(s, MLP):
                s = replace(s, layers=tuple(map(f, s.layers)))
            elif isinstance(s, Attention):
                s = replace(
                    s,
                    heads=tuple(
                        AttentionHead(f(h.query), f(h.key), f(h.value), f(h.output))
                        for h in s.heads
                    ),
                )
            subs.append(s)
        return replace(
            m,
            sublayers=tuple(subs),
            embed=f(m.embed) if m.embed else None,
            unembed=f(m.unembed) if m.unembed else None,
        )

    plain = maps(tuples, model) if tuples else model
    return plain, maps(lambda a: _blocked(a, power), model)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_block_models_agree_with_tuple_models_on_every_path(n):
    kept = 0
    for seed in range(40):
        rng = random.Random(7000 * n + seed)
        model, vocab, sequences = random_model(rng, n)
        plain, blocks = _both(model, power=seed % 2 == 0)
        kept += sum(type(a.rows) is BlockRows for a, _ in blocks.affines())
        assert blocks == plain and validate(blocks) == validate(plain)
        assert resources(blocks) == resources(plain)
        assert model_hash(blocks) == model_hash(plain) == canonical_hash(model_to_json(plain))
        try:
            agree(blocks, vocab, sequences)  # reference, fast, oracle, balls, float64
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, n = {n}: {blocks}") from exc
        for positions in ("all", "last"):
            one = run_balls(plain, vocab, sequences, precision=128, positions=positions).outputs
            two = run_balls(blocks, vocab, sequences, precision=128, positions=positions).outputs
            for a, b in zip(np.ravel(one), np.ravel(two), strict=True):
                # one arithmetic whatever the representation: the same ball, digit for digit
                assert (a.mid(), a.rad()) == (b.mid(), b.rad()), (seed, a, b)
        if not any(isinstance(s, Attention) and s.score == "hardmax" for s in plain.sublayers):
            np.testing.assert_allclose(
                float_logits(blocks, vocab, sequences),
                float_logits(plain, vocab, sequences),
                rtol=1e-12,
                atol=1e-12,
            )
    assert kept > 100  # most maps were blocks


def test_changing_one_weight_of_a_block_changes_the_hash():
    rng = np.random.default_rng(3)
    block = rng.integers(-4, 4, (3, 4)).astype(float)
    block[0, 0] = 1.0
    a = Affine(4, BlockRows(block, range(3), range(4), 3), (0, 1, 0), 8)
    model = Transformer(4, (MLP((a, Affine.from_dense([[1, 1, 1]])), residual=False),))
    other = block.copy()
    other[0, 0] = 2.0
    b = replace(a, rows=BlockRows(other, range(3), range(4), 3))
    changed = replace(model, sublayers=(MLP((b, Affine.from_dense([[1, 1, 1]])), residual=False),))
    assert model_hash(model) != model_hash(changed)
    assert model_hash(changed) == canonical_hash(model_to_json(changed))


def test_a_block_is_its_own_copy_of_the_callers_array():
    """Writing to the array a block was made from afterwards changes nothing (the weights the
    hash names are the weights evaluated); an array its maker made read-only is not copied."""
    source = np.array([[1.0, 0.0], [0.0, 3.0]])
    rows = BlockRows(source, range(2), range(2), 2)
    source[0, 0] = 0.5
    assert rows[0] == ((0, 1),) and not rows.block.flags.writeable
    mine = np.array([[2.0, 0.0]])  # read-only, but its owner may make it writable again
    mine.setflags(write=False)
    assert not np.shares_memory(BlockRows(mine, range(1), range(2), 1).block, mine)
    made = read_only(np.array([[2.0, 0.0]]))  # made read-only by the code that made it
    assert np.shares_memory(BlockRows(made, range(1), range(2), 1).block, made)
    view = np.array([[5.0, 6.0]])[:, :1]  # a read-only view of a writable array is copied
    view.setflags(write=False)
    assert not np.shares_memory(BlockRows(view, range(1), range(1), 1).block, view.base)
    cols = np.array([0, 1])  # the index arrays are the block's own too
    rows = BlockRows(np.array([[1.0, 2.0]]), [0], cols, 1)
    cols[:] = [1, 0]
    assert rows[0] == ((0, 1), (1, 2))


@pytest.mark.parametrize("columns", [1, 3])
def test_a_zero_weight_times_an_unbounded_ball_is_zero_on_every_path(columns):
    """0·x = 0 for every real x a ball [±inf] stands for; Arb's matrix product gives [±inf]
    (0·inf). The block and dense products stand aside for unbounded inputs, so block and
    tuple maps compute the same balls (a fuzzed GPT checkpoint was inconclusive from memory
    and refuted from its file)."""
    from flint import arb

    from exactmem.evaluate import softmax

    dense = [row * 40 for row in [[1, 0, 2], [0, 0, 5]] + [[0, 0, 1]] * 40]  # past DENSE_FROM
    tuples = Affine.from_dense(dense)
    block = replace(tuples, rows=block_of(tuples.rows))
    assert isinstance(block.rows, BlockRows)
    assert block.in_dim * block.out_dim >= softmax.DENSE_FROM
    unbounded = arb(0, float("inf"))
    cols = [[arb(1)] * 120 for _ in range(columns)]
    for c in cols:
        c[1] = unbounded  # read only through zero weights
    for a in (block, tuples):
        out = softmax._affine_batch(a, cols) if columns > 1 else [softmax._affine(a, cols[0])]
        assert all(x.is_finite() for col in out for x in col)
        assert [[x.mid() for x in col] for col in out] == [
            [sum(row) for row in dense] for _ in cols
        ]
