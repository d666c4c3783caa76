"""The built-in construction ``vys`` (Vardi, Yehudai & Shamir 2022, Theorem 3.1), registered as a
plugin: its checklist reads the Lemma C.1 stages of the one memorizing MLP
(:func:`exactmem.verify.check_memorizer`)."""

from __future__ import annotations

from exactmem.checklist import Evidence
from exactmem.mechanisms import vys as mechanisms
from exactmem.model import MLP
from exactmem.plugins import builtin
from exactmem.verify import Check, ChecklistStructureError, check_memorizer

PAPER = "Vardi, Yehudai & Shamir 2022, Theorem 3.1"
NAME = "vys"

# the fitted ([tight]) width of proofs/vys_theorem_3_1.toml and proofs/vys_tent_gadget.toml;
# its fitted depth, parameters and bits grow with the sizes at constants fitted on the claims'
# instances and options: they are judged there, per instance (`exactmem check`)
BOUNDS = {
    "width": "11",
}


def run(evidence: Evidence) -> list[Check]:
    """Theorem 3.1's network is one MLP: a layer beside it would escape the checklist."""
    model, trace = evidence.model, evidence.trace
    assert trace is not None  # evaluates "exact": the core hands no checklist a missing trace
    first = model.sublayers[0] if len(model.sublayers) == 1 else None
    if not isinstance(first, MLP) or model.embed or model.unembed:
        raise ChecklistStructureError("the model is not one MLP")
    from exactmem.dataflow import memorizer_dataflow

    expected = dict(enumerate(evidence.dataset.labels))
    checks = check_memorizer(trace, first, expected, lambda r: f"points[{r}]")
    # the checked read-out must be what produces the output
    return [*checks, memorizer_dataflow("vys.dataflow", model, 0)]


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("points",),
    summary="Lemma C.1 stages I–III of the memorizer (points)",
    run=run,
    evaluates="exact",
    bounds=BOUNDS,
    source="proofs/vys_theorem_3_1.toml, [tight]",
)
