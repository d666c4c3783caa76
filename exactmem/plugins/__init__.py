"""The built-in constructions, each registered as a plugin through the same entry-point group
a third party uses (:mod:`exactmem.checks.registry`). A module here imports its trusted checklist
and names its builder by import path only: certifying never imports a builder."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from exactmem.checks.checklist import Checklist, Construction, Evidence


def builtin(
    name: str,
    paper: str,
    mechanisms: ModuleType,
    *,
    summary: str,
    run: Callable[[Evidence], list],
    bounds: Mapping[str, str],
    source: str,
    bound_defines: Mapping[str, Any] | None = None,
    **checklist: Any,
) -> Construction:
    """A built-in construction: its checklist's checks are the mechanisms module's CheckSpecs
    and the declared bounds' (``source`` names where the bounds come from); its builder is
    ``exactmem.constructions.builders:<name>``, its options and description those of
    :mod:`exactmem.plugins.options`, its example the mechanisms module's; ``bound_defines`` are the
    names its bound formulas use (:attr:`~exactmem.checks.checklist.Checklist.bound_defines`), the
    bound breakers aim past the bounds at the example's options. ``checklist`` holds the
    remaining :class:`~exactmem.checks.checklist.Checklist` fields (tasks, evaluates, …)."""
    from exactmem.checks.mechanisms.resources import bound_specs
    from exactmem.plugins.options import CONSTRUCTIONS, OPTIONS

    example_options = getattr(mechanisms, "EXAMPLE_OPTIONS", {}).get(name, {})
    defines = dict(bound_defines or {})
    specs = bound_specs(
        name, paper, bounds, source, options=example_options, defines=defines, known=OPTIONS[name]
    )
    return Construction(
        name=name,
        paper=paper,
        summary=CONSTRUCTIONS[name],
        checklist=Checklist(
            name=name,
            summary=summary,
            checks=(*mechanisms.CHECKS[name], *specs),
            run=run,
            bounds=bounds,
            bound_defines=defines,
            **checklist,
        ),
        builder=f"exactmem.constructions.builders:{name.replace('-', '_')}",
        options=OPTIONS[name],
        example=mechanisms.EXAMPLES.get(name),
        example_options=example_options,
    )
