"""The checklist shared by the Kajitsuka & Sato 2025 constructions (Theorem 4.1 and its
variants): items 3–9 and both memorizers' Lemma C.1 stages (:func:`exactmem.verify_ks25.
check_ks25`), and Theorem 4.2 on the constant sequences of the dataset's tokens, which the core
runs with the other lower bounds (``lower_bound.theorem_4_2``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from exactmem.checklist import Construction, Evidence
from exactmem.plugins import builtin
from exactmem.verify import Check

PAPER = "Kajitsuka & Sato 2025"


def checklist_run(variant: str) -> Callable[[Evidence], list[Check]]:
    def run(evidence: Evidence) -> list[Check]:
        from exactmem.verify_ks25 import check_ks25

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
    from exactmem.mechanisms import ks25 as mechanisms

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
