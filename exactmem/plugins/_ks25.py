"""The checklist shared by the Kajitsuka & Sato 2025 constructions (Theorem 4.1 and its
variants): items 3–9 and both memorizers' Lemma C.1 stages (:func:`exactmem.checks.measures.ks25.
check_ks25`), and Theorem 4.2 on the constant sequences of the dataset's tokens, which the core
runs with the other lower bounds (``lower_bound.theorem_4_2``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Construction, Evidence
from exactmem.plugins import builtin

PAPER = "Kajitsuka & Sato 2025"

# The key and label bits of the two memorizers of every variant, for any option value and any
# random draw of the builder (constructions/ks25.py; our reconstruction, the paper states the
# depth as Õ(√N)): F1 memorizes the witness tokens (|A| ≤ min(ω, N − 1), Lemma B.1) with the
# sequence weights as labels, f ≤ 3√π·N²·ω + 1 ≤ 6N²ω = F for all three Lemma B.2 schemes
# (random: N'²; union: ⌈√|A|⌉·N'²; printed: ⌈N²|S|√π·v⌉ + ⌊2N²|S|√π⌋); its keys are the token
# ids 2·lcd·wᵀ(x − x_min) + 2 with |w_i| ≤ ω² (the Stage I search's last tier, Lemma C.2) and
# ‖x − x_min‖₁ ≤ 2√d·r, at most T (Theorem E.1's ids are at most ω ≤ T). F2 memorizes at most
# M context ids (f(x), id(x), Σf/n) — M = N, or nN for seq-to-seq — at scale n with
# |w_i| ≤ M², coordinates spread at most 2F + T (deep sets: the sum alone), so its keys are at
# most 2n·M²·(2F + T) + 2; its labels have bitlen(C) bits. Every define is an integer
# (ceilings of the logarithms), which keeps the formulas within the grammar's node limit.
MEMORIZER_BITS = {
    "F": "6*N**2*omega",
    "T": "4*ceiling(sqrt(d))*lcd*omega**2*ceiling(r) + 2",
    "rho1": "ceiling(log(T, 2)) + 1",
    "c1": "Max(ceiling(log(F, 2)) + 1, 2)",
    "rho2": "ceiling(log(2*n*M**2*(2*F + T) + 2, 2)) + 1",
    "c2": "Max(ceiling(log(C, 2)) + 1, 2)",
}


def memorizer_bounds(items: str, width: str) -> tuple[dict[str, str], dict[str, str]]:
    """(defines, bounds) of the depth and dense parameters of a Theorem 4.1 variant whose F2
    memorizes at most ``items`` context ids, beside its fitted ``width``.

    Without a bit budget the group size is the builder's choice of least depth
    (vys.choose_group_size, not an option), so each memorizer of N_m points has at most the
    layers of K = 1: N_m − 1 for Stage II, Stage III ρ + max(c, 2) + 2 ≤ ρ + c + 3 for every
    gadget (vys.stage3_layers), and its read-out. The model is F1 (or Theorem E.1's embedding
    table, no layer), one attention layer and F2; each layer has at most ``width`` outputs
    reading at most max(d, width) inputs, and the embedding table 3(ω + 1) parameters."""
    defines = {"M": items, **MEMORIZER_BITS}
    defines["layers"] = "Min(omega, N) + rho1 + c1 + 4 + 1 + M + rho2 + c2 + 4"
    bounds = {
        "width": width,
        "depth": "layers",
        "dense_parameters": f"layers*{width}*(Max(d, {width}) + 1) + 3*omega + 3",
    }
    return defines, bounds


def checklist_run(variant: str) -> Callable[[Evidence], list[Check]]:
    def run(evidence: Evidence) -> list[Check]:
        from exactmem.checks.measures.ks25 import check_ks25

        assert evidence.trace is not None  # evaluates "exact"
        budget = evidence.options.get("bit_budget")  # the user's --set, never the file's
        return check_ks25(
            evidence.trace, evidence.model, evidence.dataset, evidence.view, variant, budget
        )

    return run


def ks25_construction(
    name: str,
    result: str,
    *,
    tasks: tuple[str, ...],
    summary: str,
    bounds: Mapping[str, str],
    source: str,
    consistency: str | None = None,
    bound_defines: Mapping[str, Any] | None = None,
) -> Construction:
    from exactmem.checks.mechanisms import ks25 as mechanisms

    return builtin(
        name,
        f"{PAPER}, {result}",
        mechanisms,
        tasks=tasks,
        summary=summary,
        run=checklist_run(name),
        evaluates="exact",
        bounds=bounds,
        source=source,
        bound_defines=bound_defines,
        consistency=consistency,
        lower_bounds=("lower_bound.theorem_4_2",),
    )
