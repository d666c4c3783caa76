"""The built-in construction ``madden24`` (Madden, Fox & Thrampoulidis 2024),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.madden24 import CHECKS, EXAMPLE_OPTIONS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="madden24",
    paper="Madden, Fox & Thrampoulidis 2024",
    summary="",
    checklist=Checklist(
        name="madden24",
        tasks=("next-token",),
        summary="",
        checks=CHECKS["madden24"],
        evaluates="balls",
    ),
    builder=None,
    example=EXAMPLES.get("madden24"),
    example_options=EXAMPLE_OPTIONS.get("madden24", {}),
)
