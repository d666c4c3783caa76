"""The built-in construction ``ks25-bit-budget`` (Kajitsuka & Sato 2025, Theorem F.1),
registered as a plugin through the same entry-point group a third party uses.

Its depth bound names the bit budget B (``bit_budget``), which ``verify`` is told by
``--set bit_budget=B`` (a criterion, never read from the model file): without it the check is
undecided. The bound holds for every option value (every gadget, every Lemma B.2 scheme,
position-aware or not, token ids as the lemma asks or weakened) and every random draw of the
builder; it is our explicit total of the builder's layers (constructions/bit_budget.py,
constructions/vys.py, constructions/ks25.py), not a statement of the paper, which gives the
depth only as Õ(N/B):

* the model is F1, one attention layer and F2; a split memorizer of P sub-networks has
  Σ_j (m_j − 1 + Stage III_j) hidden layers and one read-out (vys.stage3_layers,
  vys.keyed_layers);
* a sub-network holds at most B² labelled points in groups of K ≤ K_B = ⌈B/√log₂ B⌉ slots; its
  K is the one of least depth unless that exceeds K_B (vys.choose_group_size, then capped), so
  its layers are at most those of K = 1 or those of K = K_B, and Stage III of K slots, ρ key
  bits and c label bits takes at most K(ρ + max(c, 2) + 1) + 1 layers for every gadget (the
  tent's count; keyed and peel take fewer);
* the key and label bits of F1 (the witness tokens, at most min(nω, N), with the sequence
  weights as labels) and F2 (at most N context ids), position-aware or not: plugins/_ks25.py
  (MEMORIZER_BITS) derives them;
* the dense parameters: each of those layers has at most 11 outputs (the width bound) reading
  at most max(d + 1, 11) inputs, d + 1 with positions (the attention's four maps on three
  lanes fewer).
"""

from __future__ import annotations

from exactmem.plugins._ks25 import MAX_BITS, MEMORIZER_BITS, SPLIT, ks25_construction

# the fitted ([tight]) width of proofs/ks25_bit_budget.toml; the depth and dense parameters of
# every model the builder makes at bit budget B (the derivation above). Every define is an
# integer (ceilings of the logarithms), so the formulas stay small for the grammar's node limit
DEFINES = {
    "M": "N",
    **MEMORIZER_BITS,
    **SPLIT,
    # the bits (plugins/_ks25.py): for every B, the budget only caps the group size
    **MAX_BITS,
}
BOUNDS = {
    "width": "Max(d + 1, 11)",  # the input stream (d + 1 lanes with positions), then ≤ 11
    "depth": "ceiling(At/B**2)*part1 + ceiling(N/B**2)*part2 + 3",
    "dense_parameters": "(ceiling(At/B**2)*part1 + ceiling(N/B**2)*part2 + 3)"
    "*11*(Max(d + 1, 11) + 1)",
    "max_bits": "bits",
}

construction = ks25_construction(
    "ks25-bit-budget",
    "Theorem F.1",
    tasks=("next-token",),
    summary="Theorem F.1: Theorem 4.1's checklist, memorizers checked per sub-network",
    bounds=BOUNDS,
    source="width: proofs/ks25_bit_budget.toml, [tight]; depth and parameters: the builder's "
    "layers at bit budget B (--set bit_budget=B; our reconstruction, the paper states Õ(N/B)); "
    "bits: the builder's layout for every option value and draw (our reconstruction)",
    bound_defines=DEFINES,
)
