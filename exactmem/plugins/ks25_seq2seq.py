"""The built-in construction ``ks25-seq2seq`` (Kajitsuka & Sato 2025, Corollary 4.1),
registered as a plugin."""

from __future__ import annotations

from exactmem.checklist import Checklist, Construction
from exactmem.mechanisms.ks25 import CHECKS, EXAMPLES

# TODO(checklist interface): ``run`` adapts the checklist to :class:`~exactmem.checklist.Evidence`
construction = Construction(
    name="ks25-seq2seq",
    paper="Kajitsuka & Sato 2025, Corollary 4.1",
    summary="",
    checklist=Checklist(
        name="ks25-seq2seq",
        tasks=("seq2seq",),
        summary="",
        checks=CHECKS["ks25-seq2seq"],
        evaluates="exact",
    ),
    builder=None,
    example=EXAMPLES.get("ks25-seq2seq"),
)
