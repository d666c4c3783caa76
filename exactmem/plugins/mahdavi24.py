"""The built-in construction ``mahdavi24`` (Mahdavi, Liao & Thrampoulidis 2024), registered as a
plugin: its checklist is :func:`exactmem.checks.attention.mahdavi_checks` (n < d, A1, A2, the
rank of the model's own attention features, capacity H(min(n, d_h) − 1) + 1, Proposition 2's
ceiling)."""

from __future__ import annotations

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import mahdavi24 as mechanisms
from exactmem.plugins import builtin

PAPER = "Mahdavi, Liao & Thrampoulidis 2024"
NAME = "mahdavi24"

# proofs/mahdavi24.toml's [tight] depth, and the width and dense parameters of every model the
# builder makes at any option value (constructions/mahdavi24.py, within the option limits of
# exactmem/plugins/options.py): the stream holds the d coordinates and at most C outputs (one for
# regression), the heads' s·H is at most N·d (H ≤ N, 2 ≤ d_h ≤ d, the builder's own check); the
# parameters are the embedding ((d + C) × d, bias d + C), per head three d_h × (d + C) maps and
# a (d + C) × d_h output map, and the read-out (C × (d + C), bias C)
SOURCE = "the builder's sizes within the option limits; depth: proofs/mahdavi24.toml, [tight]"
BOUNDS = {
    "width": "Max(d + C, N*d)",
    "depth": "1",
    "dense_parameters": "(d + C)*(d + 1 + C + 1 + 4*N*d)",
}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.checks.attention import mahdavi_checks

    return mahdavi_checks(evidence.model, evidence.dataset)


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("next-token",),
    summary="Mahdavi et al. 2024: n < d, A1, A2, the rank of the model's own attention "
    "features (exact, or certified on balls), capacity H(min(n, d_h) − 1) + 1, "
    "Proposition 2's ceiling, the output read from the heads only",
    run=run,
    evaluates="balls",
    bounds=BOUNDS,
    source=SOURCE,
)
