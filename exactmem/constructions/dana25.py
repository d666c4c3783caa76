"""Dana, Pydi & Chevaleyre 2025 (AISTATS): an attention-only Transformer memorizes H·d_h + d
next-token associations at any context length S (Theorem 1 with ε = 0, Corollary 1).

Model (§2 of the paper): token embeddings e: [N] → Q^d (a table, token inputs), additive
positional embeddings, one attention layer with exactly H heads of dimension d_h (rank-one
W_QK = q kᵀ, Remark 2) and the skip connection, read at the last position, and the unembedding
W_U: the logits are W_U (x_S + Σ_h W_O^h W_V^h A_h) with x_S = e(t_S) + pos_S.

Construction (Theorem 1's proof with ε = 0):

1. generic rational embeddings, positions and heads (Lemma 3: generic reals; random rationals
   here, redrawn if a solve fails);
2. the features of an association t are F(t) = [W_V^h A_h(t)]_h ++ x_S(t) ∈ R^{H d_h + d}: the
   heads' value vectors and the skip term. Lemma 2: on the T₀ ≤ H d_h + d sequences they have
   rank T₀ (certified non-singular on Arb balls);
3. the sequence encoder of Proposition 3 with d = 2: the target residual direction is λ_U·w_{g(t)}
   with w_j rational points on the unit circle. The unembedding is W_U = C·M (C: the N circle
   points, M ∈ Q^{2×d}), so the d coefficients of the skip term are the columns of M — the paper's
   "write e(t_S) + pos_S = W_OV(e′ + pos′)" with the free W_OV moved into the readout. The linear
   system [B, M] F(t) = λ_U w_{g(t)} (T₀ equations per coordinate, H d_h + d unknowns) is solved
   on balls, and W_O^h = Mᵀ(M Mᵀ)⁻¹ B_h gives M W_O^h = B_h (up to rounding: M's solved
   coefficients and W_O are rounded to the nearest multiple of 2^−F, ``frac_bits``, default 64,
   and the build is refused when one reaches 2^E, ``int_bits``, default 128:
   :mod:`exactmem.constructions.fixed_point`);
4. the verifier certifies every association's argmax on the evaluated model.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb_mat, ctx
from gmpy2 import mpq

from exactmem.constructions.fixed_point import round_fixed
from exactmem.core.balls import ball_midpoint, softmax_balls, to_ball
from exactmem.core.errors import InputError
from exactmem.core.model import Affine, Attention, AttentionHead, PositionalEncoding, Transformer
from exactmem.datasets.attention_data import random_associations
from exactmem.datasets.dataset import Dataset
from exactmem.runtime.progress import Steps

__all__ = [
    "DanaWitness",
    "associations",
    "build",
    "circle_points",
    "paper_parameters",
    "random_associations",
]


FRAC_BITS = 64  # the solved weights: multiples of 2^-64 ...
INT_BITS = 128  # ... of magnitude below 2^128 (the targets scale with λ_U ≤ 2^64), else refused
CIRCLE_DENOMINATOR = 10**6  # q = a/b ≈ tan(θ/2) with b ≤ 10⁶ and |q| ≤ 10⁶


def circle_points(N: int) -> list[tuple[mpq, mpq]]:
    """N rational points on the unit circle near angles 2π(j + ½)/N (/3 for N = 2):
    ((1 − q²)/(1 + q²), 2q/(1 + q²)) with q a rational approximation of tan(θ/2). The angles
    only choose the points (a float picks q); every point is exactly on the circle.

    tan(θ/2) is clamped to [−10⁶, 10⁶] (an odd N puts one angle at π, where the float tan is
    about 10¹⁶; the clamp gives it the resolution the denominators give near 0), so q = a/b has
    b ≤ 10⁶ and |a| ≤ b(10⁶ + ½) (limit_denominator is at least as close as the nearest
    integer): each point is (x/z, y/z) with |x|, |y| ≤ z = a² + b² < 2⁸⁰ (plugins/dana25.py)."""
    pts = []
    for j in range(N):
        # N = 2 at angles 2π(j + ½)/3: two antipodal points would span one line, and M its
        # solved row 0 (the Gram determinant 0 in every draw)
        theta = 2 * math.pi * (j + 0.5) / max(N, 3)
        t = min(max(math.tan(theta / 2), -CIRCLE_DENOMINATOR), CIRCLE_DENOMINATOR)
        q = mpq(Fraction(t).limit_denominator(CIRCLE_DENOMINATOR))
        pts.append(((1 - q * q) / (1 + q * q), 2 * q / (1 + q * q)))
    return pts


def paper_parameters(d: int, d_h: int, H: int, S: int, N: int) -> dict:
    """The paper's counts: d(S + 2N + 4 d_h H) (Theorem 1), and d(S + 2N + 2(d_h + 1)H) with
    rank-one W_QK (Remark 2): positions S·d, embedding and unembedding 2N·d, per head q, k ∈ Q^d
    and W_V, W_O of d·d_h entries each."""
    return {
        "theorem_1": d * (S + 2 * N + 4 * d_h * H),
        "rank_one_qk": d * (S + 2 * N + 2 * (d_h + 1) * H),
    }


@dataclass(frozen=True)
class DanaWitness:
    heads: int
    head_dim: int
    associations: int
    precision: int
    unembedding_scale: mpq


def _rand(rng: random.Random, lo: int = 500, hi: int = 1500, den: int = 1000) -> mpq:
    return mpq(rng.randint(lo, hi), den)


def _dot(u, v):
    return sum((a * b for a, b in zip(u, v, strict=True)), mpq(0))


def _features(tokens, emb, pos, heads):
    """The head features [W_V^h A_h(t)]_h (balls) and the skip term x_S(t) (exact) of one
    sequence, read at its last position."""
    xs = [[e + p for e, p in zip(emb[t], pos[s], strict=True)] for s, t in enumerate(tokens)]
    xS = xs[-1]
    d = len(xS)
    feats = []
    for q, k, V in heads:
        qS = _dot(q, xS)
        a = softmax_balls([to_ball(qS * _dot(k, x)) for x in xs])
        A = [
            sum((a[s] * to_ball(xs[s][i]) for s in range(len(xs))), to_ball(mpq(0)))
            for i in range(d)
        ]
        feats += [
            sum((to_ball(V[r][i]) * A[i] for i in range(d)), to_ball(mpq(0))) for r in range(len(V))
        ]
    return feats, xS


def associations(ds: Dataset) -> list[tuple[tuple[int, ...], int]]:
    if ds.task != "next-token":
        raise InputError(f"dana25 needs task 'next-token', the dataset has {ds.task!r}")
    seen: dict = {}
    out = []
    for i, (s, y) in enumerate(zip(ds.sequences, ds.labels, strict=True)):
        j = seen.setdefault(tuple(s), i)
        if j != i:
            if ds.labels[j] != y:
                raise InputError(
                    f"sequences[{j}] and sequences[{i}] are equal but labelled "
                    f"{ds.labels[j]} and {y}"
                )
            continue
        out.append((tuple(s), y))
    return out


def build(
    dataset: Dataset, options: dict, *, progress: Callable[..., Any] | None = None
) -> tuple[Transformer, DanaWitness]:
    """``build --construction dana25``: options d, head_dim, heads (default: the fewest H ≥ 1
    with H·d_h + min(d, k) ≥ T₀, k the number of distinct last tokens), seed, precision, scale
    (λ_U), over_capacity (build with T₀ > H·d_h + d, fitting the first H·d_h + min(d, k)
    associations: the verifier refutes), frac_bits F and int_bits E (the solved weights are
    multiples of 2^−F below 2^E in magnitude, default 64 and 128: InputError naming the weight
    past 2^E). The model has exactly H heads. ``progress`` hears
    its steps."""
    pairs = associations(dataset)
    N, S = len(dataset.vocab), len(dataset.sequences[0])
    T0 = len(pairs)
    d = options.get("d", 2)
    d_h = options.get("head_dim", d)
    if d < 2 or not 1 <= d_h <= d:
        raise InputError(f"dana25 needs d ≥ 2 and 1 ≤ d_h ≤ d (got d = {d}, d_h = {d_h})")
    # the skip term x_S(t) = e(t_S) + pos_S depends on the last token only: k distinct last
    # tokens give it rank min(d, k), the most it adds to the heads' H·d_h features
    skip = min(d, len({tokens[-1] for tokens, _ in pairs}))
    H = options.get("heads") or max(1, math.ceil((T0 - skip) / d_h))
    over = bool(options.get("over_capacity"))
    if H * d_h + d < T0 and not over:
        raise InputError(
            f"{T0} associations exceed H·d_h + d = {H * d_h + d} (--set over_capacity=true "
            "builds anyway: the verifier refutes)"
        )
    if H * d_h + skip < T0 and not over:
        raise InputError(
            f"the {T0} sequences end in {skip} distinct tokens, so the skip term "
            f"e(t_S) + pos_S has rank {skip} < d = {d} and the features rank ≤ H·d_h + {skip} "
            f"= {H * d_h + skip} < T₀: Theorem 1's exact readout needs d distinct last tokens"
        )
    if N < 2:
        raise InputError("dana25 needs a vocabulary of at least 2 tokens")
    rng = random.Random(options.get("seed", 0))
    scale = mpq(options.get("scale", 100))
    W_U = circle_points(N)
    precision = options.get("precision", 256)
    fixed = (options.get("frac_bits", FRAC_BITS), options.get("int_bits", INT_BITS))
    steps = Steps(progress, "building dana25", 3)
    for attempt in range(8):
        if attempt:
            steps.add(2)  # another draw
        steps.step(f"features of {T0} associations" + (f" (draw {attempt + 1})" if attempt else ""))
        emb = [[_rand(rng) for _ in range(d)] for _ in range(N)]
        pos = [[_rand(rng) for _ in range(d)] for _ in range(S)]
        heads = [
            (
                [_rand(rng, -1000, 1000) for _ in range(d)],
                [_rand(rng, -1000, 1000) for _ in range(d)],
                [[_rand(rng, -1000, 1000) for _ in range(d)] for _ in range(d_h)],
            )
            for _ in range(H)
        ]
        # skip coefficients outside the T₀ unknowns (when T₀ or k < d) stay fixed, generic
        fixed_M = [[_rand(rng, -1000, 1000) for _ in range(d)] for _ in range(2)]
        # beyond capacity the first H·d_h + skip associations are solved, the rest left over
        fitted = pairs[: H * d_h + skip] if over else pairs
        solved = _solve_readout(
            fitted, emb, pos, heads, fixed_M, W_U, scale, skip, precision, fixed, steps
        )
        if solved is not None:
            break
        precision *= 2
    else:
        raise InputError(
            "the attention and skip features stayed singular (or too ill-conditioned) in 8 "
            "draws; raise --set precision"
        )
    M, B = solved
    steps.step("the model")
    model = _model(emb, pos, heads, M, B, W_U, scale, d, d_h, N, S, options, fixed)
    steps.done()
    return model, DanaWitness(H, d_h, T0, precision, scale)


def _solve_readout(pairs, emb, pos, heads, fixed_M, W_U, scale, skip, precision, fixed, steps=None):
    """(M, B) with [B, M] F(t) = λ_U w_{g(t)} for every association, M of rank 2 (its solved
    coefficients rounded to the fixed point ``fixed`` = (F, E): InputError past 2^E), or None if
    the features are not certifiably of rank T₀ at this precision.

    T₀ unknowns: the first min(``skip``, T₀) skip coefficients (``skip`` = the rank the last
    tokens give the skip term), then the head features in order; the rest are fixed: head
    coefficients zero, skip coefficients those of ``fixed_M`` (generic)."""
    F, E = fixed
    old = ctx.prec
    ctx.prec = precision
    try:
        T0 = len(pairs)
        d = len(fixed_M[0])
        n_skip = min(skip, T0)
        rows, rhs = [], []
        for tokens, y in pairs:
            feats, xS = _features(tokens, emb, pos, heads)
            rows.append([to_ball(x) for x in xS[:n_skip]] + feats[: T0 - n_skip])
            rest = [_dot(fixed_M[c][n_skip:], xS[n_skip:]) for c in range(2)]
            rhs.append([to_ball(scale * W_U[y - 1][c] - rest[c]) for c in range(2)])
        if steps is not None:
            steps.step(f"solving {T0} × {T0} on balls at {precision} bits")
        try:
            X = arb_mat(rows).solve(arb_mat(rhs))  # F X = R: X = [M, B]ᵀ on the unknowns
        except ZeroDivisionError:
            return None
        width = len(feats)
        M = [
            [
                round_fixed(
                    ball_midpoint(X[i, c]), F, E, f"dana25: the read-out M[{c + 1}][{i + 1}]"
                )
                if i < n_skip
                else fixed_M[c][i]
                for i in range(d)
            ]
            for c in (0, 1)
        ]
        B = [
            [ball_midpoint(X[n_skip + j, c]) if j < T0 - n_skip else mpq(0) for j in range(width)]
            for c in (0, 1)
        ]
        if _gram_det(M) == 0:  # W_U = C·M would lose the circle: redraw
            return None
        return M, B
    finally:
        ctx.prec = old


def _gram_det(M) -> mpq:
    return _dot(M[0], M[0]) * _dot(M[1], M[1]) - _dot(M[0], M[1]) ** 2


def _right_inverse(M) -> list[list[mpq]]:
    """P = Mᵀ(M Mᵀ)⁻¹ ∈ Q^{d×2}, so that M P = I₂ exactly."""
    g = _gram_det(M)
    a, b, c = _dot(M[0], M[0]), _dot(M[0], M[1]), _dot(M[1], M[1])
    inv = [[c / g, -b / g], [-b / g, a / g]]
    return [[M[0][i] * inv[0][j] + M[1][i] * inv[1][j] for j in range(2)] for i in range(len(M[0]))]


def _model(emb, pos, heads, M, B, W_U, scale, d, d_h, N, S, options, fixed) -> Transformer:
    """The model; W_O^h = P·B_h rounded to the fixed point ``fixed`` = (F, E) (the solve's
    midpoints and P carry hundreds of bits that no margin needs; the verifier certifies the
    rounded weights)."""
    F, E = fixed
    lanes = tuple(f"x{i}" for i in range(d))
    den = math.lcm(*[int(x.denominator) for col in emb for x in col])
    embed = Affine(
        N,
        tuple(tuple((t, int(emb[t][i] * den)) for t in range(N)) for i in range(d)),
        (0,) * d,
        den,
        lanes,
    )
    P = _right_inverse(M)
    att_heads = []
    for h, (q, k, V) in enumerate(heads):
        B_h = [row[h * d_h : (h + 1) * d_h] for row in B]
        W_O = [
            [
                round_fixed(
                    P[i][0] * B_h[0][j] + P[i][1] * B_h[1][j],
                    F,
                    E,
                    f"dana25: head {h + 1}'s output map W_O[{i + 1}][{j + 1}]",
                )
                for j in range(d_h)
            ]
            for i in range(d)
        ]
        att_heads.append(
            AttentionHead(
                Affine.from_rationals([q], d),
                Affine.from_rationals([k], d),
                Affine.from_rationals(V, d),
                Affine.from_rationals(W_O, d_h),
            )
        )
    unembed_rows = [[w[0] * M[0][i] + w[1] * M[1][i] for i in range(d)] for w in W_U]
    unembed = Affine.from_rationals(unembed_rows, d)
    H = len(heads)
    meta = {
        "construction": "dana25",
        "theorem": "Dana, Pydi & Chevaleyre 2025, Theorem 1 / Corollary 1",
        "options": dict(options),
        "readout": "classification",
        "heads": H,
        "head_dim": d_h,
        "capacity": H * d_h + d,
        "paper_parameters": paper_parameters(d, d_h, H, S, N),
        "target_margin": str(
            scale * (1 - max(W_U[0][0] * w[0] + W_U[0][1] * w[1] for w in W_U[1:]))
        ),
    }
    return Transformer(
        N,
        (
            PositionalEncoding(tuple(tuple(p) for p in pos), "pos"),
            Attention(tuple(att_heads), "softmax", "aot"),
        ),
        embed,
        unembed,
        meta,
        token_inputs=True,
    )
