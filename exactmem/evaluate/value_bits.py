"""A bound on the bits of every number an exact evaluation of a model can produce, before it runs.

Weights are exact integers over one denominator per layer, and an exact evaluation carries every
value as an integer numerator over the stream's common denominator: numbers that compound
across layers grow without any one weight being large. A width-one MLP of 880 layers whose
weights have 140 hex digits (a 1 KB ``.json.gz``) produces a 490 000-bit output, and 25 000
layers of 30 digits 3 million bits; evaluating them costs minutes and gigabytes. The digit cap
on each number of a file (``--max-digits``) bounds a weight, not what the weights compound to.

So before evaluating, :func:`check_value_bits` follows the model once, from the inputs' own
magnitudes, and bounds

* the magnitude |v| ≤ A of every lane after every layer (interval arithmetic:
  ``|W·x + b| / D ≤ (Σ|w|·A + |b|) / D``, σ never grows a magnitude, a residual adds its input),
* the stream's common denominator (the product of the layers' denominators; attention averages
  over at most n keys, so it multiplies the denominator by lcm(1..n), n for uniform weights
  over all keys — Kajitsuka & Sato 2025, eqs. (1), (39)),

and refuses (:class:`~exactmem.core.errors.InputError`, exit 2) a model whose numerators could
exceed
``--max-value-bits`` (:class:`exactmem.core.limits.Limits`). Every numerator either evaluator makes
is
at most A × that denominator — the evaluators reduce by common factors, which only shrinks
them — so the bound holds for the reference and the fast evaluator alike, and the work of an
evaluation is bounded by (weights) × (multiplications of at most that many bits).

Two refinements keep the bound close to the values of the constructions, whose proofs depend on
the very cancellations interval arithmetic misses:

* **Steps.** Units of one layer with the same weights and different biases, σ(z + b₁) and
  σ(z + b₂), read through coefficients that sum to 0 (Σ cₖ·σ(z + bₖ)), make a bounded
  piecewise-linear function of z whatever z's size: constant beyond its breakpoints, so its
  largest |value| is at a breakpoint. Stage II and III of Kajitsuka & Sato 2025's Lemma C.1
  read every step as σ(x − t) − σ(x − t − 1) ∈ [0, 1]; interval arithmetic would double the
  stream's bound at every such layer.
* **Upward rounding.** The bounds are kept as 64-bit binary floats (``gmpy2.mpfr``) rounded
  toward +∞ in every operation on non-negative numbers: each is an upper bound of the exact
  interval bound, at the cost of a few µs per weight, never the exact bound's own growing bits.

Softmax with unequal scores and GELU are never evaluated exactly (the ball evaluator takes
them, at a precision bounded by its own flag); here softmax is bounded as the average it is
where the exact evaluators run it (all scores equal). A layer norm is exact only when the
variance plus eps is a square; the bound covers the squares it computes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import gmpy2
from gmpy2 import mpfr

from exactmem.core.errors import InputError
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    LayerNorm,
    PositionalEncoding,
    Transformer,
)

__all__ = ["ValueBound", "check_value_bits", "value_bits"]

_CONTEXT = gmpy2.context(precision=64, round=gmpy2.RoundUp)


@dataclass(frozen=True)
class ValueBound:
    """The most bits any numerator or denominator of the evaluation can have, and where the
    first value reaching that many is made (``embed``, ``sublayers[3].layers[7]``, …)."""

    bits: int
    where: str


class _Over(Exception):
    def __init__(self, bits: int, where: str):
        self.bits, self.where = bits, where


def _bits(x: mpfr) -> int:
    """Bits of the largest integer ≤ x (x ≥ 0 an upper bound): x < 2^e."""
    if gmpy2.is_infinite(x) or gmpy2.is_nan(x):
        return 1 << 62
    if x < 1:
        return 0
    return int(gmpy2.get_exp(x))


class _Bounds:
    """The pass over the model: lane magnitudes ``A`` and the denominator bound ``D``."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.top = ValueBound(0, "inputs")

    def note(self, bits: int, where: str) -> None:
        if bits > self.top.bits:
            self.top = ValueBound(bits, where)
        if self.limit is not None and bits > self.limit:
            raise _Over(bits, where)

    def numerators(self, A: Sequence[mpfr], D: mpfr, where: str) -> None:
        """Note the numerators of lanes ``A`` over a denominator of at most ``D``."""
        top = max(A, default=mpfr(0))
        self.note(max(_bits(top * D), _bits(D)), where)

    # ---------------------------------------------------------------- maps

    def affine(self, a: Affine, A: Sequence[mpfr], D: mpfr, where: str, *, hidden=None):
        """Magnitudes of ``(W·x + b)/den`` and the new denominator bound. ``hidden``: for the
        layer after a σ layer, that layer (its units' rows tell which read the same z)."""
        den = mpfr(a.denominator)
        out = []
        groups = _step_groups(hidden) if hidden is not None else None
        for row, b in zip(a.rows, a.bias, strict=True):
            acc = mpfr(abs(b))
            if groups:
                acc += _row_with_steps(row, A, groups, hidden)
            else:
                for c, w in row:
                    acc += abs(w) * A[c]
            out.append(acc / den)
        D = D * den
        self.numerators(out, D, where)
        return out, D


