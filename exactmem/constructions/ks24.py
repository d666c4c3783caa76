"""Kajitsuka & Sato 2024 (ICLR): one softmax self-attention layer with a single head of rank-one
weights is a contextual mapping (softmax attention as the Boltzmann operator), and one token-wise
FFN after it memorizes N seq-to-seq pairs with O(d(2nN + d)) parameters.

RECONSTRUCTED: only the paper's abstract was available to us. The model form (rank-one W_Q,
W_K, W_V ∈ Q^{1×d}, W_O ∈ Q^{d×1}, the residual attention Z + W_O W_V Z softmax((W_K Z)ᵀ W_Q Z)),
the projection step and the FFN reading "about two ReLU units per context id" are our
reconstruction of it; the choices of v, λ, β and the exact re-quantizer are ours. Step by step:

1. hypothesis, checked exactly (:mod:`exactmem.datasets.separation`): tokenwise (r_min, r_max, ε)-
   separated tokens, pairwise distinct within each sequence; labels a function of (token,
   multiset of the sequence), as in any permutation-equivariant model;
2. projection: an integer direction v with s = vᵀz distinct on the distinct tokens (the paper
   draws a random unit v with |vᵀ(z − z′)| ≥ √(8/(πd))·‖z − z′‖/|V|²; distinctness, checked
   exactly, is what the rest uses);
3. attention, one head: W_Q = λvᵀ, W_K = W_V = vᵀ, W_O = u with vᵀu = β. Token k of a sequence
   receives u·b_k, b_k = Σ_l s_l e^{λ s_k s_l} / Σ_l e^{λ s_k s_l} — the Boltzmann operator
   of the scores λ s_k s (divided by λ s_k) — so its *context id* is c_k = vᵀ(z_k + u b_k) =
   s_k + β b_k. β ≤ (least gap of the s values) / (4·their range) keeps the ids of different
   tokens apart; the tilted mean b_k separates one token's occurrences in different sequences.
   The paper bounds the least gap δ between ids of different (sequence, token) classes from
   below by an exponentially small worst case; here the gap is *measured*: the ids are
   enclosed in Arb balls and λ (a power of two: λ₀, then λ₀/4 and 4λ₀) and the precision are
   chosen so that the enclosures of different classes are disjoint with room to spare;
4. FFN (the paper's "two ReLU units per id", its exact form ours): for each id threshold t_j
   between consecutive classes with different labels, the ramp
   ReLU(M(vᵀz − t_j) + 1) − ReLU(M(vᵀz − t_j)), 0 below t_j − 1/M and 1 above t_j, adds the label
   step Δ_j to a label lane y'. On balls the ramps are exact only where they are 0, so y' is the
   label up to a tiny radius; the FFN's last layers *re-quantize* it: h_c = ReLU(4(c + ½ − y'))
   and g_c = ReLU(1 − h_c) are exactly 0 or 1 when y' lies within ¼ of an integer, and the
   output y_lo + Σ_c g_c is the label exactly. The thresholds sit ≥ 2·radius off every ramp and
   the precision is raised until the lane's error bound is below 1/16.

Parameters: W_Q, W_K, W_V (1 × d) and W_O (d × 1): 4d, rank one; the FFN: 2K(d + 1) for the
ramps (K ≤ nN − 1 thresholds), 2K + 1 for the lane and O(C²) for the re-quantization — the
paper's O(d(2nN + d)) with C labels; depth 1 + 5.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flint import arb, ctx
from gmpy2 import mpq

from exactmem.core.balls import ball_bounds, ball_midpoint, softmax_balls, to_ball
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.separation import require_separated
from exactmem.datasets.sequences import check_consistency
from exactmem.runtime.progress import Steps

__all__ = ["KS24Witness", "build", "context_ids", "random_instance"]

TEMPERATURE_STEPS = (0, -2, 2)  # λ = 2^j·λ₀: the candidates, in the order tried
START_PRECISION = 128
DEFAULT_PRECISION_LIMIT = 4096
DIRECTION_ATTEMPTS = 6
# A given temperature's denominator has at most this many bits: the option's 64 characters of
# p/q hold less, a decimal exponent (1e-9999) more; plugins/ks24.py's max_bits bound reads it
TEMPERATURE_DENOMINATOR_BITS = 256
# The FFN's slope M is at most 2^(precision + SLOPE_ROOM)·n·lcd²·(⌈spread⌉ + 1) (_slope_cap):
# what bounds its bits (plugins/ks24.py's max_bits), far above what a certified gap needs
SLOPE_ROOM = 16


@dataclass(frozen=True)
class KS24Witness:
    """What the construction intends (untrusted): the direction, temperature, value scale,
    the re-quantizer's slope and thresholds, and the gap it measured on its own balls."""

    direction: tuple[int, ...]
    temperature: mpq
    beta: mpq
    slope: int
    thresholds: tuple[mpq, ...]
    classes: int
    gap: mpq
    radius: mpq
    precision: int


