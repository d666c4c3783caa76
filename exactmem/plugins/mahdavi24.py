"""The built-in construction ``mahdavi24`` (Mahdavi, Liao & Thrampoulidis 2024),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.mahdavi24 import CHECKS, EXAMPLE_OPTIONS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="mahdavi24",
    paper="Mahdavi, Liao & Thrampoulidis 2024",
    summary="",
    checklist=Checklist(
        name="mahdavi24",
        tasks=("next-token",),
        summary="",
        checks=CHECKS["mahdavi24"],
        evaluates="balls",
    ),
    builder=None,
    example=EXAMPLES.get("mahdavi24"),
    example_options=EXAMPLE_OPTIONS.get("mahdavi24", {}),
)
