"""Helpers shared by the benchmark scripts: Markdown tables, timing, least-squares slopes."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from exactmem.checks.certify import certify


def table_header(head: Sequence[str]) -> None:
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))


def timed(fn: Callable):
    """(result, seconds) of one call."""
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def timed_verdict(model, dataset, run: bool, construction: str) -> tuple[str, str]:
    """(seconds as text, verdict) of an exact certification with ``construction``'s full
    checklist, or ("—", "not run")."""
    if not run:
        return "—", "not run"
    cert, seconds = timed(
        lambda: certify(model, dataset, construction=construction, per_layer=False)
    )
    return f"{seconds:.1f}", cert.verdict


def slope(xs, ys) -> float:
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    num = sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True))
    return num / sum((a - mx) ** 2 for a in lx)


def print_slopes(rows: list) -> None:
    """Least-squares log-log slopes of the resources against N, for (N, Resources) rows."""
    if len(rows) < 2:
        return
    ns = [n for n, _ in rows]
    parts = [
        f"{name} {slope(ns, [getattr(r, key) for _, r in rows]):.3f}"
        for name, key in (
            ("dense parameters", "dense_parameters"),
            ("non-zero", "nonzero_parameters"),
            ("depth", "depth"),
            ("max bits", "max_bits"),
        )
    ]
    print("\nlog-log slope against N: " + ", ".join(parts))
