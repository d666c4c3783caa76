"""The built-in construction ``mahdavi24`` (Mahdavi, Liao & Thrampoulidis 2024), registered as a
plugin: its checklist is :func:`exactmem.checks.attention.mahdavi_checks` (n < d, A1, A2, the
rank of the model's own attention features, capacity H(min(n, d_h) − 1) + 1, Proposition 2's
ceiling)."""

from __future__ import annotations

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import mahdavi24 as mechanisms
from exactmem.plugins import builtin

PAPER = "Mahdavi, Liao & Thrampoulidis 2024"
NAME = "mahdavi24"

# proofs/mahdavi24.toml's [tight] depth, and the width and dense parameters of every model the
# builder makes at any option value (constructions/mahdavi24.py, within the option limits of
# exactmem/plugins/options.py): the stream holds the d coordinates and at most C outputs (one for
# regression), the heads' s·H is at most N·d (H ≤ N, 2 ≤ d_h ≤ d, the builder's own check); the
# parameters are the embedding ((d + C) × d, bias d + C), per head three d_h × (d + C) maps and
# a (d + C) × d_h output map, and the read-out (C × (d + C), bias C)
#
# max_bits (a parameter p/q in lowest terms costs bitlen(|p|) + ⌈log₂ q⌉ + 1, so a value written
# P'/D' with integers 0 < |P'| ≤ P, 1 ≤ D' ≤ D costs at most log₂P + log₂D + 3; zero costs 1).
# Figures: ν = n − 1 context tokens (n counts the query), L = lcd, M = max(1, L·r), b = log₂M:
# every token the sequences use is x̃/L with x̃ integer, ‖x̃‖ ≤ M. Hadamard: a Gram determinant of
# k such vectors is at most M^{2k}; by Cauchy–Binet and Cauchy–Schwarz so is any k×k minor of a
# Gram matrix, so |adj(G̃)_st| ≤ M^{2k−2} for the Gram G̃ of k of them. A head's group has
# g ≤ min(ν, d_h) − 1 ≤ ν − 1 queries q̃_t (rows of Q̃; G̃ = Q̃Q̃ᵀ, D = det G̃ ∈ [1, M^{2g}]).
# * query maps: f_t = L·Q̃ᵀG̃⁻¹e_t is the integer vector L·Q̃ᵀadj(G̃)e_t, of norm
#   L·√(D·adj_tt) ≤ L·M^{2g−1}, over D: ≤ log₂L + (4g − 1)b + 3 bits; u = (I − P)v₀ (P the
#   projection on the queries, D·P = Q̃ᵀadj(G̃)Q̃ integral, |v₀,i| ≤ 9) is an integer vector of
#   norm ≤ 9√d·D over D: ≤ log₂(9√d) + 4g·b + 3.
# * key maps, r_t·τ and λ·v·τ. r_t = L·Ẽᵀadj(K̃)ℓ/D_E (K̃ = ẼẼᵀ of the ν context tokens,
#   1 ≤ D_E ≤ M^{2ν}, ℓ of ν − 1 ones), the integer vector Ẽᵀadj(K̃)ℓ of norm
#   √(D_E·ℓᵀadj(K̃)ℓ) ≤ (ν − 1)M^{2ν−1}. λ = ⌊max spread/gap⌋ + 1: the designed scores
#   Σ_t (f_t·e)(r_t·x) have |f_t·e| ≤ L·M^{g−1}·r = M^g (‖f_t‖² = L²·adj_tt/D) and
#   |r_t·x| ≤ (ν − 1)M^ν, so the spread is ≤ 2g(ν − 1)M^{g+ν}; the gap |uᵀe|·|vᵀ(x − x')| > 0 is
#   a multiple of 1/(D·L²) ≥ 1/(M^{2g}L²): λ ≤ 2(ν − 1)²L²M^{4ν−3} + 1, and |v_i| ≤ 99. The
#   temperature τ = p/q: 1 under hardmax, a power of two ≤ 2¹³ when searched, else given: ≤ 2⁶⁴
#   (the option's limit) with q ≤ 2⁶⁴ (the builder refuses more), log₂(p·q) ≤ 192. Both kinds
#   of key entry: ≤ log₂(198ν²L²M^{4ν}) + 192 + 3 — and so is the query maps' ("maps").
# * the output map, the readout solved exactly (every model but softmax with
#   readout_solve=resolve): example t's hardmax feature in a head is (1/s)·Σ_{j tied} x_j with
#   s = ν − 1 (a group example in its own head: its designed scores are exactly ℓ, uᵀe = 0) or
#   s = 1 (elsewhere λ·gap > spread: one token), so the R×R system's rows (R = rank ≤ N) times
#   L(ν − 1) are integral, each head's block of norm ≤ (ν − 1)M: row norms ≤ (ν − 1)√N·M; the
#   targets become L(ν − 1)·y, 0 ≤ y ≤ C (a label in 1..C, the builder's check, or 0/1).
#   Cramer and Hadamard: a weight is a ratio of integer determinants with |numerator| ≤
#   ((ν − 1)√(N·M² + L²C²))^N ≤ ((ν − 1)√N(M + LC))^N and 1 ≤ |denominator| ≤
#   ((ν − 1)√N·M)^N (R ≤ N, every factor ≥ 1): ≤ N·log₂((ν − 1)²N(M + LC)M) + 3 ≤
#   N(log₂(2n²N·L·C) + 2b) + 3 bits (M + LC ≤ 2M·LC) ("solved").
# * the output map re-solved on balls (softmax, readout_solve=resolve): midpoints rounded to
#   p/2^F, refused once |p| ≥ 2^{E+F} (F = frac_bits, E = int_bits, each ≤ 4096, the options'
#   limit; defaults 64): p'/2^{F'} in lowest terms, F' ≤ F, |p'| < 2^{E+F'}: ≤ E + 2F + 1 bits.
# * the embedding, unembedding and value maps hold 0 and 1 (≤ 2 bits).
# The exact terms are about twice what the builds reach on proofs/mahdavi24.toml; without
# --set frac_bits and int_bits the fixed point's fallback, 12 289 bits, dominates.
DEFINES = {
    "b": "log(Max(1, lcd*r), 2)",
    "maps": "log(198*sqrt(d)*n**2*lcd**2, 2) + 4*n*b + 195",
    "solved": "N*(log(2*n**2*N*lcd*C, 2) + 2*b) + 3",
    "E": ("int_bits", "4096"),
    "F": ("frac_bits", "4096"),
}
SOURCE = (
    "the builder's sizes within the option limits; depth: proofs/mahdavi24.toml, [tight]; bits: "
    "Cramer and Hadamard on the exact solves, the fixed point at the stated frac_bits and "
    "int_bits (--set; for every value when not given; our reconstruction)"
)
BOUNDS = {
    "width": "Max(d + C, N*d)",
    "depth": "1",
    "dense_parameters": "(d + C)*(d + 1 + C + 1 + 4*N*d)",
    "max_bits": "Max(maps, solved, E + 2*F + 1)",
}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.checks.attention import mahdavi_checks

    return mahdavi_checks(evidence.model, evidence.dataset)


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("next-token",),
    summary="Mahdavi et al. 2024: n < d, A1, A2, the rank of the model's own attention "
    "features (exact, or certified on balls), capacity H(min(n, d_h) − 1) + 1, "
    "Proposition 2's ceiling, the output read from the heads only",
    run=run,
    evaluates="balls",
    bounds=BOUNDS,
    bound_defines=DEFINES,
    source=SOURCE,
)
