"""The built-in construction ``ks25-token-ids`` (Kajitsuka & Sato 2025, Theorem E.1),
registered as a plugin through the same entry-point group a third party uses."""

from __future__ import annotations

from exactmem.plugins._ks25 import ks25_construction, memorizer_bounds

# the fitted ([tight]) width of proofs/ks25_token_ids.toml (the largest);
# its depth and dense parameters for every option value and draw (_ks25.memorizer_bounds); its
# fitted bits are judged per instance in the claim files (`exactmem check`)
DEFINES, BOUNDS = memorizer_bounds("N", "10")

construction = ks25_construction(
    "ks25-token-ids",
    "Theorem E.1",
    tasks=("next-token",),
    summary="Theorem E.1: Theorem 4.1's checklist with token ids ≥ 1 apart",
    bounds=BOUNDS,
    bound_defines=DEFINES,
    source="width: proofs/ks25_token_ids.toml, [tight]; "
    "depth, parameters and bits: the builder's layout for "
    "every option value and draw (our reconstruction)",
)
