"""ks24 under issue 26: values from the trusted evaluators (file A: a GELU FFN is not read as
ReLU), the Boltzmann operator checked (λ = 0 refuted; an exact collision refuted, not left
undecided), the projection checked, the one-hidden-layer residual FFN accepted, and the
builder's smaller defects (a hot temperature, an explicit temperature)."""

import math
from dataclasses import replace

import pytest
from gmpy2 import mpq

from exactmem.checks.certify import certify
from exactmem.checks.mechanisms.ks24 import _merging_key
from exactmem.commands.main import main
from exactmem.constructions import ks24
from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset
from exactmem.files.dataset_files import save_dataset
from exactmem.files.model_files import save_model


@pytest.fixture(scope="module")
def honest():
    ds = ks24.random_instance(12, 4, 3, 12, 5, seed=1)
    model, _ = ks24.build(ds, {})
    return ds, model


def _gelu(model):
    att, ffn = model.sublayers
    return replace(model, sublayers=(att, replace(ffn, activation="gelu")))


def test_file_a_a_gelu_ffn_is_refuted_with_and_without_the_construction(honest, tmp_path):
    """Issue 26 file A: the rank-one fast path applied ReLU whatever the activation said."""
    ds, model = honest
    save_model(_gelu(model), tmp_path / "a.json")
    save_dataset(ds, tmp_path / "d.json")
    argv = ["verify", str(tmp_path / "a.json"), "--data", str(tmp_path / "d.json"), "--quiet"]
    assert main(argv) == 1
    assert main([*argv, "--construction", "ks24"]) == 1


def test_the_honest_model_verifies_with_every_check(honest):
    ds, model = honest
    cert = certify(model, ds, construction="ks24")
    assert cert.verdict == "verified"
    names = [c.name for c in cert.checks]
    for name in ("ks24.separation", "ks24.boltzmann", "ks24.contextual_mapping"):
        assert name in names


def test_temperature_zero_is_refuted_by_the_boltzmann_check_alone(honest):
    """Issue 26 point 2: λ = 0 (plain averaging) passed every check."""
    ds, _ = honest
    model, witness = ks24.build(ds, {"temperature": 0})
    assert witness.temperature == 0
    cert = certify(model, ds, construction="ks24")
    assert [c.name for c in cert.failed] == ["ks24.boltzmann"]
    assert "plain averaging" in cert.failed[0].detail


def test_a_real_collision_is_refuted_exactly_not_inconclusive():
    """Tokens on a line: equal sums collide at λ = 0; the default temperature separates them."""
    ds = ks24.random_instance(60, 3, 1, 8, 4, seed=2)
    assert certify(ks24.build(ds, {})[0], ds, construction="ks24").verdict == "verified"
    model, _ = ks24.build(ds, {"temperature": 0})
    cert = certify(model, ds, construction="ks24")
    mapping = next(c for c in cert.checks if c.name == "ks24.contextual_mapping")
    assert not mapping.passed and "exactly (exact)" in mapping.detail


def test_a_query_zeroed_is_refuted_not_inconclusive(honest, tmp_path):
    """Issue 26 point 1: W_Q = 0 exited 4 under --construction ks24."""
    ds, model = honest
    att, ffn = model.sublayers
    q = att.heads[0].query
    head = replace(att.heads[0], query=replace(q, rows=((),), bias=(0,)))
    broken = replace(model, sublayers=(replace(att, heads=(head,)), ffn))
    save_model(broken, tmp_path / "q.json")
    save_dataset(ds, tmp_path / "d.json")
    argv = ["verify", str(tmp_path / "q.json"), "--data", str(tmp_path / "d.json"), "--quiet"]
    assert main([*argv, "--construction", "ks24"]) == 1


def test_separation_fails_on_a_key_that_merges_two_tokens(honest):
    """ks24.separation could fail only on a zero token; it now checks the projection too."""
    ds, model = honest
    cert = certify(_merging_key(model, ds), ds, construction="ks24")
    sep = next(c for c in cert.checks if c.name == "ks24.separation")
    assert not sep.passed and "W_K projects the distinct tokens" in sep.detail


def test_a_tiny_gap_does_not_overflow_the_staircase():
    """A hot temperature left gaps below a float's range: math.log2 overflowed (exit 3)."""
    tiny = mpq(1, 2**3000)
    ordered = [(mpq(0), mpq(0), 1), (tiny, tiny, 2)]
    M, thresholds, deltas = ks24._staircase(ordered, mpq(0))
    assert mpq(1, M) <= tiny / 8 and deltas == [1] and 0 < thresholds[0] <= tiny


