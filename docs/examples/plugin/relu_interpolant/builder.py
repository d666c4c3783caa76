"""The builder: untrusted code, as every construction is. It writes the classical network and
exactmem believes none of it — the checklist (:mod:`.checklist`) judges what it built.

N points x_(0) < … < x_(N−1) on the line with labels y_(i). One hidden layer of N ReLU units,
unit k with its knot b_k (pre-activation x − b_k): b_0 = x_(0) − 1 and b_k = x_(k−1) for
k ≥ 1, so unit k is active exactly at the points x_(i) with i ≥ k — the triangular pattern that
makes the N × N system of the output weights solvable (Zhang, Bengio, Hardt, Recht & Vinyals
2017, Theorem 1, on the line). The output f(x) = Σ c_k ReLU(x − b_k) is the piecewise-linear
interpolant: c_0 = y_(0) (f(x_(0)) = c_0 · 1) and each later c_k is the change of slope the
interpolant makes at its knot, s_(k−1) − s_(k−2) with s_j = (y_(j+1) − y_j)/(x_(j+1) − x_j).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gmpy2 import mpq

from exactmem import Dataset, InputError, Transformer
from exactmem.core.model import MLP, Affine

__all__ = ["build", "knots_and_weights"]


def knots_and_weights(xs: list, ys: list) -> tuple[list[mpq], list[mpq]]:
    """The knots b_k and output weights c_k for the points ``xs`` (ascending, distinct) with
    labels ``ys``, as exact rationals."""
    xs, ys = [mpq(x) for x in xs], [mpq(y) for y in ys]
    slopes = [(ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j]) for j in range(len(xs) - 1)]
    knots = [xs[0] - 1, *xs[:-1]]
    weights = [mpq(ys[0])]
    previous = weights[0]  # the slope of f left of x_(0), on [b_0, x_(0)]
    for s in slopes:
        weights.append(s - previous)
        previous = s
    return knots, weights


def _affine(coefficients: list[mpq], biases: list[mpq], in_dim: int) -> Affine:
    """A map with row k = coefficients[k] (on input column 0, or one weight per input unit when
    in_dim > 1) and bias biases[k], over their common denominator."""
    values = [*coefficients, *biases]
    den = math.lcm(*(int(v.denominator) for v in values))
    scaled = [int(v * den) for v in coefficients]
    if in_dim == 1:
        rows = tuple(((0, w),) if w else () for w in scaled)
    else:  # one output row reading every unit
        rows = (tuple((k, w) for k, w in enumerate(scaled) if w),)
    return Affine(in_dim, rows, tuple(int(b * den) for b in biases), den)


def build(dataset: Dataset, options: dict, progress: Callable | None = None) -> Transformer:
    """The interpolating network for a ``points`` dataset in one dimension (distinct points)."""
    if dataset.task != "points" or dataset.dim != 1:
        raise InputError(
            f"relu-interpolant interpolates points on the line: task 'points' in dimension 1, "
            f"got task {dataset.task!r} in dimension {dataset.dim}"
        )
    pairs = sorted((mpq(p[0]), int(y)) for p, y in zip(dataset.points, dataset.labels, strict=True))
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    for a, b in zip(xs, xs[1:], strict=False):
        if a == b:
            raise InputError(f"relu-interpolant needs distinct points; {a} appears twice")
    if progress:
        progress(f"relu-interpolant: {len(xs)} knots")
    knots, weights = knots_and_weights(xs, ys)
    hidden = _affine([mpq(1)] * len(knots), [-b for b in knots], in_dim=1)
    output = _affine(weights, [mpq(0)], in_dim=len(knots))
    mlp = MLP((hidden, output), residual=False, label="interpolant")
    return Transformer(1, (mlp,), meta={"construction": "relu-interpolant"})
