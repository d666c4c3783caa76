"""Certifying softmax-attention models: labels from Arb enclosures, and the checks specific to
the attention-only memorization results (Mahdavi et al. 2024, Dana et al. 2025).

A label is *certified* when the whole enclosure lies on the right side: within the stated
tolerance of a real-valued label, or with the target logit above every other logit (a positive
margin). When an enclosure is too wide at every precision up to the limit, the answer is
*inconclusive* (exit code 4), never a guess.
"""

from __future__ import annotations

import gmpy2
from gmpy2 import mpq

from exactmem.assumptions import (
    mahdavi_assumptions,
    mahdavi_capacity,
    mahdavi_examples,
    rank_of,
    shared_context_rank_ceiling,
)
from exactmem.errors import InconclusiveError
from exactmem.evaluate.softmax import ball_bounds, decide, run_balls
from exactmem.exact import format_rational
from exactmem.model import Attention, PositionalEncoding
from exactmem.verify import Check, ChecklistStructureError, _examples

__all__ = [
    "ball_label_check",
    "brief",
    "dana_checks",
    "exact_classification_check",
    "mahdavi_checks",
]


def judge_column(col, y: int, readout: str, tol: mpq, where: str):
    """One output column of balls against its label ``y``: (failures, undecided, figure). The
    figure is the least lower bound of the target logit's lead (argmax) or the largest possible
    |output − y| (regression), None when no ball is finite; a ball that is not finite (a score
    beyond the exponent range) decides nothing."""
    bad: list[str] = []
    undecided = False
    figure = None
    if readout == "argmax":
        target = col[y - 1]
        for c, other in enumerate(col):
            if c == y - 1:
                continue
            lead = target - other
            if not lead.is_finite():
                undecided = True
                continue
            lo, hi = ball_bounds(lead)
            if hi <= 0:
                bad.append(f"{where}: logit {c + 1} ≥ the target's")
            elif lo <= 0:
                undecided = True
            figure = lo if figure is None else min(figure, lo)
        return bad, undecided, figure
    off = col[0] - y
    if not off.is_finite():
        return bad, True, None
    lo, hi = ball_bounds(off)
    if lo > tol or hi < -tol:
        bad.append(
            f"{where}: output off the label {y} by more than {format_rational(tol)}"
            f" (by at least {brief(min(abs(lo), abs(hi)), up=False)})"
        )
    elif not (-tol <= lo and hi <= tol):
        undecided = True
    return bad, undecided, max(abs(lo), abs(hi))


def judge_columns(items, readout: str, tol: mpq):
    """(verdict or None, worst figure, bad items) over ``(where, column, label)`` items:
    certified when every column is, refuted when one fails (:func:`judge_column`)."""
    undecided = False
    bad: list[str] = []
    worst = None
    pick = min if readout == "argmax" else max
    for where, col, y in items:
        b, u, figure = judge_column(col, y, readout, tol, where)
        bad += b
        undecided = undecided or u
        if figure is not None:
            worst = figure if worst is None else pick(worst, figure)
    if bad:
        return False, worst, bad
    return (None if undecided else True), worst, bad


def _judge_labels(trace, labels, readout: str, tol: mpq):
    """Regression: certified when the enclosure of output − label lies in [−tol, tol], refuted
    when it lies outside; argmax: certified when the target logit's lead is certified
    positive. Returns (verdict or None, worst figure, bad items)."""
    items = (
        (f"sequences[{i}]", out[-1], y)
        for i, (out, y) in enumerate(zip(trace.outputs, labels, strict=True))
    )
    return judge_columns(items, readout, tol)


def brief(q: mpq, *, up: bool = True, digits: int = 3) -> str:
    """An exact rational as a short decimal *bound*: rounded up (``up``) or down to ``digits``
    significant digits, so "worst ≤ brief(x)" and "margin ≥ brief(x, up=False)" stay true. Never
    a float: a refuted output may lie far beyond 10³⁰⁸."""
    q = mpq(q)
    if q == 0:
        return "0"
    p, d = abs(int(q.numerator)), int(q.denominator)
    e = int((p.bit_length() - d.bit_length()) * 0.30102999566398120)  # ≈ ⌊log₁₀|q|⌋
    while p < d * _pow10(e):  # correct the estimate exactly: 10^e ≤ |q| < 10^(e+1)
        e -= 1
    while p >= d * _pow10(e + 1):
        e += 1
    shift = e - digits + 1  # |q| / 10^shift has `digits` digits before the point
    scaled = q / _pow10(shift) if shift >= 0 else q * _pow10(-shift)
    m = int(gmpy2.ceil(scaled)) if up else int(gmpy2.floor(scaled))
    if abs(m) == 10**digits:  # rounding carried into one more digit
        m, shift = m // 10, shift + 1
    text = str(abs(m))
    mantissa = text[0] + ("." + text[1:].rstrip("0") if text[1:].rstrip("0") else "")
    exponent = shift + len(text) - 1
    sign = "-" if m < 0 else ""
    return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")


