"""The oracle of the mutation tests: independent of the evaluators, right on hand-made models,
in agreement with the reference on the shipped constructions, and able to refute."""

import ast
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import mpmath
import oracle
import pytest
from gmpy2 import mpq
from mutation import families, output_problems

from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    PositionalEncoding,
    Transformer,
)
from exactmem.datasets.dataset import Dataset
from exactmem.evaluate import reference
from exactmem.evaluate.softmax import ball_bounds, run_balls


def test_the_oracle_imports_neither_evaluator_nor_their_arithmetic():
    tree = ast.parse(Path(oracle.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported <= {
        "__future__",
        "collections.abc",
        "dataclasses",
        "fractions",
        "mpmath",
        "exactmem.core.model",
    }, imported


def _seq_dataset(vocab, seqs, labels):
    return Dataset(
        "next-token",
        tuple(labels),
        max(labels),
        vocab=tuple(tuple(mpq(x) for x in v) for v in vocab),
        sequences=tuple(tuple(s) for s in seqs),
    )


def _same_as_reference(model, vocab, seq):
    mine = oracle.run_sequence(model, [tuple(mpq(x) for x in v) for v in vocab], seq)
    theirs = reference.run(model, [tuple(mpq(x) for x in v) for v in vocab], [seq]).outputs[0]
    assert [[Fraction(int(v.numerator), int(v.denominator)) for v in c] for c in theirs] == mine
    return mine


def test_uniform_attention_after_a_residual_ffn():
    """The example of docs/concepts.md: (1, 7/2) after the FFN, plus the mean 19/6."""
    ffn = MLP(
        (
            Affine.from_dense([[1, -1], [0, 2]], bias=[0, -1]),
            Affine.from_dense([[1, 0], [0, 1]], denominator=2),
        )
    )
    mean = AttentionHead(
        *(Affine.from_dense(m) for m in ([[0, 0]], [[0, 0]], [[1, 0]], [[0], [1]]))
    )
    model = Transformer(2, (ffn, Attention((mean,), "uniform")))
    out = _same_as_reference(model, [(1, 2), (3, Fraction(1, 2))], [0, 1, 1])
    assert out[0] == [1, Fraction(20, 3)]


def _selector(score, mask="none"):
    """Query and key read x0, the value reads x1 and is added to x1."""
    head = AttentionHead(
        Affine.from_dense([[1, 0]]),
        Affine.from_dense([[1, 0]]),
        Affine.from_dense([[0, 1]]),
        Affine.from_dense([[0], [1]]),
    )
    return Transformer(2, (Attention((head,), score, mask=mask),))


def test_hardmax_averages_ties_over_all_maximisers():
    # at position 0: scores (1, 1, 0): the mean of the tied values 0 and 6, not either one
    out = _same_as_reference(_selector("hardmax"), [(1, 0), (1, 6), (0, 9)], [0, 1, 2])
    assert out == [[1, 3], [1, 9], [0, 14]]  # position 2: all scores 0, mean (0 + 6 + 9)/3


def test_context_mask_leaves_the_last_position_out_of_the_keys():
    out = _same_as_reference(_selector("hardmax", "context"), [(1, 0), (1, 6), (0, 9)], [0, 1, 2])
    assert out[2] == [0, 12]  # keys 0 and 1 only: mean (0 + 6)/2


def test_token_ids_embedding_and_positions():
    model = Transformer(
        3,
        (PositionalEncoding(((mpq(1),), (mpq(1, 2),))),),
        embed=Affine.from_dense([[5, 6, 7]], bias=[1]),
        token_inputs=True,
    )
    assert _same_as_reference(model, [(0,)] * 3, [2, 0]) == [[9], [Fraction(13, 2)]]


def _softmax_pair():
    one = Affine.from_dense([[1]])
    return Transformer(1, (Attention((AttentionHead(one, one, one, one),), "softmax"),))


def test_softmax_of_unequal_scores_is_an_enclosing_interval():
    model = _softmax_pair()
    ds = _seq_dataset([(0,), (1,)], [(0, 1)], [2])
    (col,) = oracle.run(model, ds, precision=256)
    lo, hi = oracle.bounds(col[0])
    mpmath.mp.prec = 400
    e = mpmath.e
    exact = 1 + e / (1 + e)  # scores (0, 1) at the last position
    assert (
        mpmath.mpf(lo.numerator) / lo.denominator
        <= exact
        <= mpmath.mpf(hi.numerator) / hi.denominator
    )
    assert hi - lo < Fraction(1, 2**240)
    ball_lo, ball_hi = ball_bounds(run_balls(model, ds.vocab, ds.sequences).outputs[0][-1][0])
    assert ball_lo <= hi and lo <= ball_hi
    # the output 1.731… against label 2: within 1/3, not within 1/4, never exactly
    assert oracle.judge(model, ds, tolerance=Fraction(1, 3)).labels == (True,)
    assert oracle.judge(model, ds, tolerance=Fraction(1, 4)).labels == (False,)
    assert oracle.judge(model, ds).labels == (False,)


def test_softmax_of_equal_scores_is_exact():
    (col,) = oracle.run(_softmax_pair(), _seq_dataset([(0,), (3,)], [(1, 0)], [1]))
    assert col == [Fraction(3, 2)]  # scores (0, 0): the mean of 3 and 0, added to 0


def test_an_interval_across_the_label_is_undecided():
    assert (
        oracle._label(
            [oracle._interval(Fraction(1)) + mpmath.iv.mpf([-1, 1])], 1, "regression", Fraction(0)
        )
        is None
    )


@pytest.fixture(scope="module")
def shipped():
    return {f.name: f for f in families()}


@pytest.mark.parametrize(
    "name", ["vys", "ks25", "ks25-hardmax", "mahdavi-hardmax", "mahdavi-softmax", "dana"]
)
def test_shipped_models_agree_with_the_evaluators(shipped, name):
    f = shipped[name]
    judged = oracle.judge(f.model, f.dataset, readout=f.readout, tolerance=f.tolerance)
    assert judged.verified
    assert output_problems(f.model, f.dataset, judged) == []
    if name in ("vys", "ks25", "ks25-hardmax", "mahdavi-hardmax"):
        assert all(isinstance(v, Fraction) for col in judged.outputs for v in col)


def test_a_wrong_label_is_refuted(shipped):
    f = shipped["vys"]
    labels = list(f.dataset.labels)
    labels[3] = labels[3] % f.dataset.num_classes + 1
    judged = oracle.judge(f.model, replace(f.dataset, labels=tuple(labels)))
    assert judged.labels == tuple(i != 3 for i in range(len(labels)))


def test_a_wrong_class_is_refuted(shipped):
    f = shipped["dana"]
    labels = (f.dataset.labels[0] % f.dataset.num_classes + 1,) + f.dataset.labels[1:]
    judged = oracle.judge(f.model, replace(f.dataset, labels=labels), readout="classification")
    assert judged.labels[0] is False and judged.refuted


def test_a_scaled_softmax_readout_is_refuted(shipped):
    """Issue 16's lying model: the unembedding scaled by 11/10 misses the labels by far more
    than 1/1000, whatever the model's meta says."""
    f = shipped["mahdavi-softmax"]
    u = f.model.unembed
    scaled = replace(
        u,
        rows=tuple(tuple((c, 11 * v) for c, v in row) for row in u.rows),
        bias=tuple(11 * b for b in u.bias),
        denominator=10 * u.denominator,
    )
    model = replace(f.model, unembed=scaled, meta={**f.model.meta, "tolerance": "1"})
    assert oracle.judge(model, f.dataset, tolerance=f.tolerance).refuted
    assert not oracle.judge(f.model, f.dataset).verified  # tolerance 0: never exact
