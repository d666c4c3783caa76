"""The built-in construction ``ks25-bit-budget`` (Kajitsuka & Sato 2025, Theorem F.1),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.ks25 import CHECKS, EXAMPLE_OPTIONS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="ks25-bit-budget",
    paper="Kajitsuka & Sato 2025, Theorem F.1",
    summary="",
    checklist=Checklist(
        name="ks25-bit-budget",
        tasks=("next-token",),
        summary="",
        checks=CHECKS["ks25-bit-budget"],
        evaluates="exact",
    ),
    builder=None,
    example=EXAMPLES.get("ks25-bit-budget"),
    example_options=EXAMPLE_OPTIONS["ks25-bit-budget"],
)
