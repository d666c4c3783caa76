"""The branch layer norm of pre-norm blocks (``LayerNorm.source``/``target``): it normalises
some lanes into others and keeps the rest, in every evaluator and through the model file."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.core.model import Affine, LayerNorm, Transformer, validate
from exactmem.evaluate.floats import float_logits
from exactmem.evaluate.reference import run
from exactmem.evaluate.softmax import ball_bounds, run_balls
from exactmem.files.model_files import load_model, save_model
from exactmem.files.model_json import canonical_hash
from tests.test_schemas import assert_valid, problems

GAIN, BIAS = (mpq(2), mpq(1, 2)), (mpq(1), mpq(-1, 4))


def _model(eps=3) -> Transformer:
    """Q^2 inputs in lanes 0, 1; a branch layer norm writes LN(x) into lanes 2, 3; the logits
    read all four lanes (x survives beside its normalisation)."""
    embed = Affine(2, (((0, 1),), ((1, 1),), (), ()), (0, 0, 0, 0))
    ln = LayerNorm(GAIN, BIAS, mpq(eps), "ln_1", source=0, target=2)
    unembed = Affine(4, (((0, 1), (2, 1)), ((1, 1), (3, 1))), (0, 0))
    return Transformer(2, (ln,), embed, unembed)


def _expected(x, eps):
    mean = (x[0] + x[1]) / 2
    c = [v - mean for v in x]
    root = ((c[0] ** 2 + c[1] ** 2) / 2 + eps) ** 0.5
    return [x[k] + float(GAIN[k]) * c[k] / root + float(BIAS[k]) for k in range(2)]


def test_the_branch_keeps_the_stream_and_writes_the_normalisation_beside_it():
    # x = (1, 3): centred (−1, 1), σ² = 1, eps = 3: √4 = 2 is rational, so exact
    model = _model()
    (out,) = run(model, [(mpq(1), mpq(3))], [[0]]).outputs
    assert out[0] == (mpq(1) + 2 * mpq(-1, 2) + 1, mpq(3) + mpq(1, 2) * mpq(1, 2) - mpq(1, 4))


def test_balls_and_floats_agree_where_the_root_is_irrational():
    model = _model(eps=mpq(1, 7))
    vocab, seqs = [(mpq(1), mpq(2))], [[0]]
    (out,) = run_balls(model, vocab, seqs, precision=128).outputs
    want = _expected([1.0, 2.0], 1 / 7)
    for ball, w in zip(out[-1], want, strict=True):
        lo, hi = ball_bounds(ball)
        assert lo <= mpq(w) + mpq(1, 10**9) and mpq(w) - mpq(1, 10**9) <= hi
    assert np.allclose(float_logits(model, vocab, seqs)[0], want)


def test_the_model_file_round_trips_and_validates(tmp_path):
    model = _model()
    save_model(model, tmp_path / "m.json")
    back, _ = load_model(tmp_path / "m.json")
    assert back == model and back.sublayers[0].target == 2 and validate(back) is None
    assert_valid(json.loads((tmp_path / "m.json").read_text()), "model")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"source": 0}, "go together"),
        ({"source": 0, "target": 1}, "overlap"),
        ({"source": -1, "target": 2}, "non-negative"),
    ],
)
def test_the_ir_refuses_bad_branches(kw, message):
    with pytest.raises(ValueError, match=message):
        LayerNorm(GAIN, BIAS, mpq(1), "ln", **kw)


def test_a_branch_outside_the_stream_is_refused():
    embed = Affine(2, (((0, 1),), ((1, 1),), ()), (0, 0, 0))
    with pytest.raises(ValueError, match="does not fit"):
        Transformer(2, (LayerNorm(GAIN, BIAS, mpq(1), "ln", source=0, target=2),), embed, None)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.pop("target"), r"'source' and 'target' go together"),
        (lambda s: s.update(target=1), r"overlap"),
        (lambda s: s.update(target=3), r"sublayers\[0\]\.target: lanes up to 4"),
        (lambda s: s.update(target=True), r"sublayers\[0\]\.target: wrong type"),
        (lambda s: s.update(source=-2), r"sublayers\[0\]\.source: must be a lane index"),
    ],
)
def test_hostile_branch_fields_are_refused_naming_the_path(tmp_path, edit, message):
    save_model(_model(), tmp_path / "m.json")
    obj = json.loads((tmp_path / "m.json").read_text())
    edit(obj["model"]["sublayers"][0])
    obj["sha256"] = canonical_hash(obj["model"])
    (tmp_path / "bad.json").write_text(json.dumps(obj))
    with pytest.raises(InputError, match=message):
        load_model(tmp_path / "bad.json")
    if "wrong type" in message or "lane index" in message:
        assert problems(obj, "model")  # the schema refuses it too (lanes: the loader only)
