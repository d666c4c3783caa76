"""Dana, Pydi & Chevaleyre 2025 (AISTATS): an attention-only Transformer memorizes H·d_h + d
next-token associations at any context length S (Theorem 1 with ε = 0, Corollary 1).

Model (attention_memorization_papers.md §B.1): token embeddings e: [N] → Q^d (a table, token
inputs), additive positional embeddings, one attention layer read at the last position with H
heads of dimension d_h (rank-one W_QK = q kᵀ, Remark 2) plus the skip connection, and the
unembedding W_U whose rows are rational points on the unit circle (in the first two
coordinates), so the target logit margin λ_U(1 − w_j·w_g) is an exact rational.

Construction (§B.3 with the digest's practical form of step 2, [RECONSTRUCTION]):

1. generic rational embeddings and positions (Lemma 3: generic reals; random rationals here);
2. H random rank-one heads with random W_V^h, and head 0 with W_QK = λ₀·I, W_V = I: its output
   is one more d-dimensional feature block (the "skip as a head" of step 2);
3. the features Φ(t) = [W_V^h A_h(t)]_h ∈ R^{H d_h + d} of the T₀ = H d_h + d sequences form a
   square matrix; certify it non-singular (Arb) — Lemma 2's rank;
4. readout: W_O = (R − X_S) Φ⁻¹ with R(t) = λ_U·w_{g(t)} the target residual and X_S(t) the skip
   term, solved on balls; the midpoints become the rational W_O, and the verifier certifies
   every association's argmax on the evaluated model.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction

from flint import arb_mat, ctx
from gmpy2 import mpq

from exactmem.balls import ball_midpoint, softmax_balls, to_ball
from exactmem.data import Dataset
from exactmem.errors import InputError
from exactmem.model import Affine, Attention, AttentionHead, PositionalEncoding, Transformer

__all__ = [
    "DanaWitness",
    "associations",
    "build",
    "circle_points",
    "paper_parameters",
    "random_associations",
]


def circle_points(N: int) -> list[tuple[mpq, mpq]]:
    """N rational points on the unit circle near angles 2π(j + ½)/N:
    ((1 − q²)/(1 + q²), 2q/(1 + q²)) with q a rational approximation of tan(θ/2). The angles
    only choose the points (a float picks q); every point is exactly on the circle."""
    pts = []
    for j in range(N):
        theta = 2 * math.pi * (j + 0.5) / N
        q = mpq(Fraction(math.tan(theta / 2)).limit_denominator(10**6))
        pts.append(((1 - q * q) / (1 + q * q), 2 * q / (1 + q * q)))
    return pts


def paper_parameters(d: int, d_h: int, H: int, S: int, N: int) -> dict:
    """The paper's counts: d(S + 2N + 4 d_h H), and d(S + 2N + 2(d_h + 1)H) with rank-one W_QK."""
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


