"""The built-in construction ``ks25-deep-sets`` (Kajitsuka & Sato 2025, Theorem D.1),
registered as a plugin through the same entry-point group a third party uses."""

from __future__ import annotations

from exactmem.plugins._ks25 import ks25_construction

# the fitted ([tight]) width of proofs/ks25_deep_sets.toml (the largest);
# its fitted depth, parameters and bits grow with the sizes at constants fitted on the claims'
# instances and options: they are judged there, per instance (`exactmem check`)
BOUNDS = {
    "width": "12",
}

construction = ks25_construction(
    "ks25-deep-sets",
    "Theorem D.1",
    tasks=("next-token",),
    summary="Theorem D.1: Theorem 4.1's checklist on multisets (set ids)",
    bounds=BOUNDS,
    source="proofs/ks25_deep_sets.toml, [tight]",
    consistency="multiset",
)
