"""The built-in construction ``ks25-token-ids`` (Kajitsuka & Sato 2025, Theorem E.1),
registered as a plugin through the same entry-point group a third party uses."""

from __future__ import annotations

from exactmem.plugins._ks25 import ks25_construction

# the fitted ([tight]) width of proofs/ks25_token_ids.toml (the largest);
# its fitted depth, parameters and bits grow with the sizes at constants fitted on the claims'
# instances and options: they are judged there, per instance (`exactmem check`)
BOUNDS = {
    "width": "10",
}

construction = ks25_construction(
    "ks25-token-ids",
    "Theorem E.1",
    tasks=("next-token",),
    summary="Theorem E.1: Theorem 4.1's checklist with token ids ≥ 1 apart",
    bounds=BOUNDS,
    source="proofs/ks25_token_ids.toml, [tight]",
)
