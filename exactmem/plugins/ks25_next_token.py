"""The built-in construction ``ks25-next-token`` (Kajitsuka & Sato 2025, Theorem 4.1),
registered as a plugin through the same entry-point group a third party uses."""

from __future__ import annotations

from exactmem.plugins._ks25 import ks25_construction

# the fitted ([tight]) width of proofs/ks25_theorem_4_1.toml, ks25_lemma_b2_union.toml and
# ks25_zen_of_python.toml (the largest);
# its fitted depth, parameters and bits grow with the sizes at constants fitted on the claims'
# instances and options: they are judged there, per instance (`exactmem check`)
BOUNDS = {
    "width": "11",
}

construction = ks25_construction(
    "ks25-next-token",
    "Theorem 4.1",
    tasks=("next-token",),
    summary="Theorem 4.1 items 3–9, both memorizers' Lemma C.1 stages, Theorem 4.2",
    bounds=BOUNDS,
    source="proofs/ks25_theorem_4_1.toml, [tight]",
)
