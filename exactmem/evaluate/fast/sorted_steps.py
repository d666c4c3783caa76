"""Stage II on sorted keys: a step layer's units and step lane from the keys' order alone.

Lemma C.1, Stage II (Kajitsuka & Sato 2025, Lemma G.3): layer j computes
σ(x − t_j) and σ(x − t_j − 1) from the carried key x and reads their difference, the step
[x ≥ t_j + 1]. Over N inputs that is O(N) work per layer and O(N·m) for the stage; with the keys
sorted once it is O(log N) per layer, and exact: for w > 0, z = w·x + b is non-decreasing in x,
so on ascending keys the signs of z, its least positive value and its extremes sit at positions
found by binary search, and a sum of such ramps is affine between their kinks. Nothing here is
assumed of the network: a layer whose step is not exactly 0 then 1 along the sorted keys is
refused (``None``) and computed row by row.
"""

from __future__ import annotations

import numpy as np

__all__ = ["class_ranges", "step_boundary", "unit_stats"]


def unit_stats(xs: np.ndarray, w: int, b: int) -> tuple[int, int, int | None, int | None, int]:
    """(zeros, negatives, least non-zero |z|, least positive z, greatest |z|) of z = w·x + b
    over the ascending integers ``xs`` (w > 0; None: no such value), as the row kernel counts
    them."""
    n = len(xs)
    below = -(b // w)  # z < 0 ⟺ x < ⌈−b/w⌉
    neg = int(np.searchsorted(xs, below, "left"))
    zeros = 0
    if b % w == 0:  # z = 0 ⟺ x = −b/w
        zeros = int(np.searchsorted(xs, -b // w, "right")) - neg
    first = neg + zeros  # the first z > 0
    min_pos = w * int(xs[first]) + b if first < n else None
    least = [v for v in (min_pos, -(w * int(xs[neg - 1]) + b) if neg else None) if v is not None]
    top = max(abs(w * int(xs[0]) + b), abs(w * int(xs[-1]) + b)) if n else 0
    return zeros, neg, min(least) if least else None, min_pos, top


def step_boundary(xs: np.ndarray, units: list[tuple[int, int]], coefs: list[int]) -> int | None:
    """p with Σ coefs·σ(w·x + b) (over ``units`` (w, b), w > 0) equal to 0 on xs[:p] and to 1
    on xs[p:], or None if it is not such a step along ``xs`` (ascending integers).

    σ(w·x + b) is 0 up to its first positive position and w·x + b from there: between those
    positions the sum is α·x + β, constant where α = 0 or where the keys are all equal."""
    n = len(xs)
    starts = []
    for w, b in units:
        below = -(b // w)
        after = int(np.searchsorted(xs, below, "left"))
        if b % w == 0:
            after = int(np.searchsorted(xs, -b // w, "right"))
        starts.append(after)
    cuts = sorted({0, n, *starts})
    p = None
    for s, e in zip(cuts, cuts[1:], strict=False):
        if s == e:
            continue
        alpha = sum(c * w for c, (w, _), at in zip(coefs, units, starts, strict=True) if at <= s)
        beta = sum(c * b for c, (_, b), at in zip(coefs, units, starts, strict=True) if at <= s)
        if alpha and xs[s] != xs[e - 1]:
            return None
        value = alpha * int(xs[s]) + beta
        if value == 0 and p is None:
            continue
        if value == 1:
            p = s if p is None else p
            continue
        return None  # off {0, 1}, or a 0 after a 1
    return n if p is None else p


def class_ranges(cls_sorted: np.ndarray, nclass: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(lo, hi) per class if every class is one contiguous run of ``cls_sorted`` (the classes
    of the rows in key order), else None."""
    n = len(cls_sorted)
    if n == 0:
        return None
    starts = np.flatnonzero(np.concatenate([[True], cls_sorted[1:] != cls_sorted[:-1]]))
    if len(starts) != nclass:
        return None
    owner = cls_sorted[starts]
    if len(np.unique(owner)) != nclass:
        return None
    lo = np.empty(nclass, np.int64)
    hi = np.empty(nclass, np.int64)
    lo[owner] = starts
    hi[owner] = np.concatenate([starts[1:], [n]])
    return lo, hi
