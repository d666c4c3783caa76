"""Madden, Fox & Thrampoulidis 2024 (arXiv 2405.13718): a one-layer decoder-only Transformer
interpolates the next-token distributions of n distinct contexts over a vocabulary of ω with an
FNN of width m ≈ n, i.e. Θ(nω) parameters (the lower bound); k < n(ω − 1) parameters cannot
reach generic targets (the upper bound, a dimension count).

RECONSTRUCTED: the paper's proofs were not available to us; the theorem forms and the steps
below are reconstructed from its abstract and the authors' experiment code (their model:
embedding + sinusoidal positions → one causal softmax head → Linear + GELU → Linear). Where we
differ, on purpose:

* positions are **rational** sinusoids: each pair of coordinates is the rational point
  ((1 − q²)/(1 + q²), 2q/(1 + q²)) of the unit circle with q ≈ tan(θ/2), θ = k/10000^{2i/d}
  (the standard encoding's angles; every coordinate exact; |q| ≤ 10⁴, the denominators' bound,
  which bounds the coordinates' bits);
* the attention scores are not divided by √d (the factor is absorbed in the random W_K);
  the maps have no biases and the sub-layer is residual (Z + head(Z)): the IR's attention;
* zero target probabilities are reachable only as an infimum: they get the logit (log of the
  row's least positive probability) − 64.

Construction (the lower bound):

1. seeded generic rational embeddings and attention maps (the paper: almost every choice makes
   the last-position output h(x) injective on contexts — a non-zero real-analytic difference);
2. a seeded generic first FNN layer W₁, b₁ (width m); Φ = GELU(H W₁ᵀ + 1b₁ᵀ) ∈ R^{n×m}. GELU
   is real-analytic and not a polynomial, so [Φ, 1] has full row rank n once m + 1 ≥ n;
3. the output layer: class 1's logit row is 0 and, for every other class c,
   [Φ, 1]·(w_c; b_c) = L_c − L_1 with L = log π (or the one-hot margin 1 without targets),
   solved (Arb's approximate LU at ``precision`` bits) and rounded to the nearest multiple of
   2^−F (``frac_bits``, default 128; :mod:`exactmem.constructions.fixed_point`), the build
   refused when a weight reaches 2^E (``int_bits``, default 128). Softmax is invariant under a
   per-context shift, which is why the bias column counts: m ≥ n − 1 suffices and is needed.
   With m < n − 1 only the first m + 1 contexts are fitted (the verifier refutes).

The verifier (``verify --construction madden24``) certifies injectivity, the rank, every
argmax label and the targets within ``--tolerance`` on the model as built.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from flint import arb, arb_mat, ctx
from gmpy2 import mpq

from exactmem.constructions.fixed_point import round_fixed
from exactmem.core.balls import ball_midpoint, gelu_ball, softmax_balls, to_ball
from exactmem.core.errors import InputError
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    PositionalEncoding,
    Transformer,
)
from exactmem.datasets.attention_data import random_contexts
from exactmem.datasets.dataset import Dataset
from exactmem.runtime.progress import Steps

__all__ = [
    "MaddenWitness",
    "build",
    "contexts",
    "paper_parameters",
    "random_contexts",
    "rational_positions",
]

ZERO_LOGIT_GAP = 64  # a zero probability: its logit sits this far below the row's least positive
FRAC_BITS = 128  # the output weights: multiples of 2^-128 (logit error ≤ (m + 1)·max|Φ|·2^-129)
INT_BITS = 128  # ... of magnitude below 2^128 (2^43 at n = 1000), else the build is refused
POSITION_DENOMINATOR = 10**4  # q = a/b ≈ tan(θ/2) with b ≤ 10⁴ and |q| ≤ 10⁴


@dataclass(frozen=True)
class MaddenWitness:
    """What the construction intends (untrusted)."""

    contexts: int
    width: int
    d: int
    precision: int


def paper_parameters(omega_in: int, S: int, d: int, m: int, omega: int) -> int:
    """The experiments' count ωd + 4(d² + d) + (dm + m) + (mω + ω) with our differences: S·d
    positional entries, and attention maps without biases (4d²)."""
    return omega_in * d + S * d + 4 * d * d + (d * m + m) + (m * omega + omega)


def rational_positions(S: int, d: int) -> list[list[mpq]]:
    """S rows of d exact rationals: coordinates (2i, 2i + 1) are the rational point of the unit
    circle nearest (in q = tan(θ/2), denominators ≤ 10⁴) to angle θ = k/10000^{2i/d}; an odd
    last coordinate is k/S. A float only picks q; every point lies exactly on the circle.

    tan(θ/2) is clamped to [−10⁴, 10⁴] (the angles within 2·10⁻⁴ of π: the resolution the
    denominators give near 0), so q = a/b has b ≤ 10⁴ and |a| ≤ b(10⁴ + ½) (limit_denominator
    is at least as close as the nearest integer): every coordinate has numerator and
    denominator at most a² + b² < 2⁵⁴ in lowest terms, at most 109 bits (plugins/madden24.py)."""
    rows = []
    for k in range(S):
        row: list[mpq] = []
        for i in range(d // 2):
            theta = k / 10000 ** (2 * i / d)
            t = min(max(math.tan(theta / 2), -POSITION_DENOMINATOR), POSITION_DENOMINATOR)
            q = mpq(Fraction(t).limit_denominator(POSITION_DENOMINATOR))
            row += [(1 - q * q) / (1 + q * q), 2 * q / (1 + q * q)]
        if d % 2:
            row.append(mpq(k, S))
        rows.append(row)
    return rows


def contexts(ds: Dataset) -> list[int]:
    """Indices of the distinct contexts (first occurrences); equal contexts must agree."""
    if ds.task != "next-token":
        raise InputError(f"madden24 needs task 'next-token', the dataset has {ds.task!r}")
    first: dict = {}
    keep = []
    for i, s in enumerate(ds.sequences):
        j = first.setdefault(tuple(s), i)
        if j == i:
            keep.append(i)
            continue
        same = ds.labels[j] == ds.labels[i] and (not ds.targets or ds.targets[j] == ds.targets[i])
        if not same:
            raise InputError(
                f"sequences[{j}] and sequences[{i}] are the same context with different "
                "labels or targets"
            )
    return keep


def _rand(rng: random.Random, den: int) -> mpq:
    return mpq(rng.randint(-100, 100), 100 * den)


def _dot(u, v):
    return sum((a * b for a, b in zip(u, v, strict=True)), arb(0))


def _matvec(W, v):
    """W v for a matrix W of balls (converted once: :func:`_balls`)."""
    return [_dot(row, v) for row in W]


def _balls(W) -> list[list[arb]]:
    return [[to_ball(w) for w in row] for row in W]


def _last_output(tokens, emb, pos, head) -> list[arb]:
    """h(x): the residual stream at the last position after causal softmax attention."""
    WQ, WK, WV, WO = head
    xs = [
        [to_ball(emb[t][i] + pos[k][i]) for i in range(len(pos[k]))] for k, t in enumerate(tokens)
    ]
    q = _matvec(WQ, xs[-1])
    scores = [_dot(_matvec(WK, x), q) for x in xs]  # the last query reads every position
    a = softmax_balls(scores)
    values = [_matvec(WV, x) for x in xs]
    mixed = [sum((a[k] * values[k][j] for k in range(len(xs))), arb(0)) for j in range(len(WV))]
    return [x + o for x, o in zip(xs[-1], _matvec(WO, mixed), strict=True)]


def _features(H, W1, b1) -> list[list[arb]]:
    """Φ = GELU(W₁h + b₁) per context (one Arb matrix product for all contexts)."""
    Z = arb_mat(_balls(W1)) * arb_mat([list(r) for r in zip(*H, strict=True)])
    bias = [to_ball(b) for b in b1]
    return [[gelu_ball(Z[i, j] + bias[i]) for i in range(len(W1))] for j in range(len(H))]


def _log_targets(ds: Dataset, rows: list[int], precision: int) -> list[list[arb]]:
    """L_i = log π_i (zeros: ZERO_LOGIT_GAP below the least positive), or the one-hot margin."""
    C = ds.num_classes
    out = []
    for i in rows:
        if not ds.targets:
            out.append([arb(int(c + 1 == ds.labels[i])) for c in range(C)])
            continue
        logs = [to_ball(p).log() if p > 0 else None for p in ds.targets[i]]
        floor = min(x for x in logs if x is not None) - ZERO_LOGIT_GAP
        out.append([floor if x is None else x for x in logs])
    return out


def _solve_output(Phi, L, m, fixed: tuple[int, int]):
    """(W₂ rows per class, b₂): class 1 is zero; the others solve [Φ, 1](w; b) = L_c − L_1 on
    the first min(n, m + 1) contexts, with the unknowns Φ's first r − 1 columns and the bias
    (r = the number of equations), rounded to the fixed point ``fixed`` = (F, E) (InputError
    past 2^E). None if the system is not certifiably non-singular."""
    r = min(len(Phi), m + 1)
    A = arb_mat([row[: r - 1] + [arb(1)] for row in Phi[:r]])
    C = len(L[0])
    B = arb_mat([[L[i][c] - L[i][0] for c in range(1, C)] for i in range(r)])
    try:
        # midpoints only (floating LU at the working precision): the construction is untrusted
        # and the verifier certifies the rounded weights; a certified solve costs 3× more
        X = A.solve(B, algorithm="approx")
    except ZeroDivisionError:
        return None
    if not all(X[j, c].is_finite() for j in range(r) for c in range(C - 1)):
        return None
    F, E = fixed

    def rounded(j: int, c: int, what: str) -> mpq:
        return round_fixed(ball_midpoint(X[j, c - 1]), F, E, f"madden24: {what} of class {c + 1}")

    W2 = [[mpq(0)] * m]
    b2 = [mpq(0)]
    for c in range(1, C):
        W2.append(
            [rounded(j, c, f"the output weight W₂[{j + 1}]") for j in range(r - 1)]
            + [mpq(0)] * (m - r + 1)
        )
        b2.append(rounded(r - 1, c, "the output bias b₂"))
    return W2, b2


def _affine(matrix: list[list[mpq]], bias: list[mpq], in_dim: int, names=()) -> Affine:
    den = math.lcm(*[int(x.denominator) for x in [*bias, *(v for r in matrix for v in r)]])
    return Affine.from_dense(
        [[int(v * den) for v in r] for r in matrix],
        [int(b * den) for b in bias],
        den,
        names,
        in_dim,
    )


def build(
    dataset: Dataset, options: dict, *, progress: Callable[..., Any] | None = None
) -> tuple[Transformer, MaddenWitness]:
    """``build --construction madden24``: options d (default 8), width m (default n: the
    paper's m ≥ n; n − 1 is the least that fits, less is refuted), seed, precision (bits of the
    Arb solve, default 256, doubled on failure), frac_bits F and int_bits E (the output weights
    are multiples of 2^−F below 2^E in magnitude, default 128 each: InputError naming the
    weight past 2^E). ``progress`` hears the named steps (one per draw)."""
    steps = Steps(progress, "building madden24", 3)
    keep = contexts(dataset)
    n, S, V, C = len(keep), len(dataset.sequences[0]), len(dataset.vocab), dataset.num_classes
    d = options.get("d", 8)
    m = options.get("width", n)
    fixed = (options.get("frac_bits", FRAC_BITS), options.get("int_bits", INT_BITS))
    precision = options.get("precision", 256)
    if C < 2:
        raise InputError("madden24 needs at least 2 classes (C ≥ 2)")
    rng = random.Random(options.get("seed", 0))
    root = max(1, math.isqrt(d))
    pos = rational_positions(S, d)
    for attempt in range(6):
        if attempt:
            steps.add(2)
        steps.step(f"draw {attempt + 1}: the attention's outputs and the features Φ")
        emb = [[_rand(rng, 1) for _ in range(d)] for _ in range(V)]
        head = tuple([[_rand(rng, root) for _ in range(d)] for _ in range(d)] for _ in range(4))
        W1 = [[_rand(rng, root) for _ in range(d)] for _ in range(m)]
        b1 = [_rand(rng, 1) for _ in range(m)]
        old = ctx.prec
        ctx.prec = precision
        try:
            balls = tuple(_balls(W) for W in head)
            H = [_last_output(dataset.sequences[i], emb, pos, balls) for i in keep]
            Phi = _features(H, W1, b1)
            steps.step(f"draw {attempt + 1}: the output layer's solve")
            solved = _solve_output(Phi, _log_targets(dataset, keep, precision), m, fixed)
        finally:
            ctx.prec = old
        if solved is not None:
            break
        precision *= 2
    else:
        raise InputError(
            "the features [Φ, 1] stayed singular (or too ill-conditioned) in 6 draws; raise "
            "--set precision"
        )
    W2, b2 = solved
    steps.step("assembling the model")
    meta = {
        "construction": "madden24",
        "theorem": "Madden, Fox & Thrampoulidis 2024, lower bound (reconstruction)",
        "options": dict(options),
        "contexts": n,
        "width": m,
        "paper_parameters": paper_parameters(V, S, d, m, C),
    }
    lanes = tuple(f"x{i}" for i in range(d))
    embed = _affine([[emb[t][i] for t in range(V)] for i in range(d)], [mpq(0)] * d, V, lanes)
    WQ, WK, WV, WO = head
    attention = Attention(
        (
            AttentionHead(
                Affine.from_rationals(WQ, d),
                Affine.from_rationals(WK, d),
                Affine.from_rationals(WV, d),
                Affine.from_rationals(WO, d),
            ),
        ),
        "softmax",
        "decoder",
        "causal",
    )
    fnn = MLP(
        (_affine(W1, b1, d), _affine(W2, b2, m, tuple(f"logit{c + 1}" for c in range(C)))),
        residual=False,
        label="fnn",
        activation="gelu",
    )
    model = Transformer(
        V,
        (PositionalEncoding(tuple(tuple(p) for p in pos), "pos"), attention, fnn),
        embed,
        None,
        meta,
        token_inputs=True,
    )
    steps.done()
    return model, MaddenWitness(n, m, d, precision)