def _pow2_at_most(q: mpq) -> mpq:
    """The largest power of two ≤ q (q > 0), exact."""
    e = int(q.numerator).bit_length() - int(q.denominator).bit_length()
    p = mpq(2) ** e if e >= 0 else mpq(1, 2 ** (-e))
    while p > q:
        p /= 2
    while p * 2 <= q:
        p *= 2
    return p


def _direction(vectors: list[tuple[mpq, ...]], rng: random.Random) -> list[int]:
    """An integer v (entries in [−B, B], B = max(|V|², 4)) with vᵀz distinct on the vectors."""
    d = len(vectors[0])
    B = max(len(vectors) ** 2, 4)
    for _ in range(64):
        v = [rng.randint(-B, B) for _ in range(d)]
        if any(v) and len(
            {sum((a * x for a, x in zip(v, z, strict=True)), mpq(0)) for z in vectors}
        ) == len(vectors):
            return v
    raise InputError("no integer direction separates the distinct tokens in 64 draws")


def context_ids(projected: list[list[mpq]], lam: mpq, beta: mpq, precision: int) -> list[list[arb]]:
    """c_k = s_k + β·Σ_l softmax_l(λ s_k s) s_l for every sequence of projected tokens s, on
    Arb balls at ``precision`` bits (the construction's own estimate; the verifier measures the
    model's)."""
    old = ctx.prec
    ctx.prec = precision
    try:
        b_ball = to_ball(beta)
        out = []
        for s in projected:
            balls = [to_ball(x) for x in s]
            row = []
            for sk, bk in zip(s, balls, strict=True):
                w = softmax_balls([to_ball(lam * sk * x) for x in s])
                mean = sum((a * b for a, b in zip(w, balls, strict=True)), arb(0))
                row.append(bk + b_ball * mean)
            out.append(row)
        return out
    finally:
        ctx.prec = old


def _hulls(ids, keys, labels):
    """Per class: (lo, hi, label), sorted; the largest radius; None if two classes overlap."""
    hull: dict = {}
    radius = mpq(0)
    for row, krow, yrow in zip(ids, keys, labels, strict=True):
        for c, key, y in zip(row, krow, yrow, strict=True):
            if not c.is_finite():
                return None, None
            lo, hi = ball_bounds(c)
            radius = max(radius, (hi - lo) / 2)
            if key in hull:
                a, b, _ = hull[key]
                hull[key] = (min(a, lo), max(b, hi), y)
            else:
                hull[key] = (lo, hi, y)
    ordered = sorted(hull.values())
    for (_, hi, _), (lo, _, _) in zip(ordered, ordered[1:], strict=False):
        if hi >= lo:
            return None, radius
    return ordered, radius


def _midpoint_gap(ids, keys) -> mpq | None:
    mids: dict = {}
    for row, krow in zip(ids, keys, strict=True):
        for c, key in zip(row, krow, strict=True):
            if c.is_finite():
                mids.setdefault(key, ball_midpoint(c))
    values = sorted(mids.values())
    gaps = [b - a for a, b in zip(values, values[1:], strict=False)]
    return min(gaps) if gaps else None


