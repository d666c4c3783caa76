"""Issue 26, point 8: claims refuted only by the mechanism. For each such claim of the vys and
Kajitsuka–Sato constructions, every instance's model reproduces its labels, the shapes and the
data are fine, and the failed checks are exactly the mechanism checks the claim names."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from exactmem.api import build
from exactmem.checks.certify import certify
from exactmem.claims.proofs import GENERATORS

PROOFS = Path(__file__).resolve().parent.parent / "proofs"
CLAIMS = [
    "vys_mechanism_only",
    "ks25_weakened_token_ids",
    "ks25_seq2seq_weakened_token_ids",
    "ks25_token_ids_weakened",
    "ks25_deep_sets_weakened_token_ids",
    "ks25_bit_budget_weakened_token_ids",
]


@pytest.mark.parametrize("name", CLAIMS)
def test_refuted_only_by_the_mechanism(name):
    claim = tomllib.loads((PROOFS / f"{name}.toml").read_text())
    assert claim["expect"] == "refuted"
    for instance in claim["instance"]:
        params = {k: v for k, v in instance.items() if k not in ("generator", "tier")}
        dataset = GENERATORS[instance["generator"]](params)
        model = build(dataset, claim["construction"], **claim.get("options", {}))
        cert = certify(model, dataset, construction=claim["construction"])
        assert sorted(c.name for c in cert.failed) == sorted(claim["refuted_by"])
        assert "labels" not in claim["refuted_by"]
