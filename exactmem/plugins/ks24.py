"""The built-in construction ``ks24`` (Kajitsuka & Sato 2024),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.ks24 import CHECKS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="ks24",
    paper="Kajitsuka & Sato 2024",
    summary="",
    checklist=Checklist(
        name="ks24",
        tasks=("seq2seq",),
        summary="",
        checks=CHECKS["ks24"],
        evaluates="balls",
    ),
    builder=None,
    example=EXAMPLES.get("ks24"),
)