def _search(projected, keys, labels, beta, lam0, limit, fixed: bool = False):
    """The first (λ, precision, hulls, radius, gap) whose class hulls are disjoint with gaps ≥
    16·radius: λ₀, λ₀/4, 4λ₀ at each precision (λ₀ alone when ``fixed``), the least precision
    first."""
    precision = min(START_PRECISION, limit)
    while precision <= limit:
        for j in (0,) if fixed else TEMPERATURE_STEPS:
            lam = lam0 * (mpq(2) ** j if j >= 0 else mpq(1, 2 ** (-j)))
            ids = context_ids(projected, lam, beta, precision)
            ordered, radius = _hulls(ids, keys, labels)
            if ordered is None:
                continue
            gaps = [b[0] - a[1] for a, b in zip(ordered, ordered[1:], strict=False)]
            gap = min(gaps) if gaps else mpq(1)
            if gap > 16 * radius:
                return lam, precision, ordered, radius, gap
        precision *= 2
    return None


def _merge_hulls(ids, keys, labels):
    """(hulls, radius) as :func:`_hulls`, with the classes whose hulls overlap merged (the
    label of the lowest); (None, None) when an id is not finite."""
    hull: dict = {}
    radius = mpq(0)
    for row, krow, yrow in zip(ids, keys, labels, strict=True):
        for c, key, y in zip(row, krow, yrow, strict=True):
            if not c.is_finite():
                return None, None
            lo, hi = ball_bounds(c)
            radius = max(radius, (hi - lo) / 2)
            a, b, _ = hull.get(key, (lo, hi, y))
            hull[key] = (min(a, lo), max(b, hi), y)
    ordered: list = []
    for lo, hi, y in sorted(hull.values()):
        if ordered and lo <= ordered[-1][1]:
            a, b, z = ordered[-1]
            ordered[-1] = (a, max(b, hi), z)
        else:
            ordered.append((lo, hi, y))
    return ordered, radius


def _merged(projected, keys, labels, beta, lam, limit):
    """(λ, precision, hulls, radius, gap) at the user's λ with the classes whose hulls overlap
    merged: a model the verifier judges — it refutes where merged classes carry different
    labels or their ids collide. None when even then no gap ≥ 16·radius separates them."""
    precision = min(START_PRECISION, limit)
    while precision <= limit:
        ordered, radius = _merge_hulls(context_ids(projected, lam, beta, precision), keys, labels)
        if ordered is None:
            return None
        gaps = [b[0] - a[1] for a, b in zip(ordered, ordered[1:], strict=False)]
        gap = min(gaps) if gaps else mpq(1)
        if gap > 16 * radius:
            return lam, precision, ordered, radius, gap
        precision *= 2
    return None


def _needed_precision(projected, keys, beta, lam0, limit: int, scale: mpq) -> str:
    """The bits a certified gap would need: the least midpoint gap between classes, measured
    once at a precision above the limit, against the ids' magnitude (with 16 bits of room)."""
    probe = min(max(4 * limit, 512), 1 << 16)
    g = _midpoint_gap(context_ids(projected, lam0, beta, probe), keys)
    if not g:
        return f"two classes share one context id to {probe} bits: their gap may be zero"
    bits = int(scale.numerator).bit_length() - int(scale.denominator).bit_length()
    bits += int(g.denominator).bit_length() - int(g.numerator).bit_length() + 16
    return f"about {max(bits, 64)} bits would be needed (--set precision=…)"