def test_a_slope_past_the_cap_is_refused_naming_the_precision():
    """Issue 26 point 2: the FFN's slope M is read from a gap measured on Arb balls, which no
    dataset figure bounds; the builder caps it (plugins/ks24.py's max_bits bound reads the
    cap) and refuses past it, exit 2 naming --set precision."""
    ordered = [(mpq(0), mpq(0), 1), (mpq(1, 2**200), mpq(1, 2**200), 2)]
    cap = ks24._slope_cap(128, 3, 1, mpq(10))
    M, _, _ = ks24._staircase(ordered, mpq(0), cap=2**210)
    assert M <= 2**210 and cap > 2**144
    with pytest.raises(InputError, match=r"--set precision"):
        ks24._staircase(ordered, mpq(0), cap=2**150)


def test_the_lone_threshold_stays_below_the_ids_however_wide_the_lowest_ball():
    """One label: the ramp below every id is placed from ``below`` when the lowest ball
    reaches further down (its bias stays bounded by the data)."""
    M, thresholds, deltas = ks24._staircase([(mpq(-(2**500)), mpq(5), 1)], mpq(0), below=-7)
    assert deltas == [0] and thresholds == [mpq(math.floor(-8 * M), M)]
    _, thresholds, _ = ks24._staircase([(mpq(-3), mpq(5), 1)], mpq(0), below=-7)
    assert thresholds[0] == -4


def test_a_temperature_of_a_huge_denominator_is_refused(honest):
    """A decimal exponent gives a short --set temperature a denominator of thousands of bits
    (1e-9999): past 256 bits the build refuses it (the bits bound reads the limit)."""
    ds, _ = honest
    with pytest.raises(InputError, match="denominator has more than 256 bits"):
        ks24.build(ds, {"temperature": "1e-100"})
    near_one = mpq(2**255 + 1, 2**255)  # a denominator of 256 bits: kept as given
    _, witness = ks24.build(ds, {"temperature": near_one})
    assert witness.temperature == near_one


def test_the_residual_ffn_keeps_the_denominator_of_its_base():
    """ffn=residual adds label − z₀ of the lowest class as W₂'s bias: its denominator (here 3,
    the label steps' being 1) was truncated away, every output off by 2/3 (refuted)."""
    vocab = ((mpq(2, 3), mpq(2)), (mpq(2, 3), mpq(5)), (mpq(5, 3), mpq(-3)))
    ds = Dataset("seq2seq", ((1, 2), (2, 1)), 2, vocab=vocab, sequences=((0, 1), (1, 2)))
    model, _ = ks24.build(ds, {"ffn": "residual"})
    out = model.sublayers[1].layers[1]
    assert mpq(out.bias[0], out.denominator) == mpq(1) - mpq(5, 3)
    # z₀ = 2/3 is no binary ball's centre: exact labels stay undecided, within 1/4 certified
    cert = certify(model, ds, construction="ks24", tolerance=mpq(1, 4))
    assert cert.verdict == "verified", [c.detail for c in cert.failed]


def test_the_residual_one_hidden_layer_ffn_is_accepted_and_certified(honest, monkeypatch):
    """Issue 26 point 6: F(z) = z + W₂ReLU(W₁z + b₁) + b₂ is judged, not refused. Its labels are
    exact through the rank-one rearrangement (an active ramp pair's slopes cancel in exact
    rationals); plain ball arithmetic cannot cancel them and stays undecided (docs/ks24.md)."""
    import exactmem.checks.seq2seq_balls as seq2seq_balls

    ds, _ = honest
    model, _ = ks24.build(ds, {"ffn": "residual"})
    att, ffn = model.sublayers
    assert ffn.residual and len(ffn.layers) == 2
    cert = certify(model, ds, construction="ks24")
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    assert "exactly their labels" in cert.checks[0].detail
    assert "ks24.requantization" not in [c.name for c in cert.checks]
    monkeypatch.setattr(seq2seq_balls, "shortcut", lambda model: None)
    cert = certify(model, ds, construction="ks24")  # undecided labels: inconclusive
    assert cert.verdict == "inconclusive"
    assert "too wide" in cert.checks[0].detail and cert.checks[0].undecided
    cert = certify(model, ds, construction="ks24", tolerance=mpq(1, 4))
    assert cert.verdict == "verified"
