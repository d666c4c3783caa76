"""Ball evaluation of a token-wise FFN whose first layer has rank one, in O(log K) per token.

When every row of the first layer is a multiple f_j·w of one integer vector w, unit j is
ReLU((f_j·x + b_j)/D) of the scalar x = wᵀz, with its kink at p_j = −b_j/f_j. For an enclosure
x ∈ [lo, hi], a unit whose kink lies at or beyond the enclosure on its inactive side is exactly
0, one whose kink lies at or beyond it on the active side is the affine function (f_j·x + b_j)/D,
and only the units with a kink strictly inside (lo, hi) need their own ReLU. A row of the second
layer, Σ_j c_j·h_j, is then A·x + B with A and B exact prefix sums over the units sorted by kink,
plus those few units — the same real function of x, enclosed by one ball product. The layers
after the second are evaluated as they are. Nothing here is approximate: it is the model's own
function, rearranged exactly (the sums are rational), then enclosed.

It is a shortcut of the ball evaluator (:mod:`exactmem.evaluate.softmax`), kept for speed (a
token costs O(log K) instead of O(K·d)) and taken only where it computes the same function:
:func:`shortcut` refuses every model outside the one shape it evaluates — an activation other
than ReLU (GELU is not piecewise linear), an embedding, token ids, a first layer not of rank
one — and honours the FFN's residual connection and the read-out map. ``tests/test_rank_one.py``
checks it against the ball evaluator over those features (masks, scores, activations,
residual).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from fractions import Fraction
from itertools import accumulate

from flint import arb
from gmpy2 import mpq

from exactmem.core.balls import ball_bounds, to_ball
from exactmem.core.model import MLP, Affine, Attention, Transformer

__all__ = ["RankOneFFN", "rank_one_direction", "shortcut"]


def rank_one_direction(first: Affine) -> tuple[list[int], list[Fraction]] | None:
    """(w, [f_j]) with row j = f_j·w, w a primitive integer vector and every f_j ≠ 0; None
    when some row is not such a multiple (or the layer reads nothing)."""
    import math

    dense = [[0] * first.in_dim for _ in first.rows]
    for r, row in enumerate(first.rows):
        for c, x in row:
            dense[r][c] = x
    base = next((r for r in dense if any(r)), None)
    if base is None:
        return None
    g = 0
    for x in base:
        g = math.gcd(g, x)
    w = [x // g for x in base]
    pivot = next(i for i, x in enumerate(w) if x)
    factors = []
    wp = w[pivot]
    for row in dense:
        rp = row[pivot]  # row = (rp / wp)·w  ⇔  row·wp = rp·w, in integers
        if rp == 0 or any(x * wp != rp * y for x, y in zip(row, w, strict=True)):
            return None
        factors.append(Fraction(rp, wp))
    return w, factors


class _Row:
    """One row of the second layer: its units split by slope sign, sorted by kink, with exact
    prefix sums of c·f/D and c·b/D (the affine contribution of the active units)."""

    def __init__(self, row, factors, bias0, den0):
        pos, neg = [], []
        for j, c in row:
            f = mpq(factors[j].numerator, factors[j].denominator)
            b = mpq(bias0[j])
            unit = (-b / f, j, mpq(c) * f / den0, mpq(c) * b / den0, c)
            (pos if f > 0 else neg).append(unit)
        pos.sort()
        neg.sort()
        self.pos_kinks = [u[0] for u in pos]
        self.neg_kinks = [u[0] for u in neg]
        self.pos, self.neg = pos, neg
        zero = mpq(0)
        # a positive-slope unit is active above its kink: the active ones are a prefix
        self.pos_a = [zero, *accumulate(u[2] for u in pos)]
        self.pos_b = [zero, *accumulate(u[3] for u in pos)]
        # a negative-slope unit is active below its kink: the active ones are a suffix
        self.neg_a = [zero, *accumulate(u[2] for u in reversed(neg))]
        self.neg_b = [zero, *accumulate(u[3] for u in reversed(neg))]

    def value(self, x: arb, lo: mpq, hi: mpq, unit_ball) -> arb:
        """Σ_j c_j·ReLU(pre_j(x)) over this row's units."""
        i_lo = bisect_right(self.pos_kinks, lo)  # kinks ≤ lo: active on the whole enclosure
        i_hi = bisect_left(self.pos_kinks, hi)  # kinks ≥ hi: zero on it
        k_lo = bisect_right(self.neg_kinks, lo)  # kinks ≤ lo: zero on it
        k_hi = bisect_left(self.neg_kinks, hi)  # kinks ≥ hi: active on it
        n_neg = len(self.neg)
        a = self.pos_a[i_lo] + self.neg_a[n_neg - k_hi]
        b = self.pos_b[i_lo] + self.neg_b[n_neg - k_hi]
        total = to_ball(a) * x + to_ball(b)
        for unit in self.pos[i_lo:i_hi] + self.neg[k_lo:k_hi]:
            total += unit_ball(unit[1], x) * unit[4]
        return total