def build(
    dataset: Dataset, options: dict, *, progress: Callable[..., Any] | None = None
) -> tuple[Transformer, KS24Witness]:
    """``build --construction ks24``; ``progress`` hears the named steps (one per direction
    tried)."""
    steps = Steps(progress, "building ks24", 4)
    steps.step("tokenwise separatedness")
    if dataset.task != "seq2seq":
        raise InputError(f"ks24 memorizes seq-to-seq data (task seq2seq), got {dataset.task!r}")
    check_consistency(dataset, "seq2seq")
    require_separated(
        dataset,
        allow_repeats=bool(options.get("allow_repeats")),
        r_min=_opt(options, "r_min"),
        r_max=_opt(options, "r_max"),
        epsilon=_opt(options, "epsilon"),
    )
    limit = int(options.get("precision", DEFAULT_PRECISION_LIMIT))
    rng = random.Random(options.get("seed", 0))
    canon: dict[tuple, int] = {}
    for seq in dataset.sequences:
        for t in seq:
            canon.setdefault(tuple(dataset.vocab[t]), len(canon))
    vectors = list(canon)
    keys = []
    for seq in dataset.sequences:
        toks = [canon[tuple(dataset.vocab[t])] for t in seq]
        ms = tuple(sorted(toks))
        keys.append([(ms, t) for t in toks])
    residual = _form(options, dataset.dim)
    if residual:  # lane 0 of F(z) = z + …: the FFN adds label − z₀, z₀ the token's coordinate
        labels = [
            tuple(mpq(y) - dataset.vocab[t][0] for y, t in zip(ys, seq, strict=True))
            for ys, seq in zip(dataset.labels, dataset.sequences, strict=True)
        ]
        if len({x for row in labels for x in row}) == 1:  # the checklist refutes a dead FFN
            raise InputError(
                "ks24: with ffn=residual every label is its token's first coordinate plus "
                f"{labels[0][0]}: the FFN would add a constant (no context to map) and is "
                "refuted as dead code; use the default ffn=requantized"
            )
    else:
        labels = [tuple(y) for y in dataset.labels]
    given = _opt(options, "temperature")
    if given is not None and given < 0:
        raise InputError(f"ks24: temperature must be ≥ 0, got {given}")
    if given is not None and int(given.denominator).bit_length() > TEMPERATURE_DENOMINATOR_BITS:
        raise InputError(
            f"ks24: --set temperature: its denominator has more than "
            f"{TEMPERATURE_DENOMINATOR_BITS} bits (the weights' bits are bounded by it)"
        )
    found = None
    for attempt in range(DIRECTION_ATTEMPTS):
        if attempt:
            steps.add(1)
        steps.step(f"direction {attempt + 1}: temperature and precision of the context ids")
        v = _direction(vectors, rng)
        s_of = [sum((a * x for a, x in zip(v, z, strict=True)), mpq(0)) for z in vectors]
        projected = [
            [s_of[canon[tuple(dataset.vocab[t])]] for t in seq] for seq in dataset.sequences
        ]
        ordered_s = sorted(set(s_of))
        spread = ordered_s[-1] - ordered_s[0]
        least = min((b - a for a, b in zip(ordered_s, ordered_s[1:], strict=False)), default=None)
        beta = _pow2_at_most(least / (4 * spread)) if least else mpq(1)
        top = max(abs(x) for x in s_of)
        lam0 = _pow2_at_most(1 / (top * spread)) if spread and top else mpq(1)
        if given is not None:
            lam0 = given
        found = _search(projected, keys, labels, beta, lam0, limit, fixed=given is not None)
        if found is not None:
            break
    else:
        if given is not None:  # the user's λ is kept: classes it does not separate are merged
            found = _merged(projected, keys, labels, beta, given, limit)
            if found is not None:
                classes = len({k for row in keys for k in row})
                warnings.warn(
                    f"ks24: at temperature {given} the context ids of {classes} (multiset, "
                    f"token) classes fall in {len(found[2])} groups not certified apart; each "
                    "group was merged under its lowest class's label (the verifier refutes where "
                    "merged labels differ, or leaves ids it cannot tell apart undecided)",
                    stacklevel=2,
                )
    if found is None:
        scale = max((abs(x) for x in s_of), default=mpq(1)) or mpq(1)
        raise InconclusiveError(
            f"ks24: the context ids of different (sequence, token) classes were not certified "
            f"apart at up to {limit} bits in {DIRECTION_ATTEMPTS} directions; "
            + _needed_precision(projected, keys, beta, lam0, limit, scale)
        )
    lam, precision, ordered, radius, gap = found
    steps.step("the FFN's ramps and re-quantization")
    n = len(dataset.sequences[0])
    lcd = math.lcm(*(int(x.denominator) for z in vectors for x in z))
    cap = _slope_cap(limit, n, lcd, spread)
    below = -2 * math.ceil(max(abs(x) for x in s_of)) - 1  # below every context id
    M, thresholds, deltas = _staircase(ordered, radius, below=below, cap=cap)
    while _label_error(M, deltas, radius) > mpq(1, 16):  # the label lane needs narrower ids
        precision *= 2
        if precision > limit:
            raise InconclusiveError(
                f"ks24: the label lane stays wider than 1/16 at {limit} bits; "
                f"--set precision={2 * precision} would be needed"
            )
        ids = context_ids(projected, lam, beta, precision)
        ordered, radius = _hulls(ids, keys, labels)
        if ordered is None:  # the user's λ left classes merged
            ordered, radius = _merge_hulls(ids, keys, labels)
        M, thresholds, deltas = _staircase(ordered, radius, below=below, cap=cap)
    steps.step("assembling the model")
    built = _assemble(
        dataset, options, v, lam, beta, precision, ordered, radius, gap, M, thresholds, deltas
    )
    steps.done()
    return built


