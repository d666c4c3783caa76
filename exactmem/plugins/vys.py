"""The built-in construction ``vys`` (Vardi, Yehudai & Shamir 2022, Theorem 3.1),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.vys import CHECKS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="vys",
    paper="Vardi, Yehudai & Shamir 2022, Theorem 3.1",
    summary="",
    checklist=Checklist(
        name="vys",
        tasks=("points",),
        summary="",
        checks=CHECKS["vys"],
        evaluates="exact",
    ),
    builder=None,
    example=EXAMPLES.get("vys"),
)
