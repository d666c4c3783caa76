"""Kajitsuka & Sato 2024's checklist, measured on the model (the seq-to-seq labels on balls
are :mod:`exactmem.checks.seq2seq_balls`, which this checklist reads the same evaluation of).

The model the checklist reads is one softmax self-attention layer with a single head of rank
one (W_Q, W_K, W_V of one row, W_O of one column) followed by one token-wise FFN — plain or
residual, of one hidden layer or more — on the raw tokens, with an optional read-out map. Its
*context id* of a token is what the FFN's first layer reads: wᵀz after the attention, w the
common direction of that layer's rows (every row a multiple of w, else the model has not the
structure the checklist reads).

* ``ks24.separation``: the hypothesis — tokenwise (r_min, r_max, ε)-separatedness, exact
  (r_min > 0), the tokens of every sequence pairwise distinct — and the projection step:
  s = W_K z distinct on the distinct tokens;
* ``ks24.boltzmann``: the head is the Boltzmann operator, W_Q = λ·W_K with λ > 0, W_V a non-zero
  multiple of W_K, and the ids read the head (β = μ·wᵀW_O ≠ 0), from the weights;
* ``ks24.contextual_mapping``: the ids of different (multiset, token) classes are certified
  apart — the least distance between the enclosures of two classes, against their widest
  enclosure — reported beside the paper's worst-case margin δ, which is exponentially small and
  not what the model is held to; two classes with one exact id refute;
* ``ks24.requantization`` (an FFN of two hidden layers or more, the construction's form): every
  unit of the FFN's last hidden layer takes an exact value in {0, 1} at every token.
* ``ks24.dataflow``: the output depends on the context only through the FFN's units that read
  the id (a cut over the non-zero weights: past the attention only lanes no head writes may go
  around them), some of them reach the output without cancelling in every margin, and no
  constant in place of the FFN gives every label (:func:`_dataflow`, :func:`_knocked_out`).

Every value comes from the trusted evaluators on the model as its file defines it: exactly
(:func:`exactmem.evaluate.reference.run`) where the head's scores are equal in every column, as
with λ = 0, else on Arb balls (:func:`exactmem.evaluate.softmax.run_balls`, on the model, its
prefix up to the attention, or its FFN cut after the last hidden layer) — or, for a ReLU FFN
with a rank-one first layer, through :func:`exactmem.checks.rank_one.shortcut`, the same function
exactly rearranged (O(log K) per token; tested against the ball evaluator). A figure left
undecided up to the precision limit is *inconclusive* (exit 4), unless another check failed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from flint import arb, ctx
from gmpy2 import mpq

from exactmem.checks.attention import brief, reaches_a_margin
from exactmem.checks.certificate import Check, ChecklistStructureError, _examples
from exactmem.checks.rank_one import rank_one_direction
from exactmem.checks.seq2seq_balls import _LAST_RUN, _balls, _to_last_hidden
from exactmem.core.errors import InconclusiveError
from exactmem.core.exact import format_rational
from exactmem.core.model import MLP, Affine, Attention
from exactmem.datasets.separation import Separation, separation
from exactmem.evaluate.softmax import (
    MAX_PRECISION,
    ball_bounds,
    decide,
    to_ball,
)

__all__ = ["check_ks24", "paper_delta_exponent"]


# evaluate the same model at the same precisions; the entry holds its objects, so an `is` match
# cannot be a recycled id


# --------------------------------------------------------------------------- the checklist


def _layers(model) -> tuple[Attention, MLP, list[int], list[Fraction]]:
    """The architecture the checklist reads, the id direction w (primitive integer vector) and
    the factors a_j ≠ 0 with the FFN's first-layer rows a_j·w."""
    subs = model.sublayers
    if (
        len(subs) != 2
        or not isinstance(subs[0], Attention)
        or not isinstance(subs[1], MLP)
        or model.embed is not None
        or model.token_inputs
    ):
        raise ChecklistStructureError(
            "Kajitsuka & Sato 2024's model is one attention layer and then one FFN on the raw "
            "tokens (and an optional read-out map)"
        )
    att, ffn = subs
    if att.score != "softmax" or att.mask != "none" or len(att.heads) != 1:
        raise ChecklistStructureError("its attention is not one softmax head over every position")
    if att.scale != 1:  # λ is read from W_Q and W_K alone: a score divisor would change it
        raise ChecklistStructureError(f"its scores are divided by √{att.scale} (the λ of W_Q, W_K)")
    h = att.heads[0]
    if (h.query.out_dim, h.key.out_dim, h.value.out_dim, h.output.in_dim) != (1, 1, 1, 1):
        raise ChecklistStructureError("its W_Q, W_K, W_V, W_O are not of rank one (1 row/column)")
    if len(ffn.layers) < 2:
        raise ChecklistStructureError("its FFN has no hidden layer")
    found = rank_one_direction(ffn.layers[0])
    if found is None:
        raise ChecklistStructureError(
            "the rows of its FFN's first layer are not multiples of one direction: it reads no "
            "single context id"
        )
    w, factors = found
    return att, ffn, w, factors