def _form(options: dict, d: int) -> bool:
    """True for ``ffn=residual``: the one-hidden-layer residual FFN F(z) = z + W₂ReLU(W₁z + b₁)
    + b₂ (labels on lane 0; needs d ≥ 2 so that the head writes another lane)."""
    form = options.get("ffn", "requantized")
    if form not in ("requantized", "residual"):
        raise InputError(f"ks24: ffn must be 'requantized' or 'residual', got {form!r}")
    if form == "residual" and d < 2:
        raise InputError("ks24: ffn=residual needs d ≥ 2 (the head writes a lane other than 0)")
    return form == "residual"


def _opt(options: dict, key: str) -> mpq | None:
    return mpq(options[key]) if options.get(key) is not None else None


def _slope_cap(limit: int, n: int, lcd: int, spread: mpq) -> int:
    """The largest slope M the FFN may take: 2^(limit + SLOPE_ROOM)·n·lcd²·(⌈spread⌉ + 1), with
    ``limit`` the precision option, lcd that of the tokens' coordinates and spread the range of
    their projections. A certified gap needs far less: ids that Arb cannot hold exactly have radii
    of about 2^−precision·|id| and are certified apart by gaps > 16·radius; where the softmax
    rows are uniform (λ = 0, or s_k = 0) the ids are exact rationals, distinct ones at least
    β/(n·lcd) ≥ 1/(8n·lcd²·spread) apart."""
    return (1 << (limit + SLOPE_ROOM)) * n * lcd**2 * (math.ceil(spread) + 1)


def _staircase(ordered, radius, *, below: mpq | None = None, cap: int | None = None):
    """Slope M and the thresholds t_j (multiples of 1/M) between consecutive classes whose
    labels differ, each ≥ 1/M + 2·radius above the lower class and ≥ 2·radius below the upper
    one (gaps ≥ 16·radius and ≥ 8/M leave an interval ≥ 5/M long), with the label steps Δ_j.
    ``below`` is a number below every context id (the lone threshold of one label sits below it
    when the lowest ball reaches further down); a slope above ``cap`` is refused (exit 2: its
    bits would pass the declared bound, plugins/ks24.py)."""
    steps = [(a, b) for a, b in zip(ordered, ordered[1:], strict=False) if a[2] != b[2]]
    least = min((b[0] - a[1] for a, b in steps), default=mpq(1))
    # M a power of two with 1/M ≤ least/8, from bit lengths (a tiny gap, as a hot temperature
    # gives, is far below a float's range: math.log2 of it overflows)
    ratio = 8 / least
    M = 1 << max(0, int(ratio.numerator).bit_length() - int(ratio.denominator).bit_length() + 1)
    while mpq(1, M) > least / 8:
        M *= 2
    if cap is not None and M > cap:
        raise InputError(
            f"ks24: the least gap between differently labelled context ids, about 2^"
            f"{int(least.numerator).bit_length() - int(least.denominator).bit_length()}, needs "
            f"an FFN slope 2^{M.bit_length() - 1} above the cap 2^(precision + {SLOPE_ROOM})·"
            "n·lcd²·(⌈spread⌉ + 1) that bounds the weights' bits; a larger --set precision "
            "(at most 65536) raises it"
        )
    thresholds, deltas = [], []
    for a, b in steps:
        t = mpq(math.ceil((a[1] + mpq(1, M) + 2 * radius) * M), M)
        if t > b[0] - 2 * radius:  # (gaps > 16·radius leave room: not reached)
            raise InconclusiveError(
                "ks24: no threshold fits between two differently labelled context ids at "
                "this precision"
            )
        thresholds.append(t)  # a.hi < t ≤ b.lo: within the ids' range
        deltas.append(b[2] - a[2])
    if not thresholds:  # one label for all: a ramp below every id keeps the layers non-empty
        low = ordered[0][0] if below is None else max(ordered[0][0], mpq(below))
        thresholds.append(mpq(math.floor((low - 1) * M), M))
        deltas.append(0)
    return M, thresholds, deltas


