"""The third hostile review (issue 26): each way it found to a false VERIFIED, a false REFUTED or
a forged certificate that rechecked as SAME, fed to the verifier as the reviewer built it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from gmpy2 import mpq

import exactmem
from exactmem.checks.certify import certify
from exactmem.commands.main import main
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Affine, Transformer, resources
from exactmem.datasets.dataset import Dataset, random_points
from exactmem.datasets.sequences import random_sequences
from exactmem.files.dataset_files import save_dataset
from exactmem.files.model_files import save_certificate, save_model


def test_a_token_id_model_is_refused_on_points_never_fed_their_index(tmp_path, capsys):
    """A2: a token model's input_dim counts its table's rows; three points of dimension 3 were
    read as token ids 0, 1, 2 (their positions in the file) and the labels 'reproduced'."""
    embed = Affine(3, (((0, 1), (1, 2), (2, 3)),), (0,))
    identity = MLP((Affine(1, (((0, 1),),), (0,)),), residual=False)
    model = Transformer(3, (identity,), embed=embed, token_inputs=True)
    a, b, c = (mpq(5), mpq(0), mpq(0)), (mpq(0), mpq(7), mpq(0)), (mpq(0), mpq(0), mpq(9))
    points = Dataset("points", (1, 2, 3), 3, points=(a, b, c))
    with pytest.raises(InputError, match="token-id inputs.*the dataset has points"):
        certify(model, points)
    save_model(model, str(tmp_path / "m.json"))
    save_dataset(points, str(tmp_path / "p.json"))
    assert main(["verify", str(tmp_path / "m.json"), "--data", str(tmp_path / "p.json")]) == 2
    assert "the dataset has points" in capsys.readouterr().err


@pytest.fixture(scope="module")
def memorizer():
    points = random_points(12, 2, 3, 1)
    return exactmem.build(points, "vys"), points


def _first_row_with(model: Transformer, least: int) -> tuple[int, int, int]:
    for i, s in enumerate(model.sublayers):
        for j, layer in enumerate(getattr(s, "layers", ())):
            for k, row in enumerate(layer.rows):
                if len(row) >= least:
                    return i, j, k
    raise AssertionError("no such row")


def _with_row(model: Transformer, where: tuple[int, int, int], row: tuple) -> Transformer:
    i, j, k = where
    mlp = model.sublayers[i]
    layer = mlp.layers[j]
    rows = (*layer.rows[:k], row, *layer.rows[k + 1 :])
    # object.__setattr__: past Affine's own checks, as a hostile plugin's model may be
    bad = dataclasses.replace(layer)
    object.__setattr__(bad, "rows", rows)
    layers = (*mlp.layers[:j], bad, *mlp.layers[j + 1 :])
    subs = list(model.sublayers)
    subs[i] = dataclasses.replace(mlp, layers=layers)
    return dataclasses.replace(model, sublayers=tuple(subs))


@pytest.mark.parametrize("evaluator", ["fast", "reference"])
def test_a_model_made_in_memory_is_checked_as_a_files_loader_checks_it(memorizer, evaluator):
    """A3: a duplicate column (the fast evaluator's plans assume distinct ones: VERIFIED while
    the reference got every label wrong) and a float coefficient (float arithmetic decided
    'reproduced exactly') are refused by ``certify`` itself, naming the place, as a model
    file's loader refuses them — whatever made the model (a caller, a plugin's builder)."""
    model, points = memorizer
    where = _first_row_with(model, 2)
    row = model.sublayers[where[0]].layers[where[1]].rows[where[2]]
    doubled = _with_row(model, where, (row[0], *row))
    with pytest.raises(InputError, match=r"rows\[\d+\]: columns .* not strictly increasing"):
        certify(doubled, points, evaluator=evaluator)
    floated = _with_row(model, where, ((row[0][0], float(row[0][1]) + 0.5), *row[1:]))
    with pytest.raises(InputError, match="is not a pair of integers"):
        certify(floated, points, evaluator=evaluator)


def test_a_certificate_without_its_checklist_provider_differs(tmp_path, capsys):
    """Deleting ``criteria.checklist_provider`` (who supplied the checklist) and re-hashing
    rechecked as SAME: an absent key was taken for an old certificate."""
    points = random_points(8, 2, 3, 2)
    data, model, cert = (tmp_path / n for n in ("p.json", "m.json", "c.json"))
    save_dataset(points, str(data))
    save_model(exactmem.build(points, "vys"), str(model))
    verify = ["verify", str(model), "--data", str(data), "--quiet", "--construction", "vys"]
    assert main([*verify, "--certificate", str(cert)]) == 0
    content = json.loads(cert.read_text())["certificate"]
    del content["subject"]["criteria"]["checklist_provider"]
    forged = tmp_path / "forged.json"
    save_certificate(content, str(forged))
    capsys.readouterr()
    args = ["recheck", str(forged), "--model", str(model), "--data", str(data), "--quiet"]
    assert main(args) == 1
    assert "criteria.checklist_provider" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "make", "options"),
    [
        ("vys", lambda: random_points(10, 20, 3, 1), {}),
        ("ks25-next-token", lambda: random_sequences(10, 3, 16, 6, 3, 1), {}),
        ("ks25-next-token", lambda: random_sequences(10, 3, 16, 6, 3, 1), {"position_aware": True}),
        ("ks25-bit-budget", lambda: random_sequences(10, 3, 16, 6, 3, 1), {"bit_budget": 2}),
    ],
)
def test_the_width_bound_counts_the_input_stream(name, make, options):
    """B: resources' width counts the input stream (d lanes, d + 1 with positions); vys and the
    ks25 variants declared the layers' 11, refuting honest models of d = 20 and d = 16."""
    dataset = make()
    model = exactmem.build(dataset, name, **options)
    assert resources(model).width > 11  # the input stream is the widest
    cert = certify(model, dataset, construction=name, options=options)
    bound = {c.name: c for c in cert.checks}[f"{name}.bounds.width"]
    assert bound.passed, bound.detail
    assert cert.verdict == "verified", [c.detail for c in cert.failed]


