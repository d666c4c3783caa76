"""The built-in construction ``dana25`` (Dana, Pydi & Chevaleyre 2025), registered as a plugin:
its checklist is :func:`exactmem.checks.attention.dana_checks` (Lemma 2's feature rank on Arb
balls, capacity H·d_h + d)."""

from __future__ import annotations

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import dana25 as mechanisms
from exactmem.plugins import builtin

PAPER = "Dana, Pydi & Chevaleyre 2025"
NAME = "dana25"

# proofs/dana25.toml's [tight] depth, and the width and dense parameters of every model the
# builder makes (constructions/dana25.py): the heads' s·H is at most N·max(2, N) within the
# option limits of exactmem/plugins/options.py (H ≤ N, d_h ≤ D ≤ max(2, N)); the embedding
# dimension D is bounded by the same W = N·max(2, N), which also holds for a D the builder is
# given past the option limit (up to N²). The parameters are the embedding (D × ω, bias D),
# the positional table (n × D), per head a query and a key row (D each), W_V (d_h × D) and
# W_O (D × d_h) — 2D(H + Σ d_h) ≤ 2D(N + W) in all — and the read-out (one row of D and a bias
# per class or token).
# max_bits (bits of p/q in lowest terms: bitlen(|p|) + ⌈log₂ q⌉ + 1), parameter by parameter,
# with F and E the options frac_bits and int_bits (≤ 4096, their limit, when not stated; the
# builder's defaults are 64 and 128):
# * W_O^h = P·B_h and the read-out's solved coefficients M[c][i]: multiples of 2^−F below 2^E in
#   magnitude (the builder refuses a larger one): at most E + 2F + 1 bits
#   (constructions/fixed_point.py); M's other coefficients are k/1000 with |k| ≤ 1000;
# * the unembedding rows u_i = w₀M[1][i] + w₁M[2][i] (λ_U only scales the solve's targets, so it
#   reaches the bits through E alone): the circle point w = ((b² − a²)/z, 2ab/z), z = a² + b²,
#   q = a/b the limit_denominator(10⁶) of tan(θ/2) clamped to [−10⁶, 10⁶], so b ≤ 10⁶ and
#   |a| ≤ b(10⁶ + ½) (the nearest integer is a candidate): z < 2⁸⁰. Every M entry times
#   2^F·1000 is an integer, so u_i's denominator in lowest terms is at most z·2^F·1000 < 2^{F+90};
#   |u_i| ≤ ‖w‖·‖(M[1][i], M[2][i])‖ < √2·2^E (|w| = 1, |M| < 2^E, 1 ≤ 2^E), so its numerator is
#   below 2^{E+1}·2^{F+90}: at most (E + F + 91) + (F + 90) + 1 = E + 2F + 182 bits;
# * the embedding and the positions k/1000 with 500 ≤ k ≤ 1500, the heads' q, k and W_V k/1000
#   with |k| ≤ 1000: at most 11 + 10 + 1 = 22 bits (below the above); every bias 0 (1 bit)
SOURCE = (
    "width and parameters: the builder's sizes within the option limits; bits: its fixed point "
    "at the stated frac_bits and int_bits (for every value when not given); depth: "
    "proofs/dana25.toml, [tight]"
)
DEFINES = {
    "F": ("frac_bits", "4096"),
    "E": ("int_bits", "4096"),
}
BOUNDS = {
    "width": "N*Max(2, N)",
    "depth": "1",
    "dense_parameters": "N*Max(2, N)*(omega + 1 + n + Max(omega, C) + 2*N + 2*N*Max(2, N))"
    " + Max(omega, C)",
    "max_bits": "E + 2*F + 182",
}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.checks.attention import dana_checks

    return dana_checks(evidence.model, evidence.dataset)


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("next-token",),
    summary="Dana et al. 2025: Lemma 2's feature rank (Arb), capacity H·d_h + d",
    run=run,
    evaluates="balls",
    bounds=BOUNDS,
    bound_defines=DEFINES,
    source=SOURCE,
)
