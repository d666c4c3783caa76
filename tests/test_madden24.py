"""Madden, Fox & Thrampoulidis 2024: the one-layer decoder interpolates n next-token
distributions with a GELU FNN of width m ≥ n − 1, Θ(nω) parameters; each check of its checklist
fails on a broken model or bad data."""

from dataclasses import replace

import pytest
from gmpy2 import mpq
from support import certify_built

from exactmem.checks.measures.madden24 import (
    decoder_parts,
    dimension_count_check,
    dimension_count_checks,
    distinct_contexts,
    feature_rank_check,
    injectivity_check,
    targets_check,
)
from exactmem.commands.main import main
from exactmem.constructions import madden24
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, resources
from exactmem.datasets.dataset import Dataset
from exactmem.files.dataset_files import load_dataset
from exactmem.files.model_files import save_model


def built(n=12, S=3, omega=4, seed=1, targets=True, **options):
    ds = madden24.random_contexts(n, S, omega, seed, targets=targets)
    model, witness = madden24.build(ds, options)
    return ds, model, witness


def checks_of(model, ds, **kw):
    cert = certify_built(model, ds, **kw)
    return cert, {c.name: c for c in cert.checks}


@pytest.mark.parametrize(("n", "S", "omega", "d"), [(12, 3, 4, 8), (20, 2, 6, 4), (9, 4, 3, 5)])
def test_the_decoder_interpolates_the_targets(n, S, omega, d):
    ds, model, witness = built(n, S, omega, d=d)
    assert witness.width == n
    cert, checks = checks_of(model, ds, tolerance="1/10000000000")
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    for name in ("injectivity", "feature_rank", "targets", "dimension_count"):
        assert checks[f"madden24.{name}"].passed
    assert mpq(checks["madden24.targets"].figures["max_error_upper_bound"]) < mpq(1, 10**10)
    assert mpq(checks["labels"].figures["min_margin_lower_bound"]) > 0


