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

from exactmem.core.errors import InconclusiveError

__all__ = [
    "activation_ball",
    "ball_bounds",
    "ball_midpoint",
    "gelu_ball",
    "gelu_tanh_ball",
    "hardmax_balls",
    "softmax_balls",
    "to_ball",
]


def to_ball(value: mpq) -> arb:
    value = mpq(value)
    return arb(fmpq(int(value.numerator), int(value.denominator)))


def _dyadic(x: arb) -> mpq:
    man, exp = x.man_exp()
    return mpq(int(man)) * (mpq(2) ** int(exp)) if exp >= 0 else mpq(int(man), 2 ** (-int(exp)))


def ball_midpoint(x: arb) -> mpq:
    """The exact (dyadic) midpoint of a ball."""
    return _dyadic(x.mid())


FINEST = 1 << 18
"""Bounds are rounded outward to multiples of 2^-FINEST: a softmax weight exp(−2^64) is a ball
whose exponent has 20 digits, and its exact bound 2^-(2^64) could never be written down."""


def _outward(x: arb, up: bool) -> mpq:
    """A dyadic ``x`` (radius 0) exactly, or rounded to the multiple of 2^-FINEST below it
    (``up``: above it) when finer."""
    fm, fe = x.man_exp()
    man, exp = int(fm), int(fe)
    if exp > FINEST:  # (no exp() of the evaluators grows: softmax exponentiates s − max ≤ 0)
        raise InconclusiveError(f"a ball's magnitude exceeds 2^{FINEST}: no bounds are written")
    if exp >= -FINEST:
        return mpq(man) * (mpq(2) ** exp) if exp >= 0 else mpq(man, 1 << -exp)
    shift = -FINEST - exp
    return mpq(-((-man) >> shift) if up else man >> shift, 1 << FINEST)


def ball_bounds(x: arb) -> tuple[mpq, mpq]:
    """Rational lower and upper bounds of a ball: exact (its midpoint and radius are dyadic)
    except below 2^-FINEST, where they are rounded outward. A ball that is not finite (an
    overflow, NaN) bounds nothing: :class:`InconclusiveError`, the precision's limit, never a
    ValueError a caller could mistake for a refutation (review r1, M2)."""
    if not x.is_finite():
        raise InconclusiveError(f"an enclosure is not finite ({x.str(5)}): nothing is bounded")
    rad = _outward(x.rad(), True)
    return _outward(x.mid(), False) - rad, _outward(x.mid(), True) + rad


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


def hardmax_balls(scores: Sequence[arb], values: Sequence[Sequence[arb]]) -> list[arb]:
    """An enclosure of Σ_k a_k·values[k] with a the hardmax weights of ``scores``: 1/|I| on
    the maximisers I, ties averaged (Kajitsuka & Sato 2025, eq. (1)).

    A key whose score is certainly below another's is no maximiser. One key left: its value.
    Keys left whose scores are all exact (radius 0) and so equal: the mean of their values.
    Otherwise the balls cannot tell which keys maximise: the mean over any non-empty subset of
    the keys left lies in the hull of their values, returned lane by lane — an enclosure too
    wide to decide much, which the caller raises the precision on or calls inconclusive."""
    if not all(s.is_finite() for s in scores):
        left = list(range(len(scores)))
    else:
        bounds = [ball_bounds(s) for s in scores]
        floor = max(lo for lo, _ in bounds)  # some maximiser's score is at least this
        left = [k for k, (_, hi) in enumerate(bounds) if hi >= floor]
    width = len(values[0]) if values else 0
    if len(left) == 1:
        return list(values[left[0]])
    if all(scores[k].is_exact() for k in left):  # all ≥ floor and ≤ the largest: all equal
        return [
            sum((values[k][j] for k in left[1:]), values[left[0]][j]) / len(left)
            for j in range(width)
        ]
    hull = []
    for j in range(width):
        ball = values[left[0]][j]
        for k in left[1:]:
            ball = ball.union(values[k][j])
        hull.append(ball)
    return hull


def gelu_ball(x: arb) -> arb:
    """An enclosure of GELU(x) = x·Φ(x) = x·(1 + erf(x/√2))/2 (Φ the standard normal
    distribution function; Arb's erf and √2 are rigorous). GELU(0) = 0 exactly."""
    if x.is_exact() and x == 0:
        return arb(0)
    return x * (1 + (x / arb(2).sqrt()).erf()) / 2


GELU_TANH_CUBIC = fmpq(44715, 1000000)  # 0.044715, the decimal the tanh approximation names


def gelu_tanh_ball(x: arb) -> arb:
    """An enclosure of GELU's tanh approximation ½x(1 + tanh(√(2/π)(x + 0.044715x³))) — Hugging
    Face GPT-2's ``gelu_new`` and PyTorch's ``gelu(approximate="tanh")``, a function other than
    x·Φ(x) (:func:`gelu_ball`); √(2/π), tanh and the decimal 0.044715 are enclosed by Arb.
    It is 0 exactly at 0."""
    if x.is_exact() and x == 0:
        return arb(0)
    inner = (2 / arb.pi()).sqrt() * (x + arb(GELU_TANH_CUBIC) * x * x * x)
    return x * (1 + inner.tanh()) / 2


def activation_ball(name: str):
    """The ball enclosure of the MLP activation ``name`` (:data:`exactmem.core.model.ACTIVATIONS`);
    an unknown name is an error, never another activation."""
    if name == "gelu":
        return gelu_ball
    if name == "gelu_tanh":
        return gelu_tanh_ball
    if name == "relu":
        return lambda x: x.max(arb(0))
    raise ValueError(f"activation {name!r} has no ball evaluation")
