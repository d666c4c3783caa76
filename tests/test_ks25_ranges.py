"""Lemma B.3's range 4MN³√π and Lemma C.2's key range, checked on evaluated values; a model
whose lanes break either is refuted by that check."""

from dataclasses import replace

import pytest
from gmpy2 import mpq
from support import certify_built

from exactmem.checks.measures.ks25 import _at_most_sqrt_pi_times, _below_pi
from exactmem.constructions import ks25
from exactmem.core.model import MLP
from exactmem.datasets.sequences import random_sequences


def scaled_lane(affine, lane: str, factor: int = 1, shift: int = 0):
    """``affine`` with output ``lane`` multiplied by ``factor`` and ``shift`` added."""
    i = affine.names.index(lane)
    rows = list(affine.rows)
    bias = list(affine.bias)
    rows[i] = tuple((c, v * factor) for c, v in rows[i])
    bias[i] = bias[i] * factor + shift * affine.denominator
    return replace(affine, rows=tuple(rows), bias=tuple(bias))


def with_f1_lane(model, lane, **kw):
    f1 = model.sublayers[0]
    layers = f1.layers[:-1] + (scaled_lane(f1.layers[-1], lane, **kw),)
    broken = MLP(layers, f1.residual, f1.probes, f1.label, f1.meta)
    return replace(model, sublayers=(broken,) + model.sublayers[1:])


def checks_of(model, ds, construction):
    cert = certify_built(model, ds, construction=construction)
    return cert, {c.name: c for c in cert.checks}


@pytest.fixture(scope="module")
def built():
    ds = random_sequences(40, 5, 3, 20, 4, seed=7)
    model, _ = ks25.build(ds, {"seed": 7})
    return model, ds


def test_pi_comparisons_are_exact():
    assert _below_pi(mpq(333, 106)) and not _below_pi(mpq(355, 113))
    assert _at_most_sqrt_pi_times(mpq(-5), mpq(1))
    assert _at_most_sqrt_pi_times(mpq(1772, 1000), mpq(1))  # √π = 1.77245…
    assert not _at_most_sqrt_pi_times(mpq(1773, 1000), mpq(1))


def test_the_construction_meets_both_ranges(built):
    model, ds = built
    cert, checks = checks_of(model, ds, "ks25-next-token")
    assert cert.verdict == "verified"
    assert checks["ks25.phi_range"].passed and checks["ks25.token_id_range"].passed
    assert checks["ks25.phi_range"].figures["max_sum"]


def test_phi_beyond_lemma_b3_range_is_refuted(built):
    """φ̃ scaled by 10⁶: still non-negative integers, sums still distinct, but beyond
    ⌈4N³√π⌉ and 4MN³√π."""
    model, ds = built
    cert, checks = checks_of(with_f1_lane(model, "phi", factor=10**6), ds, "ks25-next-token")
    assert cert.verdict == "refuted"
    assert checks["ks25.phi_values"].passed and checks["ks25.sequence_sums"].passed
    check = checks["ks25.phi_range"]
    assert not check.passed
    assert "> ⌈4N³√π⌉" in check.detail and "> 4MN³√π" in check.detail


def test_token_ids_beyond_lemma_c2_range_are_refuted(built):
    """Token ids scaled by 10⁹: still integers ≥ 2 apart, but beyond 10rM²√(πd)/δ."""
    model, ds = built
    cert, checks = checks_of(with_f1_lane(model, "tid", factor=10**9), ds, "ks25-next-token")
    assert checks["ks25.token_ids"].passed
    assert not checks["ks25.token_id_range"].passed
    assert "> 10rM²√(πd)/δ" in checks["ks25.token_id_range"].detail
    assert cert.verdict == "refuted"


def test_negative_token_ids_are_refuted(built):
    model, ds = built
    _, checks = checks_of(with_f1_lane(model, "tid", shift=-(10**6)), ds, "ks25-next-token")
    assert not checks["ks25.token_id_range"].passed
    assert "< 0" in checks["ks25.token_id_range"].detail


def test_embedding_ids_outside_the_vocabulary_are_refuted():
    """Theorem E.1: the table's id row holds x ∈ [1, ω]; doubled, it leaves the range."""
    ds = random_sequences(40, 4, 1, 15, 3, seed=2)
    model, _ = ks25.build(ds, {"seed": 2}, "ks25-token-ids")
    _, checks = checks_of(model, ds, "ks25-token-ids")
    assert checks["ks25.token_id_range"].passed
    broken = replace(model, embed=scaled_lane(model.embed, "tid", factor=2))
    cert, checks = checks_of(broken, ds, "ks25-token-ids")
    assert not checks["ks25.token_id_range"].passed
    assert "outside [1, 15]" in checks["ks25.token_id_range"].detail
    assert cert.verdict == "refuted"
