"""Bound formulas of the papers, as SymPy expressions, decided rigorously.

A claim file states bounds such as ``depth <= 3*K*Max(ceiling(log(R, 2)), …) + …`` in the
dataset's figures (N, d, C, r, delta, …). A measured integer is compared with the formula by
evaluating the formula as an Arb ball (python-flint) at increasing precision: the comparison is
decided only when the ball lies entirely on one side, else it is *inconclusive* — a float never
decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sympy
from flint import arb, ctx, fmpq

from exactmem.errors import InputError

__all__ = ["BoundResult", "decide_ge", "decide_le", "evaluate_ball", "parse_formula"]

FUNCTIONS = {
    "sqrt": sympy.sqrt,
    "log": sympy.log,
    "ceiling": sympy.ceiling,
    "floor": sympy.floor,
    "Max": sympy.Max,
    "Min": sympy.Min,
    "pi": sympy.pi,
    "E": sympy.E,
}
MAX_PRECISION = 4096


def parse_formula(text: str, names: Mapping[str, sympy.Expr], where: str) -> sympy.Expr:
    """Parse ``text`` with only ``names`` (symbols or sub-formulas) and :data:`FUNCTIONS`."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}: expected a formula string")
    namespace = {**FUNCTIONS, **names}
    try:
        expr = sympy.sympify(text, locals=namespace, rational=True)
    except (sympy.SympifyError, SyntaxError, TypeError) as exc:
        raise InputError(f"{where}: cannot parse {text!r} ({exc})") from None
    unknown = (
        {str(s) for s in expr.free_symbols}
        - {str(s) for v in names.values() for s in sympy.sympify(v).free_symbols}
        - set(names)
    )
    if unknown:
        raise InputError(f"{where}: unknown names {', '.join(sorted(unknown))} in {text!r}")
    return expr


class _Undecided(Exception):
    pass


def _ball(expr: sympy.Expr) -> arb:
    if expr.is_Integer:
        return arb(int(expr))
    if expr.is_Rational:
        return arb(fmpq(int(expr.p), int(expr.q)))
    if expr is sympy.pi:
        return arb.pi()
    if expr is sympy.E:
        return arb.const_e()
    args = [_ball(a) for a in expr.args]
    if expr.is_Add:
        total = args[0]
        for a in args[1:]:
            total = total + a
        return total
    if expr.is_Mul:
        total = args[0]
        for a in args[1:]:
            total = total * a
        return total
    if expr.is_Pow:
        base, exponent = expr.args
        if exponent.is_Integer:
            return args[0] ** int(exponent)
        if exponent == sympy.Rational(1, 2):
            return args[0].sqrt()
        if exponent == sympy.Rational(-1, 2):
            return args[0].rsqrt()
        return (args[1] * args[0].log()).exp()
    if isinstance(expr, sympy.log):
        return args[0].log()
    if isinstance(expr, sympy.exp):
        return args[0].exp()
    if isinstance(expr, sympy.ceiling | sympy.floor):
        rounded = args[0].ceil() if isinstance(expr, sympy.ceiling) else args[0].floor()
        value = rounded.unique_fmpz()
        if value is None:
            raise _Undecided
        return arb(value)
    if isinstance(expr, sympy.Max | sympy.Min):
        total = args[0]
        for a in args[1:]:
            total = total.max(a) if isinstance(expr, sympy.Max) else total.min(a)
        return total
    raise InputError(f"bound formulas cannot use {type(expr).__name__} ({expr})")


def evaluate_ball(expr: sympy.Expr, precision: int) -> arb | None:
    """The formula as an Arb ball at ``precision`` bits (None if a floor/ceiling is undecided)."""
    old = ctx.prec
    ctx.prec = precision
    try:
        return _ball(sympy.sympify(expr))
    except _Undecided:
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
