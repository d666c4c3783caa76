"""An oracle for exactmem models, independent of both evaluators.

Written from the IR's definition (``exactmem.core.model``) with :class:`fractions.Fraction` and
plain
lists: no NumPy, no gmpy2, no python-flint, nothing from ``exactmem.evaluate``. Every sequence is
evaluated position by position, nothing is shared or cached, so the code can be read against the
definition line by line:

* the input column of a token is its vocabulary vector, or the one-hot vector e_x of its id
  (``token_inputs``), then ``E_in`` (affine, with bias);
* an :class:`MLP` is ``L_k ∘ σ ∘ … ∘ σ ∘ L_1`` with σ ReLU, GELU x·Φ(x) or its tanh form
  (intervals from mpmath at the interval precision plus a margin, on GELU's monotone pieces),
  plus its input when residual;
* a :class:`LayerNorm` is ``gain ⊙ (x − μ)/√(σ² + eps) + bias`` (biased variance), on the whole
  column or from ``source`` into ``target``; exact when the root is rational;
* a :class:`PositionalEncoding` adds ``table[k]`` to the column at position k;
* an :class:`Attention` sub-layer adds ``Σ_h W_O W_V Z a_h`` to Z, where the weights a_h of a
  query column are 1/|keys| (``uniform``), 1/|I| on the maximisers I of the scores
  ``⟨W_K z_k, W_Q z_q⟩`` (``hardmax``, ties averaged) or softmax of the scores divided by
  √scale; with mask
  ``context`` the last position is not a key, with ``causal`` position q reads 0..q;
* ``E_out`` (affine, with bias) gives the outputs.

Softmax of unequal scores is transcendental: from there on values are ``mpmath.iv`` intervals
(outward rounded, at a chosen precision) and a label is decided only when its interval is on one
side. Softmax of equal exact scores is exactly 1/|keys|.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import mpmath
from mpmath import iv, libmp

from exactmem.core.model import MLP, Affine, Attention, LayerNorm, PositionalEncoding, Transformer

__all__ = ["Judgement", "Undecided", "bounds", "judge", "run"]


class Undecided(Exception):
    """An interval is too wide to decide a discrete choice (a hardmax maximiser)."""


def _interval(q: Fraction):
    return iv.mpf(q.numerator) / q.denominator


def _lift(x):
    return _interval(x) if isinstance(x, Fraction) else x


def _exact(*xs) -> bool:
    return all(isinstance(x, Fraction) for x in xs)


def add(x, y):
    return x + y if _exact(x, y) else _lift(x) + _lift(y)


def mul(x, y):
    return x * y if _exact(x, y) else _lift(x) * _lift(y)


def bounds(x) -> tuple[Fraction, Fraction]:
    """Exact rational lower and upper bounds of a value (itself when exact)."""
    if isinstance(x, Fraction):
        return x, x
    lo, hi = (libmp.to_rational(end) for end in x._mpi_)
    return Fraction(int(lo[0]), int(lo[1])), Fraction(int(hi[0]), int(hi[1]))


def relu(x):
    if isinstance(x, Fraction):
        return max(x, Fraction(0))
    lo, hi = bounds(x)
    if lo >= 0:
        return x
    if hi <= 0:
        return Fraction(0)
    return iv.mpf([0, x.b])


GELU_MIN = Fraction(-8, 10)  # both GELUs decrease up to their minimum (≈ −0.75), then rise


def _gelu_point(x: Fraction, tanh: bool) -> tuple:
    """An interval around GELU(x) (x·Φ(x), or ``tanh``: ½x(1 + tanh(√(2/π)(x + 0.044715x³)))):
    mpmath at the interval precision + 40 bits, widened by 2^-(precision) (its error is far
    below that)."""
    with mpmath.workprec(iv.prec + 40):
        z = mpmath.mpf(x.numerator) / x.denominator
        if tanh:
            cubic = mpmath.mpf(44715) / 10**6
            v = z * (1 + mpmath.tanh(mpmath.sqrt(2 / mpmath.pi) * (z + cubic * z**3))) / 2
        else:
            v = z * mpmath.ncdf(z)
        slack = mpmath.ldexp(1, -iv.prec) * (1 + abs(v))
        return v - slack, v + slack


def gelu(x, tanh: bool = False):
    """GELU(x) as an interval (exact 0 at an exact 0)."""
    if isinstance(x, Fraction) and x == 0:
        return Fraction(0)
    lo, hi = bounds(x)
    a, b = _gelu_point(lo, tanh), _gelu_point(hi, tanh)
    if hi <= GELU_MIN:  # decreasing
        return iv.mpf([b[0], a[1]])
    if lo >= 0:  # increasing (and GELU(0) = 0 in between is covered by the endpoints)
        return iv.mpf([a[0], b[1]])
    # the minimum of GELU (≈ −0.17) may lie inside: −0.2 bounds it from below
    return iv.mpf([min(a[0], b[0], mpmath.mpf(-0.2)), max(a[1], b[1])])


def layer_norm(ln: LayerNorm, x: list) -> list:
    """The layer norm of one column (whole, or ``source`` lanes into ``target`` lanes)."""
    if ln.source is not None and ln.target is not None:
        out = list(x)
        out[ln.target : ln.target + ln.width] = layer_norm(
            LayerNorm(ln.gain, ln.bias, ln.eps), x[ln.source : ln.source + ln.width]
        )
        return out
    w = len(x)
    mean = Fraction(0)
    for v in x:
        mean = add(mean, v)
    mean = mul(mean, Fraction(1, w))
    centred = [add(v, mul(Fraction(-1), mean)) for v in x]
    spread = _fraction(ln.eps)
    for c in centred:
        square = c * c if isinstance(c, Fraction) else c**2  # an interval's square is ≥ 0
        spread = add(spread, mul(Fraction(1, w), square))
    root = None
    if isinstance(spread, Fraction):
        p, q = spread.numerator, spread.denominator
        rp, rq = libmp.isqrt(p), libmp.isqrt(q)
        if rp * rp == p and rq * rq == q:
            root = Fraction(int(rp), int(rq))
    if root is None:
        root = iv.sqrt(_lift(spread))
        inverse = 1 / root
    else:
        inverse = Fraction(1) / root
    return [
        add(mul(mul(_fraction(g), c), inverse), _fraction(b))
        for g, c, b in zip(ln.gain, centred, ln.bias, strict=True)
    ]


def affine(a: Affine, x: Sequence) -> list:
    """``(W·x + b) / denominator``, entry by entry."""
    assert len(x) == a.in_dim, (len(x), a.in_dim)
    out = []
    for row, b in zip(a.rows, a.bias, strict=True):
        acc = Fraction(b, a.denominator)
        for col, coeff in row:
            acc = add(acc, mul(Fraction(coeff, a.denominator), x[col]))
        out.append(acc)
    return out


def mlp(m: MLP, x: list) -> list:
    h = x
    for i, layer in enumerate(m.layers):
        h = affine(layer, h)
        if i < len(m.layers) - 1:
            if m.activation == "relu":
                h = [relu(v) for v in h]
            else:
                h = [gelu(v, tanh=m.activation == "gelu_tanh") for v in h]
    return [add(a, b) for a, b in zip(x, h, strict=True)] if m.residual else h


def dot(u: Sequence, v: Sequence):
    acc = Fraction(0)
    for a, b in zip(u, v, strict=True):
        acc = add(acc, mul(a, b))
    return acc


def _weights(score: str, scores: list, scale: int = 1) -> list:
    """Attention weights of one query column over its keys."""
    n = len(scores)
    if score == "uniform":
        return [Fraction(1, n)] * n
    if _exact(*scores) and all(s == scores[0] for s in scores):
        return [Fraction(1, n)] * n  # hardmax and softmax alike
    if score == "hardmax":
        if not _exact(*scores):
            spans = [bounds(s) for s in scores]
            floor = max(lo for lo, _ in spans)
            left = [k for k, (_, hi) in enumerate(spans) if hi >= floor]
            if len(left) != 1:
                raise Undecided("hardmax over interval scores")
            return [Fraction(int(k == left[0])) for k in range(n)]
        top = max(scores)
        tied = [s == top for s in scores]
        return [Fraction(1, sum(tied)) if t else Fraction(0) for t in tied]
    # softmax: w_k = 1 / Σ_j exp((s_j − s_k)/√scale); each difference exact when the scores are
    weights = []
    shrink = 1 / iv.sqrt(scale) if scale != 1 else Fraction(1)
    for sk in scores:
        total = iv.mpf(0)
        for sj in scores:
            total += iv.exp(_lift(mul(shrink, add(sj, mul(Fraction(-1), sk)))))
        weights.append(1 / total)
    return weights


def attention(att: Attention, cols: list[list]) -> list[list]:
    n = len(cols)
    every = list(range(n - 1)) if att.mask == "context" and n > 1 else list(range(n))
    new = [list(c) for c in cols]
    for h in att.heads:
        values = [affine(h.value, c) for c in cols]
        for q in range(n):
            keys = list(range(q + 1)) if att.mask == "causal" else every
            query = affine(h.query, cols[q])
            scores = [dot(affine(h.key, cols[k]), query) for k in keys]
            weights = _weights(att.score, scores, att.scale)
            mixed = [Fraction(0)] * h.value.out_dim
            for k, w in zip(keys, weights, strict=True):
                mixed = [add(m, mul(w, v)) for m, v in zip(mixed, values[k], strict=True)]
            delta = affine(h.output, mixed)
            new[q] = [add(a, b) for a, b in zip(new[q], delta, strict=True)]
    return new


def _fraction(x) -> Fraction:
    return Fraction(int(x.numerator), int(x.denominator))


def run_sequence(model: Transformer, vocab: Sequence, seq: Sequence[int]) -> list[list]:
    """The output columns at every position of one sequence."""
    if model.token_inputs:
        cols = [[Fraction(int(t == j)) for j in range(model.input_dim)] for t in seq]
    else:
        cols = [[_fraction(x) for x in vocab[t]] for t in seq]
    if model.embed:
        cols = [affine(model.embed, c) for c in cols]
    for sub in model.sublayers:
        if isinstance(sub, MLP):
            cols = [mlp(sub, c) for c in cols]
        elif isinstance(sub, PositionalEncoding):
            if len(cols) > len(sub.table):
                raise ValueError("the positional encoding is shorter than the sequence")
            cols = [
                [add(a, _fraction(b)) for a, b in zip(c, sub.table[k], strict=True)]
                for k, c in enumerate(cols)
            ]
        elif isinstance(sub, LayerNorm):
            cols = [layer_norm(sub, c) for c in cols]
        else:
            cols = attention(sub, cols)
    if model.unembed:
        cols = [affine(model.unembed, c) for c in cols]
    return cols


def run(model: Transformer, dataset, *, precision: int = 256) -> list[list]:
    """The judged output column of every example: the point's, or the last position's."""
    old = iv.prec
    iv.prec = precision
    try:
        if dataset.task == "points":
            return [run_sequence(model, [p], [0])[0] for p in dataset.points]
        return [run_sequence(model, dataset.vocab, s)[-1] for s in dataset.sequences]
    finally:
        iv.prec = old


def _label(col: list, y: int, readout: str, tolerance: Fraction) -> bool | None:
    """True: the label is reproduced; False: it is not; None: the intervals cannot tell."""
    if readout == "classification":
        if not 1 <= y <= len(col):
            return False
        verdict: bool | None = True
        for c, other in enumerate(col):
            if c != y - 1:
                lo, hi = bounds(add(col[y - 1], mul(Fraction(-1), other)))
                if hi <= 0:
                    return False
                if lo <= 0:
                    verdict = None
        return verdict
    if len(col) != 1:
        return False
    lo, hi = bounds(add(col[0], Fraction(-y)))  # |output − label| ≤ tolerance, 0: equality
    if -tolerance <= lo and hi <= tolerance:
        return True
    return False if lo > tolerance or hi < -tolerance else None


@dataclass(frozen=True)
class Judgement:
    """Per label: True reproduced, False not, None undecided at every precision tried."""

    labels: tuple[bool | None, ...]
    outputs: tuple[tuple, ...]
    precision: int

    @property
    def verified(self) -> bool:
        return all(v is True for v in self.labels)

    @property
    def refuted(self) -> bool:
        return any(v is False for v in self.labels)


def judge(
    model: Transformer,
    dataset,
    *,
    readout: str = "regression",
    tolerance: Fraction = Fraction(0),
    precisions: Sequence[int] = (256, 1024, 4096),
) -> Judgement:
    """Whether the model reproduces every label of ``dataset`` (next-token: at the last
    position), raising the interval precision while some label is undecided."""
    result = None
    for precision in precisions:
        try:
            outputs = run(model, dataset, precision=precision)
        except Undecided:
            continue
        labels = tuple(
            _label(col, y, readout, tolerance)
            for col, y in zip(outputs, dataset.labels, strict=True)
        )
        result = Judgement(labels, tuple(tuple(c) for c in outputs), precision)
        if None not in labels:
            break
    if result is None:
        raise Undecided("hardmax over interval scores at every precision")
    return result