def _pow10(e: int) -> mpq:
    return mpq(10) ** e if e >= 0 else mpq(1, 10 ** (-e))


def ball_label_check(
    model, ds, *, readout: str = "label", tolerance: mpq | None = None, limit: int = 1 << 12
) -> Check:
    """Labels at the last position, certified on Arb balls with rising precision.

    ``readout`` (``label`` or ``argmax``) and ``tolerance`` come from the caller (the output
    width and the user's ``--tolerance``), never from the model file."""
    tol = mpq(0) if tolerance is None else mpq(tolerance)
    state: dict = {}

    def evaluate(precision):
        return run_balls(model, ds.vocab, ds.sequences, precision=precision, positions="last")

    def judge(trace):
        verdict, worst, bad = _judge_labels(trace, ds.labels, readout, tol)
        state.update(worst=worst, bad=bad)
        return verdict

    verdict, precision = decide(evaluate, judge, limit=limit)
    if verdict is None:
        raise InconclusiveError(
            f"the enclosures of the outputs stay too wide at {precision} bits to decide every "
            "label"
            + (
                " exactly; pass --tolerance Q to judge real-valued outputs within Q"
                if readout == "label" and tol == 0
                else "; raise the temperature (saturation) or the precision limit"
            )
        )
    worst = state["worst"]
    figures: dict[str, str | int | None]
    if readout == "argmax":
        figures = {"min_margin_lower_bound": None if worst is None else format_rational(worst)}
        detail = (
            f"all {ds.size} argmax labels certified, target logit ahead by ≥ "
            f"{None if worst is None else brief(worst, up=False)} (Arb, {precision} bits)"
        )
    else:
        figures = {
            "max_error_upper_bound": None if worst is None else format_rational(worst),
            "tolerance": format_rational(tol),
        }
        detail = (
            f"all {ds.size} labels within {format_rational(tol)} (worst ≤ "
            f"{None if worst is None else brief(worst)}; Arb, {precision} bits)"
        )
    figures["precision"] = precision
    if not verdict:
        return Check("labels", False, _examples(state["bad"]), figures)
    return Check("labels", True, detail, figures)


def exact_classification_check(outputs, labels, where: str = "sequences") -> Check:
    """Argmax labels from exact outputs: the target logit strictly above the others. A label
    that is a tuple (seq-to-seq) is judged at every position, an integer at the last one;
    ``where`` names the inputs in messages (``points`` or ``sequences``)."""
    bad, margin, count = [], None, 0
    for i, (out, y) in enumerate(zip(outputs, labels, strict=True)):
        judged = (
            [(f"{where}[{i}][{k}]", out[k], yk) for k, yk in enumerate(y)]
            if isinstance(y, tuple | list)
            else [(f"{where}[{i}]", out[-1], y)]
        )
        for name, col, target in judged:
            count += 1
            gaps = [col[target - 1] - v for c, v in enumerate(col) if c != target - 1]
            gap = min(gaps) if gaps else None
            if gap is not None and gap <= 0:
                bad.append(
                    f"{name}: target logit {format_rational(col[target - 1])} is not above "
                    "the others"
                )
            if gap is not None:
                margin = gap if margin is None else min(margin, gap)
    figures = {"min_margin": None if margin is None else format_rational(margin)}
    if bad:
        return Check("labels", False, _examples(bad), figures)
    return Check(
        "labels",
        True,
        f"all {count} argmax labels exact, margin ≥ {figures['min_margin']}",
        figures,
    )


