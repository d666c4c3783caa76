"""Arb balls (python-flint) as exact rational bounds: the arithmetic that rigorous softmax
evaluation and the softmax constructions share.

A ball [m ± r] is guaranteed to contain the true value (every operation rounds outward); its
midpoint and radius are dyadic, so a ball converts to exact rational bounds. This module holds
no evaluator: constructions may use it to design their weights, the evaluators to run them.
"""

from __future__ import annotations

from collections.abc import Sequence

from flint import arb, fmpq
from gmpy2 import mpq

__all__ = ["ball_bounds", "ball_midpoint", "gelu_ball", "softmax_balls", "to_ball"]


def to_ball(value: mpq) -> arb:
    value = mpq(value)
    return arb(fmpq(int(value.numerator), int(value.denominator)))


def _dyadic(x: arb) -> mpq:
    man, exp = x.man_exp()
    return mpq(int(man)) * (mpq(2) ** int(exp)) if exp >= 0 else mpq(int(man), 2 ** (-int(exp)))


def ball_midpoint(x: arb) -> mpq:
    """The exact (dyadic) midpoint of a ball."""
    return _dyadic(x.mid())


def ball_bounds(x: arb) -> tuple[mpq, mpq]:
    """Exact rational lower and upper bounds of a ball (its midpoint and radius are dyadic)."""
    mid, rad = _dyadic(x.mid()), _dyadic(x.rad())
    return mid - rad, mid + rad


def softmax_balls(scores: Sequence[arb]) -> list[arb]:
    """Enclosures of softmax(scores). When every score is the same exact number the weights are
    1/n exactly (eq. (39)), returned as the tightest ball around 1/n (exact when n is a power of
    two); the exact evaluator computes such layers with rational 1/n."""
    n = len(scores)
    if all(s.is_exact() for s in scores) and all(s == scores[0] for s in scores):
        return [arb(fmpq(1, n))] * n
    top = scores[0]
    for s in scores[1:]:
        top = top.max(s)
    exps = [(s - top).exp() for s in scores]
    total = sum(exps[1:], exps[0])
    return [e / total for e in exps]


def gelu_ball(x: arb) -> arb:
    """An enclosure of GELU(x) = x·Φ(x) = x·(1 + erf(x/√2))/2 (Φ the standard normal
    distribution function; Arb's erf and √2 are rigorous). GELU(0) = 0 exactly."""
    if x.is_exact() and x == 0:
        return arb(0)
    return x * (1 + (x / arb(2).sqrt()).erf()) / 2