def _row(a: Affine) -> list[mpq]:
    """The one row of a rank-one map as exact rationals (its denominator divided out)."""
    dense = [mpq(0)] * a.in_dim
    for c, x in a.rows[0]:
        dense[c] = mpq(x, a.denominator)
    return dense


def _ratio(row: list[mpq], base: list[mpq]) -> mpq | None:
    """μ with row = μ·base exactly (base ≠ 0), else None."""
    pivot = next((i for i, x in enumerate(base) if x), None)
    if pivot is None:
        return None
    mu = row[pivot] / base[pivot]
    return mu if all(x == mu * y for x, y in zip(row, base, strict=True)) else None


def _boltzmann(att: Attention, w: list[int]) -> Check:
    """The head is the Boltzmann operator of the paper: W_Q = λ·W_K with λ > 0 and W_V = μ·W_K
    (μ ≠ 0), so token k receives Σ_l s_l e^{λ s_k s_l} / Σ_l e^{λ s_k s_l} (s = W_K z) times
    μ·W_O, and the ids the FFN reads see it: β = μ·wᵀW_O ≠ 0. Read from the weights, exactly;
    λ = 0 is plain averaging, which the paper's contextual mapping does not rest on."""
    h = att.heads[0]
    key = _row(h.key)
    lam = _ratio(_row(h.query), key)
    mu = _ratio(_row(h.value), key)
    u = [mpq(row[0][1], h.output.denominator) if row else mpq(0) for row in h.output.rows]
    beta = None if mu is None else mu * sum((a * b for a, b in zip(w, u, strict=True)), mpq(0))
    bad = []
    if not any(key):
        bad.append("W_K = 0: every score is 0")
    elif lam is None:
        bad.append("W_Q is not a multiple of W_K: the scores are not λ·s_k·s_l")
    elif lam <= 0:
        bad.append(
            f"W_Q = λ·W_K with λ = {format_rational(lam)}: "
            + ("plain averaging, no Boltzmann operator" if lam == 0 else "a negative temperature")
        )
    if mu is None or mu == 0:
        bad.append("W_V is not a non-zero multiple of W_K: the values are not the scores' s")
    elif beta == 0:
        bad.append("the FFN's id direction w is orthogonal to W_O: the ids never see the head")
    figures = {
        "temperature": None if lam is None else format_rational(lam),
        "beta": None if beta is None else format_rational(beta),
    }
    detail = (
        f"W_Q = λ·W_K with λ = {format_rational(lam)}, W_V = {format_rational(mu)}·W_K, the ids "
        f"read the head with β = {format_rational(beta)}"
        if not bad
        else "; ".join(bad)
    )
    return Check("ks24.boltzmann", not bad, detail, figures)


def _separation(att: Attention, ds, sep: Separation) -> Check:
    """The hypothesis, exactly (no zero token, the tokens of a sequence pairwise distinct) and
    the projection step: s = W_K z takes distinct values on the distinct tokens, so the scores
    λ s_k s_l tell the tokens apart (the paper's random direction v with |vᵀ(z − z′)| > 0)."""
    key = _row(att.heads[0].key)
    seen: dict[mpq, tuple[int, ...]] = {}
    merged = None
    for seq in ds.sequences:
        for t in seq:
            z = tuple(ds.vocab[t])
            s = sum((a * b for a, b in zip(key, z, strict=True)), mpq(0))
            other = seen.setdefault(s, z)
            if other != z and merged is None:
                merged = (other, z, s)
    bad = []
    if sep.zero_tokens:
        bad.append(f"vocab[{sep.zero_tokens[0]}] is the zero vector: r_min = 0")
    if sep.repeats:
        i, k, j = sep.repeats[0]
        bad.append(
            f"sequences[{i}][{j}] and sequences[{i}][{k}] are equal tokens: they receive one "
            "context id, and a contextual mapping gives every position of a sequence its own"
        )
    if merged is not None:
        a, b, s = merged
        bad.append(
            f"W_K projects the distinct tokens {_vec(a)} and {_vec(b)} to one value "
            f"s = {format_rational(s)}: the scores cannot tell them apart"
        )
    detail = (
        "tokenwise separated: " + sep.describe() + f"; W_K z distinct on the {len(seen)} tokens"
        if not bad
        else "; ".join(bad)
    )
    return Check("ks24.separation", not bad, detail, sep.figures())