def test_the_width_bound_still_refutes_a_wider_layer(memorizer):
    """The bound stays a bound: a layer of 12 outputs on a stream of d = 2 is refuted."""
    model, points = memorizer
    mlp = model.sublayers[0]
    first = mlp.layers[0]
    extra = 12 - first.out_dim
    wide = dataclasses.replace(
        first, rows=(*first.rows, *[()] * extra), bias=(*first.bias, *[0] * extra), names=()
    )
    pad = dataclasses.replace(mlp.layers[1], in_dim=12)
    broken = dataclasses.replace(
        model,
        sublayers=(dataclasses.replace(mlp, layers=(wide, pad, *mlp.layers[2:])),),
    )
    assert resources(broken).width == 12
    cert = certify(broken, points, construction="vys")
    assert not {c.name: c for c in cert.checks}["vys.bounds.width"].passed


def test_two_classes_with_one_read_out_row_are_refuted_without_the_ladder():
    """C: two logits computed by the same read-out row tie on every input; balls enclose each
    apart, so every example climbed to 2¹⁴ bits (a 9 kB pair of files took 7 minutes). The tie
    is read off the weights: refuted at once, lead = 0."""
    from exactmem.checks.margins import argmax_margins, tied_classes
    from exactmem.core.model import Attention, AttentionHead

    q = Affine(2, (((0, 1), (1, 1)),), (0,))
    k = Affine(2, (((0, 1),),), (0,))
    v = Affine(2, (((1, 1),),), (0,))
    o = Affine(1, ((), ((0, 1),)), (0, 0), 7)
    att = Attention((AttentionHead(q, k, v, o),), "softmax")
    same = ((0, 1), (1, 1))
    unembed = Affine(2, (same, same, ((0, 2),)), (0, 0, 0))
    model = Transformer(2, (att, att), unembed=unembed)
    assert tied_classes(model) == {0, 1}
    vocab = ((mpq(1), mpq(2)), (mpq(3), mpq(1)))
    seqs = ((0, 1, 1), (1, 0, 0))
    results = argmax_margins(model, vocab, seqs, [1, 3])
    assert (results[0].status, results[0].margin, results[0].precision) == ("refuted", 0, 0)
    assert results[1].status in ("certified", "refuted") and results[1].precision > 0
    cert = certify(model, Dataset("next-token", (1, 2), 3, vocab=vocab, sequences=seqs))
    assert cert.verdict == "refuted"
    assert "the row of another" in {c.name: c for c in cert.checks}["labels"].detail
    # without a read-out map the logits are a last MLP's outputs (fourth review: 2 minutes)
    last = MLP((Affine(2, (same, same, ((0, 2),)), (0, 0, 0)),), residual=False)
    assert tied_classes(Transformer(2, (att, att, last))) == {0, 1}
    twin = MLP((Affine(2, (same, same), (0, 0)),), residual=True)  # adds to unequal lanes
    assert tied_classes(Transformer(2, (att, att, twin))) == set()