def test_labels_only_and_the_least_width_n_minus_1():
    ds, model, _ = built(15, 3, 4, targets=False, width=14)
    cert, checks = checks_of(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    assert "madden24.targets" not in checks
    assert "[Φ, 1]" in checks["madden24.feature_rank"].detail


def test_the_dimension_count_does_not_judge_labels_only():
    """An argmax label is an open set of logits: far fewer than n(ω − 1) parameters reach it,
    so on label-only data the dimension count says nothing and is not run — even for a model
    whose k is below n(ω − 1) (which the old checklist refuted)."""
    ds, model, _ = built(12, 3, 4, targets=False)
    many = madden24.random_contexts(400, 5, 4, seed=3, targets=False)
    assert resources(model).dense_parameters < many.size * 3
    assert dimension_count_checks(model, many) == []
    with pytest.raises(ValueError, match="target distributions"):
        dimension_count_check(model, many, many.size)
    cert, checks = checks_of(model, ds)
    assert cert.verdict == "verified" and "madden24.dimension_count" not in checks


def test_parameters_are_theta_n_omega():
    """The output layer m·ω + ω dominates: with m = n the dense count is the paper's count (plus
    the d zero biases of the embedding, which the IR counts) and grows by ω + d + 1 per
    context."""
    counts = []
    for n in (10, 20, 40):
        ds, model, _ = built(n, 3, 5)
        k = resources(model).dense_parameters
        assert k == madden24.paper_parameters(5, 3, 8, n, 5) + 8
        assert k >= n * (5 - 1)
        counts.append(k)
    assert counts[2] - counts[1] == 2 * (counts[1] - counts[0]) == 20 * (5 + 8 + 1)


def test_a_width_below_n_minus_1_is_refuted():
    """The lower bound's width: m = n − 3 leaves [Φ, 1] of rank < n, and generic targets are
    missed (the builder fits the first m + 1 contexts only)."""
    ds, model, _ = built(14, 3, 4, width=11)
    cert, checks = checks_of(model, ds, tolerance="1/1000")
    assert cert.verdict == "refuted"
    assert not checks["madden24.feature_rank"].passed
    assert not checks["madden24.targets"].passed
    assert checks["madden24.injectivity"].passed


def test_injectivity_fails_when_attention_adds_nothing():
    """W_O = 0: h(x) = e(last token) + p_last, exact, so two contexts ending in the same token
    have the same output."""
    ds, model, _ = built(12, 3, 4)
    att = model.sublayers[1]
    head = att.heads[0]
    zero = Affine(head.output.in_dim, ((),) * head.output.out_dim, (0,) * head.output.out_dim)
    broken = replace(
        model,
        sublayers=(model.sublayers[0], replace(att, heads=(replace(head, output=zero),)))
        + model.sublayers[2:],
    )
    front, _ = decoder_parts(broken)
    check = injectivity_check(front, ds, distinct_contexts(ds))
    assert (
        not check.passed and "exactly the same" in check.detail and "W_O·W_V is 0" in check.detail
    )


def test_feature_rank_fails_on_a_narrow_fnn():
    ds, model, _ = built(12, 3, 4, width=6)
    front, fnn = decoder_parts(model)
    check = feature_rank_check(front, fnn, ds, distinct_contexts(ds))
    assert not check.passed and "m = 6 < n − 1 = 11" in check.detail


def test_targets_fail_on_other_targets_with_the_same_labels():
    ds, model, _ = built(12, 3, 4)
    moved = []
    for y, row in zip(ds.labels, ds.targets, strict=True):
        others = [c for c in range(4) if c != y - 1]
        new = list(row)
        new[others[0]], new[others[1]] = row[others[1]] + mpq(1, 100), row[others[0]] - mpq(1, 100)
        moved.append(tuple(new))
    bad = replace(ds, targets=tuple(moved))
    check = targets_check(model, bad, mpq(1, 10**6))
    assert not check.passed and "sequences[0]" in check.detail


def test_labels_fail_on_other_labels():
    ds, model, _ = built(12, 3, 4, targets=False)
    bad = replace(ds, labels=tuple(y % 4 + 1 for y in ds.labels))
    cert, checks = checks_of(model, bad)
    assert cert.verdict == "refuted" and not checks["labels"].passed


def test_dimension_count_fails_below_n_omega_minus_1():
    """The upper bound on any next-token model: k = resources' dense count against n(ω − 1)."""
    _, model, _ = built(12, 3, 4)
    k = resources(model).dense_parameters
    many = madden24.random_contexts(k // 3 + 1, 5, 4, seed=3)
    check = dimension_count_check(model, many, many.size)
    assert not check.passed and "out of reach" in check.detail
    assert check.figures == {"parameters": k, "n_times_omega_minus_1": many.size * 3}


def test_a_relu_model_lacks_the_structure():
    ds, model, _ = built(8, 2, 3)
    fnn = model.sublayers[2]
    relu = replace(model, sublayers=model.sublayers[:2] + (replace(fnn, activation="relu"),))
    cert, checks = checks_of(relu, ds, tolerance="1/1000")
    assert not checks["madden24.structure"].passed
    assert "not gelu" in checks["madden24.structure"].detail
    assert checks["madden24.dimension_count"].passed  # the upper bound judges any model


def test_a_non_causal_model_lacks_the_structure():
    ds, model, _ = built(8, 2, 3)
    att = replace(model.sublayers[1], mask="none")
    other = replace(model, sublayers=(model.sublayers[0], att, model.sublayers[2]))
    with pytest.raises(Exception, match="softmax/causal"):
        decoder_parts(other)


def test_targets_need_a_tolerance():
    ds, model, _ = built(8, 2, 3)
    with pytest.raises(InputError, match="pass --tolerance"):
        certify_built(model, ds, tolerance=None)


def test_conflicting_contexts_are_refused_naming_both():
    ds = madden24.random_contexts(6, 2, 3, seed=2, targets=False)
    dup = replace(
        ds,
        sequences=ds.sequences + (ds.sequences[1],),
        labels=ds.labels + (ds.labels[1] % 3 + 1,),
    )
    with pytest.raises(InputError, match=r"sequences\[1\] and sequences\[6\]"):
        madden24.build(dup, {})


def test_rational_positions_lie_on_the_unit_circle():
    for row in madden24.rational_positions(6, 5):
        for i in range(0, 4, 2):
            assert row[i] ** 2 + row[i + 1] ** 2 == 1
    assert madden24.rational_positions(3, 3)[2][2] == mpq(2, 3)


def test_cli_build_verify_and_the_refuted_width(tmp_path, capsys):
    data = tmp_path / "ds.json"
    generate = ["generate", "contexts", "--N", "10", "--n", "3", "--vocab", "4", "--seed", "5"]
    assert main([*generate, "--out", str(data)]) == 0
    ds = madden24.random_contexts(10, 3, 4, seed=5)
    assert load_dataset(data) == ds
    out = tmp_path / "m.json"
    assert (
        main(["build", "--construction", "madden24", "--data", str(data), "--out", str(out)]) == 0
    )
    assert main(["inspect", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "plain gelu, 2 layers" in shown and "mask causal" in shown
    verify = ["verify", str(out), "--data", str(data), "--construction", "madden24", "--quiet"]
    assert main([*verify, "--tolerance", "1/1000000"]) == 0
    assert main(verify) == 2  # targets without a tolerance
    assert "pass --tolerance" in capsys.readouterr().err
    narrow = tmp_path / "n.json"
    model, _ = madden24.build(ds, {"width": 5})
    save_model(model, narrow)
    verify[1] = str(narrow)
    assert main([*verify, "--tolerance", "1/1000000"]) == 1


def test_the_model_file_keeps_gelu_and_causal(tmp_path):
    from exactmem.files.model_files import load_model

    _, model, _ = built(8, 2, 3)
    path = tmp_path / "m.json"
    save_model(model, path)
    loaded, _ = load_model(path)
    assert loaded == model
    assert isinstance(loaded.sublayers[2], MLP) and loaded.sublayers[2].activation == "gelu"
    att = loaded.sublayers[1]
    assert isinstance(att, Attention) and att.mask == "causal"
    assert isinstance(att.heads[0], AttentionHead)


def test_the_files_validate_against_the_schemas(tmp_path):
    import json

    from test_schemas import assert_valid, problems

    from exactmem.checks.certify import certificate_json
    from exactmem.datasets.dataset import dataset_to_json

    ds, model, _ = built(8, 2, 3)
    assert_valid(json.loads(json.dumps(dataset_to_json(ds))), "dataset")
    path = tmp_path / "m.json"
    save_model(model, path)
    assert_valid(json.loads(path.read_text()), "model")
    from exactmem.files.model_files import save_certificate

    cert = certify_built(model, ds, tolerance="1/1000")
    save_certificate(certificate_json(cert), tmp_path / "c.json")
    assert_valid(json.loads((tmp_path / "c.json").read_text()), "certificate")
    points = {"format": "exactmem.dataset/1", "task": "points", "points": [[1]], "labels": [1]}
    assert problems({**points, "targets": [["1"]]}, "dataset")
    obj = json.loads(path.read_text())
    obj["model"]["sublayers"][2]["activation"] = "relu"
    assert problems(obj, "model")


def test_the_measured_row_stands_against_the_sufficient_parameters_row():
    """`bounds --measure`: the construction's dense parameters over ω·N, the madden24-upper
    row (O(nω) parameters suffice: the construction), not the Ω row of the needed ones."""
    from exactmem.reports.field import against_paper

    ds, model, _ = built(30, 3, 5)
    dense = resources(model).dense_parameters
    figures = against_paper("madden24", ds, dense)
    assert figures["paper_row"] == "madden24-upper"
    assert float(figures["measured_over_paper"]) > 1
    assert figures["fitted_constants"]["depth"] == "3"


def test_verified_as_ks25_next_token_it_is_refuted_not_inconclusive():
    """Under another construction's checklist the decoder lacks the structure, and Theorem
    4.2's constant sequences meet the positional table: their columns differ, so the softmax
    scores are unequal — the check finds where on balls and fails (it used to exit 4)."""
    from exactmem.checks.certify import certify

    ds, model, _ = built(8, 2, 3)
    cert = certify(model, ds, construction="ks25-next-token")
    failed = {c.name: c for c in cert.failed}
    assert cert.verdict == "refuted"
    assert "lower_bound.theorem_4_2" in failed
    assert "columns differ after sub-layer 0" in failed["lower_bound.theorem_4_2"].detail


def test_token_averaging_collides_on_permuted_contexts_exactly():
    """A zero query map makes every score equal: the head averages its context (the TL;DR's
    token averaging), so two contexts that permute their first tokens and end alike get exactly
    the same h(x). The exact evaluator runs such attention, and the check fails on the exact
    collision (balls could only leave it undecided)."""
    from exactmem.checks.measures.madden24 import decoder_parts

    ds = Dataset(
        "next-token",
        (1, 2, 3),
        3,
        vocab=((mpq(0),), (mpq(1),), (mpq(2),)),
        sequences=((0, 1, 2), (1, 0, 2), (2, 1, 0)),
    )
    model, _ = madden24.build(ds, {"d": 4})
    att = model.sublayers[1]
    q = att.heads[0].query
    flat = replace(
        att, heads=(replace(att.heads[0], query=Affine(q.in_dim, ((),) * q.out_dim, q.bias, 1)),)
    )
    averaging = replace(model, sublayers=(model.sublayers[0], flat, model.sublayers[2]))
    front, _ = decoder_parts(averaging)
    check = injectivity_check(front, ds, [0, 1, 2])
    assert not check.passed and check.figures["collision"] == [0, 1]
    honest_front, _ = decoder_parts(model)
    assert injectivity_check(honest_front, ds, [0, 1, 2]).passed


def test_past_int_bits_the_build_is_refused_naming_the_weight(tmp_path, capsys):
    """The output weights are fixed-point numbers below 2^E (``int_bits``): a solved weight that
    reaches it refuses the build (exit 2), naming the weight and the option to raise — never a
    model whose bits the declared bound does not cover."""
    from exactmem.files.dataset_files import save_dataset

    data, out = tmp_path / "ds.json", tmp_path / "m.json"
    save_dataset(madden24.random_contexts(12, 3, 4, 1), data)
    build = ["build", "--construction", "madden24", "--data", str(data), "--out", str(out)]
    assert main([*build, "--set", "int_bits=1"]) == 2
    err = capsys.readouterr().err
    assert "int_bits" in err and "class" in err and ("W₂" in err or "b₂" in err)
    assert not out.exists()
    assert main([*build, "--set", "int_bits=4097"]) == 2
    assert "at most 4096 integer bits" in capsys.readouterr().err
    assert main([*build, "--set", "bits=128"]) == 2  # the option frac_bits replaced
    assert "bits: unknown option" in capsys.readouterr().err


def test_too_few_fractional_bits_are_refuted_not_accepted():
    """Output weights rounded to multiples of 2^−4 keep every label, the injectivity and the
    rank, and miss the targets: ``madden24.targets`` refutes (proofs/madden24_precision.toml);
    the bits bound at the stated fixed point holds either way."""
    ds, model, _ = built(20, 3, 4, d=8, frac_bits=4)
    cert, checks = checks_of(model, ds, tolerance="1/1000")
    assert cert.verdict == "refuted"
    assert {c.name for c in cert.failed} == {"madden24.targets"}
    assert resources(model).max_bits < resources(built(20, 3, 4, d=8)[1]).max_bits


def test_the_output_weights_are_fixed_point_within_the_stated_bits():
    """Every output weight is a multiple of 2^−F below 2^E, so it costs at most E + 2F + 1 bits
    (plugins/madden24.py) — here at F = 40, E = 24."""
    from exactmem.core.exact import parameter_bits

    _, model, _ = built(frac_bits=40, int_bits=24)
    out = model.sublayers[-1].layers[-1]
    values = [mpq(v, out.denominator) for row in out.rows for _, v in row]
    values += [mpq(b, out.denominator) for b in out.bias]
    assert all((v * 2**40).denominator == 1 and abs(v) < 2**24 for v in values)
    assert max(map(parameter_bits, values)) <= 24 + 2 * 40 + 1


def test_the_positions_tangent_is_clamped_so_their_bits_are_bounded():
    """θ = 355 ≈ 113π puts tan(θ/2) near −66347: clamped to −10⁴, every coordinate of a context
    of 400 positions keeps at most 109 bits (plugins/madden24.py) and lies on the circle."""
    from exactmem.core.exact import parameter_bits

    rows = madden24.rational_positions(400, 2)
    assert rows[355][0] ** 2 + rows[355][1] ** 2 == 1
    assert max(parameter_bits(x) for row in rows for x in row) <= 109
    q = rows[355][1] / (1 + rows[355][0])  # the point's q = tan(θ/2)
    assert q == -(10**4)


def _own_targets(model, ds):
    """The model's own next-token distributions on ``ds``, rounded to 10⁻⁹ (the last class
    takes the rest), with their argmax labels: a dataset the model fits by construction."""
    from exactmem.core.balls import ball_midpoint, softmax_balls
    from exactmem.evaluate.softmax import run_balls

    trace = run_balls(model, ds.vocab, ds.sequences, precision=256, positions="last")
    targets, labels = [], []
    for out in trace.outputs:
        p = [mpq(round(ball_midpoint(x) * 10**9), 10**9) for x in softmax_balls(out[-1])]
        p[-1] = 1 - sum(p[:-1])
        targets.append(tuple(p))
        labels.append(1 + max(range(len(p)), key=lambda c: p[c]))
    return replace(ds, targets=tuple(targets), labels=tuple(labels))


def _w2_reading(model, keep, fill=None):
    """W₂ reading feature ``keep`` alone: its other columns dropped (``fill`` None) or set to
    ``fill`` for every logit (a per-context shift softmax ignores)."""
    *front, fnn = model.sublayers
    w2 = fnn.layers[1]
    rows = tuple(
        tuple((j, v) for j, v in row if j == keep)
        if fill is None
        else tuple(
            sorted(
                [(j, v) for j, v in row if j == keep]
                + [(j, fill) for j in range(w2.in_dim) if j != keep]
            )
        )
        for row in w2.rows
    )
    fnn2 = replace(fnn, layers=(fnn.layers[0], replace(w2, rows=rows)))
    return replace(model, sublayers=(*front, fnn2))


@pytest.mark.parametrize("fill", [None, 7], ids=["zeroed", "constant"])
def test_features_the_output_does_not_read_add_no_rank(fill):
    """Issue 26 (hostile review A4): W₂ zeroed but for unit 0 (or its other columns the same
    for every logit), the targets the model's own distributions. Every unit is computed and Φ
    has full rank, but the output reads one feature: [Φ, 1] restricted to what it reads has 2
    columns for 8 contexts, and the verdict is REFUTED with the feature rank failing (it was
    VERIFIED with "Φ (8 × 8) has full row rank 8")."""
    ds, model, _ = built(8, 3, 4, seed=1)
    dead = _w2_reading(model, 0, fill)
    own = _own_targets(dead, ds)
    cert, checks = checks_of(dead, own, tolerance="1/1000")
    assert cert.verdict == "refuted"
    assert [c.name for c in cert.failed] == ["madden24.feature_rank"]
    rank = checks["madden24.feature_rank"]
    assert rank.figures["read_features"] == 1 and "reads 1 of the m = 8" in rank.detail
    assert checks["madden24.targets"].passed and checks["labels"].passed
    # the honest model on its own distributions reads n − 1 = 7 features and verifies
    cert, checks = checks_of(model, _own_targets(model, ds), tolerance="1/1000")
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    assert checks["madden24.feature_rank"].figures["read_features"] == 7


def test_a_constant_dataset_reads_no_feature_and_is_refuted():
    """Every context with the same target distribution: the honest solve gives W₂ = 0 (the
    bias alone fits), so the output reads no feature and the rank is not the model's
    mechanism — refuted on the feature rank, the only failure."""
    ds = madden24.random_contexts(6, 3, 4, 1, targets=True)
    same = replace(ds, targets=(ds.targets[0],) * 6, labels=(ds.labels[0],) * 6)
    model, _ = madden24.build(same, {})
    cert, checks = checks_of(model, same, tolerance="1/1000")
    assert [c.name for c in cert.failed] == ["madden24.feature_rank"]
    assert checks["madden24.feature_rank"].figures["read_features"] == 0