def _head_lanes(att: Attention) -> set[int]:
    """The lanes the head may write: every row of W_O with a weight (W_O W_V ≠ 0 or not — a
    superset is the safe side: a lane counted as written is never a token lane)."""
    return {i for h in att.heads for i, row in enumerate(h.output.rows) if row}


def _cancels(model, ffn: MLP, j: int) -> bool:
    """Whether hidden unit ``j`` of a one-hidden-layer FFN reaches the output only in a way that
    decides nothing: its contribution ReLU(·)·U·W₂[:, j] (U the read-out, the identity without
    one) is 0, or — C logits read by argmax — the same in every logit, so it cancels in every
    margin (:func:`~exactmem.checks.attention.reaches_a_margin`). Exact, from the weights."""
    last = ffn.layers[-1]
    column = [[mpq(dict(row).get(j, 0), last.denominator)] for row in last.rows]
    return not reaches_a_margin(model, column)


def _dataflow(model, ds, tolerance: mpq | None = None, undecided: list[str] | None = None) -> Check:
    """``ks24.dataflow``: the output depends on the context only through the FFN's units that
    read the context id wᵀz — the units that map the ids to labels — and those units matter.

    (i) A cut over the non-zero weights (:mod:`exactmem.checks.dataflow`): every path from the
    input to the output crosses those units or a *token lane* after the attention — a lane no
    head writes (no weight in that row of any W_O), which is the token's own coordinate z_i,
    the same in every context (in the residual form F(z) = z + W₂ReLU(W₁z + b₁) + b₂ the
    residual adds it back). A lane the head writes reaching the output around the FFN (through
    the residual) fails, even if the head reads only that lane.
    (ii) Some of the units reach the output in a way that decides something: W₂ ≠ 0 on what the
    read-out reads and, for an FFN of one hidden layer, the unit's column through the read-out
    neither 0 nor — argmax over C logits — the same in every logit (it would cancel in every
    margin) (:func:`_cancels`).
    (iii) The knock-out (:func:`_knocked_out`): no constant in place of the FFN may give every
    label — judged as the labels are, at the user's tolerance or by a strict argmax. With the
    FFN knocked out (W₂ = 0) the outputs are token-wise; any constant the FFN could be replaced
    by shifts them all alike, and if one shift gives every label the FFN is dead on the data
    (the zero constant alone would pass an FFN adding a constant, or a tie)."""
    from exactmem.checks.dataflow import cut_check, graph

    g = graph(model)
    att, ffn = model.sublayers
    first = g.hidden[1][0]
    level = g.levels[first]
    assert level.deps is not None
    units = ffn.layers[0].out_dim
    ids = {(first, j) for j in range(units) if level.deps[j]}
    stream = g.streams[1]
    written = _head_lanes(att)
    tokens = {(stream, i) for i in range(g.levels[stream].width) if i not in written}
    around = cut_check(
        "ks24.dataflow",
        model,
        ids | tokens,
        what=f"the FFN's {len(ids)} units reading the id wᵀz (or a token lane no head writes)",
        g=g,
        require_use=False,
    )
    reached = set(range(g.levels[g.output].width))
    read_at: dict[int, set[int]] = {}
    for at in range(g.output, 0, -1):
        deps = g.levels[at].deps
        assert deps is not None
        reached = {c for i in reached for c in deps[i]}
        read_at[at - 1] = reached
    read = {j for _, j in ids} & read_at[first]
    deciding = {j for j in read if len(ffn.layers) > 2 or not _cancels(model, ffn, j)}
    figures = {
        **around.figures,
        "id_units": len(ids),
        "id_units_read": len(read),
        "id_units_deciding": len(deciding),
        "head_lanes": len(written),
    }
    if not read_at[0]:  # one class: the output is a constant of the weights, nothing to bypass
        return Check(
            "ks24.dataflow", True, "the output is a constant (it reads no input lane)", figures
        )
    bad = []
    if not around.passed:
        bad.append(
            "the context reaches the output around the FFN's units (a lane the head writes is "
            "read past them): " + around.detail
        )
    if not read:
        bad.append(
            "the output reads none of the FFN's units that read the id wᵀz (W₂ = 0 on what the "
            "read-out reads): the FFN is dead code"
        )
    elif not deciding:
        bad.append(
            f"each of the {len(read)} FFN units the output reads reaches it by the same amount "
            "in every logit (or not at all): its contribution cancels in every margin, the FFN "
            "decides nothing"
        )
    if not bad:
        bad += _knocked_out(model, ds, tolerance, [] if undecided is None else undecided)
    detail = (
        f"every path from the input to the output crosses the FFN's units reading the id wᵀz "
        f"({len(read)} of {len(ids)} read"
        + (f", {len(deciding)} not cancelling" if len(ffn.layers) == 2 else "")
        + ")"
        + (f" or one of the {len(tokens)} token lanes no head writes" if ffn.residual else "")
        + "; no constant in place of the FFN gives every label"
    )
    return Check("ks24.dataflow", not bad, "; ".join(bad) if bad else detail, figures)


