"""The built-in construction ``dana25`` (Dana, Pydi & Chevaleyre 2025),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.dana25 import CHECKS, EXAMPLE_OPTIONS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="dana25",
    paper="Dana, Pydi & Chevaleyre 2025",
    summary="",
    checklist=Checklist(
        name="dana25",
        tasks=("next-token",),
        summary="",
        checks=CHECKS["dana25"],
        evaluates="balls",
    ),
    builder=None,
    example=EXAMPLES.get("dana25"),
    example_options=EXAMPLE_OPTIONS.get("dana25", {}),
)