def mahdavi_checks(model, ds) -> list[Check]:
    """Mahdavi et al. 2024's checklist, measured on the model's own attention.

    * ``mahdavi.assumptions``: n < d, A2 and A1, exact;
    * ``mahdavi.feature_rank``: the features Z (row t: the attention-weighted columns
      Σ_j a_hj^(t) X_j of every head h, the quantity the value maps read) have rank T, so that
      every label vector is reachable by some readout — exact for hardmax, for softmax a
      nonsingular T × T minor certified on Arb balls;
    * ``mahdavi.rank_ceiling`` (one context shared by all examples, Proposition 2): the measured
      rank stays within H·(n − 1) + 1 (no attention does better) and T does too;
    * ``mahdavi.capacity``: T ≤ H(min(n, d_h) − 1) + 1 with H and d_h read off the heads."""
    queries, contexts = mahdavi_examples(ds)
    report = mahdavi_assumptions(queries, contexts)
    T, n = len(queries), len(contexts[0])
    # Theorem 1's model is one attention layer: a layer after it would escape the checklist
    att = model.sublayers[0] if len(model.sublayers) == 1 else None
    if not isinstance(att, Attention) or not att.heads:
        raise ChecklistStructureError("the model is not one multi-head attention layer")
    if att.mask != "context":
        raise ChecklistStructureError(
            "its query attends to itself: Mahdavi et al.'s query attends to its context only "
            "(mask 'context')"
        )
    H = len(att.heads)
    d_h = min(h.query.out_dim for h in att.heads)  # the head dimension, from the weights
    checks = [
        Check(
            "mahdavi.assumptions",
            True,
            f"A2: all {T} contexts have rank n = {n}; A1: {report.describe()}",
            {"subsets_tried": report.subsets_tried, "exhaustive": report.exhaustive},
        )
    ]
    cap = mahdavi_capacity(H, n, d_h)
    rank, exact, how = _measured_feature_rank(model, att, ds)
    ok = rank == T
    if ok:
        detail = f"the features of the model's attention have rank {rank} = T ({how})"
    elif exact:
        detail = (
            f"the features of the model's attention have rank {rank} < T = {T} ({how}): some "
            "labels cannot be fitted by any readout on this attention"
        )
    else:
        detail = f"no nonsingular {T} × {T} minor of the features certified ({how})"
    checks.append(Check("mahdavi.feature_rank", ok, detail, {"rank": rank, "exact": exact, "T": T}))
    ceiling = shared_context_rank_ceiling(contexts, H)
    if ceiling is not None:
        checks.append(_ceiling_check(rank, ceiling, T))
    checks.append(
        Check(
            "mahdavi.capacity",
            T <= cap,
            f"T = {T} {'≤' if T <= cap else '>'} H(min(n, d_h) − 1) + 1 = {cap} "
            f"(H = {H}, d_h = {d_h}, n = {n})",
            {"capacity": cap, "heads": H, "head_dim": d_h},
        )
    )
    return checks


def _ceiling_check(rank: int, ceiling: int, T: int) -> Check:
    """Proposition 2 against the measured rank: every attention vector lies in a simplex, so
    with one shared context the rows of Z lie in an affine space of dimension H·(n − 1) and
    rank Z ≤ H·(n − 1) + 1, whatever the weights. A measured rank above it contradicts the
    proposition (or the evaluation); T above it leaves some label vectors unreachable."""
    attained = rank == ceiling
    ok = rank <= ceiling and T <= ceiling
    if rank > ceiling:
        why = f"the measured rank {rank} exceeds H·(n − 1) + 1 = {ceiling}: impossible"
    else:
        why = (
            f"the model's features have rank {rank}"
            + (" = " if attained else " < ")
            + f"H·(n − 1) + 1 = {ceiling}, "
            + ("the ceiling, attained" if attained else "below the ceiling")
            + (
                f"; T = {T} ≤ {ceiling}"
                if T <= ceiling
                else f"; T = {T} > {ceiling}, so for any attention weights the readout "
                "reaches only a proper subspace of the labels (Proposition 2)"
            )
        )
    return Check(
        "mahdavi.rank_ceiling",
        ok,
        "shared context: " + why,
        {"ceiling": ceiling, "rank": rank, "attained": attained, "T": T},
    )


def _attention_inputs(model, ds) -> list[list[tuple[mpq, ...]]]:
    """Per example, the columns the attention layer reads (context tokens, then the query),
    through the model's own embedding (exact)."""
    out = []
    for seq in ds.sequences:
        cols = []
        for tok in seq:
            if model.token_inputs:
                x = tuple(mpq(int(tok == j)) for j in range(model.input_dim))
            else:
                x = tuple(ds.vocab[tok])
            if model.embed is not None:
                e = model.embed
                x = tuple(
                    (sum((x[c] * w for c, w in row), mpq(0)) + b) / e.denominator
                    for row, b in zip(e.rows, e.bias, strict=True)
                )
            cols.append(x)
        out.append(cols)
    return out


