"""The built-in construction ``ks24`` (Kajitsuka & Sato 2024), registered as a plugin: its
checklist is :func:`exactmem.checks.measures.ks24.check_ks24` (tokenwise separatedness, the
contextual-mapping gap of the rank-one softmax head on Arb balls, the FFN's exact
re-quantization)."""

from __future__ import annotations

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import ks24 as mechanisms
from exactmem.plugins import builtin

PAPER = "Kajitsuka & Sato 2024"
NAME = "ks24"

# proofs/ks24.toml's [tight] width and depth, and the dense parameters of every model the builder
# makes (constructions/ks24.py, both FFN forms): the head's four maps of rank one (4d), the
# ramp pairs (2K ≤ W units, W the width bound, each reading the d lanes with a bias) and either
# the requantizing layers (a label lane, span ≤ C cuts and steps, the read-out: at most
# C² + 4C + 2) or the residual read-out onto the d lanes (2K·d weights, d biases, E_out d + 1)
# max_bits (bits of p/q in lowest terms: bitlen(|p|) + ⌈log₂ q⌉ + 1), weight by weight, with
# B = max((nN)², 4) ≥ |v_i| (the direction's entries: at most nN distinct tokens), S = B√d·r ≥
# |s| = |vᵀz| (Cauchy–Schwarz, ‖v‖ ≤ B√d), the projections s ∈ (1/lcd)ℤ so their least gap is
# ≥ 1/lcd and their spread ≤ 2S; 2^b ≥ B, 2^s ≥ S + 1, 2^l ≥ lcd, 2^c ≥ C:
# * W_K = W_V = v: ≤ b + 2 bits; W_O's entry β/v_j with β = 2^−e (or 1), 2^e < 8·spread/least
#   ≤ 16S·lcd: numerator ±1, denominator < 16S·lcd·B: ≤ b + s + l + 7;
# * W_Q = λv: the automatic λ is a power of two with 1/(16S²) < λ ≤ 8·lcd² (λ₀ ≤ 1/(max|s|·
#   spread) ≤ 2/spread², λ₀ > 1/(4S²), then ×4 or ÷4): ≤ b + 2s + 2l + 6 bits; a given λ ≤ 2⁶⁴
#   (the option's limit) has a denominator of ≤ 256 bits (the builder refuses more), so its
#   numerator ≤ 2⁶⁴·q has ≤ 320: ≤ b + 578 bits;
# * the ramps: M·v_i and the biases 1 − a, −a with a = M·t. M is a power of two the builder
#   caps at 2^(P + 16)·n·lcd²·(⌈spread⌉ + 1) (constructions/ks24.py _slope_cap; P the precision
#   option, ≤ 2¹⁶; the gap it is read from is an Arb enclosure's, with no bound of its own), so
#   log₂ M ≤ m = P + 17 + ⌈log₂ n⌉ + s + 2l. A threshold between two classes lies between the
#   upper end of the lower hull and the lower end of the upper one, each a point of an Arb ball
#   enclosing a true id c = s_k + β·(a mean of s) with |c| ≤ 2S (β ≤ ¼, or β = 1 with one
#   token), and the lone threshold of one label lies in [−2S − 5, 2S] (clamped below at
#   −2⌈max|s|⌉ − 1): |a| ≤ M(2S + 5); M·v_i has ≤ m + b + 2 bits, the biases ≤ m + s + 5;
# * the re-quantizing FFN: the label steps Δ (|Δ| < C), its base in [1, C], −4, 4c + 2 ≤ 4C,
#   ±1, y_lo ≤ C: ≤ c + 5 bits; the residual one (ffn=residual): the steps Δ of label − z₀
#   (|z₀| ≤ r) and the base (one label − z₀), of denominators dividing lcd: ≤ c + s + 2l + 4.
# m + b + s + 5 covers the head's terms (m ≥ 18 + s + 2l) but a given λ's.
DEFINES = {
    "b": "ceiling(log(Max(n**2*N**2, 4), 2))",
    "s": "ceiling(log(Max(n**2*N**2, 4)*sqrt(d)*r + 1, 2))",
    "l": "ceiling(log(lcd, 2))",
    "c": "ceiling(log(C, 2))",
    "P": ("precision", "2**16"),
    "m": "P + 17 + ceiling(log(n, 2)) + s + 2*l",
}
BOUNDS = {
    "width": "1.0*(Max(d, 2*n*N, C))",
    "depth": "6",
    "dense_parameters": "4*d + (2*d + 2)*Max(d, 2*n*N, C) + C**2 + 4*C + 2*d + 2",
    "max_bits": "Max(m + b + s + 5, b + 578, c + s + 2*l + 5)",
}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.checks.measures.ks24 import check_ks24

    return check_ks24(evidence.model, evidence.dataset, tolerance=evidence.tolerance)


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("seq2seq",),
    summary="Kajitsuka & Sato 2024: tokenwise separatedness, the contextual-mapping gap of "
    "the rank-one softmax head (Arb), the FFN's exact re-quantization, labels exact",
    run=run,
    evaluates="balls",
    bounds=BOUNDS,
    bound_defines=DEFINES,
    source="width and depth: proofs/ks24.toml, [tight]; dense parameters: the builder's layout; "
    "bits: the builder's layout at the stated precision (--set; for every value when not "
    "given; our reconstruction)",
)
