"""Kajitsuka & Sato 2024: one rank-one softmax head and a re-quantizing FFN memorize seq-to-seq
data; the checklist measures the contextual-mapping gap on Arb balls, and every check fails on
a model or dataset made to break it."""

from dataclasses import replace
from pathlib import Path

import pytest
from gmpy2 import mpq

from exactmem.checks.certify import certify
from exactmem.checks.measures.ks24 import check_ks24
from exactmem.claims.proofs import GENERATORS, _build, load_claim
from exactmem.commands.main import main
from exactmem.constructions import ks24
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.model import MLP, Affine, Attention
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.separation import require_separated, separation
from exactmem.files.dataset_files import save_dataset

PROOFS = Path(__file__).resolve().parent.parent / "proofs"


def checks(cert):
    return {c.name: c for c in cert.checks}


@pytest.fixture(scope="module")
def built():
    ds = ks24.random_instance(24, 4, 3, 12, 5, seed=3)
    model, witness = ks24.build(ds, {"seed": 0})
    return ds, model, witness


def with_ffn(model, layers):
    att, ffn = model.sublayers
    return replace(model, sublayers=(att, replace(ffn, layers=tuple(layers))))


def test_builds_and_certifies_with_exact_labels(built):
    """Rank-one weights, one head, one FFN; every output is its label exactly (radius 0)."""
    ds, model, witness = built
    att, ffn = model.sublayers
    assert isinstance(att, Attention) and att.score == "softmax" and len(att.heads) == 1
    h = att.heads[0]
    assert (h.query.out_dim, h.key.out_dim, h.value.out_dim, h.output.in_dim) == (1, 1, 1, 1)
    assert isinstance(ffn, MLP) and len(ffn.layers) == 5
    assert ffn.layers[0].out_dim == 2 * len(witness.thresholds)  # two ramp units per step
    assert len(witness.thresholds) <= len(ds.sequences) * 4 - 1
    cert = certify(model, ds, construction="ks24")
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    c = checks(cert)
    assert "exactly their labels" in c["labels"].detail
    assert mpq(c["ks24.contextual_mapping"].figures["gap_lower_bound"]) > mpq(
        c["ks24.contextual_mapping"].figures["max_enclosure"]
    )
    assert c["ks24.contextual_mapping"].figures["paper_delta_exponent"] is not None


def test_repeated_token_is_refused_naming_the_positions():
    ds = ks24.random_instance(6, 3, 2, 8, 3, seed=1, repeats=1)
    with pytest.raises(InputError, match=r"sequences\[0\]\[0\] and sequences\[0\]\[1\]"):
        ks24.build(ds, {})


def test_repeated_token_is_refuted_by_the_hypothesis():
    """Built anyway, the model may fit the labels, but two positions of one sequence share an
    id: the data are outside the contextual mapping's hypothesis (the claim
    ks24_repeated_tokens; a data check, which the mechanism claims ks24_boltzmann complete)."""
    ds = ks24.random_instance(6, 3, 2, 8, 3, seed=1, repeats=2)
    model, _ = ks24.build(ds, {"allow_repeats": True})
    cert = certify(model, ds, construction="ks24")
    assert cert.verdict == "refuted"
    assert [c.name for c in cert.failed] == ["ks24.separation"]
    assert "are equal tokens" in cert.failed[0].detail


def test_zero_token_is_refused_and_fails_separation(built):
    ds, model, _ = built
    vocab = list(ds.vocab)
    vocab[ds.sequences[0][0]] = (mpq(0),) * ds.dim
    bad = replace(ds, vocab=tuple(vocab))
    with pytest.raises(InputError, match="zero vector"):
        ks24.build(bad, {})
    got = {c.name: c for c in check_ks24(model, bad, limit=256)}
    assert not got["ks24.separation"].passed


def test_stated_separation_bounds_are_checked_exactly(built):
    ds = built[0]
    sep = separation(ds)
    require_separated(ds, r_min=mpq(1), r_max=mpq(100), epsilon=mpq(1))
    with pytest.raises(InputError, match="below r_min"):
        require_separated(ds, r_min=mpq(sep.r_max2))
    with pytest.raises(InputError, match="above r_max"):
        require_separated(ds, r_max=mpq(1))
    with pytest.raises(InputError, match="< ε²"):
        require_separated(ds, epsilon=mpq(1000))


def test_wrong_task_and_inconsistent_labels_are_refused(built):
    ds = built[0]
    with pytest.raises(InputError, match="seq2seq"):
        ks24.build(replace(ds, task="next-token", labels=tuple(y[-1] for y in ds.labels)), {})
    seq = ds.sequences[0]
    twin = tuple(reversed(seq))  # a permutation: token k keeps its class, so its label
    labels = list(ds.labels) + [tuple(1 + (y % 5) for y in reversed(ds.labels[0]))]
    bad = replace(ds, sequences=ds.sequences + (twin,), labels=tuple(labels))
    with pytest.raises(InputError):
        ks24.build(bad, {})