class RankOneFFN:
    """The ReLU FFN ``ffn`` (≥ 2 layers, plain or residual) with a rank-one first layer,
    evaluated on the ball of x = wᵀz."""

    def __init__(self, ffn: MLP, w: list[int], factors: list[Fraction]):
        if ffn.activation != "relu" or len(ffn.layers) < 2:
            raise ValueError("the rank-one shortcut evaluates ReLU FFNs of ≥ 2 layers only")
        first, second = ffn.layers[0], ffn.layers[1]
        self.ffn, self.w = ffn, w
        den0 = first.denominator
        self.scale = [mpq(f.numerator, f.denominator * den0) for f in factors]
        self.shift = [mpq(b, den0) for b in first.bias]
        self.rows = [_Row(row, factors, first.bias, den0) for row in second.rows]
        self.second = second

    def _unit(self, j: int, x: arb) -> arb:
        return (to_ball(self.scale[j]) * x + to_ball(self.shift[j])).max(arb(0))

    def layers(self, x: arb, column: list[arb] | None = None) -> list[list[arb]]:
        """The activations after every hidden layer from the second on, then the output (a
        residual FFN adds its input ``column``, whose wᵀ-projection x is)."""
        lo, hi = ball_bounds(x)
        den = arb(self.second.denominator)
        h = [
            (row.value(x, lo, hi, self._unit) + b) / den
            for row, b in zip(self.rows, self.second.bias, strict=True)
        ]
        out = []
        rest = self.ffn.layers[2:]
        for layer in rest:
            h = [v.max(arb(0)) for v in h]
            out.append(h)
            h = _affine(layer, h)
        if self.ffn.residual:
            if column is None:
                raise ValueError("a residual FFN needs its input column")
            h = [a + b for a, b in zip(column, h, strict=True)]
        out.append(h)
        return out


def shortcut(model: Transformer) -> RankOneFFN | None:
    """The :class:`RankOneFFN` of a model that is one softmax or uniform attention layer and one
    ReLU FFN with a rank-one first layer on raw tokens (and an optional read-out map), else None
    (evaluate it with the ball evaluator). The attention and the read-out map are the ball
    evaluator's own (every mask and score kind)."""
    subs = model.sublayers
    if (
        len(subs) != 2
        or not isinstance(subs[0], Attention)
        or subs[0].score not in ("softmax", "uniform")
        or not isinstance(subs[1], MLP)
        or subs[1].activation != "relu"
        or len(subs[1].layers) < 2
        or model.embed is not None
        or model.token_inputs
    ):
        return None
    found = rank_one_direction(subs[1].layers[0])
    return None if found is None else RankOneFFN(subs[1], *found)


def _affine(a: Affine, v: list[arb]) -> list[arb]:
    den = arb(a.denominator)
    res = []
    for row, b in zip(a.rows, a.bias, strict=True):
        acc = arb(b)
        for col, coeff in row:
            acc = acc + v[col] * coeff
        res.append(acc / den)
    return res
