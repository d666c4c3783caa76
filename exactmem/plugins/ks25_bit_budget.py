"""The built-in construction ``ks25-bit-budget`` (Kajitsuka & Sato 2025, Theorem F.1),
registered as a plugin through the same entry-point group a third party uses."""

from __future__ import annotations

from exactmem.plugins._ks25 import ks25_construction

# the fitted ([tight]) width of proofs/ks25_bit_budget.toml (its depth, parameters and bits are
# formulas in the option B, which verify does not know)
BOUNDS = {"width": "11"}

construction = ks25_construction(
    "ks25-bit-budget",
    "Theorem F.1",
    tasks=("next-token",),
    summary="Theorem F.1: Theorem 4.1's checklist, memorizers checked per sub-network",
    bounds=BOUNDS,
    source="proofs/ks25_bit_budget.toml, [tight]",
)