def _judged(outputs, labels):
    """(output column, label) at every judged position, as the labels check reads them: every
    position of a seq-to-seq label (a tuple), the last one for a sequence's single label."""
    for out, y in zip(outputs, labels, strict=True):
        if isinstance(y, tuple | list):
            yield from zip(out, y, strict=True)
        else:
            yield out[-1], y


def shift_interval_fits(residuals: list[mpq], tolerance: mpq) -> bool:
    """One output: whether one constant s puts every B_t + s within ``tolerance`` of its label,
    given the residuals y_t − B_t — iff they lie in an interval of length ≤ 2·tolerance (then
    s = their midpoint). Exact."""
    return max(residuals) - min(residuals) <= 2 * tolerance


#: above this many distinct labels the k³ cycle search is not run (k = 200: 8·10⁶ integer steps,
#: under a second with small entries); :func:`shift_separates` then decides only by its k²
#: tests or returns None
MAX_SHIFT_LABELS = 200


def shift_separates(bare: list[list[mpq]], targets: list[int]) -> bool | None:
    """C logits read by a strict argmax: whether one shift s ∈ R^C makes every target win,
    B_t[y_t] + s[y_t] > B_t[c] + s[c] for every judged position t and class c ≠ y_t (``targets``
    0-based). True: some s does; False: none does; None: undecided (more than
    :data:`MAX_SHIFT_LABELS` distinct targets and no 2-cycle decides — the caller names it).

    The constraints are strict difference constraints s[y] − s[c] > L(y, c) with
    L(y, c) = max over the positions t labelled y of B_t[c] − B_t[y]. A class c that is never a
    target has no constraint of its own (it is beaten by a low enough s[c]), so only the k
    distinct targets matter. Summed around a cycle y₁ → y₂ → … → y₁ the left sides cancel: the
    system is feasible iff every cycle has Σ L < 0, i.e. no cycle of weight Σ −L ≤ 0 in the graph
    of edges y → c of weight −L(y, c) (conversely, with every cycle of weight ≥ δ > 0 the
    constraints s[y] − s[c] ≥ L(y, c) + δ/k have no negative cycle, so shortest-path potentials
    solve them). Decided exactly on integers (the L over their common
    denominator): if every B_t is the same vector and two targets differ, at once (L(y, c) +
    L(c, y) = 0: a 2-cycle of weight 0); else 2-cycles, then Floyd–Warshall with zero diagonal
    (a negative cycle shows as d[i][i] < 0, stopping at once so the entries stay small) and the
    least cycle weight min over i ≠ j of d[i][j] + w(j, i) (with no negative cycle, a shortest
    path back plus the edge closing it)."""
    labels = sorted(set(targets))
    k = len(labels)
    if k == 1:
        return True  # s large at the one target
    if all(b == bare[0] for b in bare):
        return False
    at: dict[int, list[list[mpq]]] = {y: [] for y in labels}
    for b, y in zip(bare, targets, strict=True):
        at[y].append(b)
    worst = [[max(b[c] - b[y] for b in at[y]) for c in labels] for y in labels]
    den = math.lcm(*(int(x.denominator) for row in worst for x in row))
    w = [[0 if i == j else -int(x * den) for j, x in enumerate(row)]
         for i, row in enumerate(worst)]  # fmt: skip
    if any(w[i][j] + w[j][i] <= 0 for i in range(k) for j in range(i)):
        return False
    if k > MAX_SHIFT_LABELS:
        return None
    d = [row[:] for row in w]
    for m in range(k):
        dm = d[m]
        for i in range(k):
            dim = d[i][m]
            d[i] = [a if a <= dim + b else dim + b for a, b in zip(d[i], dm, strict=True)]
        if any(d[i][i] < 0 for i in range(k)):
            return False
    return all(d[i][j] + w[j][i] > 0 for i in range(k) for j in range(k) if i != j)


