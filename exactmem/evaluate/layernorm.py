"""Layer normalisation (:class:`exactmem.model.LayerNorm`) in each arithmetic the evaluators
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
import numpy as np
from flint import arb
from gmpy2 import mpq

from exactmem.balls import to_ball
from exactmem.errors import InconclusiveError
from exactmem.exact import format_rational
from exactmem.model import LayerNorm

__all__ = ["layer_norm_balls", "layer_norm_exact", "layer_norm_floats", "rational_sqrt"]


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


def layer_norm_floats(ln: LayerNorm, z: np.ndarray) -> np.ndarray:
    """float64 layer norm of every column of ``z`` (shape ``[width, positions]``)."""
    if ln.source is None or ln.target is None:
        return _floats(ln, z)
    out = z.copy()
    out[ln.target : ln.target + ln.width] = _floats(ln, z[ln.source : ln.source + ln.width])
    return out


def _floats(ln: LayerNorm, z: np.ndarray) -> np.ndarray:
    from exactmem.evaluate.floats import as_float

    gain = np.array([as_float(g) for g in ln.gain])[:, None]
    bias = np.array([as_float(b) for b in ln.bias])[:, None]
    centred = z - z.mean(axis=0, keepdims=True)
    var = (centred * centred).mean(axis=0, keepdims=True)
    return gain * centred / np.sqrt(var + as_float(ln.eps)) + bias
