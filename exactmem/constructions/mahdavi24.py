"""Mahdavi, Liao & Thrampoulidis 2024 (ICLR): one multi-head attention layer with H heads of
dimension d_h memorizes T = H(min(n, d_h) − 1) + 1 examples (query e^(t), context
E^(t) ∈ Q^{n×d}, n < d) under A1 (queries: Kruskal rank ≥ n) and A2 (every context has rank n).

RECONSTRUCTED: the paper's own proof was not available to us; the steps below are a
reconstruction consistent with its statements (high-rank features through the attention maps,
saturation allocating examples to heads, a readout solved linearly). So is the factorisation of
W^h into query and key maps of d_h rows (step 3) and the value map of d_h rows (step 5): the
paper states only the sizes W_Q^h, W_K^h ∈ R^{d×d_h}. A sequence is the n context tokens
followed by the query, the attention mask makes the query attend to its context only, and the
output is read at the query. With m = min(n, d_h) (``head_dim`` = d_h, default d):

1. example 0 is the anchor; the next H(m − 1) form H groups G_h of m − 1 examples (beyond
   capacity, with ``over_capacity``, the rest are saturated by every head);
2. designed attention on the head's own group: with f_t the dual basis of the group's queries
   and r_t = Eᵀ(EEᵀ)⁻¹ℓ_t, W_G = Σ f_t r_tᵀ gives scores e^(t)ᵀW_G x_j = ℓ_{t,j} (ℓ_t: 0/1 logits of
   the designed subset S_t = [n] ∖ {i_t}, distinct i_t);
3. saturation elsewhere: W^h = W_G + λ u vᵀ with u ⊥ the group's queries and v separating every
   context, so every other example attends to the single token argmax_j sign(uᵀe)·vᵀx_j.
   W^h = [f_t…, u]·[r_t…, λv]ᵀ has rank ≤ m ≤ d_h: the query map has the rows f_t and u, the
   key map the rows r_t and λv, both padded with zero rows to d_h;
4. rank: the features z^(t) = [E^(t)ᵀ a_h^(t)]_h have rank T (checked exactly in the hardmax
   limit, where a group example attends uniformly to S_t: designed ties);
5. readout: solve Z w = y on T pivot columns, at most d_h in each head's block; the value map
   W_V^h (d_h rows) selects those coordinates and W_O^h carries the weights to the output
   lane(s).

``score="hardmax"`` is the exact limit model (every weight rational, every output exact).
``score="softmax"`` keeps the weights at a finite λ and re-solves the readout in ball
arithmetic; its certificate is rigorous (Arb enclosures) with a stated tolerance (regression)
or an argmax margin (classification).

Every weight has a size the dataset's figures bound (exactmem/plugins/mahdavi24.py derives
``max_bits``): the exact solves by Cramer's rule and Hadamard's inequality, a given temperature
p/q by its denominator (refused above 2⁶⁴), and the readout re-solved on balls
(``readout_solve=resolve``) by its fixed point: each midpoint rounded to the nearest multiple of
2^−F (``frac_bits``, default 64) and the build refused when one reaches 2^E (``int_bits``,
default 64).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flint import arb_mat, ctx, fmpq, fmpq_mat
from gmpy2 import mpq

from exactmem.constructions.fixed_point import round_fixed
from exactmem.core.balls import ball_bounds, ball_midpoint, softmax_balls, to_ball
from exactmem.core.errors import InputError
from exactmem.core.model import Affine, Attention, AttentionHead, Transformer
from exactmem.datasets.assumptions import mahdavi_assumptions as check_assumptions
from exactmem.datasets.assumptions import mahdavi_capacity as capacity
from exactmem.datasets.assumptions import mahdavi_examples as examples
from exactmem.datasets.assumptions import rank_of
from exactmem.datasets.assumptions import shared_context_rank_ceiling as rank_ceiling
from exactmem.datasets.attention_data import random_instance
from exactmem.datasets.dataset import Dataset
from exactmem.runtime.progress import Steps

__all__ = [
    "MahdaviWitness",
    "build",
    "capacity",
    "check_assumptions",
    "examples",
    "random_instance",
    "rank_ceiling",
    "rank_of",
]

Vec = tuple[mpq, ...]


# --------------------------------------------------------------------------- exact algebra


def _fmat(rows: Sequence[Sequence[mpq]]) -> fmpq_mat:
    return fmpq_mat(
        [[fmpq(int(mpq(x).numerator), int(mpq(x).denominator)) for x in r] for r in rows]
    )


def _rows(m: fmpq_mat) -> list[list[mpq]]:
    return [[mpq(int(x.p), int(x.q)) for x in row] for row in m.tolist()]


def _transpose(rows):
    return [list(c) for c in zip(*rows, strict=True)]


def _matmul(a, b):
    bt = _transpose(b)
    return [[sum((x * y for x, y in zip(r, c, strict=True)), mpq(0)) for c in bt] for r in a]


def _dot(u, v) -> mpq:
    return sum((mpq(a) * b for a, b in zip(u, v, strict=True)), mpq(0))


def _pivots(rows) -> list[int]:
    """Pivot columns of the reduced row echelon form (exact)."""
    rref, rank = _fmat(rows).rref()
    piv = []
    for r in _rows(rref)[:rank]:
        piv.append(next(j for j, x in enumerate(r) if x != 0))
    return piv


# --------------------------------------------------------------------------- the design


@dataclass(frozen=True)
class MahdaviWitness:
    """What the construction intends (untrusted)."""

    heads: int
    groups: tuple[tuple[int, ...], ...]
    designed: tuple[tuple[int, ...], ...]  # S_t per example (empty for the anchor)
    lam: mpq
    feature_rank: int
    capacity: int
    precision: int = 0
    temperature: mpq = mpq(1)
    head_dim: int = 0


def _head(group, queries, contexts, rng, d, n):
    """Steps 2–3 for one head: (W_G, u, v, designed subsets) with W_G = Σ_t f_t r_tᵀ kept as
    its factors ([f_t], [r_t]), so W^h = W_G + λ·u vᵀ = [f_t…, u]·[r_t…, λv]ᵀ has rank
    ≤ |G_h| + 1."""
    Q = [list(queries[t]) for t in group]  # k × d (rows are queries)
    designed = {}
    fs: list[list[mpq]] = []
    rs: list[list[mpq]] = []
    if group:
        gram = _matmul(Q, _transpose(Q))
        F = _transpose(_rows(_fmat(gram).solve(_fmat(Q))))  # d × k: columns f_t
        # uniform attention on [n] ∖ {i}, distinct i: these n points are an affine image of the
        # simplex's vertices, so any n − 1 of them and a saturated vertex are affinely
        # independent (a singleton would look saturated)
        left_out = rng.sample(range(n), len(group))
        for col, t in enumerate(group):
            S = tuple(j for j in range(n) if j != left_out[col])
            designed[t] = S
            ell = [[mpq(1 if j in S else 0)] for j in range(n)]
            E = contexts[t]
            r = _rows(_fmat(_matmul(E, _transpose(E))).solve(_fmat(ell)))  # n × 1
            r_t = [sum((E[j][i] * r[j][0] for j in range(n)), mpq(0)) for i in range(d)]
            fs.append([F[i][col] for i in range(d)])
            rs.append(r_t)
    for _ in range(64):
        v0 = [mpq(rng.randint(-9, 9)) for _ in range(d)]
        if group:
            gram = _matmul(Q, _transpose(Q))
            coef = _rows(_fmat(gram).solve(_fmat([[_dot(q, v0)] for q in Q])))
            u = [
                v0[i] - sum((coef[c][0] * Q[c][i] for c in range(len(Q))), mpq(0)) for i in range(d)
            ]
        else:
            u = v0
        others = [t for t in range(len(queries)) if t not in designed]
        if all(_dot(u, queries[t]) != 0 for t in others):
            break
    else:
        raise InputError("no saturating direction found (are the queries in general position?)")
    for _ in range(64):
        v = [mpq(rng.randint(-99, 99)) for _ in range(d)]
        if all(len({_dot(v, x) for x in ctx_}) == n for ctx_ in contexts):
            break
    else:
        raise InputError("no direction separates the tokens of every context")
    return (fs, rs), u, v, designed


def _designed_scores(W, e, E) -> list[mpq]:
    """eᵀ W_G x_j for the tokens x_j of E, with W_G = Σ f_t r_tᵀ given as ([f_t], [r_t])."""
    fs, rs = W
    qe = [_dot(f, e) for f in fs]
    return [sum((a * _dot(r, x) for a, r in zip(qe, rs, strict=True)), mpq(0)) for x in E]


def _saturating_lambda(W, u, v, queries, contexts, outside) -> mpq:
    """The least integer λ ≥ 1 for which every example outside the group has a unique hardmax
    at argmax_j sign(uᵀe)·vᵀx_j: λ·|uᵀe|·(value gap) must exceed the spread of the designed
    scores (exact)."""
    need = mpq(0)
    for t in outside:
        e, E = queries[t], contexts[t]
        c = _designed_scores(W, e, E)
        s = _dot(u, e)
        vals = sorted((s * _dot(v, x) for x in E), reverse=True)
        gap = vals[0] - vals[1]
        spread = max(c) - min(c)
        need = max(need, spread / gap)
    return mpq(math.floor(need) + 1)


def _attention_rows(W, lam, u, v, e, E, score, precision):
    """Scores and weights of one head on one example (exact for hardmax, balls for softmax)."""
    ue = lam * _dot(u, e)
    scores = [c + ue * _dot(v, x) for c, x in zip(_designed_scores(W, e, E), E, strict=True)]
    if score == "hardmax":
        top = max(scores)
        tied = [j for j, s in enumerate(scores) if s == top]
        return [mpq(1, len(tied)) if j in tied else mpq(0) for j in range(len(E))]
    old = ctx.prec
    ctx.prec = precision
    try:
        return softmax_balls([to_ball(s) for s in scores])
    finally:
        ctx.prec = old


def _features(heads, queries, contexts, score, precision):
    """Z: row t is [E^(t)ᵀ a_h^(t)]_h (exact rationals or balls)."""
    Z = []
    for e, E in zip(queries, contexts, strict=True):
        row = []
        ball = score != "hardmax"
        cast = (lambda x: to_ball(x)) if ball else (lambda x: x)
        old = ctx.prec
        ctx.prec = max(precision, 53)
        try:
            for W, lam, u, v in heads:
                a = _attention_rows(W, lam, u, v, e, E, score, precision)
                for i in range(len(e)):
                    terms = [a[j] * cast(E[j][i]) for j in range(len(E))]
                    row.append(sum(terms[1:], terms[0]))
        finally:
            ctx.prec = old
        Z.append(row)
    return Z


def _model(factors, lams, temperature, W_read, piv, d, d_h, outputs, score, meta) -> Transformer:
    """E_in = [I_d; 0], one attention layer of H heads of dimension d_h, E_out reads the output
    lane(s).

    Head h (reconstructed: the factorisation is ours, the paper states only W_Q^h, W_K^h ∈
    R^{d×d_h}): the query map has the rows f_t (t ∈ G_h) and u, the key map the rows r_t and
    λ·v, both padded with zero rows to d_h, so that qᵀk = eᵀ(W_G + λ u vᵀ)x. The value map
    (the paper's W_V^h, here d × d_h as well) selects the ≤ d_h coordinates of Eᵀa_h that the
    readout uses; the output map W_O^h carries the readout weights on them."""
    width = d + outputs
    lanes = tuple(f"x{i}" for i in range(d)) + tuple(f"out{c}" for c in range(outputs))
    embed = Affine(d, tuple(((i, 1),) for i in range(d)) + ((),) * outputs, (0,) * width, 1, lanes)
    pad = [mpq(0)] * outputs
    zero = [mpq(0)] * width
    att_heads = []
    for h, ((fs, rs, u, v), lam) in enumerate(zip(factors, lams, strict=True)):
        q_rows = [list(f) + pad for f in fs] + [list(u) + pad]
        k_rows = [[x * temperature for x in r] + pad for r in rs]
        k_rows.append([x * lam * temperature for x in v] + pad)
        q_rows += [zero] * (d_h - len(q_rows))
        k_rows += [zero] * (d_h - len(k_rows))
        cols = [j - h * d for j in piv if h * d <= j < (h + 1) * d]
        v_rows = [[mpq(int(i == j)) for i in range(width)] for j in cols]
        v_rows += [zero] * (d_h - len(v_rows))
        o_rows = [[mpq(0)] * d_h for _ in range(d)]
        for c in range(outputs):
            o_rows.append([W_read[c][h * d + j] for j in cols] + [mpq(0)] * (d_h - len(cols)))
        att_heads.append(
            AttentionHead(
                Affine.from_rationals(q_rows, width),
                Affine.from_rationals(k_rows, width),
                Affine.from_rationals(v_rows, width),
                Affine.from_rationals(o_rows, d_h),
            )
        )
    unembed = Affine(width, tuple(((d + c, 1),) for c in range(outputs)), (0,) * outputs)
    return Transformer(
        d, (Attention(tuple(att_heads), score, "mha", "context"),), embed, unembed, meta
    )


def _capped_pivots(Z, H: int, d: int, d_h: int) -> list[int]:
    """Columns of Z, at most d_h in each head's block of d, that span its column space: the
    leftmost independent ones (the plain pivots when d_h = d), else taken in turn from each
    block. A readout through a value map of d_h rows can use no more (rank-checked, exact)."""
    target = rank_of(Z)
    orders = [list(range(H * d)), [h * d + i for i in range(d) for h in range(H)]]
    for order in orders:
        chosen: list[int] = []
        used = [0] * H
        for j in order:
            if used[j // d] == d_h:
                continue
            if rank_of([[row[c] for c in chosen + [j]] for row in Z]) > len(chosen):
                chosen.append(j)
                used[j // d] += 1
                if len(chosen) == target:
                    return sorted(chosen)
    raise InputError(f"no {target} independent feature columns with at most d_h = {d_h} per head")


def _targets(ds: Dataset, readout: str) -> list[list[mpq]]:
    if readout == "regression":
        return [[mpq(y)] for y in ds.labels]
    return [[mpq(1 if c + 1 == y else 0) for c in range(ds.num_classes)] for y in ds.labels]


FRAC_BITS = 64
"""F: a readout solved on balls is rounded to multiples of 2^−F (``--set frac_bits``)."""
INT_BITS = 64
"""E: a readout solved on balls reaching 2^E in magnitude is refused (``--set int_bits``)."""
TEMPERATURE_DENOMINATOR = 2**64
"""The largest denominator of a given temperature (its value is at most 2⁶⁴, the option's
limit): a temperature p/q then costs the key maps at most log₂(p·q) ≤ 192 bits."""


def _solve_balls(Z, piv, Y, precision, fixed=(FRAC_BITS, INT_BITS)) -> list[list[mpq]]:
    """Readout w on the pivot columns from ball features; midpoints, rounded to the fixed
    point ``fixed`` = (F, E) (:func:`~exactmem.constructions.fixed_point.round_fixed`: at most
    E + 2F + 1 bits, exactmem/plugins/mahdavi24.py), become the rational weights (the verifier
    evaluates the resulting model independently)."""
    old = ctx.prec
    ctx.prec = precision
    try:
        A = arb_mat([[Z[t][j] for j in piv] for t in range(len(Z))])
        B = arb_mat([[to_ball(y) for y in row] for row in Y])
        X = A.solve(B)
        cols = len(Y[0])
        width = len(Z[0])
        W_read = [[mpq(0)] * width for _ in range(cols)]
        for i, j in enumerate(piv):
            for c in range(cols):
                W_read[c][j] = round_fixed(
                    ball_midpoint(X[i, c]), *fixed, f"mahdavi24: readout weight [{c}][{j}]"
                )
        return W_read
    finally:
        ctx.prec = old


def _scale(W, factor):
    fs, rs = W
    return fs, [[x * factor for x in r] for r in rs]


def _exact_readout(Z0, piv, Y, T, outputs, width) -> list[list[mpq]]:
    """Solve Z w = y exactly on the pivot columns (the first rank-many examples if Z is rank
    deficient: then the others are not fitted and the verifier says so)."""
    rows = _pivots(_transpose(Z0))  # independent examples (all of them when rank Z = T)
    X = _rows(_fmat([[Z0[t][j] for j in piv] for t in rows]).solve(_fmat([Y[t] for t in rows])))
    W_read = [[mpq(0)] * width for _ in range(outputs)]
    for i, j in enumerate(piv):
        for c in range(outputs):
            W_read[c][j] = X[i][c]
    return W_read


def solve_of(options: dict) -> str:
    return options.get("readout_solve", "limit")


def _auto_temperature(
    heads,
    W_read,
    queries,
    contexts,
    Y,
    piv,
    tol,
    precision,
    solve,
    steps: Steps | None = None,
    fixed=(FRAC_BITS, INT_BITS),
) -> mpq:
    """Double the temperature until the outputs are within ``tol`` of the targets (regression)
    or keep their argmax with margin (classification), checked on Arb balls; a re-solved
    readout beyond the fixed point's 2^E fails the temperature, not the build."""
    temperature = mpq(1)
    beyond = ""
    for _ in range(14):
        if steps is not None:
            steps.step(f"temperature {temperature}")
        scaled = [(_scale(W, temperature), lam * temperature, u, v) for W, lam, u, v in heads]
        Z = _features(scaled, queries, contexts, "softmax", precision)
        read = W_read
        if solve == "resolve":
            try:
                read = _solve_balls(Z[: len(piv)], piv, Y[: len(piv)], precision, fixed)
            except InputError as exc:
                beyond = f" ({exc})"
                temperature *= 2
                continue
        old = ctx.prec
        ctx.prec = precision
        try:
            ok = True
            for z, y in zip(Z, Y, strict=True):
                outs = [sum((z[j] * to_ball(w[j]) for j in piv), to_ball(mpq(0))) for w in read]
                for o, target in zip(outs, y, strict=True):
                    lo, hi = ball_bounds(o - to_ball(target))
                    if not (-tol < lo and hi < tol):
                        ok = False
        finally:
            ctx.prec = old
        if ok:
            return temperature
        temperature *= 2
    raise InputError(f"no temperature up to 2^13 brings the softmax model within tolerance{beyond}")


def build(
    dataset: Dataset, options: dict, *, progress: Callable[..., Any] | None = None
) -> tuple[Transformer, MahdaviWitness]:
    """``build --construction mahdavi24``; ``progress`` hears its steps (one per head)."""
    queries, contexts = examples(dataset)
    T, n, d = len(queries), len(contexts[0]), len(queries[0])
    # what the bits bound reads (exactmem/plugins/mahdavi24.py): n context tokens in every
    # example (a dataset file's rule, also for a Dataset made in Python) and labels in 1..C
    if any(len(c) != n for c in contexts):
        raise InputError(f"mahdavi24: every sequence must have the length n + 1 = {n + 1}")
    if any(not 1 <= y <= dataset.num_classes for y in dataset.labels):
        raise InputError(f"mahdavi24: every label must lie in 1..C = {dataset.num_classes}")
    if options.get("temperature") and mpq(options["temperature"]).denominator > (
        TEMPERATURE_DENOMINATOR
    ):
        raise InputError(
            f"--set temperature={options['temperature']}: its denominator must be at most 2⁶⁴ "
            "(the key maps' bits grow with it)"
        )
    seed = options.get("seed", 0)
    score = options.get("score", "hardmax")
    readout = options.get("readout", "regression")
    if score not in ("hardmax", "softmax") or readout not in ("regression", "classification"):
        raise InputError(
            "mahdavi24: score must be hardmax|softmax, readout regression|classification"
        )
    steps = Steps(progress, "building mahdavi24", 5)  # A1, features, pivots, readout, model
    steps.step("assumption A1")
    report = check_assumptions(queries, contexts, seed=seed)
    d_h = options.get("head_dim", d)
    if not 2 <= d_h <= d:
        raise InputError(f"mahdavi24: head_dim must lie in [2, d = {d}], got {d_h}")
    m = min(n, d_h)
    H = options.get("heads") or max(1, math.ceil((T - 1) / (m - 1)))
    cap = capacity(H, n, d_h)
    over = T > cap
    if over and not options.get("over_capacity"):
        raise InputError(
            f"{T} examples exceed the capacity H(min(n, d_h) − 1) + 1 = {cap} "
            f"of {H} heads of dimension {d_h} (--set heads=… or over_capacity=true to try anyway)"
        )
    rng = random.Random(seed)
    rest = list(range(1, T))
    # beyond capacity the construction for the first H(m − 1) + 1 examples is kept and the
    # rest are saturated by every head: Z then reaches rank H(m − 1) + 1, no more
    groups = [tuple(rest[h * (m - 1) : (h + 1) * (m - 1)]) for h in range(H)]
    outputs = 1 if readout == "regression" else dataset.num_classes
    Y = _targets(dataset, readout)
    searched = score == "softmax" and not options.get("temperature")
    steps.add(H + searched + (score == "softmax" and solve_of(options) == "resolve"))
    for attempt in range(16):
        if attempt:
            steps.add(H + 1)  # another design
        parts = []
        for h, g in enumerate(groups):
            steps.step(f"head {h + 1}/{H}")
            parts.append(_head(list(g), queries, contexts, rng, d, n))
        steps.step(f"features of {T} examples")
        heads = []
        for (W, u, v, *_), g in zip(parts, groups, strict=True):
            outside = [t for t in range(T) if t not in g]
            heads.append((W, _saturating_lambda(W, u, v, queries, contexts, outside), u, v))
        Z0 = _features(heads, queries, contexts, "hardmax", 0)
        rank = rank_of(Z0)
        if rank >= min(T, cap):
            break
    else:
        raise InputError(f"the features did not reach rank {min(T, cap)} in 16 designs")
    designed = [()] * T
    for *_, des in parts:
        for t, S in des.items():
            designed[t] = S
    steps.step("pivot columns")
    piv = _capped_pivots(Z0, H, d, d_h)
    steps.step("exact readout")
    W_read = _exact_readout(Z0, piv, Y, T, outputs, H * d)
    temperature = mpq(1)
    precision = 0
    solve = solve_of(options)
    fixed = (options.get("frac_bits", FRAC_BITS), options.get("int_bits", INT_BITS))
    if score == "softmax":
        tol = mpq(options.get("tolerance", "1/1000"))
        precision = options.get("precision", 256)
        if options.get("temperature"):
            temperature = mpq(options["temperature"])
        else:  # the least power of two at which the construction's own check passes
            temperature = _auto_temperature(
                heads, W_read, queries, contexts, Y, piv, tol, precision, solve, steps, fixed
            )
        if solve == "resolve":
            steps.step("readout on balls")
            scaled = [(_scale(W, temperature), lam * temperature, u, v) for W, lam, u, v in heads]
            Zs = _features(scaled, queries, contexts, "softmax", precision)
            rows = list(range(min(T, len(piv))))
            W_read = _solve_balls(
                [Zs[t] for t in rows], piv, [Y[t] for t in rows], precision, fixed
            )
    meta = {
        "construction": "mahdavi24",
        "theorem": "Mahdavi, Liao & Thrampoulidis 2024, Theorem 1 (reconstruction)",
        "options": {k: v for k, v in options.items()},
        "readout": readout,
        "tolerance": str(options.get("tolerance", "1/1000")),
        "temperature": str(temperature),
        "readout_solve": solve,
        "heads": H,
        "head_dim": d_h,
        "capacity": cap,
        "assumption_A1": report.describe(),
    }
    steps.step("the model")
    factors = [(fs, rs, u, v) for ((fs, rs), u, v, _) in parts]
    lams = [lam for _, lam, _, _ in heads]
    model = _model(factors, lams, temperature, W_read, piv, d, d_h, outputs, score, meta)
    steps.done()
    witness = MahdaviWitness(
        H, tuple(groups), tuple(designed), lams[0], rank, cap, precision, temperature, d_h
    )
    return model, witness