def _knocked_out(model, ds, tolerance: mpq | None, undecided: list[str]) -> list[str]:
    """Whether some constant in place of the FFN gives every label; if so, the FFN is dead on
    the data (a failure line). The FFN knocked out: its second layer reduced to its bias, so the
    FFN is a constant map (z ↦ z + c in the residual form). The cut passed, so every path from
    the input to the output then runs through token lanes no head writes (the residual's z_i):
    the outputs B_t are those of the model without its attention, a function of each token
    evaluated exactly by the reference evaluator (one vector for the plain FFN). Another
    constant c + v in place of the FFN adds U·v to every output (U the read-out, which is
    affine; the identity without one), whatever the position — so the question is whether one
    shift s makes every B_t + s give its label, judged as the labels are:

    * one output (U ≠ 0 on the FFN's lanes, or the units would not be read: every s ∈ R is U·v
      for some v): the residuals y_t − B_t within an interval of length ≤ 2·tolerance (all equal
      without one) — :func:`shift_interval_fits`, exact;
    * C logits, a strict argmax: strict difference constraints on s ∈ R^C
      (:func:`shift_separates`). Every s ∈ R^C is taken, a superset of the shifts U·v (mod the
      all-ones vector, which no argmax sees) when U's image with (1, …, 1) is smaller than R^C:
      a model then fails if a shift the FFN could not add would give every label, which errs
      towards refuting. No ks24 model the builder makes has C logits (its labels are one output,
      ``ffn=residual`` or not), so none is refuted by the superset. More than
      :data:`MAX_SHIFT_LABELS` distinct labels and no 2-cycle deciding: named in ``undecided``
      (the checklist is then inconclusive unless something failed).

    A tie is no miss: the zero constant missing a label (the reviewer's ks24_tie.json) shows
    nothing unless no other constant gives every label."""
    from exactmem.evaluate.reference import run

    ffn = model.sublayers[1]
    second = ffn.layers[1]
    bias_only = Affine(second.in_dim, ((),) * second.out_dim, second.bias, second.denominator)
    knocked = replace(ffn, layers=(ffn.layers[0], bias_only, *ffn.layers[2:]))
    bare = replace(model, sublayers=(knocked,))
    judged = list(_judged(run(bare, ds.vocab, ds.sequences).outputs, ds.labels))
    if len(judged[0][0]) > 1:  # C logits, argmax
        fits = shift_separates([b for b, _ in judged], [int(y) - 1 for _, y in judged])
        how = "one shift of the logits"
        if fits is None:
            undecided.append(
                f"ks24.dataflow: whether one shift of the logits in place of the FFN gives every "
                f"label is not decided ({len({y for _, y in judged})} distinct labels > "
                f"{MAX_SHIFT_LABELS}, no pair of them excluding it)"
            )
            return []
    else:
        tol = mpq(0) if tolerance is None else mpq(tolerance)
        fits = shift_interval_fits([mpq(y) - b[0] for b, y in judged], tol)
        how = "one constant added to the output" + (
            f" (tolerance {format_rational(tol)})" if tolerance is not None else ""
        )
    if not fits:
        return []
    return [
        f"a constant replaces the FFN: with its units knocked out (W₂ = 0, b₂ kept) the model — "
        f"a function of each token — gives every label up to {how}, which a constant FFN output "
        "adds: the FFN is dead on the data"
    ]


def _vec(z) -> str:
    return "(" + ", ".join(format_rational(x) for x in z) + ")"