def _step_groups(layer: Affine) -> dict[int, tuple[int, list[int]]]:
    """Units of ``layer`` whose rows are equal (same columns and weights), by unit: (group id,
    the group's units). Singletons are left out."""
    by_row: dict[tuple, list[int]] = {}
    for u, row in enumerate(layer.rows):
        if row:
            by_row.setdefault(row, []).append(u)
    out: dict[int, tuple[int, list[int]]] = {}
    for g, units in enumerate(by_row.values()):
        if len(units) > 1:
            for u in units:
                out[u] = (g, units)
    return out


def _row_with_steps(row, A, groups, hidden: Affine) -> mpfr:
    """Σ|w|·A over a row reading σ units, the terms on units of one step group bounded as the
    piecewise-linear function they make (:func:`_step_sup`) when that is smaller."""
    acc = mpfr(0)
    seen: dict[int, list[tuple[int, int]]] = {}
    for c, w in row:
        got = groups.get(c)
        if got is None:
            acc += abs(w) * A[c]
        else:
            seen.setdefault(got[0], []).append((c, w))
    for terms in seen.values():
        plain = sum((abs(w) * A[c] for c, w in terms), mpfr(0))
        if len(terms) > 1:
            plain = min(plain, _step_sup(terms, groups[terms[0][0]][1], A, hidden))
        acc += plain
    return acc


def _step_sup(terms: list[tuple[int, int]], group: list[int], A, hidden: Affine) -> mpfr:
    """A bound on |Σ cₖ·σ(z + bₖ)| (times the layer's denominator) for units k of ``hidden``
    sharing one row z. With S = Σ cₖ and j the group's unit of least bound,

        Σ cₖ·σ(z + bₖ) = S·σ(z + bⱼ) + g(z),  g = Σ cₖ·σ(z + bₖ) − S·σ(z + bⱼ),

    and g's coefficients sum to 0: g is 0 below every breakpoint −bₖ, constant above them
    all, linear between, so sup |g| is its largest |value| at a breakpoint (exact integers).
    Stage III of Lemma C.1 reads hi − lo plus the carried integer σ(z) this way."""
    j = min(group, key=lambda u: A[u])
    total = sum(w for _, w in terms)
    coef: dict[int, int] = {}
    for c, w in terms:
        coef[c] = coef.get(c, 0) + w
    coef[j] = coef.get(j, 0) - total
    # breakpoints t = −b ascending; at t the units with −bₖ ≤ t are active and
    # g(t) = (Σ active cₖ)·t + Σ active cₖ·bₖ (one sweep: a group may have thousands of units)
    points = sorted((-hidden.bias[c], w) for c, w in coef.items() if w)
    best = slope = offset = 0
    for i, (t, w) in enumerate(points):
        slope += w
        offset -= w * t
        if i + 1 == len(points) or points[i + 1][0] != t:
            best = max(best, abs(slope * t + offset))
    return abs(total) * A[j] + mpfr(best) / hidden.denominator


def _table(a: Affine, bounds: _Bounds) -> tuple[list[mpfr], mpfr]:
    """Magnitudes of an embedding table's columns plus its bias: |E·e_x + b| ≤ max|w| + |b|
    row by row (one token's one-hot vector reads one column)."""
    out = [
        (mpfr(max((abs(w) for _, w in row), default=0)) + abs(b)) / a.denominator
        for row, b in zip(a.rows, a.bias, strict=True)
    ]
    D = mpfr(a.denominator)
    bounds.numerators(out, D, "embed")
    return out, D


def _lcm_upto(n: int) -> int:
    return math.lcm(*range(1, n + 1)) if n > 1 else 1


def _mixing_denominator(att: Attention, n: int) -> int:
    """What the average over the keys multiplies the denominator by: the number of keys for
    uniform (and all-equal softmax) weights over every key, lcm(1..n) when the count varies
    (hardmax ties, causal masks)."""
    keys = n - 1 if att.mask == "context" and n > 1 else n
    if att.mask == "causal" or att.score == "hardmax":
        return _lcm_upto(keys)
    return max(keys, 1)


