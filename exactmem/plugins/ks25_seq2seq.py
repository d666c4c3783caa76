"""The built-in construction ``ks25-seq2seq`` (Kajitsuka & Sato 2025, Corollary 4.1),
registered as a plugin through the same entry-point group a third party uses."""

from __future__ import annotations

from exactmem.plugins._ks25 import ks25_construction

# the fitted ([tight]) width of proofs/ks25_seq2seq.toml and ks25_theorem_4_3.toml (the largest);
# its fitted depth, parameters and bits grow with the sizes at constants fitted on the claims'
# instances and options: they are judged there, per instance (`exactmem check`)
BOUNDS = {
    "width": "12",
}

construction = ks25_construction(
    "ks25-seq2seq",
    "Corollary 4.1",
    tasks=("seq2seq",),
    summary="Corollary 4.1: Theorem 4.1's checklist at every position",
    bounds=BOUNDS,
    source="proofs/ks25_seq2seq.toml, [tight]",
)