def _hardmax_features(att, columns) -> list[list[mpq]]:
    """Z from the model's weights, exact: row t = [Σ_j a_hj X_j]_h over the context columns
    X_j, with the model's hardmax (ties averaged) or uniform weights a_h."""
    from exactmem.evaluate.reference import _apply_linear

    Z = []
    for cols in columns:
        ctx_cols, q_col = cols[:-1], cols[-1]
        row: list[mpq] = []
        for h in att.heads:
            if att.score == "uniform":
                tied = list(range(len(ctx_cols)))
            else:
                q = _apply_linear(h.query, q_col)
                scores = [
                    sum((a * b for a, b in zip(_apply_linear(h.key, x), q, strict=True)), mpq(0))
                    for x in ctx_cols
                ]
                top = max(scores)
                tied = [j for j, s in enumerate(scores) if s == top]
            for i in range(len(q_col)):
                row.append(sum((ctx_cols[j][i] for j in tied), mpq(0)) / len(tied))
        Z.append(row)
    return Z


def _softmax_features(att, columns, precision: int):
    """Z on Arb balls at ``precision`` bits: the model's softmax weights, enclosed."""
    from flint import ctx

    from exactmem.balls import softmax_balls, to_ball

    old = ctx.prec
    ctx.prec = precision
    try:
        Z = []
        for cols in columns:
            balls = [[to_ball(v) for v in c] for c in cols]
            ctx_cols, q_col = balls[:-1], balls[-1]
            row = []
            for h in att.heads:

                def lin(a, v):
                    return [
                        sum((v[j] * to_ball(mpq(c, a.denominator)) for j, c in r), to_ball(mpq(0)))
                        for r in a.rows
                    ]

                q = lin(h.query, q_col)
                scores = [
                    sum((a * b for a, b in zip(lin(h.key, x), q, strict=True)), to_ball(mpq(0)))
                    for x in ctx_cols
                ]
                a = softmax_balls(scores)
                for i in range(len(q_col)):
                    terms = [a[j] * ctx_cols[j][i] for j in range(len(ctx_cols))]
                    row.append(sum(terms[1:], terms[0]))
            Z.append(row)
        return Z
    finally:
        ctx.prec = old


def _certified_rank(Z, precision: int) -> int:
    """A lower bound on the rank of a ball matrix: Gaussian elimination on the balls, row by
    row, pivoting only on entries whose ball excludes 0 (the largest midpoint first). Every
    true pivot lies in its ball, so the minor on the pivot rows and columns has a nonzero
    determinant (± the product of the pivots): its size is a certified lower bound."""
    from flint import ctx

    old = ctx.prec
    ctx.prec = precision
    try:
        pivots: list[tuple[int, list]] = []
        for row in Z:
            v = list(row)
            for j, p in pivots:
                f = v[j] / p[j]
                v = [a - f * b for a, b in zip(v, p, strict=True)]
            live = [j for j, x in enumerate(v) if not x.contains(0)]
            if live:
                pivots.append((max(live, key=lambda j: abs(v[j].mid())), v))
        return len(pivots)
    finally:
        ctx.prec = old


def _measured_feature_rank(model, att, ds, limit: int = 1024) -> tuple[int, bool, str]:
    """The rank of Z as the model's attention produces it: exact for hardmax and uniform
    weights; for softmax a certified lower bound, raising the precision up to ``limit`` bits
    until a full-rank minor is certified."""
    columns = _attention_inputs(model, ds)
    if att.score != "softmax":
        return rank_of(_hardmax_features(att, columns)), True, f"exact, {att.score} weights"
    T = len(columns)
    precision, best = 128, 0
    while precision <= limit:
        best = max(best, _certified_rank(_softmax_features(att, columns, precision), precision))
        if best == T:
            break
        precision *= 2
    bits = min(precision, limit)
    return best, False, f"softmax weights; rank ≥ {best} certified on Arb balls, {bits} bits"


