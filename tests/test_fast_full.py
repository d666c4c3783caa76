"""The fast evaluator against the reference on the full tier's large claim instances: the slow
tier, run by `python -m pytest -m slow` (CI runs it after the suite)."""

import pytest
from support import both, claim_instances

from exactmem.claims.proofs import GENERATORS, _build
from exactmem.datasets.sequences import with_positions

pytestmark = pytest.mark.slow  # minutes: `python -m pytest -m slow` (CI runs it)

FULL = claim_instances("full")


@pytest.mark.parametrize(("claim", "inst"), FULL, ids=[f"{c.name}[{i.label}]" for c, i in FULL])
def test_fast_equals_reference_on_full_claims(claim, inst):
    """Every evaluator agrees with the reference on every instance in proofs/
    (the full tier's large instances: traces only, the certificates follow from them)."""
    dataset = GENERATORS[inst.generator](inst.params)
    model, _ = _build(claim.construction, dataset, {**claim.options, **inst.options})
    if dataset.task == "points":
        both(model, dataset.points, [[i] for i in range(dataset.size)])
    else:
        ds = with_positions(dataset) if model.meta.get("position_aware") else dataset
        positions = "all" if ds.task == "seq2seq" else "last"
        both(model, ds.vocab, ds.sequences, positions=positions)