def test_structure_is_demanded(built):
    ds, model, _ = built
    att, ffn = model.sublayers
    two_heads = replace(model, sublayers=(replace(att, heads=att.heads * 2), ffn))
    cert = certify(two_heads, ds, construction="ks24")
    assert "ks24.structure" in {c.name for c in cert.failed}
    h = att.heads[0]
    q = h.query
    rank_two = replace(h, query=Affine(q.in_dim, q.rows * 2, q.bias * 2, q.denominator))
    k = h.key
    rank_two = replace(rank_two, key=Affine(k.in_dim, k.rows * 2, k.bias * 2, k.denominator))
    bad = replace(model, sublayers=(replace(att, heads=(rank_two,)), ffn))
    cert = certify(bad, ds, construction="ks24")
    assert "ks24.structure" in {c.name for c in cert.failed}


def test_collapsed_contextual_mapping_is_refuted():
    """W_Q = 0: every weight is exactly 1/n (n = 4: exact balls) and b_k is the mean, so two
    sequences with equal sums of projections that share a token give that token one id,
    certified equal."""
    vocab = tuple((mpq(x),) for x in (1, 2, 3, 4, 5, 7))
    # {1, 4, 5, 7} and {2, 3, 5, 7}: equal sums, both hold the tokens 5 and 7
    seqs = ((0, 3, 4, 5), (1, 2, 4, 5))
    ds = Dataset("seq2seq", ((1, 1, 1, 1), (2, 2, 2, 2)), 2, vocab=vocab, sequences=seqs)
    model, _ = ks24.build(ds, {})
    att, ffn = model.sublayers
    h = att.heads[0]
    q = h.query
    flat = replace(h, query=Affine(q.in_dim, ((),), q.bias, 1))
    bad = replace(model, sublayers=(replace(att, heads=(flat,)), ffn))
    got = {c.name: c for c in check_ks24(bad, ds, limit=256)}
    assert not got["ks24.contextual_mapping"].passed
    assert "exactly" in got["ks24.contextual_mapping"].detail


def test_shallow_cuts_fail_the_requantization(built):
    """The label lane's cut slopes divided by 10⁹: the step units g_c = 1 − h_c leave {0, 1}."""
    ds, model, _ = built
    layers = list(model.sublayers[1].layers)
    cuts = layers[2]
    layers[2] = Affine(cuts.in_dim, cuts.rows, cuts.bias, cuts.denominator * 10**9)
    got = {c.name: c for c in check_ks24(with_ffn(model, layers), ds, limit=256)}
    assert not got["ks24.requantization"].passed


def test_ffn_reading_two_directions_is_not_the_structure(built):
    ds, model, _ = built
    layers = list(model.sublayers[1].layers)
    ramps = layers[0]
    rows = list(ramps.rows)
    rows[1] = tuple((c, x + 1) for c, x in rows[1])
    layers[0] = Affine(ramps.in_dim, tuple(rows), ramps.bias, ramps.denominator)
    cert = certify(with_ffn(model, layers), ds, construction="ks24")
    assert "ks24.structure" in {c.name for c in cert.failed}


def test_wrong_readout_fails_the_labels(built):
    ds, model, _ = built
    layers = list(model.sublayers[1].layers)
    last = layers[-1]
    layers[-1] = Affine(last.in_dim, last.rows, (last.bias[0] + 1,), last.denominator)
    cert = certify(with_ffn(model, layers), ds, construction="ks24")
    assert "labels" in {c.name for c in cert.failed}


def test_labels_within_a_tolerance_and_argmax():
    """The ball label check of seq-to-seq softmax models, with a tolerance."""
    from exactmem.checks.seq2seq_balls import ball_seq2seq_label_check

    ds = ks24.random_instance(8, 3, 2, 8, 4, seed=5)
    model, _ = ks24.build(ds, {})
    assert ball_seq2seq_label_check(model, ds, tolerance=mpq(1, 10)).passed
    y = ds.labels
    shifted = replace(ds, labels=tuple(tuple(min(4, v + 1) if v < 4 else 3 for v in r) for r in y))
    assert not ball_seq2seq_label_check(model, shifted, tolerance=mpq(1, 2)).passed


def test_build_too_little_precision_is_inconclusive_naming_the_bits(tmp_path):
    ds = ks24.random_instance(16, 4, 3, 12, 5, seed=2)
    with pytest.raises(InconclusiveError, match=r"bits would be needed"):
        ks24.build(ds, {"precision": 8})
    path = tmp_path / "d.json"
    save_dataset(ds, path)
    out = str(tmp_path / "m.json")
    argv = ["build", "--data", str(path), "--construction", "ks24", "--out", out, "--quiet"]
    assert main([*argv, "--set", "precision=8"]) == 4


def test_cli_build_and_verify(tmp_path):
    ds = ks24.random_instance(10, 3, 2, 9, 3, seed=4)
    path = tmp_path / "d.json"
    save_dataset(ds, path)
    out = str(tmp_path / "m.json")
    argv = ["build", "--data", str(path), "--construction", "ks24", "--out", out, "--quiet"]
    assert main(argv) == 0
    assert main(["verify", out, "--data", str(path), "--construction", "ks24", "--quiet"]) == 0
    rep = ks24.random_instance(10, 3, 2, 9, 3, seed=4, repeats=1)
    save_dataset(rep, path)
    assert main(argv) == 2


