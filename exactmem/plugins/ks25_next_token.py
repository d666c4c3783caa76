"""The built-in construction ``ks25-next-token`` (Kajitsuka & Sato 2025, Theorem 4.1),
registered as a plugin through the same entry-point group a third party uses."""

from __future__ import annotations

from exactmem.plugins._ks25 import ks25_construction, memorizer_bounds

# the fitted ([tight]) width of proofs/ks25_theorem_4_1.toml, ks25_lemma_b2_union.toml and
# ks25_zen_of_python.toml (the largest);
# its depth and dense parameters for every option value and draw (_ks25.memorizer_bounds); its
# fitted bits are judged per instance in the claim files (`exactmem check`)
DEFINES, BOUNDS = memorizer_bounds("N", "11")

construction = ks25_construction(
    "ks25-next-token",
    "Theorem 4.1",
    tasks=("next-token",),
    summary="Theorem 4.1 items 3–9, both memorizers' Lemma C.1 stages, Theorem 4.2",
    bounds=BOUNDS,
    bound_defines=DEFINES,
    source="width: proofs/ks25_theorem_4_1.toml, [tight]; "
    "depth, parameters and bits: the builder's layout for "
    "every option value and draw (our reconstruction)",
)
