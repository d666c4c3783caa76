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

# proofs/madden24.toml's [tight] depth, and the width and dense parameters of every model the
# builder makes at any option value (constructions/madden24.py, within the option limits of
# exactmem/plugins/options.py): widths are the embedding dimension D ≤ max(2, N), the FNN's m ≤ 2N
# and
# the C logits; the parameters are E (D × ω, bias D), the positional table (n × D), four D × D
# attention maps, W₁ (m × D, bias m) and W₂ (C × m, bias C). The fitted bits (the option
# bits ≤ 4096 sets them) are judged per instance in the claim file
SOURCE = "the builder's sizes within the option limits; depth: proofs/madden24.toml, [tight]"
BOUNDS = {
    "width": "Max(2, 2*N, C)",
    "depth": "3",
    "dense_parameters": "Max(2, N)*(omega + 1 + n + 4*Max(2, N) + 2*N) + 2*N*(C + 1) + C",
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
    source=SOURCE,
    require=require,
)
