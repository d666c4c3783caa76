"""The attention constructions' claims that exercise the mechanism (issue 26, point 8): each
construction has an instance refuted *only* by its mechanism checks — the labels come out right,
the shapes are the honest ones — and one where a weakened constant (a capacity one too large, a
feature count one short, output weights too coarse) collides."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactmem.checks.certify import certify
from exactmem.claims.proofs import build_instance, load_claim

PROOFS = Path(__file__).resolve().parent.parent / "proofs"


def _certify(claim_file: str, index: int):
    claim = load_claim(PROOFS / claim_file)
    inst = claim.instances[index]
    ds, options, model = build_instance(claim, inst)
    cert = certify(model, ds, construction=claim.construction, tolerance=options.get("tolerance"))
    return claim, cert, {c.name for c in cert.failed}


# (claim file, instance, the checks that fail — exactly these: the labels pass)
MECHANISM_ONLY = [
    (
        "mahdavi24_mechanism.toml",
        0,
        {"mahdavi.feature_rank", "mahdavi.rank_ceiling", "mahdavi.capacity"},
    ),
    ("mahdavi24_capacity.toml", 0, {"mahdavi.capacity"}),
    ("dana25_capacity.toml", 0, {"dana.feature_rank", "dana.capacity"}),
    ("madden24_precision.toml", 0, {"madden24.targets"}),
]


@pytest.mark.parametrize(("claim_file", "index", "failing"), MECHANISM_ONLY)
def test_refuted_by_the_mechanism_alone(claim_file, index, failing):
    claim, cert, failed = _certify(claim_file, index)
    assert claim.expect == cert.verdict == "refuted"
    assert failed == failing
    assert "labels" not in failed and not any(n.endswith(".structure") for n in failed)
    assert set(claim.refuted_by) <= failed


def test_a_capacity_one_too_large_still_reaches_rank_t_on_random_contexts():
    """Theorem 1 is a lower bound on the capacity: on random contexts the over-capacity build
    fits every label through features of rank T; only the count refutes it."""
    _, cert, _ = _certify("mahdavi24_capacity.toml", 0)
    checks = {c.name: c for c in cert.checks}
    assert checks["mahdavi.feature_rank"].passed
    assert checks["mahdavi.capacity"].figures["capacity"] == 9


def test_one_association_too_many_also_fails_its_label():
    _, cert, failed = _certify("dana25_capacity.toml", 1)
    assert cert.verdict == "refuted" and {"labels", "dana.capacity"} <= failed