def paper_delta_exponent(sep: Separation, n: int, d: int) -> str | None:
    """E of the paper's worst-case margin δ ≈ poly · e^{−E}, E = (|V| + 1)⁴ (2 ln n + 3) π d
    r_max² / (4 ε r_min) — the form reconstructed from the paper, its constants unverified — as
    a short decimal (None when ε is not measured)."""
    if sep.eps2 is None or sep.r_min2 == 0:
        return None
    old = ctx.prec
    ctx.prec = 64
    try:
        V = arb(sep.distinct + 1)
        E = (
            V**4
            * (2 * arb(max(n, 1)).log() + 3)
            * arb.pi()
            * d
            * to_ball(sep.r_max2)
            / (4 * to_ball(sep.eps2).sqrt() * to_ball(sep.r_min2).sqrt())
        )
        return brief(ball_bounds(E)[0], up=False)
    finally:
        ctx.prec = old


def _classes(ds):
    """Per (sequence, position): the key (multiset of token vectors, token vector)."""
    keys = []
    for seq in ds.sequences:
        toks = [tuple(ds.vocab[t]) for t in seq]
        ms = tuple(sorted(toks))
        keys.append([(ms, z) for z in toks])
    return keys


def _bounds(c) -> tuple[mpq, mpq] | None:
    """Exact (lo, hi) of an id: a rational is its own bounds, a ball its enclosure (None when
    the ball is not finite)."""
    if isinstance(c, arb):
        return ball_bounds(c) if c.is_finite() else None
    return c, c


def _gap(ids, keys):
    """(certified least gap between classes or None, widest enclosure, collision): the
    collision names two classes whose ids are the same exact number (certified equal)."""
    hull: dict = {}
    where: dict = {}
    width = mpq(0)
    for i, (row, krow) in enumerate(zip(ids, keys, strict=True)):
        for k, (c, key) in enumerate(zip(row, krow, strict=True)):
            b = _bounds(c)
            if b is None:
                return None, None, None
            lo, hi = b
            width = max(width, hi - lo)
            a, b = hull.get(key, (lo, hi))
            hull[key] = (min(a, lo), max(b, hi))
            where.setdefault(key, (i, k))
    ordered = sorted((lo, hi, where[key]) for key, (lo, hi) in hull.items())
    if len(ordered) < 2:
        return mpq(0), width, None
    least = None
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a[0] == a[1] == b[0] == b[1]:
            return None, width, (a[2], b[2], a[0])
        gap = b[0] - a[1]
        least = gap if least is None else min(least, gap)
    return (least if least > 0 else None), width, None


def _bits_needed(ids, keys) -> str:
    """The precision a certified gap would need, estimated from the midpoints: the ids'
    magnitude over the least midpoint gap between classes, with 16 bits of room."""
    from exactmem.core.balls import ball_midpoint

    mids: dict = {}
    for row, krow in zip(ids, keys, strict=True):
        for c, key in zip(row, krow, strict=True):
            if c.is_finite():
                mids.setdefault(key, ball_midpoint(c))
    values = sorted(mids.values())
    gaps = [b - a for a, b in zip(values, values[1:], strict=False) if b != a]
    if not gaps or len(gaps) < len(values) - 1:
        return " (two classes share a midpoint: their gap may be zero)"
    top = max(abs(v) for v in values) or mpq(1)
    ratio = top / min(gaps)
    bits = int(ratio.numerator).bit_length() - int(ratio.denominator).bit_length() + 16
    return f"; about {bits} bits would be needed"


def _steps_judge(hidden):
    """(verdict or None, bad items) for 'every last-hidden unit exact in {0, 1}'."""
    bad, undecided = [], False
    for i, rows in enumerate(hidden):
        for k, units in enumerate(rows):
            if units is None:  # an id beyond the exponent range: nothing decided here
                undecided = True
                continue
            for j, g in enumerate(units):
                b = _bounds(g)
                if b is None:
                    undecided = True
                    continue
                lo, hi = b
                if lo == hi and lo in (0, 1):
                    continue
                if hi < 0 or lo > 1 or (0 < lo and hi < 1) or lo == hi:
                    bad.append(f"sequences[{i}][{k}] unit {j}: {brief(lo, up=False)}…{brief(hi)}")
                else:
                    undecided = True
    if bad:
        return False, bad
    return (None if undecided else True), bad