@pytest.mark.parametrize("name", ["ks24", "madden24", "dana25"])
def test_a_precision_below_two_bits_is_refused_by_the_parser(name):
    """Arb refuses a working precision below 2: ``--set precision=1`` crashed three builders
    (exit 3); the option parser refuses it (exit 2), for build and verify alike."""
    from exactmem.checks.build_options import parse_options

    with pytest.raises(InputError, match="precision must be at least 2 bits"):
        parse_options(name, ["precision=1"])
    assert parse_options(name, ["precision=2"]) == {"precision": 2}


def test_dana25_builds_a_vocabulary_of_two_tokens():
    """N = 2 took two antipodal circle points: one line, M's solved row 0 and every draw refused
    ("stayed singular … raise --set precision", which could not help)."""
    from exactmem.constructions.dana25 import circle_points
    from exactmem.datasets.attention_data import random_associations

    (x0, y0), (x1, y1) = circle_points(2)
    assert x0 * y1 - x1 * y0 != 0  # not on one line through the origin
    dataset = random_associations(2, 3, 4, 1)
    model = exactmem.build(dataset, "dana25")
    assert certify(model, dataset, construction="dana25").verdict == "verified"


def _mutated(rows=(((0, 1),),), bias=(0,), den=1, in_dim=2) -> Transformer:
    """A map changed after its own checks (past the frozen dataclass), as a plugin's may be."""
    a = Affine(2, (((0, 1),),), (0,))
    for key, value in (("rows", rows), ("bias", bias), ("denominator", den), ("in_dim", in_dim)):
        object.__setattr__(a, key, value)
    return Transformer(2, (MLP((a,), residual=False),))


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_mutated(rows=(((-1, 1),),)), r"entry \(-1, 1\): a column in 0 … 1"),
        (_mutated(rows=(((2, 1),),)), r"entry \(2, 1\): a column in 0 … 1"),
        (_mutated(rows=(((0, 0), (1, 1)),)), r"entry \(0, 0\).*non-zero"),
        (_mutated(den=-1), "denominator: -1 is not a positive integer"),
        (_mutated(den=0), "denominator: 0 is not a positive integer"),
        (_mutated(bias=(0, 7)), "bias: 2 entries for 1 rows"),
        (_mutated(in_dim=2.0), r"in_dim: 2\.0 is not an integer"),
        (_mutated(rows=(((0, np.int64(2**62)),),)), "is not a pair of integers"),
        (_mutated(bias=(np.int64(1),)), "is a int64, not an integer"),
    ],
)
@pytest.mark.parametrize("evaluator", ["fast", "reference"])
def test_what_a_files_loader_refuses_certify_refuses_in_memory(model, message, evaluator):
    """Fourth review: a column −1 (read as the last lane), a zero coefficient, a denominator of
    −1 or 0, a bias per row missing, and NumPy integers (whose arithmetic wraps) passed
    ``certify`` — VERIFIED or a traceback — while a model file holding them is refused."""
    points = Dataset("points", (3, 5), 5, points=((mpq(1), mpq(3)), (mpq(2), mpq(5))))
    with pytest.raises(InputError, match=message):
        certify(model, points, evaluator=evaluator)


