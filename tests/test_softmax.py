"""Rigorous softmax enclosures: soundness against mpmath interval
arithmetic at high precision, exact 1/n on equal scores, and a live saturation check."""

import mpmath
import pytest
from flint import arb, ctx
from gmpy2 import mpq
from hypothesis import given, settings
from hypothesis import strategies as st

from exactmem.core.model import Affine, Attention, AttentionHead, Transformer
from exactmem.datasets.assumptions import context_rank_violations, kruskal_rank_at_least, rank
from exactmem.evaluate.softmax import ball_bounds, decide, run_balls, softmax_balls, to_ball

scores = st.lists(
    st.fractions(min_value=-50, max_value=50, max_denominator=1000), min_size=1, max_size=8
)


def mpmath_softmax(values, prec=400):
    with mpmath.workprec(prec):
        xs = [mpmath.mpf(v.numerator) / v.denominator for v in values]
        top = max(xs)
        exps = [mpmath.exp(x - top) for x in xs]
        total = mpmath.fsum(exps)
        return [e / total for e in exps]


@settings(max_examples=80, deadline=None)
@given(scores, st.sampled_from([53, 64, 128, 300]))
def test_arb_enclosures_contain_the_high_precision_value(values, precision):
    old = ctx.prec
    ctx.prec = precision
    try:
        balls = softmax_balls([to_ball(mpq(v)) for v in values])
    finally:
        ctx.prec = old
    for ball, ref in zip(balls, mpmath_softmax(values), strict=True):
        lo, hi = ball_bounds(ball)
        with mpmath.workprec(400):
            assert mpmath.mpf(lo.numerator) / lo.denominator <= ref
            assert ref <= mpmath.mpf(hi.numerator) / hi.denominator


@settings(max_examples=40, deadline=None)
@given(scores)
def test_arb_agrees_with_mpmath_interval_arithmetic(values):
    """Two independent code bases: their enclosures must overlap."""
    old = ctx.prec
    ctx.prec = 200
    try:
        balls = softmax_balls([to_ball(mpq(v)) for v in values])
    finally:
        ctx.prec = old
    with mpmath.workprec(200):
        xs = [mpmath.iv.mpf(v.numerator) / v.denominator for v in values]
        top = max(float(x.a) for x in xs)
        exps = [mpmath.iv.exp(x - top) for x in xs]
        total = sum(exps[1:], exps[0])
        ivs = [e / total for e in exps]
    for ball, iv in zip(balls, ivs, strict=True):
        lo, hi = ball_bounds(ball)
        assert float(lo) <= float(iv.b) + 1e-30 and float(iv.a) <= float(hi) + 1e-30


def test_equal_scores_are_uniform():
    from flint import fmpq

    old = ctx.prec
    ctx.prec = 200  # comparisons convert 1/5 at the current precision too
    try:
        balls = softmax_balls([to_ball(mpq(7, 3))] * 5)
        assert all(b.contains(fmpq(1, 5)) and b.rad() < arb(2) ** -190 for b in balls)
    finally:
        ctx.prec = old
    assert all(b.is_exact() and b == arb(1) / 4 for b in softmax_balls([to_ball(mpq(1))] * 4))


def one_head(scale):
    """Scores λ·(a_query · a_key) on a 2-lane stream; the value copies lane 0 into lane 1."""
    q = Affine.from_dense([[scale, 0]])
    k = Affine.from_dense([[1, 0]])
    v = Affine.from_dense([[1, 0]])
    o = Affine.from_dense([[0], [1]])
    return Transformer(2, (Attention((AttentionHead(q, k, v, o),), "softmax"),))


VOCAB = [(mpq(1), mpq(0)), (mpq(2), mpq(0)), (mpq(0), mpq(0))]


@pytest.mark.parametrize("scale, decided", [(40, True), (1, False)])
def test_saturation_check_is_live(scale, decided):
    """The query of value 1 should attend to the key of value 2 (output lane 1 ≈ 2). With
    λ = 40 the softmax saturates and |out − 2| < 10⁻⁶ is certified; with λ = 1 it does not,
    and the certificate fails instead of guessing."""
    model = one_head(scale)

    def evaluate(precision):
        return run_balls(model, VOCAB, [[0, 1, 2]], precision=precision)

    def judge(trace):
        lo, hi = ball_bounds(trace.outputs[0][0][1] - 2)
        if -mpq(1, 10**6) < lo and hi < mpq(1, 10**6):
            return True
        if hi <= -mpq(1, 10**6) or lo >= mpq(1, 10**6):
            return False
        return None

    verdict, precision = decide(evaluate, judge)
    assert verdict is decided
    assert precision >= 64


def test_context_rank_and_kruskal_rank():
    e = [
        (mpq(1), mpq(0), mpq(0)),
        (mpq(0), mpq(1), mpq(0)),
        (mpq(1), mpq(1), mpq(0)),
        (mpq(0), mpq(0), mpq(1)),
    ]
    assert rank(e) == 3
    report = kruskal_rank_at_least(e, 2)
    assert report.holds and report.exhaustive and report.subsets_tried == 6
    report = kruskal_rank_at_least(e, 3)
    assert not report.holds and report.violation == (0, 1, 2)
    contexts = [[(mpq(1), mpq(0)), (mpq(0), mpq(1))], [(mpq(1), mpq(2)), (mpq(2), mpq(4))]]
    assert context_rank_violations(contexts) == [(1, 1)]


def test_kruskal_sampling_says_so():
    import random

    rng = random.Random(0)
    vectors = [tuple(mpq(rng.randint(-9, 9)) for _ in range(6)) for _ in range(30)]
    report = kruskal_rank_at_least(vectors, 6, max_subsets=50)
    assert not report.exhaustive and report.subsets_tried <= 50
    assert report.subsets_total == 593775
    assert "randomly sampled" in report.describe() or not report.holds


def test_undecidable_enclosure_is_inconclusive(tmp_path, capsys):
    """Unequal softmax scores over values that are all 2: the output is exactly 2, but the
    balls can only straddle it. With tolerance 0 the verdict is inconclusive (exit 4)."""
    from support import certify_built

    from exactmem.commands.main import main
    from exactmem.datasets.dataset import Dataset
    from exactmem.files.dataset_files import save_dataset
    from exactmem.files.model_files import save_model

    q = Affine.from_dense([[1, 0]])
    k = Affine.from_dense([[1, 0]])
    v = Affine.from_dense([[0, 1]])
    o = Affine.from_dense([[0], [1]])
    unembed = Affine.from_dense([[0, 1]], [-2])  # out = lane 1 − 2 = the attention output
    model = Transformer(
        2,
        (Attention((AttentionHead(q, k, v, o),), "softmax"),),
        unembed=unembed,
        meta={"readout": "regression", "tolerance": "0"},
    )
    vocab = ((mpq(1), mpq(2)), (mpq(3), mpq(2)))
    ds = Dataset("next-token", (2,), 2, vocab=vocab, sequences=((0, 1),))
    cert = certify_built(model, ds)
    assert cert.verdict == "inconclusive" and [c.name for c in cert.undecided] == ["labels"]
    save_model(model, tmp_path / "m.json")
    save_dataset(ds, tmp_path / "d.json")
    assert (
        main(["verify", str(tmp_path / "m.json"), "--data", str(tmp_path / "d.json"), "--quiet"])
        == 4
    )
    assert "undecided labels" in capsys.readouterr().out