def _label_error(M: int, deltas, radius: mpq) -> mpq:
    """A bound on how far the label lane's ball strays from the label: each ramp pair is off
    by ≤ 2M·radius (plus rounding, covered by the factor 2)."""
    return 4 * M * radius * sum(abs(x) for x in deltas)


def _ffn(d: int, v, M: int, thresholds, deltas, y_lo: int, y_hi: int) -> MLP:
    """The FFN: two ramp units per threshold (the paper's "two ReLU units per id"), the label
    lane y' = y − y_lo + 1 ≥ 1 (a ReLU leaves it be), then its re-quantization: units
    h_c = ReLU(4(c + ½ − y')) and g_c = ReLU(1 − h_c), exactly 0 or 1 when y' is within ¼ of an
    integer, and the label y_lo + Σ_c g_c."""
    K = len(thresholds)
    rows, bias = [], []
    for t in thresholds:
        a = int(t * M)
        rows += [[M * x for x in v], [M * x for x in v]]
        bias += [1 - a, -a]  # ReLU(M(x − t) + 1) and ReLU(M(x − t)): their difference a ramp
    ramps = Affine.from_dense(rows, bias, 1, in_dim=d)
    lane = Affine(
        2 * K,
        (tuple(p for j, dj in enumerate(deltas) if dj for p in ((2 * j, dj), (2 * j + 1, -dj))),),
        (1,),  # y' of the lowest class (offset y_lo − 1 below)
    )
    span = max(1, y_hi - y_lo)
    cuts = Affine(
        1, tuple(((0, -4),) for _ in range(span)), tuple(4 * c + 2 for c in range(1, span + 1))
    )
    steps = Affine(span, tuple(((c, -1),) for c in range(span)), (1,) * span)
    read = Affine(span, (tuple((c, 1) for c in range(y_hi - y_lo)),), (y_lo,))
    return MLP((ramps, lane, cuts, steps, read), residual=False, label="ffn")


def _residual_ffn(d: int, v, M: int, thresholds, deltas, base) -> MLP:
    """F(z) = z + W₂ReLU(W₁z + b₁) + b₂ with one hidden layer: the ramp pairs of :func:`_ffn`
    add the steps of label − z₀ to lane 0 (b₂ its value on the lowest class). Exact in the
    reals; on balls an active ramp pair is 1 only up to its radius, so the outputs are
    enclosures of radius > 0 (docs/ks24.md)."""
    ramps = _ffn(d, v, M, thresholds, deltas, 1, 2).layers[0]
    row = [mpq(0)] * (2 * len(thresholds))
    for j, dj in enumerate(deltas):
        row[2 * j], row[2 * j + 1] = mpq(dj), mpq(-dj)
    base = mpq(base)  # label − z₀ of the lowest class: its denominator joins the map's
    den = math.lcm(int(base.denominator), *(int(x.denominator) for x in row))
    dense = [[int(x * den) for x in row]] + [[0] * len(row) for _ in range(d - 1)]
    out = Affine.from_dense(dense, [int(base * den)] + [0] * (d - 1), den, in_dim=len(row))
    return MLP((ramps, out), residual=True, label="ffn")


