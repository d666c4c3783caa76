"""Single-weight mutants of VYS, Theorem 4.1, Mahdavi, Kim et al. and Dana: both evaluators
give identical certificates, and every verdict holds up against the independent oracle.

``EXACTMEM_MUTANTS=N`` sets the total number of mutants, split evenly over the families
(default 48); ``benchmarks/mutants.py`` runs the large campaign and prints its table."""

import os
from fractions import Fraction

import mutation
import pytest

TOTAL = int(os.environ.get("EXACTMEM_MUTANTS", "48"))


@pytest.fixture(scope="module")
def shipped():
    return {f.name: f for f in mutation.families()}


@pytest.mark.parametrize(
    "name",
    ["vys", "ks25", "ks25-hardmax", "mahdavi-hardmax", "mahdavi-softmax", "kim23", "dana"],
)
def test_mutants_agree_everywhere(shipped, name):
    count = -(-TOTAL // len(shipped))
    tally = mutation.campaign(shipped[name], count, seed=0)
    assert tally.failures == []
    assert tally.mutants == count
    assert tally.evaluator_disagreements == tally.oracle_disagreements == tally.errors == 0
    assert tally.verified + tally.refuted + tally.inconclusive == count
    assert tally.refuted > 0  # single-weight changes do break these models


def test_attention_maps_are_mutated(shipped):
    import random

    rng = random.Random(1)
    kinds = {mutation.sample_site(shipped["dana"].model, rng).kind for _ in range(200)}
    assert {"query", "key", "value", "output", "positional", "embed", "unembed"} <= kinds


def test_a_mutation_changes_one_entry_and_keeps_the_denominator(shipped):
    import random

    model = shipped["mahdavi-hardmax"].model
    site = mutation.Site("unembed", ("unembed",), 0, 2)
    mutant, old, new = mutation.apply(model, site, "+1", random.Random(0))
    assert new == old + 1
    assert mutant.unembed.denominator == model.unembed.denominator
    assert mutant.embed == model.embed and mutant.sublayers == model.sublayers
    changed = [
        (r, c)
        for r, (a, b) in enumerate(zip(model.unembed.rows, mutant.unembed.rows, strict=True))
        for c in range(model.unembed.in_dim)
        if dict(a).get(c, 0) != dict(b).get(c, 0)
    ]
    assert changed == [(0, 2)]


def test_an_evaluator_disagreement_is_counted(shipped, monkeypatch):
    real = mutation.outcome

    def lying(model, ds, evaluator, **criteria):
        kind, verdict, doc = real(model, ds, evaluator, **criteria)
        return (kind, "verified" if evaluator == "fast" else verdict, doc)

    monkeypatch.setattr(mutation, "outcome", lying)
    f = shipped["vys"]
    site = mutation.Site("mlp", ("mlp", 0, len(f.model.sublayers[0].layers) - 1), 0, None)
    import random

    mutant, _, _ = mutation.apply(f.model, site, "+1", random.Random(0))  # shifts every output
    tally = mutation.Tally("vys")
    mutation.judge_mutant(f, mutant, tally, "lying fast")
    assert tally.evaluator_disagreements == 1 and tally.refuted == 1


def test_an_oracle_disagreement_is_counted(shipped, monkeypatch):
    """Certified within 1/1000 but held by the oracle to 10⁻¹²: a verified model the oracle
    does not confirm is counted — the oracle can fail."""
    f = shipped["mahdavi-softmax"]
    monkeypatch.setattr(
        mutation, "criteria", lambda family: {"construction": "mahdavi24", "tolerance": "1/1000"}
    )
    strict = mutation.Family(f.name, f.model, f.dataset, "mahdavi24", tolerance=Fraction(1, 10**12))
    tally = mutation.Tally(f.name)
    mutation.judge_mutant(strict, f.model, tally, "wrong criterion")
    assert tally.verified == 1 and tally.oracle_disagreements >= 1, tally.failures
