"""The checklist: what exactmem's trusted core runs on the evaluated network, under
``verify --construction relu-interpolant``. Every value it reads comes from the trusted exact
evaluator (:attr:`exactmem.checks.checklist.Evidence.run`) on the model as its file defines it;
nothing
the builder says is believed.

The result (Zhang, Bengio, Hardt, Recht & Vinyals 2017, Theorem 1, on the line): N distinct
points x_(0) < … < x_(N−1) with any labels are interpolated by one hidden layer of N ReLU units.
The standard argument orders the units so that unit k is active exactly at x_(i), i ≥ k: the N × N
activation matrix is triangular with a positive diagonal, so the output weights exist (and are
unique). The classical choice of knots at the points makes the network *the* piecewise-linear
interpolant. The core already checks the labels (``labels``) and the bounds declared in
:mod:`.plugin`; this checklist adds the two mechanisms:

* ``interpolant.knots`` — the triangular activation pattern;
* ``interpolant.pieces`` — no knot strictly between two consecutive points, so that f is
  linear on each [x_(i), x_(i+1)] and each knot's change of slope is the one the interpolant
  makes there.

Each check has a breaker (a knot moved) that must make it fail: ``exactmem selftest
relu-interpolant``.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gmpy2 import mpq

from exactmem import Dataset, Transformer
from exactmem.checks.certificate import Check, ChecklistStructureError
from exactmem.checks.checklist import Breaker, CheckSpec, Evidence
from exactmem.core.model import MLP, Affine

__all__ = ["CHECKS", "example", "run"]

PAPER = "Zhang, Bengio, Hardt, Recht & Vinyals 2017"


def _the_mlp(model: Transformer) -> MLP:
    """The one hidden layer: the model must be one plain MLP of two affine maps on Q^1."""
    mlp = model.sublayers[0] if len(model.sublayers) == 1 else None
    if (
        not isinstance(mlp, MLP)
        or len(mlp.layers) != 2
        or mlp.residual
        or mlp.activation != "relu"
        or model.embed is not None
        or model.unembed is not None
        or model.input_dim != 1
    ):
        raise ChecklistStructureError("the model is not one ReLU layer between two affine maps")
    return mlp


def _sorted_points(dataset: Dataset) -> list[tuple[mpq, int]]:
    """(x, index) of the dataset's points, ascending (the core has refused equal points with
    different labels; equal points with one label are the same point twice)."""
    return sorted((mpq(p[0]), i) for i, p in enumerate(dataset.points))


def _preactivations(evidence: Evidence, mlp: MLP) -> list[tuple[mpq, ...]]:
    """The hidden pre-activations at every point, by the trusted evaluator: the model's own
    first affine map, evaluated as a model of its own."""
    first = Transformer(1, (MLP(mlp.layers[:1], residual=False),))
    points = evidence.dataset.points
    trace = evidence.run(first, points, [[i] for i in range(len(points))])
    return [tuple(trace.outputs[i][0]) for i in range(len(points))]


def _knots_check(pre: list[tuple[mpq, ...]], order: list[int]) -> Check:
    n, units = len(order), len(pre[0])
    active = [frozenset(r for r, i in enumerate(order) if pre[i][u] > 0) for u in range(units)]
    ranked = sorted(range(units), key=lambda u: -len(active[u]))
    bad = []
    if units != n:
        bad.append(f"{units} hidden units for {n} points")
    for k, u in enumerate(ranked[:n]):
        want = frozenset(range(k, n))
        if active[u] != want:
            where = sorted(active[u])
            bad.append(
                f"unit {u} is active at sorted points {where[:6]}{'…' if len(where) > 6 else ''}"
                f", the triangular pattern needs exactly x_({k})…x_({n - 1})"
            )
            break
    if bad:
        return Check("interpolant.knots", False, "; ".join(bad))
    return Check(
        "interpolant.knots",
        True,
        f"unit k is active exactly at x_(k)…x_({n - 1}) for an order of the {n} units: the "
        "activation matrix is triangular with a positive diagonal",
        {"units": units},
    )


def _pieces_check(pre: list[tuple[mpq, ...]], order: list[int], xs: list[mpq]) -> Check:
    bad = []
    for r in range(len(order) - 1):
        left, right = pre[order[r]], pre[order[r + 1]]
        inside = [u for u in range(len(left)) if left[u] * right[u] < 0]
        if inside:
            bad.append(f"unit {inside[0]} has its knot strictly between {xs[r]} and {xs[r + 1]}")
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        return Check("interpolant.pieces", False, "; ".join(bad[:3]) + more)
    return Check(
        "interpolant.pieces",
        True,
        f"no knot strictly between two of the {len(order)} points: f is linear on each piece, "
        "the piecewise-linear interpolant",
    )


def run(evidence: Evidence) -> list[Check]:
    """The checklist's checks on the evaluated network (:class:`exactmem.checks.checklist.Checklist`
    ``run``)."""
    mlp = _the_mlp(evidence.model)
    pairs = _sorted_points(evidence.dataset)
    order, xs = [i for _, i in pairs], [x for x, _ in pairs]
    pre = _preactivations(evidence, mlp)
    return [_knots_check(pre, order), _pieces_check(pre, order, xs)]


# --------------------------------------------------------------------------- breakers


def _knots(model: Transformer) -> tuple[MLP, list[mpq]]:
    mlp = model.sublayers[0]
    hidden = mlp.layers[0]
    return mlp, [mpq(-b, dict(row)[0]) for row, b in zip(hidden.rows, hidden.bias, strict=True)]


def _with_knot(model: Transformer, unit: int, knot: mpq) -> Transformer:
    """The model with hidden unit ``unit``'s knot moved to ``knot`` (its pre-activation
    x − knot; the output weights unchanged)."""
    mlp, knots = _knots(model)
    knots[unit] = knot
    den = math.lcm(*(int(b.denominator) for b in knots))
    hidden = Affine(1, tuple(((0, den),) for _ in knots), tuple(int(-b * den) for b in knots), den)
    return replace(model, sublayers=(replace(mlp, layers=(hidden, mlp.layers[1])),))


def knot_past_the_next_point(model: Transformer, dataset: Dataset) -> Transformer:
    """Unit 1's knot moved from x_(0) to x_(1): units 1 and 2 are then active at the same
    points, and the activation matrix is singular."""
    xs = [x for x, _ in _sorted_points(dataset)]
    return _with_knot(model, 1, xs[1])


def knot_between_points(model: Transformer, dataset: Dataset) -> Transformer:
    """Unit 1's knot moved from x_(0) to the middle of [x_(0), x_(1)]: still triangular, but
    the slope changes inside a piece."""
    xs = [x for x, _ in _sorted_points(dataset)]
    return _with_knot(model, 1, (xs[0] + xs[1]) / 2)


CHECKS = (
    CheckSpec(
        "interpolant.knots",
        PAPER,
        "Theorem 1, on the line: the triangular argument",
        "unit k active exactly at the points x_(i), i ≥ k: a triangular activation matrix with a "
        "positive diagonal, so that N output weights solve the N label equations",
        (
            Breaker(
                "a knot moved past the next point",
                "the triangular pattern (two units active at the same points)",
                "interpolant.knots",
                model=knot_past_the_next_point,
            ),
        ),
    ),
    CheckSpec(
        "interpolant.pieces",
        PAPER,
        "Theorem 1 with the knots at the points: the piecewise-linear interpolant",
        "no knot strictly between consecutive points: f is linear on each [x_(i), x_(i+1)], each "
        "knot's change of slope the one the interpolant needs",
        (
            Breaker(
                "a knot's bias moved inside a piece",
                "the linear pieces (a change of slope between two points)",
                "interpolant.pieces",
                model=knot_between_points,
            ),
        ),
    ),
)


def example() -> Dataset:
    """The small dataset ``selftest`` builds the honest model on: six points on the line, in no
    order, with rational coordinates."""
    points = [["3"], ["-1/2"], ["7/3"], ["0"], ["5"], ["-4"]]
    return Dataset.from_points(points, [2, 5, 1, 3, 3, 4])
