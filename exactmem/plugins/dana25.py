"""The built-in construction ``dana25`` (Dana, Pydi & Chevaleyre 2025), registered as a plugin:
its checklist is :func:`exactmem.verify_attention.dana_checks` (Lemma 2's feature rank on Arb
balls, capacity H·d_h + d)."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction, Evidence
from exactmem.mechanisms import dana25 as mechanisms
from exactmem.mechanisms.resources import bound_specs
from exactmem.options import CONSTRUCTIONS, OPTIONS
from exactmem.verify import Check

PAPER = "Dana, Pydi & Chevaleyre 2025"
NAME = "dana25"

# proofs/dana25.toml's [tight] depth; its other fitted bounds are formulas in the options (d,
# heads, head_dim), which verify does not know
BOUNDS = {"depth": "1"}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.verify_attention import dana_checks

    return dana_checks(evidence.model, evidence.dataset)


construction = Construction(
    name=NAME,
    paper=PAPER,
    summary=CONSTRUCTIONS[NAME],
    checklist=Checklist(
        name=NAME,
        tasks=("next-token",),
        summary="Dana et al. 2025: Lemma 2's feature rank (Arb), capacity H·d_h + d",
        checks=(
            *mechanisms.CHECKS[NAME],
            *bound_specs(NAME, PAPER, BOUNDS, "proofs/dana25.toml, [tight]"),
        ),
        run=run,
        evaluates="balls",
        bounds=BOUNDS,
    ),
    builder="exactmem.constructions.builders:dana25",
    options=OPTIONS[NAME],
    example=mechanisms.EXAMPLES.get(NAME),
    example_options=getattr(mechanisms, "EXAMPLE_OPTIONS", {}).get(NAME, {}),
)