def _pass(model: Transformer, A: list[mpfr] | None, D: mpfr, n: int, bounds: _Bounds) -> None:
    if A is None:  # one-hot token ids: the embedding of x is column x of the table
        if model.embed is None:
            raise ValueError("token inputs need an embedding table")
        A, D = _table(model.embed, bounds)
    else:
        bounds.numerators(A, D, "inputs")
        if model.embed is not None:
            A, D = bounds.affine(model.embed, A, D, "embed")
    for si, sub in enumerate(model.sublayers):
        here = f"sublayers[{si}]"
        if isinstance(sub, MLP):
            H, hD = A, D
            prev = None
            for li, layer in enumerate(sub.layers):
                H, hD = bounds.affine(layer, H, hD, f"{here}.layers[{li}]", hidden=prev)
                relu = sub.activation == "relu" and li < len(sub.layers) - 1
                prev = layer if relu else None
                for p in sub.probes:
                    if p.layer == li:
                        acc = sum((abs(w) * H[c] for c, w in p.terms), mpfr(0))
                        bounds.numerators([acc], hD, f"{here}.probes")
            if sub.residual:
                A = [x + h for x, h in zip(A, H, strict=True)]
            else:
                A = H
            D = hD
            bounds.numerators(A, D, here)
        elif isinstance(sub, Attention):
            factor = mpfr(_mixing_denominator(sub, n))
            new = list(A)
            for h in sub.heads:
                V, vD = bounds.affine(h.value, A, D, f"{here}.value")
                O, _ = bounds.affine(h.output, V, vD * factor, f"{here}.output")
                new = [x + o for x, o in zip(new, O, strict=True)]
                factor *= h.value.denominator * h.output.denominator
                if sub.score != "uniform":
                    Q, _ = bounds.affine(h.query, A, D, f"{here}.query")
                    K, _ = bounds.affine(h.key, A, D, f"{here}.key")
                    score = sum((q * k for q, k in zip(Q, K, strict=True)), mpfr(0))
                    qd = D * h.query.denominator
                    kd = D * h.key.denominator
                    bounds.numerators([score], qd * kd, f"{here}.scores")
            A, D = new, D * factor
            bounds.numerators(A, D, here)
        elif isinstance(sub, PositionalEncoding):
            lcm = math.lcm(*(int(v.denominator) for row in sub.table for v in row), 1)
            top = [
                max((abs(mpfr(row[j])) for row in sub.table), default=mpfr(0))
                for j in range(sub.width)
            ]
            A = [x + t for x, t in zip(A, top, strict=True)]
            D = D * lcm
            bounds.numerators(A, D, here)
        else:
            A, D = _layer_norm(sub, A, D, here, bounds)
    if model.unembed is not None:
        bounds.affine(model.unembed, A, D, "unembed")


def _layer_norm(ln: LayerNorm, A, D, here: str, bounds: _Bounds):
    """|(x − μ)/√(σ² + eps)| ≤ √w for each of the w entries (Σ(x − μ)² = w·σ²), so
    |y| ≤ |gain|·√w + |bias|. The exact evaluator squares the centred entries: σ² + eps = P/Q
    with P ≤ w·(2w·N)²·den(eps) + num(eps)·w³·D², and (when it is a square) divides by a root
    of at most √P, over denominators w·D·√P·lcm(den(gain))·lcm(den(bias))."""
    w = ln.width
    lo = ln.source if ln.source is not None else 0
    N = max(A[lo : lo + w], default=mpfr(0)) * D
    eps_n, eps_d = int(ln.eps.numerator), int(ln.eps.denominator)
    P = w * (2 * w * N) ** 2 * eps_d + eps_n * mpfr(w) ** 3 * D * D
    bounds.numerators([P], mpfr(w) ** 3 * D * D * eps_d, f"{here} (variance)")
    lg = math.lcm(*(int(g.denominator) for g in ln.gain))
    lb = math.lcm(*(int(b.denominator) for b in ln.bias))
    new_den = w * D * gmpy2.sqrt(P) * lg * lb
    root_w = gmpy2.sqrt(mpfr(w))
    normed = [abs(mpfr(g)) * root_w + abs(mpfr(b)) for g, b in zip(ln.gain, ln.bias, strict=True)]
    if ln.target is None:
        A, D = normed, new_den
    else:
        A = list(A)
        A[ln.target : ln.target + w] = normed
        D = D * new_den
    bounds.numerators(A, D, here)
    return A, D


def value_bits(
    model: Transformer,
    inputs: Sequence[int] | None,
    den: int,
    n: int,
    *,
    limit: int | None = None,
) -> ValueBound:
    """The bound for ``model`` on inputs whose lane j has numerators of magnitude at most
    ``inputs[j]`` over ``den`` (None: one-hot token ids read by the embedding table), in
    sequences of ``n`` tokens. With ``limit`` the pass stops at the first value over it (the
    bound returned is then that value's)."""
    bounds = _Bounds(limit)
    with gmpy2.context(_CONTEXT):
        A = None if inputs is None else [mpfr(m) / den for m in inputs]
        try:
            _pass(model, A, mpfr(den), n, bounds)
        except _Over as over:
            return ValueBound(over.bits, over.where)
    return bounds.top


def check_value_bits(
    model: Transformer, inputs: Sequence[int] | None, den: int, n: int, limit: int
) -> ValueBound:
    """:func:`value_bits`, refusing (:class:`InputError`) a model whose values could exceed
    ``limit`` bits."""
    got = value_bits(model, inputs, den, n, limit=limit)
    if got.bits > limit:
        raise InputError(
            f"model: its values could reach {got.bits} bits at {got.where} (an upper bound "
            "from the sizes of the inputs and the weights, the widths and the depth, before "
            f"evaluating), more than the limit of {limit} bits (--max-value-bits N raises it)"
        )
    return got