def _features(tokens, emb, pos, heads, lam0, precision):
    """Φ(t) and the skip term x_S(t) of one sequence, on balls."""
    xs = [[e + p for e, p in zip(emb[t], pos[s], strict=True)] for s, t in enumerate(tokens)]
    xS = xs[-1]
    d = len(xS)
    feats = []
    for q, k, V in heads:
        qS = sum((a * b for a, b in zip(q, xS, strict=True)), mpq(0))
        scores = [to_ball(qS * sum((a * b for a, b in zip(k, x, strict=True)), mpq(0))) for x in xs]
        a = softmax_balls(scores)
        A = [
            sum((a[s] * to_ball(xs[s][i]) for s in range(len(xs))), to_ball(mpq(0)))
            for i in range(d)
        ]
        feats += [
            sum((to_ball(V[r][i]) * A[i] for i in range(d)), to_ball(mpq(0))) for r in range(len(V))
        ]
    scores = [to_ball(lam0 * sum((a * b for a, b in zip(xS, x, strict=True)), mpq(0))) for x in xs]
    a = softmax_balls(scores)
    feats += [
        sum((a[s] * to_ball(xs[s][i]) for s in range(len(xs))), to_ball(mpq(0))) for i in range(d)
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


def build(dataset: Dataset, options: dict) -> tuple[Transformer, DanaWitness]:
    """``build --construction dana25``: options d, head_dim, heads (default: the fewest with
    H·d_h + d ≥ T₀), seed, precision, scale (λ_U)."""
    pairs = associations(dataset)
    N, S = len(dataset.vocab), len(dataset.sequences[0])
    T0 = len(pairs)
    d = options.get("d", 2)
    d_h = options.get("head_dim", d)
    if d < 2 or not 1 <= d_h <= d:
        raise InputError(f"dana25 needs d ≥ 2 and 1 ≤ d_h ≤ d (got d = {d}, d_h = {d_h})")
    H = options.get("heads") or max(0, math.ceil((T0 - d) / d_h))
    if H * d_h + d < T0:
        raise InputError(f"{T0} associations exceed H·d_h + d = {H * d_h + d}")
    if N < 2:
        raise InputError("dana25 needs a vocabulary of at least 2 tokens")
    rng = random.Random(options.get("seed", 0))
    scale = mpq(options.get("scale", 100))
    lam0 = mpq(options.get("skip_scale", 4))
    W_U = circle_points(N)
    precision = options.get("precision", 256)
    for _attempt in range(8):
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
        solved = _solve_readout(pairs, emb, pos, heads, lam0, W_U, scale, d, precision)
        if solved is not None:
            break
        precision *= 2
    else:
        raise InputError(
            "the attention features stayed singular (or too ill-conditioned) in 8 draws"
        )
    W_O = solved
    model = _model(emb, pos, heads, lam0, W_O, W_U, scale, d, d_h, N, S, options)
    return model, DanaWitness(H, d_h, T0, precision, scale)


def _solve_readout(pairs, emb, pos, heads, lam0, W_U, scale, d, precision):
    """W_O with W_O Φ(t) = λ_U w_{g(t)} − x_S(t) for every association (None if Φ is not
    certifiably invertible at this precision). Columns beyond T₀ (if H·d_h + d > T₀) are set
    to zero: the first T₀ feature columns are used."""
    old = ctx.prec
    ctx.prec = precision
    try:
        rows, rhs = [], []
        T0 = len(pairs)
        for tokens, y in pairs:
            feats, xS = _features(tokens, emb, pos, heads, lam0, precision)
            rows.append(feats[:T0])
            target = list(W_U[y - 1]) + [mpq(0)] * (d - 2)
            rhs.append([to_ball(scale * target[i] - xS[i]) for i in range(d)])
        width = len(feats)
        try:
            X = arb_mat(rows).solve(arb_mat(rhs))  # Φ X = R − X_S, X = W_Oᵀ on T₀ columns
        except ZeroDivisionError:
            return None
        W_O = [[mpq(0)] * width for _ in range(d)]
        for j in range(T0):
            for i in range(d):
                W_O[i][j] = ball_midpoint(X[j, i])
        return W_O
    finally:
        ctx.prec = old


def _model(emb, pos, heads, lam0, W_O, W_U, scale, d, d_h, N, S, options) -> Transformer:
    lanes = tuple(f"x{i}" for i in range(d))
    den = math.lcm(*[int(x.denominator) for col in emb for x in col])
    embed = Affine(
        N,
        tuple(tuple((t, int(emb[t][i] * den)) for t in range(N)) for i in range(d)),
        (0,) * d,
        den,
        lanes,
    )
    att_heads = []
    col = 0
    for q, k, V in heads:
        block = [row[col : col + d_h] for row in W_O]
        att_heads.append(
            AttentionHead(
                Affine.from_rationals([q], d),
                Affine.from_rationals([k], d),
                Affine.from_rationals(V, d),
                Affine.from_rationals(block, d_h),
            )
        )
        col += d_h
    ident = [[mpq(int(i == j)) for j in range(d)] for i in range(d)]
    att_heads.append(
        AttentionHead(
            Affine.from_rationals([[lam0 * x for x in r] for r in ident], d),
            Affine.from_rationals(ident, d),
            Affine.from_rationals(ident, d),
            Affine.from_rationals([row[col : col + d] for row in W_O], d),
        )
    )
    unembed_rows = [list(w) + [mpq(0)] * (d - 2) for w in W_U]
    unembed = Affine.from_rationals(unembed_rows, d)
    meta = {
        "construction": "dana25",
        "theorem": "Dana, Pydi & Chevaleyre 2025, Theorem 1 / Corollary 1 (reconstruction)",
        "options": dict(options),
        "readout": "classification",
        "heads": len(heads),
        "head_dim": d_h,
        "capacity": len(heads) * d_h + d,
        "paper_parameters": paper_parameters(d, d_h, len(heads), S, N),
        "target_margin": str(
            scale * (1 - max(W_U[0][0] * w[0] + W_U[0][1] * w[1] for w in W_U[1:]))
        )
        if N > 1
        else None,
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


def random_associations(N: int, S: int, T0: int, seed: int = 0) -> Dataset:
    """T₀ distinct sequences of S tokens over [N] with random targets (a random function g)."""
    if T0 > N**S:
        raise InputError(f"only {N**S} distinct sequences of length {S} over {N} tokens")
    rng = random.Random(seed)
    seqs: dict = {}
    while len(seqs) < T0:
        s = tuple(rng.randrange(N) for _ in range(S))
        seqs.setdefault(s, rng.randint(1, N))
    vocab = tuple((mpq(t),) for t in range(N))
    return Dataset(
        "next-token",
        tuple(seqs.values()),
        N,
        vocab=vocab,
        sequences=tuple(seqs),
        meta={"generator": "random_associations"},
    )
