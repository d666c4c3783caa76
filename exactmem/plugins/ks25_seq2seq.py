"""The built-in construction ``ks25-seq2seq`` (Kajitsuka & Sato 2025, Corollary 4.1),
registered as a plugin through the same entry-point group a third party uses."""

from __future__ import annotations

from exactmem.plugins._ks25 import ks25_construction, memorizer_bounds

# the fitted ([tight]) width of proofs/ks25_seq2seq.toml and ks25_theorem_4_3.toml (the largest);
# its depth and dense parameters for every option value and draw (_ks25.memorizer_bounds); its
# fitted bits are judged per instance in the claim files (`exactmem check`)
DEFINES, BOUNDS = memorizer_bounds("n*N", "12")

construction = ks25_construction(
    "ks25-seq2seq",
    "Corollary 4.1",
    tasks=("seq2seq",),
    summary="Corollary 4.1: Theorem 4.1's checklist at every position",
    bounds=BOUNDS,
    bound_defines=DEFINES,
    source="width: proofs/ks25_seq2seq.toml, [tight]; "
    "depth, parameters and bits: the builder's layout for "
    "every option value and draw (our reconstruction)",
)
