"""Bound formulas of the papers, as SymPy expressions, decided rigorously.

A claim file states bounds such as ``depth <= 3*K*Max(ceiling(log(R, 2)), …) + …`` in the
dataset's figures (N, d, C, r, delta, …), parsed by the grammar of :mod:`exactmem.core.formula`
(never by Python). A measured integer is compared with the formula by evaluating the formula as
an Arb ball (python-flint) at increasing precision: the comparison is decided only when the ball
lies entirely on one side, else it is *inconclusive* — a float never decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from flint import arb, ctx

from exactmem.core.formula import Undecided, ball_of, parse_formula

__all__ = ["BoundResult", "decide_ge", "decide_le", "evaluate_ball", "parse_formula"]

MAX_PRECISION = 4096


def evaluate_ball(expr: sympy.Expr, precision: int) -> arb | None:
    """The formula as an Arb ball at ``precision`` bits (None if a floor/ceiling is undecided)."""
    old = ctx.prec
    ctx.prec = precision
    try:
        return ball_of(expr)
    except Undecided:
        return None
    finally:
        ctx.prec = old


@dataclass(frozen=True)
class BoundResult:
    """``holds`` is True/False when decided, None when inconclusive at MAX_PRECISION."""

    holds: bool | None
    value: int
    bound: str  # the ball, printed


def _decide(value: int, expr: sympy.Expr, *, value_is_lower: bool) -> BoundResult:
    """Compare ``value`` with the ball of ``expr`` at rising precision until one side is
    certain; ``value_is_lower`` asks value ≤ expr, otherwise value ≥ expr."""
    precision = 128
    ball = None
    while precision <= MAX_PRECISION:
        ball = evaluate_ball(expr, precision)
        if ball is not None:
            above, below = ball >= value, ball < value
            if not value_is_lower:
                above, below = ball <= value, ball > value
            if above or below:
                return BoundResult(bool(above), value, ball.str(10, radius=False))
        precision *= 2
    return BoundResult(None, value, "undecided" if ball is None else ball.str(10))


def decide_le(value: int, expr: sympy.Expr) -> BoundResult:
    """Decide ``value ≤ expr`` rigorously (an upper bound on a measured resource)."""
    return _decide(value, expr, value_is_lower=True)


def decide_ge(value: int, expr: sympy.Expr) -> BoundResult:
    """Decide ``value ≥ expr`` rigorously (a lower bound such as W ≥ √(nN/…))."""
    return _decide(value, expr, value_is_lower=False)
