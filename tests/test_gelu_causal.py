"""The IR's GELU activation and causal mask: model files, the exact evaluators (GELU refused as
transcendental, causal computed exactly), the ball evaluator, and the dataset's targets."""

import json

import mpmath
import pytest
from flint import arb, ctx
from gmpy2 import mpq

from exactmem.checks.certify import certify
from exactmem.core.balls import ball_bounds, gelu_ball
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer, resources
from exactmem.datasets.dataset import Dataset, dataset_to_json, parse_dataset
from exactmem.evaluate import fast, reference
from exactmem.evaluate.softmax import run_balls
from exactmem.files.dataset_files import load_dataset
from exactmem.files.model_files import load_model, save_model
from exactmem.files.model_json import model_from_json, model_to_json


def mean_head(width: int) -> AttentionHead:
    zero = Affine.from_dense([[0] * width])
    eye = Affine.from_dense([[int(i == j) for j in range(width)] for i in range(width)])
    return AttentionHead(zero, zero, eye, eye)


def decoder(activation="gelu", mask="causal", score="uniform") -> Transformer:
    """x ↦ x + mean of the keys, then a plain two-layer MLP of width 2 to 2 logits."""
    att = Attention((mean_head(1),), score, "att", mask)
    mlp = MLP(
        (Affine.from_dense([[1], [-1]], bias=[0, 1]), Affine.from_dense([[1, 0], [0, 1]])),
        residual=False,
        activation=activation,
    )
    return Transformer(1, (att, mlp))


VOCAB = [(mpq(1),), (mpq(2),), (mpq(4),)]


def test_causal_position_k_reads_the_keys_0_to_k():
    model = Transformer(1, (Attention((mean_head(1),), "uniform", "att", "causal"),))
    trace = reference.run(model, VOCAB, [[0, 1, 2]])
    assert [c[0] for c in trace.outputs[0]] == [mpq(2), mpq(2) + mpq(3, 2), mpq(4) + mpq(7, 3)]
    fast_trace = fast.run(model, VOCAB, [[0, 1, 2]])
    assert fast_trace.outputs == trace.outputs  # the equal-score shortcut stands aside
    none = Transformer(1, (Attention((mean_head(1),), "uniform", "att", "none"),))
    assert reference.run(none, VOCAB, [[0, 1, 2]]).outputs[0][0][0] == mpq(1) + mpq(7, 3)


def test_causal_balls_agree_with_the_exact_evaluator():
    model = Transformer(1, (Attention((mean_head(1),), "softmax", "att", "causal"),))
    exact = reference.run(model, VOCAB, [[2, 0, 1]]).outputs[0]
    balls = run_balls(model, VOCAB, [[2, 0, 1]], precision=128).outputs[0]
    for col, ball in zip(exact, balls, strict=True):
        lo, hi = ball_bounds(ball[0])
        assert lo <= col[0] <= hi


@pytest.mark.parametrize("module", [reference, fast])
def test_the_exact_evaluators_refuse_gelu(module):
    with pytest.raises(InconclusiveError, match="GELU"):
        module.run(decoder(), VOCAB, [[0, 1]])


def test_relu_is_unchanged_and_gelu_runs_on_balls():
    relu = reference.run(decoder("relu"), VOCAB, [[0, 1]], positions="last").outputs[0][-1]
    x = mpq(2) + mpq(3, 2)
    assert list(relu) == [x, max(mpq(0), 1 - x)]
    out = run_balls(decoder(), VOCAB, [[0, 1]], precision=200, positions="last").outputs[0][-1]
    mpmath.mp.prec = 300
    for ball, z in zip(out, (x, 1 - x), strict=True):
        zf = mpmath.mpf(z.numerator) / z.denominator
        want = zf * mpmath.ncdf(zf)
        lo, hi = ball_bounds(ball)
        assert mpmath.mpf(lo.numerator) / lo.denominator <= want
        assert want <= mpmath.mpf(hi.numerator) / hi.denominator


def test_gelu_ball_encloses_x_phi_x():
    old = ctx.prec
    ctx.prec = 128
    try:
        zero, one = gelu_ball(arb(0)), gelu_ball(arb(1))
    finally:
        ctx.prec = old
    assert zero == 0 and zero.is_exact()
    lo, hi = ball_bounds(one)
    mpmath.mp.prec = 200
    want = mpmath.ncdf(1)  # GELU(1) = Φ(1)
    assert (
        mpmath.mpf(lo.numerator) / lo.denominator
        <= want
        <= mpmath.mpf(hi.numerator) / hi.denominator
    )
    assert hi - lo < mpq(1, 10**30)


