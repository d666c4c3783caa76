"""The IR's tanh GELU (``gelu_tanh``) and irrational score scale (``Attention.scale``): their
ball enclosures, their float64 values and their model-file spelling (issue 29 points 2-3)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from flint import arb, ctx
from gmpy2 import mpq

from exactmem.core.balls import activation_ball, ball_bounds, gelu_ball, gelu_tanh_ball
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer
from exactmem.evaluate.floats import float_logits
from exactmem.evaluate.reference import run as run_reference
from exactmem.evaluate.softmax import run_balls
from exactmem.files.model_files import load_model, save_model
from exactmem.files.model_json import model_from_json, model_to_json


def _tanh_gelu(x: float) -> float:
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("x", [mpq(-3), mpq(-1, 3), mpq(1, 7), mpq(2), mpq(5, 2)])
def test_the_tanh_gelu_ball_encloses_the_formula_and_is_not_the_erf_gelu(x):
    old = ctx.prec
    ctx.prec = 128
    try:
        ball = gelu_tanh_ball(arb(int(x.numerator)) / int(x.denominator))
        lo, hi = ball_bounds(ball)
        assert hi - lo < mpq(1, 10**30)
        assert abs(float(lo) - _tanh_gelu(float(x))) < 1e-15
        erf_lo, erf_hi = ball_bounds(gelu_ball(arb(int(x.numerator)) / int(x.denominator)))
        assert erf_hi < lo or hi < erf_lo  # two functions: their enclosures are apart
    finally:
        ctx.prec = old
    assert gelu_tanh_ball(arb(0)) == 0 and gelu_tanh_ball(arb(0)).is_exact()
    with pytest.raises(ValueError, match="'silu' has no ball evaluation"):
        activation_ball("silu")


def _model(activation: str = "gelu_tanh", scale: int = 1) -> Transformer:
    """Token embedding in Q², one softmax head with scores divided by √scale, a GELU MLP."""
    embed = Affine(3, (((0, 1), (1, 2)), ((1, 3), (2, -1))), (0, 0), 2)
    ident = Affine(2, (((0, 1),), ((1, 1),)), (0, 0))
    head = AttentionHead(ident, ident, ident, ident)
    att = Attention((head,), "softmax", "att", "causal", scale)
    mlp = MLP((ident, ident), residual=True, label="mlp", activation=activation)
    return Transformer(3, (att, mlp), embed, None, {}, token_inputs=True)


def test_the_scale_divides_the_scores_on_balls_and_in_float64():
    seqs = [[0, 1, 2], [2, 2, 1]]
    for scale in (1, 2, 7):
        model = _model(scale=scale)
        floats = float_logits(model, None, seqs)
        trace = run_balls(model, None, seqs, precision=96, positions="last")
        for out, f in zip(trace.outputs, floats, strict=True):
            for ball, x in zip(out[-1], f, strict=True):
                lo, hi = ball_bounds(ball)
                assert lo - mpq(1, 10**12) <= mpq(float(x)) <= hi + mpq(1, 10**12)
    unscaled = float_logits(_model(scale=1), None, seqs)
    assert abs(float_logits(_model(scale=7), None, seqs) - unscaled).max() > 1e-3


def test_scores_that_tie_keep_exact_weights_under_any_scale():
    """Equal scores: weights exactly 1/n, whatever √scale divides them by (the exact evaluator
    runs such a column; the balls keep it exact)."""
    zero = Affine(2, ((),), (0,))
    ident = Affine(2, (((0, 1),), ((1, 1),)), (0, 0))
    att = Attention((AttentionHead(zero, zero, ident, ident),), "softmax", "a", "none", 5)
    model = Transformer(2, (att,), None, None, {})
    vocab = [[mpq(1), mpq(0)], [mpq(0), mpq(1, 4)]]
    trace = run_balls(model, vocab, [[0, 1]], precision=64)
    assert all(b.is_exact() for col in trace.outputs[0] for b in col)
    ref = run_reference(model, vocab, [[0, 1]])
    assert tuple(ref.outputs[0][0]) == (mpq(3, 2), mpq(1, 8))


def test_the_model_file_spells_both_and_old_files_are_unchanged(tmp_path):
    plain = _model("gelu", 1)
    text = json.dumps(model_to_json(plain))
    assert '"scale"' not in text  # an unscaled attention is written as before
    new = _model("gelu_tanh", 8)
    obj = model_to_json(new)
    assert obj["sublayers"][0]["scale"] == "1/sqrt(8)"
    assert obj["sublayers"][1]["activation"] == "gelu_tanh"
    save_model(new, tmp_path / "m.json")
    back, _ = load_model(tmp_path / "m.json")
    assert back.sublayers[0].scale == 8 and back.sublayers[1].activation == "gelu_tanh"
    for bad in ("1/sqrt(1)", "1/sqrt(08)", "1/sqrt(2.5)", "sqrt(2)", 2, "1/sqrt(1234567)"):
        broken = model_to_json(new)
        broken["sublayers"][0]["scale"] = bad
        with pytest.raises(InputError, match=r"sublayers\[0\]\.scale: .* is not \"1/sqrt\(k\)\""):
            model_from_json(broken)
    broken = model_to_json(new)
    broken["sublayers"][1]["activation"] = "gelu_new"  # the checkpoint's name, not the IR's
    with pytest.raises(InputError, match="'gelu_new' is not one of 'gelu', 'gelu_tanh'"):
        model_from_json(broken)
    with pytest.raises(ValueError, match="scale 0 is not an integer"):
        replace(new.sublayers[0], scale=0)


def _scaled(model: Transformer, k: int) -> Transformer:
    """``model`` with every softmax attention's scores divided by √k."""
    subs = tuple(
        replace(s, scale=k) if isinstance(s, Attention) and s.score == "softmax" else s
        for s in model.sublayers
    )
    return replace(model, sublayers=subs)


def test_checklists_that_read_scores_from_the_weights_refuse_a_scaled_attention():
    """ks24 reads its temperature λ, kim23 its softmax gaps, from W_Q and W_K alone: with the
    scores divided by √k those are not the softmax's, so a scaled attention is refused there
    (ks24.structure and kim23.softmax fail), never judged as if unscaled."""
    from support import certify_built

    from exactmem.constructions import kim23, ks24
    from exactmem.datasets.sequences import random_sequences

    ds = ks24.random_instance(12, 4, 3, 12, 5, seed=1)
    model, _ = ks24.build(ds, {})
    assert certify_built(model, ds, construction="ks24").verdict == "verified"
    cert = certify_built(_scaled(model, 4), ds, construction="ks24")
    failed = {c.name: c.detail for c in cert.failed}
    assert cert.verdict == "refuted" and "divided by √4" in failed["ks24.structure"]
    ds = random_sequences(20, 4, 2, 5, 3, seed=1, task="seq2seq", labels_by="key")
    model, _ = kim23.build(ds, {"seed": 0, "attention": "softmax"})
    assert certify_built(model, ds).verdict == "verified"
    cert = certify_built(_scaled(model, 4), ds)
    failed = {c.name: c.detail for c in cert.failed}
    assert "kim23.softmax" in failed and "divided by √4" in failed["kim23.softmax"]
