"""The built-in construction ``ks24`` (Kajitsuka & Sato 2024), registered as a plugin: its
checklist is :func:`exactmem.checks.measures.ks24.check_ks24` (tokenwise separatedness, the
contextual-mapping gap of the rank-one softmax head on Arb balls, the FFN's exact
re-quantization)."""

from __future__ import annotations

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import ks24 as mechanisms
from exactmem.plugins import builtin

PAPER = "Kajitsuka & Sato 2024"
NAME = "ks24"

# proofs/ks24.toml's [tight] width and depth, and the dense parameters of every model the builder
# makes (constructions/ks24.py, both FFN forms): the head's four maps of rank one (4d), the
# ramp pairs (2K ≤ W units, W the width bound, each reading the d lanes with a bias) and either
# the requantizing layers (a label lane, span ≤ C cuts and steps, the read-out: at most
# C² + 4C + 2) or the residual read-out onto the d lanes (2K·d weights, d biases, E_out d + 1)
BOUNDS = {
    "width": "1.0*(Max(d, 2*n*N, C))",
    "depth": "6",
    "dense_parameters": "4*d + (2*d + 2)*Max(d, 2*n*N, C) + C**2 + 4*C + 2*d + 2",
}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.checks.measures.ks24 import check_ks24

    return check_ks24(evidence.model, evidence.dataset)


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("seq2seq",),
    summary="Kajitsuka & Sato 2024: tokenwise separatedness, the contextual-mapping gap of "
    "the rank-one softmax head (Arb), the FFN's exact re-quantization, labels exact",
    run=run,
    evaluates="balls",
    bounds=BOUNDS,
    source="proofs/ks24.toml, [tight]",
)