def _exact(model, ds, w, hidden: bool):
    """(ids, last hidden units) evaluated exactly by the reference evaluator, when it can (the
    attention's scores equal in every column, as with λ = 0; a ReLU FFN), else None."""
    from exactmem.evaluate.reference import run

    att = model.sublayers[0]
    try:
        cols = run(replace(model, sublayers=(att,), unembed=None), ds.vocab, ds.sequences).outputs
        units = run(_to_last_hidden(model), ds.vocab, ds.sequences).outputs if hidden else None
    except InconclusiveError:
        return None
    ids = [
        [sum((c * wj for c, wj in zip(col, w, strict=True)), mpq(0)) for col in seq] for seq in cols
    ]
    return ids, (None if units is None else [list(seq) for seq in units])


def check_ks24(
    model, ds, *, limit: int = MAX_PRECISION, tolerance: mpq | None = None
) -> list[Check]:
    """The ks24 checklist (module docstring), from the model's weights on ``ds``; a figure
    left undecided raises :class:`InconclusiveError` only when no check failed. ``tolerance``:
    the user's, judging one output as the labels check does (the knock-out of ks24.dataflow)."""
    att, ffn, w, factors = _layers(model)
    sep = separation(ds)
    n = len(ds.sequences[0])
    undecided: list[str] = []
    checks = [
        _separation(att, ds, sep),
        _boltzmann(att, w),
        _dataflow(model, ds, tolerance, undecided),
    ]
    keys = _classes(ds)
    state: dict = {}
    requantizes = len(ffn.layers) > 2  # the construction's form: steps after the ramps

    def judge(result):
        ids, hidden = result
        gap, width, collision = _gap(ids, keys)
        steps, bad = _steps_judge(hidden) if requantizes else (True, [])
        state.update(gap=gap, width=width, steps=steps, bad=bad, collision=collision)
        if steps is False or collision:
            return False
        return None if gap is None or steps is None else True

    exact = _exact(model, ds, w, requantizes)
    try:
        if exact is not None:
            judge(exact)
            precision = None
        else:

            def evaluate(precision):
                values = _balls(model, ds, precision, ids=w, hidden=requantizes)
                return values.ids, values.hidden

            _, precision = decide(evaluate, judge, start=min(64, limit), limit=limit)
    finally:
        _LAST_RUN.clear()
    how = "exact" if precision is None else f"Arb, {precision} bits"
    delta = paper_delta_exponent(sep, n, ds.dim)
    delta_text = (
        "paper's worst-case δ: not measured"
        if delta is None
        else f"the paper's worst-case δ ≈ e^(−E), E ≥ {delta} (form reconstructed; not targeted)"
    )
    figures = {
        "precision": precision,
        "classes": len({k for row in keys for k in row}),
        "paper_delta_exponent": delta,
    }
    if state["collision"]:
        (i, k), (j, m), value = state["collision"]
        checks.append(
            Check(
                "ks24.contextual_mapping",
                False,
                f"sequences[{i}][{k}] and sequences[{j}][{m}] are of different (multiset, token) "
                f"classes but share the context id {format_rational(value)} exactly ({how})",
                figures,
            )
        )
    elif state["gap"] is None:
        undecided.append(
            f"ks24.contextual_mapping: the context ids of two classes still overlap at "
            f"{precision} bits (the precision limit); their gap is not certified"
            + _bits_needed(_balls(model, ds, min(max(4 * limit, 512), 1 << 16), ids=w).ids, keys)
        )
    else:
        gap, width = state["gap"], state["width"]
        figures.update(gap_lower_bound=format_rational(gap), max_enclosure=format_rational(width))
        checks.append(
            Check(
                "ks24.contextual_mapping",
                True,
                f"{figures['classes']} (multiset, token) classes get context ids ≥ "
                f"{brief(gap, up=False)} apart (enclosures ≤ {brief(width)} wide; {how}); "
                f"{delta_text}",
                figures,
            )
        )
    if requantizes:
        units = ffn.layers[-2].out_dim
        steps = state["steps"]
        if steps is None:
            undecided.append(f"ks24.requantization: some step units stay undecided ({how})")
        else:
            checks.append(
                Check(
                    "ks24.requantization",
                    steps,
                    f"all {units} step units exact in {{0, 1}} at every token ({how})"
                    if steps
                    else "step units off {0, 1}: " + _examples(state["bad"]),
                    {"units": units, "precision": precision},
                )
            )
    _LAST_RUN.clear()
    if undecided and all(c.passed for c in checks):
        raise InconclusiveError("; ".join(undecided))
    return checks