def dana_checks(model, ds, precision: int = 256, limit: int = 2048) -> list[Check]:
    """Dana et al. 2025, Lemma 2 and Theorem 1, from the model's weights.

    The features of a sequence t are what the attention layer adds up at the last position:
    F(t) = [W_V^h A_h(t)]_h ++ x_S(t), the heads' value vectors and the skip term x_S(t) (the
    stream entering the layer, which returns Z + Σ_h head_h(Z)). ``dana.feature_rank``
    certifies on Arb balls that the T₀ distinct sequences give features of rank T₀ (precision
    doubled from ``precision`` up to ``limit`` bits); ``dana.capacity`` checks T₀ ≤ H·d_h + d
    with H the number of heads, d_h their value widths (at most d each) and d the stream width,
    all counted from the weights."""
    from flint import ctx

    att, tables = _dana_layers(model)
    d = model.embed.out_dim
    seqs = list(dict.fromkeys(tuple(s) for s in ds.sequences))
    T0 = len(seqs)
    # W_V^h A_h is an image of A_h ∈ R^d: a head gives at most d features, whatever its d_h
    widths = [min(h.value.out_dim, d) for h in att.heads]
    cap = sum(widths) + d
    old = ctx.prec
    ok, bits = False, precision
    try:
        while not ok and bits <= limit and cap >= T0:
            ctx.prec = bits
            rows = [_dana_features(model, att, tables, seq) for seq in seqs]
            ok = _certified_full_row_rank(rows)
            if not ok:
                bits *= 2
    finally:
        ctx.prec = old
    bits = min(bits, limit)
    if ok:
        detail = (
            f"the features [W_V^h A_h(t)]_h ++ x_S(t) of the {T0} sequences have rank {T0} "
            f"(H = {len(att.heads)} heads and the skip term: {cap} features; Arb, {bits} bits)"
        )
    elif cap < T0:
        detail = f"{cap} features for {T0} sequences: rank < T₀"
    else:
        detail = (
            f"the {T0} feature vectors ({cap} features: {len(att.heads)} heads and the skip "
            f"term) are not certified independent at up to {limit} bits: Lemma 2's rank is not "
            "shown"
        )
    return [
        Check("dana.feature_rank", ok, detail, {"associations": T0, "precision": bits}),
        Check(
            "dana.capacity",
            T0 <= cap,
            f"T₀ = {T0} {'≤' if T0 <= cap else '>'} H·d_h + d = {cap} "
            f"(H = {len(att.heads)} head{'s' * (len(att.heads) != 1)} of value width "
            f"{_widths_text(widths)}, skip d = {d})",
            {"capacity": cap, "heads": len(att.heads), "skip_dim": d},
        ),
    ]


def _widths_text(widths: list[int]) -> str:
    return str(widths[0]) if len(set(widths)) == 1 else ", ".join(map(str, widths))


def _dana_layers(model):
    """The attention-only architecture the checklist reads: token ids through an embedding
    table, positional encodings, then one softmax attention layer (every position a key) read by
    the unembedding, and nothing else."""
    *before, att = model.sublayers or (None,)
    if (
        not isinstance(att, Attention)
        or not att.heads
        or att.score != "softmax"
        or att.mask != "none"
        or not all(isinstance(s, PositionalEncoding) for s in before)
        or model.embed is None
        or not model.token_inputs
    ):
        raise ChecklistStructureError(
            "an attention-only Transformer needs token ids, an embedding table, positional "
            "encodings and then one softmax attention layer with heads, every position a key"
        )
    return att, [s.table for s in before]


def _dana_features(model, att, tables, seq) -> list:
    """F(t) on balls at the current precision: the heads' W_V^h A_h(t), then x_S(t)."""
    from exactmem.balls import softmax_balls, to_ball

    zero = to_ball(mpq(0))

    def lin(a, v):
        return [
            sum((v[j] * to_ball(mpq(c, a.denominator)) for j, c in row), zero) for row in a.rows
        ]

    emb = model.embed
    xs = []
    for k, t in enumerate(seq):
        if not 0 <= t < emb.in_dim:
            raise ChecklistStructureError(f"token {t} is outside the embedding table")
        col = [
            mpq(sum((c for j, c in row if j == t), 0) + b, emb.denominator)
            for row, b in zip(emb.rows, emb.bias, strict=True)
        ]
        for table in tables:
            col = [a + b for a, b in zip(col, table[k], strict=True)]
        xs.append([to_ball(x) for x in col])
    feats = []
    for h in att.heads:
        q = lin(h.query, xs[-1])
        a = softmax_balls(
            [sum((x * y for x, y in zip(lin(h.key, x_), q, strict=True)), zero) for x_ in xs]
        )
        A = [sum((a[s] * xs[s][i] for s in range(len(xs))), zero) for i in range(len(xs[0]))]
        feats += lin(h.value, A)
    return feats + xs[-1]


def _certified_full_row_rank(rows) -> bool:
    """Whether the T × F matrix of balls certainly has rank T: a square one is solved, a wide
    one through its Gram matrix F Fᵀ (non-singular iff the rank is T)."""
    from flint import arb_mat

    T = len(rows)
    if T == 0:
        return True
    F = arb_mat(rows)
    G = F if F.ncols() == T else F * F.transpose()
    try:
        G.solve(arb_mat([[int(i == j) for j in range(T)] for i in range(T)]))
    except ZeroDivisionError:
        return False
    return True