def test_dana25_heads_read_only_through_a_shift_argmax_ignores_are_not_credited():
    """Fourth review: the skip term's lane 0 decided every label while four heads wrote lanes
    the read-out reads with one coefficient in every logit (a shift argmax ignores): VERIFIED,
    feature rank 16 and capacity 16 credited to the heads. A lane read the same in every logit is
    not read."""
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model

    folder = Path(__file__).parent / "data" / "review4"
    model, _ = load_model(str(folder / "dana_const.json"))
    dataset = load_dataset(str(folder / "dana_tok.json"))
    cert = certify(model, dataset, construction="dana25")
    checks = {c.name: c for c in cert.checks}
    assert checks["labels"].passed
    assert cert.verdict == "refuted"
    assert not checks["dana.feature_rank"].passed and not checks["dana.capacity"].passed


def test_ks24_residual_form_refuses_labels_its_ffn_has_nothing_to_add_to(tmp_path, capsys):
    """Fourth review: labels equal to each token's first coordinate gave the residual form
    W₂ = 0, a model the checklist refutes as dead code; the builder now says so (exit 2)."""
    vocab = ((mpq(1), mpq(0)), (mpq(2), mpq(1)), (mpq(3), mpq(5)))
    seqs = ((0, 1), (1, 2), (2, 0))
    labels = tuple(tuple(int(vocab[t][0]) for t in s) for s in seqs)
    data = tmp_path / "d.json"
    save_dataset(Dataset("seq2seq", labels, 3, vocab=vocab, sequences=seqs), str(data))
    args = ["build", "--construction", "ks24", "--data", str(data), "--quiet"]
    assert main([*args, "--set", "ffn=residual", "--out", str(tmp_path / "m.json")]) == 2
    assert "ffn=requantized" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "data", "failing", "tolerance"),
    [
        # lane pairs always equal, read +1 in one logit and +1 in the other: a shift
        ("dana_pairs.json", "dana_tok.json", {"dana.feature_rank", "dana.capacity"}, None),
        # a fourth head whose value rows are duplicated and written +1 and −1: U·W_O·W_V = 0
        ("mahdavi_cancel.json.gz", "mahdavi_T20.json", {"mahdavi.feature_rank"}, None),
        # twin units (one row of W₁ and bias) read with columns +c and −c
        ("madden_cancel.json", "madden_own.json", {"madden24.feature_rank"}, "1/1000000"),
    ],
)
def test_parts_that_cancel_are_read_by_nothing(model, data, failing, tolerance):
    """Fifth review: each lane, column or head was asked alone whether the output reads it, so
    parts that cancel one another were credited rank: VERIFIED with the labels right. A map is
    now asked as a whole whether it reaches a margin (``attention.reaches_a_margin``), and twin
    units are one feature."""
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model

    folder = Path(__file__).parent / "data" / "review5"
    construction = {"dana": "dana25", "mahd": "mahdavi24", "madd": "madden24"}[model[:4]]
    cert = certify(
        load_model(str(folder / model))[0],
        load_dataset(str(folder / data)),
        construction=construction,
        tolerance=tolerance,
    )
    assert cert.verdict == "refuted"
    assert {c.name for c in cert.failed} == failing
