"""The built-in construction ``mahdavi24`` (Mahdavi, Liao & Thrampoulidis 2024), registered as a
plugin: its checklist is :func:`exactmem.verify_attention.mahdavi_checks` (n < d, A1, A2, the
rank of the model's own attention features, capacity H(min(n, d_h) − 1) + 1, Proposition 2's
ceiling)."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction, Evidence
from exactmem.mechanisms import mahdavi24 as mechanisms
from exactmem.mechanisms.resources import bound_specs
from exactmem.options import CONSTRUCTIONS, OPTIONS
from exactmem.verify import Check

PAPER = "Mahdavi, Liao & Thrampoulidis 2024"
NAME = "mahdavi24"

# proofs/mahdavi24.toml's [tight] depth; its other fitted bounds are formulas in the options
# (heads, head_dim), which verify does not know
BOUNDS = {"depth": "1"}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.verify_attention import mahdavi_checks

    return mahdavi_checks(evidence.model, evidence.dataset)


construction = Construction(
    name=NAME,
    paper=PAPER,
    summary=CONSTRUCTIONS[NAME],
    checklist=Checklist(
        name=NAME,
        tasks=("next-token",),
        summary="Mahdavi et al. 2024: n < d, A1, A2, the rank of the model's own attention "
        "features (exact, or certified on balls), capacity H(min(n, d_h) − 1) + 1, "
        "Proposition 2's ceiling",
        checks=(
            *mechanisms.CHECKS[NAME],
            *bound_specs(NAME, PAPER, BOUNDS, "proofs/mahdavi24.toml, [tight]"),
        ),
        run=run,
        evaluates="balls",
        bounds=BOUNDS,
    ),
    builder="exactmem.constructions.builders:mahdavi24",
    options=OPTIONS[NAME],
    example=mechanisms.EXAMPLES.get(NAME),
    example_options=getattr(mechanisms, "EXAMPLE_OPTIONS", {}).get(NAME, {}),
)
