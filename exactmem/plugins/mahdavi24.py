"""The built-in construction ``mahdavi24`` (Mahdavi, Liao & Thrampoulidis 2024), registered as a
plugin: its checklist is :func:`exactmem.verify_attention.mahdavi_checks` (n < d, A1, A2, the
rank of the model's own attention features, capacity H(min(n, d_h) − 1) + 1, Proposition 2's
ceiling)."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction, Evidence
from exactmem.mechanisms.mahdavi24 import CHECKS, EXAMPLES
from exactmem.options import CONSTRUCTIONS, OPTIONS
from exactmem.verify import Check

NAME = "mahdavi24"

# proofs/mahdavi24.toml's [tight] depth; its other fitted bounds are formulas in the options
# (heads, head_dim), which verify does not know
BOUNDS = {"depth": "1"}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.verify_attention import mahdavi_checks

    return mahdavi_checks(evidence.model, evidence.dataset)


construction = Construction(
    name=NAME,
    paper="Mahdavi, Liao & Thrampoulidis 2024",
    summary=CONSTRUCTIONS[NAME],
    checklist=Checklist(
        name=NAME,
        tasks=("next-token",),
        summary="Mahdavi et al. 2024: n < d, A1, A2, the rank of the model's own attention "
        "features (exact, or certified on balls), capacity H(min(n, d_h) − 1) + 1, "
        "Proposition 2's ceiling",
        checks=CHECKS[NAME],
        run=run,
        evaluates="balls",
        bounds=BOUNDS,
    ),
    builder="exactmem.constructions.builders:mahdavi24",
    options=OPTIONS[NAME],
    example=EXAMPLES.get(NAME),
)
