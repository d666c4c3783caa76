"""Next-token target distributions: the optional ``"targets"`` field of a dataset file.

Next-token prediction in the sense of Madden, Fox & Thrampoulidis 2024 gives each context a
distribution π_i over the C classes (the next token), not one label. A dataset file may carry
them: ``"targets"`` holds one row per sequence of C exact rationals, each ≥ 0, summing to exactly
1; the sequence's label must be the unique most probable class of its row (so argmax labels and
targets never disagree). The ``madden24`` checklist certifies softmax(logits) within the user's
``--tolerance`` of every row.
"""

from __future__ import annotations

from collections.abc import Sequence

from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.core.exact import format_rational, parse_rational

__all__ = ["parse_targets", "targets_to_json"]

Row = tuple[mpq, ...]


def parse_targets(
    raw: object, labels: Sequence[int], num_classes: int, *, task: str, allow_floats: bool = False
) -> tuple[Row, ...]:
    """The exact rows of a dataset's ``targets`` field, each checked (errors name the index)."""
    if task != "next-token":
        raise InputError(
            f"targets: only task 'next-token' takes target distributions, not {task!r}"
        )
    if not isinstance(raw, list):
        raise InputError("targets: expected a list of rows (one distribution per sequence)")
    if len(raw) != len(labels):
        raise InputError(f"targets: {len(raw)} rows for {len(labels)} sequences (one per sequence)")
    rows = []
    for i, row in enumerate(raw):
        where = f"targets[{i}]"
        if not isinstance(row, list) or len(row) != num_classes:
            raise InputError(f"{where}: expected a list of C = {num_classes} probabilities")
        probs = tuple(
            parse_rational(x, f"{where}[{j}]", allow_floats=allow_floats) for j, x in enumerate(row)
        )
        for j, p in enumerate(probs):
            if p < 0:
                raise InputError(f"{where}[{j}]: probability {format_rational(p)} is negative")
        total = sum(probs, mpq(0))
        if total != 1:
            raise InputError(f"{where}: the probabilities sum to {format_rational(total)}, not 1")
        y = labels[i]
        rival = max(
            (j for j in range(num_classes) if j != y - 1), key=lambda j: probs[j], default=None
        )
        if rival is not None and probs[rival] >= probs[y - 1]:
            raise InputError(
                f"{where}: label {y} has probability {format_rational(probs[y - 1])}, class "
                f"{rival + 1} has {format_rational(probs[rival])}; the label must be the unique "
                "most probable class"
            )
        rows.append(probs)
    return tuple(rows)


def targets_to_json(rows: Sequence[Row]) -> list[list[str]]:
    return [[str(p) for p in row] for row in rows]
