"""Layer normalisation (:class:`exactmem.core.model.LayerNorm`) in each arithmetic the evaluators
use: exact rationals where the square root is rational, Arb balls always, float64 for the
float evaluation printed beside a certificate.

``y = gain ⊙ (x − μ) / √(σ² + eps) + bias``; μ = Σx/w, σ² = Σ(x − μ)²/w (the biased variance,
as ``torch.nn.LayerNorm``). √(p/q) for p/q in lowest terms is rational exactly when p and q are
both perfect squares; otherwise the exact evaluator stops with :class:`InconclusiveError` and
the verifier judges the model on balls, where the square root is enclosed (Arb's ``sqrt``
rounds outward).
"""

from __future__ import annotations

from collections.abc import Sequence

import gmpy2
from flint import arb
from gmpy2 import mpq

from exactmem.core.balls import to_ball
from exactmem.core.errors import InconclusiveError
from exactmem.core.exact import format_rational
from exactmem.core.model import LayerNorm

__all__ = ["layer_norm_balls", "layer_norm_exact", "rational_sqrt"]


def rational_sqrt(value: mpq) -> mpq | None:
    """√value when it is rational (value ≥ 0), else None."""
    value = mpq(value)
    p, q = int(value.numerator), int(value.denominator)
    if p < 0 or not gmpy2.is_square(p) or not gmpy2.is_square(q):
        return None
    return mpq(int(gmpy2.isqrt(p)), int(gmpy2.isqrt(q)))


def _branch(ln: LayerNorm, column: Sequence, normalise) -> Sequence:
    """A column through ``ln``: the whole of it, or (a branch layer norm) its source lanes
    normalised into its target lanes, every other lane kept."""
    if ln.source is None or ln.target is None:
        return normalise(column)
    out = list(column)
    out[ln.target : ln.target + ln.width] = normalise(column[ln.source : ln.source + ln.width])
    return out


def layer_norm_exact(ln: LayerNorm, x: Sequence[mpq]) -> tuple[mpq, ...]:
    """The exact output, or :class:`InconclusiveError` when √(σ² + eps) is irrational."""
    return tuple(_branch(ln, x, lambda v: _exact(ln, v)))


def _exact(ln: LayerNorm, x: Sequence[mpq]) -> tuple[mpq, ...]:
    w = len(x)
    mean = sum(x, mpq(0)) / w
    centred = [v - mean for v in x]
    spread = sum((c * c for c in centred), mpq(0)) / w + ln.eps
    root = rational_sqrt(spread)
    if root is None:
        raise InconclusiveError(
            f"layer norm {ln.label!r}: √(σ² + eps) = √({format_rational(spread)[:60]}) is "
            "irrational; judged on Arb balls instead (exactmem.evaluate.softmax)"
        )
    return tuple(g * c / root + b for g, c, b in zip(ln.gain, centred, ln.bias, strict=True))


def layer_norm_balls(ln: LayerNorm, x: Sequence[arb]) -> list[arb]:
    """Enclosures of the output from enclosures of the input (at the context's precision)."""
    return list(_branch(ln, x, lambda v: _balls(ln, v)))


def _balls(ln: LayerNorm, x: Sequence[arb]) -> list[arb]:
    w = len(x)
    mean = sum(x[1:], x[0]) / w
    centred = [v - mean for v in x]
    spread = sum((c * c for c in centred[1:]), centred[0] * centred[0]) / w + to_ball(ln.eps)
    root = spread.sqrt()  # eps > 0: a ball of positive reals once precise enough
    return [
        to_ball(g) * c / root + to_ball(b)
        for g, c, b in zip(ln.gain, centred, ln.bias, strict=True)
    ]
