"""The built-in construction ``madden24`` (Madden, Fox & Thrampoulidis 2024), registered as a
plugin: its checklist is :func:`exactmem.checks.measures.madden24.madden_checks` (injective
last-position outputs, full row rank of the GELU features, targets within ``--tolerance``) and
the dimension count, which reads any model."""

from __future__ import annotations

from gmpy2 import mpq

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import madden24 as mechanisms
from exactmem.datasets.dataset import Dataset
from exactmem.plugins import builtin

PAPER = "Madden, Fox & Thrampoulidis 2024"
NAME = "madden24"

# proofs/madden24.toml's [tight] depth, and the width, dense parameters and bits of every model
# the builder makes at any option value (constructions/madden24.py, within the option limits of
# exactmem/plugins/options.py): widths are the embedding dimension D ≤ max(8, N) (the default 8,
# or the option's limit max(2, N)), the FNN's m ≤ 2N and the C logits; the parameters are the
# embedding (D × ω, bias D), the positional table (n × D), four D × D attention maps,
# W₁ (m × D, bias m) and W₂ (C × m, bias C).
# max_bits (bits of p/q in lowest terms: bitlen(|p|) + ⌈log₂ q⌉ + 1), parameter by parameter:
# * W₂ and b₂, the solved output layer: multiples of 2^−F below 2^E in magnitude (the builder
#   refuses a larger one), so p'/2^{F'} in lowest terms with F' ≤ F and |p'| < 2^{E+F'}: at most
#   E + 2F + 1 bits (constructions/fixed_point.py), F and E the options frac_bits and int_bits
#   (≤ 4096, their limit, when not stated; the builder's defaults are 128 and 128);
# * W₁ and the four attention maps: k/(100·⌊√D⌋) with |k| ≤ 100, so bitlen(|k|) ≤ 7 and
#   ⌈log₂ q⌉ ≤ ⌈log₂(100·D)⌉ ≤ ⌈log₂ max(8, N)⌉ + 7: at most ⌈log₂ max(8, N)⌉ + 15; the
#   embedding and b₁ are k/100 (15 bits), every other bias 0 (1 bit);
# * the positions: a coordinate pair is ((b² − a²)/z, 2ab/z), z = a² + b², with q = a/b the
#   limit_denominator(10⁴) of tan(θ/2) clamped to [−10⁴, 10⁴], so b ≤ 10⁴ and
#   |a| ≤ b(10⁴ + ½) (the nearest integer is a candidate): z < 2⁵⁴, and numerator and
#   denominator in lowest terms are at most z: at most 54 + 54 + 1 = 109 bits; an odd last
#   coordinate k/n (0 ≤ k < n) has at most 2⌈log₂ n⌉ + 1
SOURCE = (
    "width and parameters: the builder's sizes within the option limits; bits: its fixed point "
    "at the stated frac_bits and int_bits (for every value when not given); depth: "
    "proofs/madden24.toml, [tight]"
)
DEFINES = {
    "F": ("frac_bits", "4096"),
    "E": ("int_bits", "4096"),
}
BOUNDS = {
    "width": "Max(8, 2*N, C)",
    "depth": "3",
    "dense_parameters": "Max(8, N)*(omega + 1 + n + 4*Max(8, N) + 2*N) + 2*N*(C + 1) + C",
    "max_bits": "Max(E + 2*F + 1, 109, ceiling(log(Max(8, N), 2)) + 15, 2*ceiling(log(n, 2)) + 1)",
}


def require(dataset: Dataset, tolerance: mpq | None) -> None:
    """Target distributions are judged within a tolerance the user gives (exit 2 without)."""
    from exactmem.checks.measures.madden24 import require_tolerance

    require_tolerance(dataset, tolerance)


def run(evidence: Evidence) -> list[Check]:
    from exactmem.checks.checklist import guarded
    from exactmem.checks.measures.madden24 import dimension_count_checks, madden_checks

    model, dataset = evidence.model, evidence.dataset
    checks = guarded(NAME, lambda: madden_checks(model, dataset, evidence.tolerance))
    # the upper bound reads only k, n and ω: it judges any model, decoder or not (on target
    # distributions only: labels alone are an open set of logits)
    return checks + guarded(NAME, lambda: dimension_count_checks(model, dataset))


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("next-token",),
    summary="Madden et al. 2024: injective last-position outputs, full row rank of the GELU "
    "features (m ≥ n − 1), targets within --tolerance, the dimension count k ≥ n(ω − 1) "
    "(Arb)",
    run=run,
    evaluates="balls",
    bounds=BOUNDS,
    bound_defines=DEFINES,
    source=SOURCE,
    require=require,
)