def test_quick_claim_instances_reproduce():
    for name, verdict in (("ks24", "verified"), ("ks24_repeated_tokens", "refuted")):
        claim = load_claim(PROOFS / f"{name}.toml")
        inst = next(i for i in claim.instances if i.tier == "quick")
        ds = GENERATORS[inst.generator](inst.params)
        model, _ = _build(claim.construction, ds, {**claim.options, **inst.options, "seed": 0})
        assert certify(model, ds, construction="ks24").verdict == verdict


def test_files_of_a_ks24_run_validate(tmp_path, built):
    """The dataset, model and certificate files of a ks24 run meet the published schemas."""
    import json

    from test_schemas import assert_valid

    from exactmem.datasets.dataset import dataset_to_json
    from exactmem.files.model_files import save_certificate, save_model

    ds, model, _ = built
    assert_valid(json.loads(json.dumps(dataset_to_json(ds))), "dataset")
    save_model(model, tmp_path / "m.json")
    assert_valid(json.loads((tmp_path / "m.json").read_text()), "model")
    save_certificate(certify(model, ds, construction="ks24").to_json(), tmp_path / "c.json")
    assert_valid(json.loads((tmp_path / "c.json").read_text()), "certificate")


def _exact_mlp(ffn, z):
    """The plain FFN on an exact rational input (ReLU after every layer but the last)."""
    h = list(z)
    for i, layer in enumerate(ffn.layers):
        h = [
            (sum((h[c] * x for c, x in row), mpq(0)) + b) / layer.denominator
            for row, b in zip(layer.rows, layer.bias, strict=True)
        ]
        if i < len(ffn.layers) - 1:
            h = [max(v, mpq(0)) for v in h]
    return h


@pytest.mark.parametrize("seed", range(12))
def test_rank_one_evaluator_encloses_the_exact_values(seed):
    """Kinks of both slope signs, several second-layer rows, inputs on, beside and between the
    kinks, exact and as wide balls: every exact value of the FFN lies in the enclosure."""
    import random

    from flint import arb, ctx

    from exactmem.checks.rank_one import RankOneFFN, rank_one_direction

    rng = random.Random(seed)
    d, K = 3, 9
    w = [rng.choice([-3, -1, 2, 5]) for _ in range(d)]
    factors = [rng.choice([-4, -1, 1, 3]) for _ in range(K)]
    first = Affine.from_dense(
        [[f * x for x in w] for f in factors], [rng.randint(-20, 20) for _ in range(K)], 2
    )
    second = Affine.from_dense(
        [[rng.choice([0, 0, -2, 1, 3]) for _ in range(K)] for _ in range(3)],
        [rng.randint(-5, 5) for _ in range(3)],
        3,
    )
    third = Affine.from_dense([[1, -1, 2]], [1], 1)
    ffn = MLP((first, second, third), residual=False)
    found = rank_one_direction(first)
    assert found is not None
    fast = RankOneFFN(ffn, *found)
    old = ctx.prec
    ctx.prec = 128
    try:
        for _ in range(30):
            z = [mpq(rng.randint(-12, 12), rng.choice([1, 2, 3])) for _ in range(d)]
            x = sum((a * b for a, b in zip(found[0], z, strict=True)), mpq(0))
            layers = fast.layers(arb(float(x)) if x.denominator == 1 else _ball(x))
            assert _contains(layers[-1][0], _exact_mlp(ffn, z)[0])
            # a wide ball: every point inside it maps into the enclosure
            rad = mpq(rng.randint(1, 40), 8)  # dyadic: the ball is exactly x ± rad
            wide = fast.layers(_ball(x) + arb(0, float(rad)))[-1][0]
            for t in range(5):
                shift = rad * mpq(2 * t - 4, 4)
                zt = list(z)
                pivot = next(i for i, v in enumerate(found[0]) if v)
                zt[pivot] += shift / found[0][pivot]
                assert _contains(wide, _exact_mlp(ffn, zt)[0])
    finally:
        ctx.prec = old


def _ball(q):
    from exactmem.core.balls import to_ball

    return to_ball(q)


def _contains(ball, q) -> bool:
    from exactmem.core.balls import ball_bounds

    lo, hi = ball_bounds(ball)
    return lo <= q <= hi


def test_rank_one_direction_refuses_other_layers():
    from exactmem.checks.rank_one import rank_one_direction

    assert rank_one_direction(Affine.from_dense([[2, 4], [-1, -2]], [0, 1])) is not None
    assert rank_one_direction(Affine.from_dense([[2, 4], [1, 3]], [0, 1])) is None
    assert rank_one_direction(Affine.from_dense([[2, 4], [0, 0]], [0, 1])) is None


def test_verify_below_the_needed_precision_is_inconclusive_naming_the_bits(built):
    ds, model, _ = built
    with pytest.raises(InconclusiveError, match=r"about \d+ bits would be needed"):
        check_ks24(model, ds, limit=16)
