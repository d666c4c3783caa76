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

__all__ = [
    "activation_ball",
    "ball_bounds",
    "ball_midpoint",
    "gelu_ball",
    "gelu_tanh_ball",
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
    """The ball enclosure of the MLP activation ``name`` (:data:`exactmem.model.ACTIVATIONS`);
    an unknown name is an error, never another activation."""
    if name == "gelu":
        return gelu_ball
    if name == "gelu_tanh":
        return gelu_tanh_ball
    if name == "relu":
        return lambda x: x.max(arb(0))
    raise ValueError(f"activation {name!r} has no ball evaluation")
