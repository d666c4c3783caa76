"""The LayerNorm sub-layer: exact where √(σ² + eps) is rational, Arb balls otherwise, float64
beside; the model file round-trips and hostile files are refused naming the JSON path."""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest
from gmpy2 import mpq

from exactmem import Dataset
from exactmem.checks.certify import certify
from exactmem.commands.main import main
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.model import Affine, LayerNorm, Transformer, resources, validate
from exactmem.evaluate.floats import float_logits
from exactmem.evaluate.layernorm import layer_norm_exact, rational_sqrt
from exactmem.evaluate.reference import run
from exactmem.evaluate.softmax import ball_bounds, run_balls
from exactmem.files.model_files import load_model, save_model
from tests.test_schemas import assert_valid, problems

GAIN, BIAS = (mpq(1), mpq(1, 2)), (mpq(0), mpq(1, 4))


def _model(eps=3, gain=GAIN, bias=BIAS) -> Transformer:
    """Vectors in Q^2 → LayerNorm → logits = the normalised pair (2 classes)."""
    eps = mpq(eps)
    unembed = Affine(2, (((0, 1),), ((1, 1),)), (0, 0))
    return Transformer(2, (LayerNorm(gain, bias, eps, "ln"),), None, unembed)


def test_rational_square_roots():
    assert rational_sqrt(mpq(9, 4)) == mpq(3, 2)
    assert rational_sqrt(mpq(0)) == 0
    assert rational_sqrt(mpq(2)) is None
    assert rational_sqrt(mpq(4, 3)) is None
    assert rational_sqrt(mpq(-4)) is None


def test_exact_where_the_root_is_rational():
    ln = _model().sublayers[0]
    # x = (0, 2): μ = 1, centred (−1, 1), σ² = 1, σ² + 3 = 4, root 2
    assert layer_norm_exact(ln, (mpq(0), mpq(2))) == (mpq(-1, 2), mpq(1, 4) + mpq(1, 4))
    trace = run(_model(), [(mpq(0), mpq(2))], [[0]])
    assert trace.outputs[0][-1] == (mpq(-1, 2), mpq(1, 2))


def test_the_exact_evaluator_refuses_an_irrational_root():
    with pytest.raises(InconclusiveError, match=r"layer norm 'ln': √\(σ² \+ eps\) = √\(3/2\)"):
        run(_model(eps=mpq(1, 2)), [(mpq(0), mpq(2))], [[0]])


def test_balls_enclose_the_true_value_and_floats_agree():
    model = _model(eps=mpq(1, 1000))
    x = (mpq(1, 3), mpq(-5, 7))
    out = run_balls(model, [x], [[0]], precision=200).outputs[0][-1]
    mpmath.mp.prec = 300
    a, b = (mpmath.mpf(int(v.numerator)) / int(v.denominator) for v in x)
    mean = (a + b) / 2
    root = mpmath.sqrt(((a - mean) ** 2 + (b - mean) ** 2) / 2 + mpmath.mpf(1) / 1000)
    true = [(a - mean) / root, (b - mean) / root / 2 + mpmath.mpf(1) / 4]
    for ball, value in zip(out, true, strict=True):
        lo, hi = ball_bounds(ball)
        assert mpmath.mpf(int(lo.numerator)) / int(lo.denominator) <= value
        assert value <= mpmath.mpf(int(hi.numerator)) / int(hi.denominator)
        assert hi - lo < mpq(1, 2**150)
    floats = float_logits(model, [x], [[0]])[0]
    assert np.allclose(floats, [float(v) for v in true], rtol=1e-12)


def test_next_token_labels_through_an_irrational_layer_norm_are_certified_on_balls():
    model = _model(eps=mpq(1, 1000))
    vocab = [[3, 1], [1, 3], [2, -7]]
    data = Dataset.from_tokens([[0], [1], [2]], [1, 2, 1], vocab=vocab, num_classes=2)
    cert = certify(model, data)
    check = cert.checks[0]
    assert cert.verdict == "verified" and check.figures["certified"] == 3
    assert mpq(check.figures["min_margin_lower_bound"]) > 0
    wrong = Dataset.from_tokens([[0], [1]], [2, 2], vocab=vocab[:2], num_classes=2)
    assert certify(model, wrong).verdict == "refuted"


def test_resources_count_gain_and_bias():
    res = resources(_model())
    assert res.dense_parameters == 4 + 2 + 2 + 2  # unembed 2×2 + its bias 2, gain 2, bias 2
    assert res.nonzero_parameters == 2 + 2 + 1


def test_the_ir_refuses_bad_layer_norms():
    with pytest.raises(ValueError, match="eps must be positive"):
        LayerNorm((mpq(1),), (mpq(0),), mpq(0))
    with pytest.raises(ValueError, match="same positive width"):
        LayerNorm((mpq(1),), (), mpq(1))
    with pytest.raises(ValueError, match="does not fit width 3"):
        Transformer(3, (LayerNorm((mpq(1),) * 2, (mpq(0),) * 2, mpq(1)),))


def test_the_model_file_round_trips_and_validates(tmp_path):
    model = _model(eps=mpq(1, 100000))
    save_model(model, tmp_path / "m.json")
    back, _ = load_model(tmp_path / "m.json")
    assert back == model and validate(back) is None
    assert_valid(json.loads((tmp_path / "m.json").read_text()), "model")


def _edited(tmp_path, edit) -> str:
    from exactmem.files.model_json import canonical_hash

    save_model(_model(), tmp_path / "m.json")
    obj = json.loads((tmp_path / "m.json").read_text())
    edit(obj["model"]["sublayers"][0])
    obj["sha256"] = canonical_hash(obj["model"])
    (tmp_path / "bad.json").write_text(json.dumps(obj))
    return obj


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.update(eps=["0x0", "0x1"]), r"sublayers\[0\]\.eps: must be positive"),
        (lambda s: s.update(eps=["-0x1", "0x3"]), r"sublayers\[0\]\.eps: must be positive"),
        (lambda s: s.update(eps=["0x1", "0x0"]), r"sublayers\[0\]\.eps: denominator"),
        (lambda s: s["bias"].pop(), r"sublayers\[0\]\.bias: 1 entries, the gain has 2"),
        (lambda s: s.update(gain=[], bias=[]), r"sublayers\[0\]\.gain: a layer norm needs"),
        (lambda s: s.update(gain=s["gain"] * 2, bias=s["bias"] * 2), r"sublayers\[0\]\.gain: 4"),
        (lambda s: s.update(scale=1), r"sublayers\[0\]: unknown field 'scale'"),
        (lambda s: s.pop("eps"), r"sublayers\[0\]: missing field 'eps'"),
        (lambda s: s["gain"].__setitem__(0, "1/2"), r"sublayers\[0\]\.gain\[0\]: expected"),
    ],
)
def test_hostile_layer_norms_are_refused_naming_the_path(tmp_path, capsys, edit, message):
    obj = _edited(tmp_path, edit)
    with pytest.raises(InputError, match=message):
        load_model(tmp_path / "bad.json")
    if not any(v in message for v in ("eps: must", "eps: denominator", "entries", "gain: 4")):
        assert problems(obj, "model")  # the schema refuses it too (values: the loader only)
    argv = ["inspect", str(tmp_path / "bad.json")]
    assert main(argv) == 2
    assert "sublayers[0]" in capsys.readouterr().err


def test_inspect_describes_a_layer_norm(tmp_path, capsys):
    save_model(_model(), tmp_path / "m.json")
    assert main(["inspect", str(tmp_path / "m.json")]) == 0
    assert "layer norm ln       token-wise, width 2" in capsys.readouterr().out
