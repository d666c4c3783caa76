"""The built-in construction ``ks25-next-token`` (Kajitsuka & Sato 2025, Theorem 4.1),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.ks25 import CHECKS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="ks25-next-token",
    paper="Kajitsuka & Sato 2025, Theorem 4.1",
    summary="",
    checklist=Checklist(
        name="ks25-next-token",
        tasks=("next-token",),
        summary="",
        checks=CHECKS["ks25-next-token"],
        evaluates="exact",
    ),
    builder=None,
    example=EXAMPLES.get("ks25-next-token"),
)