def _assemble(
    dataset, options, v, lam, beta, precision, ordered, radius, gap, M, thresholds, deltas
):
    d = dataset.dim
    residual = _form(options, d)
    if residual:
        ffn = _residual_ffn(d, v, M, thresholds, deltas, ordered[0][2])
    else:
        y_lo = min(c[2] for c in ordered)
        y_hi = max(c[2] for c in ordered)
        # the lowest class's label enters through the lane's bias: shift Δ's origin to y_lo
        ffn = _ffn(d, v, M, thresholds, deltas, y_lo, y_hi)
        base = ordered[0][2] - y_lo + 1
        lane = ffn.layers[1]
        ffn = MLP(
            (ffn.layers[0], Affine(lane.in_dim, lane.rows, (base,)), *ffn.layers[2:]),
            residual=False,
            label="ffn",
        )
    u = [mpq(0)] * d
    lanes = range(1, d) if residual else range(d)  # residual: lane 0 carries the label
    j0 = max(lanes, key=lambda i: abs(v[i]))
    if not v[j0]:
        raise InputError("ks24: ffn=residual needs a direction v with an entry beyond lane 0")
    u[j0] = beta / v[j0]
    head = AttentionHead(
        Affine.from_rationals([[lam * x for x in v]], d),
        Affine.from_rationals([[mpq(x) for x in v]], d),
        Affine.from_rationals([[mpq(x) for x in v]], d),
        Affine.from_rationals([[x] for x in u], 1),
    )
    meta = {
        "construction": "ks24",
        "theorem": "Kajitsuka & Sato 2024, memorization by one rank-one softmax attention "
        "layer and one FFN (reconstruction)",
        "options": {k: val for k, val in options.items()},
        "temperature": str(lam),
        "beta": str(beta),
        "build_precision": precision,
    }
    model = Transformer(
        d,
        (
            Attention((head,), "softmax", "boltzmann", "none"),
            ffn,
        ),
        None,
        Affine(d, (((0, 1),),), (0,)) if residual else None,  # the residual form: read lane 0
        meta,
    )
    witness = KS24Witness(
        tuple(v), lam, beta, M, tuple(thresholds), len(ordered), gap, radius, precision
    )
    return model, witness


def random_instance(
    N: int,
    n: int,
    d: int,
    vocab: int,
    C: int,
    seed: int = 0,
    *,
    repeats: int = 0,
    bound: int | None = None,
) -> Dataset:
    """N seq-to-seq pairs of n tokens drawn without repeats from ``vocab`` distinct non-zero
    integer tokens in [−bound, bound]^d (default: the least bound ≥ 9 leaving twice ``vocab``
    tokens to draw from); the first ``repeats`` sequences repeat their first
    token at position 1 (outside the paper's hypothesis). Labels in 1..C, a function of
    (token, multiset of the sequence)."""
    if min(N, n, d, vocab, C) < 1 or vocab < n:
        raise InputError("random_instance needs N, n, d, C ≥ 1 and vocab ≥ n")
    if bound is None:
        bound = 9
        while (2 * bound + 1) ** d - 1 < 2 * vocab:
            bound *= 2
    if (2 * bound + 1) ** d - 1 < vocab:
        raise InputError(f"[−{bound}, {bound}]^{d} holds fewer than {vocab} non-zero tokens")
    rng = random.Random(seed)
    table: dict[tuple, None] = {}
    while len(table) < vocab:
        z = tuple(mpq(rng.randint(-bound, bound)) for _ in range(d))
        if any(z):
            table.setdefault(z, None)
    seqs = []
    for i in range(N):
        seq = rng.sample(range(vocab), n)
        if i < repeats and n >= 2:
            seq[1] = seq[0]
        seqs.append(tuple(seq))
    first: dict = {}
    labels = []
    for seq in seqs:
        ms = tuple(sorted(seq))
        labels.append(tuple(first.setdefault((ms, t), rng.randint(1, C)) for t in seq))
    return Dataset(
        "seq2seq",
        tuple(labels),
        C,
        vocab=tuple(table),
        sequences=tuple(seqs),
        meta={"generator": "ks24_instance", "seed": seed, "repeats": repeats},
    )