def test_certify_falls_back_to_balls_for_gelu():
    ds = Dataset.from_tokens([[0, 1], [2, 2]], [1, 1], vocab=[[1], [2], [4]], num_classes=2)
    cert = certify(decoder(), ds, evaluator="fast")
    labels = next(c for c in cert.checks if c.name == "labels")
    assert cert.verdict == "verified" and "Arb" in labels.detail
    assert cert.subject["evaluator"] == "reference"  # the fast one knows no GELU


def test_model_files_carry_gelu_and_causal_and_relu_files_are_unchanged(tmp_path):
    relu = model_to_json(decoder("relu", "none"))
    assert "activation" not in relu["sublayers"][1]
    obj = model_to_json(decoder())
    assert obj["sublayers"][1]["activation"] == "gelu" and obj["sublayers"][0]["mask"] == "causal"
    assert model_from_json(obj) == decoder()
    save_model(decoder(), tmp_path / "m.json")
    assert load_model(tmp_path / "m.json")[0] == decoder()
    assert resources(decoder()).relu_layers == 0 and resources(decoder("relu")).relu_layers == 1


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ((1, "activation"), "relu", "omit the field for relu"),
        ((1, "activation"), "tanh", "is not one of 'gelu'"),
        ((1, "activation"), 3, "is not one of 'gelu'"),
        ((0, "mask"), "future", "is not one of none, context, causal"),
    ],
)
def test_bad_activation_or_mask_is_refused_naming_the_path(path, value, message):
    obj = json.loads(json.dumps(model_to_json(decoder())))
    obj["sublayers"][path[0]][path[1]] = value
    with pytest.raises(InputError, match=message) as exc:
        model_from_json(obj)
    assert f"sublayers[{path[0]}]" in str(exc.value)


# --------------------------------------------------------------------------- targets


def dataset_obj(**extra) -> dict:
    return {
        "format": "exactmem.dataset/1",
        "task": "next-token",
        "C": 3,
        "vocab": [[0], [1]],
        "sequences": [[0, 1], [1, 0]],
        "labels": [1, 3],
        **extra,
    }


def test_targets_load_exactly_and_round_trip(tmp_path):
    ds = parse_dataset(dataset_obj(targets=[["1/2", "1/4", "1/4"], [0, "0.25", "3/4"]]))
    assert ds.targets == ((mpq(1, 2), mpq(1, 4), mpq(1, 4)), (mpq(0), mpq(1, 4), mpq(3, 4)))
    path = tmp_path / "d.json"
    path.write_text(json.dumps(dataset_to_json(ds)))
    assert load_dataset(path).targets == ds.targets
    assert "targets" not in dataset_to_json(parse_dataset(dataset_obj()))


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        ([["1/2", "1/2", 0]], r"targets: 1 rows for 2 sequences"),
        ([["1/2", "1/2"], [0, 0, 1]], r"targets\[0\]: expected a list of C = 3"),
        ([["1/2", "1/4", "1/3"], [0, 0, 1]], r"targets\[0\]: the probabilities sum to 13/12"),
        ([["3/2", "-1/4", "-1/4"], [0, 0, 1]], r"targets\[0\]\[1\]: probability -1/4 is negative"),
        ([["1/2", "1/4", "1/4"], [0, "1/2", "1/2"]], r"targets\[1\]: label 3 has probability 1/2"),
        ([["1/2", "x", "1/4"], [0, 0, 1]], r"targets\[0\]\[1\]"),
        ([[0.5, 0.25, 0.25], [0, 0, 1]], r"targets\[0\]\[0\]"),
        ("no", r"targets: expected a list"),
    ],
)
def test_bad_targets_exit_2_naming_the_index(tmp_path, targets, message):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(dataset_obj(targets=targets)))
    with pytest.raises(InputError, match=message):
        load_dataset(path)


def test_targets_belong_to_next_token_only():
    with pytest.raises(InputError, match="unknown field 'targets'"):
        parse_dataset(
            {
                "format": "exactmem.dataset/1",
                "task": "points",
                "points": [[1]],
                "labels": [1],
                "targets": [[1]],
            }
        )
    obj = dataset_obj(task="seq2seq", labels=[[1, 1], [1, 1]], targets=[[1, 0, 0], [1, 0, 0]])
    with pytest.raises(InputError, match="only task 'next-token'"):
        parse_dataset(obj)
