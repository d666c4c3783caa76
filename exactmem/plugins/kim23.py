"""The built-in construction ``kim23`` (Kim, Kim & Mozafari 2023),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.kim23 import CHECKS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="kim23",
    paper="Kim, Kim & Mozafari 2023",
    summary="",
    checklist=Checklist(
        name="kim23",
        tasks=("seq2seq", "next-token"),
        summary="",
        checks=CHECKS["kim23"],
        evaluates="hardmax-limit",
    ),
    builder=None,
    example=EXAMPLES.get("kim23"),
)
