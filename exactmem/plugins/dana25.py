"""The built-in construction ``dana25`` (Dana, Pydi & Chevaleyre 2025), registered as a plugin:
its checklist is :func:`exactmem.checks.attention.dana_checks` (Lemma 2's feature rank on Arb
balls, capacity H·d_h + d)."""

from __future__ import annotations

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import dana25 as mechanisms
from exactmem.plugins import builtin

PAPER = "Dana, Pydi & Chevaleyre 2025"
NAME = "dana25"

# proofs/dana25.toml's [tight] depth, and the width and dense parameters of every model the
# builder makes (constructions/dana25.py): the heads' s·H is at most N·max(2, N) within the
# option limits of exactmem/plugins/options.py (H ≤ N, d_h ≤ D ≤ max(2, N)); the embedding
# dimension D
# is bounded by the same W = N·max(2, N), which also holds for a D the builder is given past the
# option limit (up to N²). The parameters are E (D × ω, bias D), the positional table (n × D),
# per head a query and a key row (D each), W_V (d_h × D) and W_O (D × d_h) — 2D(H + Σ d_h) ≤
# 2D(N + W) in all — and the read-out (one row of D and a bias per class or token)
SOURCE = "the builder's sizes within the option limits; depth: proofs/dana25.toml, [tight]"
BOUNDS = {
    "width": "N*Max(2, N)",
    "depth": "1",
    "dense_parameters": "N*Max(2, N)*(omega + 1 + n + Max(omega, C) + 2*N + 2*N*Max(2, N))"
    " + Max(omega, C)",
}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.checks.attention import dana_checks

    return dana_checks(evidence.model, evidence.dataset)


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("next-token",),
    summary="Dana et al. 2025: Lemma 2's feature rank (Arb), capacity H·d_h + d",
    run=run,
    evaluates="balls",
    bounds=BOUNDS,
    source=SOURCE,
)
