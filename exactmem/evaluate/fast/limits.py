"""The bounds and thresholds of the fast evaluator: what int64 may hold, and from what sizes
threads, key order and long runs pay. The engine reads them through this module, so a test may
lower one (``monkeypatch.setattr(limits, "PARALLEL_ROWS", 64)``) to exercise a path on small
inputs."""

from __future__ import annotations

LIMIT = 2**62  # every partial sum of an int64 unit is proved below this
PARALLEL_ROWS = 1 << 16  # below this many rows (classes) a thread pool costs more than it saves
PARALLEL_CLASSES = 1024  # a class costs ~0.3 µs: fewer are not worth waking threads for
# Stage II in key order from this many rows: its runs of step layers (step_kernel) cost O(log N +
# classes) a layer against the row kernel's O(N) (N = 10⁴: 0.147 s against 0.252 s in all; one
# layer at a time, ~60 µs of Python each, it paid only from 3·10⁴ rows)
SORTED_FROM = 0
# layers per run of step layers: its statistics take (mixed units × limbs) per layer (N = 10⁷:
# 2 × 1534 limbs), so a long Stage II goes in several runs, each a few µs to set up
STEP_RUN_LAYERS = 256

SHORT = 8  # limbs per class of a short block (a long one has _Engine.long)
# one distinct input row whose values may pass this many bits: nothing to share, and limbs
# cost more than Python's integers (880 layers of 560-bit weights on one point: 1.2 s in the
# engine, 0.5 s in the reference), so the reference's step evaluates the sub-layer
ONE_ROW_BITS = 64 * 30


def _chunks(n: int, grain: int) -> int:
    """Parts to cut ``n`` rows (classes) into: one per ``grain``, at most 64."""
    return max(1, min(n // grain, 64))
