"""Certifying softmax-attention models: labels from Arb enclosures, and the checks specific to
the attention-only memorization results (Mahdavi et al. 2024, Dana et al. 2025).

A label is *certified* when the whole enclosure lies on the right side: within the stated
tolerance of a real-valued label, or with the target logit above every other logit (a positive
margin). When an enclosure is too wide at every precision up to the limit, the answer is
*inconclusive* (exit code 4), never a guess.
"""

from __future__ import annotations

from dataclasses import replace

import gmpy2
from gmpy2 import mpq

from exactmem.checks.certificate import Check, ChecklistStructureError, _examples
from exactmem.checks.mixtures import attention_inputs_model, mixture_model, stream_width
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.exact import format_rational
from exactmem.core.model import Affine, Attention, PositionalEncoding
from exactmem.datasets.assumptions import (
    mahdavi_assumptions,
    mahdavi_examples,
    rank_of,
    shared_context_rank_ceiling,
)
from exactmem.evaluate.softmax import ball_bounds, decide, run_balls

__all__ = [
    "ball_label_check",
    "brief",
    "dana_checks",
    "exact_classification_check",
    "head_map",
    "mahdavi_checks",
    "read_value_coordinates",
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


def mahdavi_checks(model, ds, run=None) -> list[Check]:
    """Mahdavi et al. 2024's checklist, measured on the model's own attention.

    Every value comes from the trusted evaluators on models derived from this one
    (:mod:`exactmem.checks.mixtures`): ``run`` (the exact evaluator; the reference one by default)
    for
    the columns the attention reads and the features of hardmax and uniform attention, Arb
    balls (:func:`~exactmem.evaluate.softmax.run_balls`) for softmax.

    * ``mahdavi.assumptions``: n < d, A2 and A1, exact, on the columns the attention reads
      (the data through the model's own embedding): a violation fails the check;
    * ``mahdavi.feature_rank``: the features the output reads (row t: the value vectors
      W_V^h Σ_j a_hj^(t) X_j of the heads h whose U·W_O^h is not zero — nor, for argmax
      logits, the same for every logit; U the read-out: :func:`read_value_coordinates`) have
      rank T, so that every label vector is reachable by some readout on them — exact for
      hardmax, for softmax a nonsingular T × T minor certified on Arb balls. Features taken
      before W_V^h and W_O^h would credit a head whose output nothing reads (issue 26);
    * ``mahdavi.rank_ceiling`` (one context shared by all examples, Proposition 2): the measured
      rank stays within H·(n − 1) + 1 (no attention does better) and T does too;
    * ``mahdavi.capacity``: T ≤ Σ_h (min(n, d_h) − 1) + 1 = H(min(n, d_h) − 1) + 1, with d_h
      of each head the rank of its score form W_Q^hᵀW_K^h (exact, from the weights: zero rows
      padding a query map add nothing);
    * ``mahdavi.readout`` (:func:`readout_check`): the output reads the heads only — the
      theorem's MHA(e, E) has no skip connection, so every check above measures quantities the
      output must be computed from."""
    if run is None:
        from exactmem.evaluate.reference import run
    # Theorem 1's model is one attention layer: a layer after it would escape the checklist
    att = model.sublayers[0] if len(model.sublayers) == 1 else None
    if not isinstance(att, Attention) or not att.heads:
        raise ChecklistStructureError("the model is not one multi-head attention layer")
    if att.mask != "context":
        raise ChecklistStructureError(
            "its query attends to itself: Mahdavi et al.'s query attends to its context only "
            "(mask 'context')"
        )
    mahdavi_examples(ds)  # the task and the shape: a query after n ≥ 2 context tokens
    checks = []
    columns = _attention_inputs(model, att, ds, run)
    queries = [cols[-1] for cols in columns]
    contexts = [cols[:-1] for cols in columns]
    T, n = len(queries), len(contexts[0])
    try:
        report = mahdavi_assumptions(queries, contexts)
        checks.append(
            Check(
                "mahdavi.assumptions",
                True,
                f"on the columns the attention reads: A2: all {T} contexts have rank n = {n}; "
                f"A1: {report.describe()}",
                {"subsets_tried": report.subsets_tried, "exhaustive": report.exhaustive},
            )
        )
    except InputError as exc:
        checks.append(
            Check(
                "mahdavi.assumptions",
                False,
                f"on the columns the attention reads (the data through the model's embedding): "
                f"{exc}",
            )
        )
    H = len(att.heads)
    ranks = [_score_rank(h) for h in att.heads]
    d_h = min(ranks)
    cap = sum(max(0, min(n, r) - 1) for r in ranks) + 1
    rank, exact, how = _measured_feature_rank(model, att, ds, run)
    ok = rank == T
    if ok:
        detail = f"the attention features the output reads have rank {rank} = T ({how})"
    elif exact:
        detail = (
            f"the attention features the output reads have rank {rank} < T = {T} ({how}): "
            "some labels cannot be fitted by any readout on them"
        )
    else:
        detail = f"no nonsingular {T} × {T} minor of the read features certified ({how})"
    checks.append(Check("mahdavi.feature_rank", ok, detail, {"rank": rank, "exact": exact, "T": T}))
    ceiling = shared_context_rank_ceiling(contexts, H)
    if ceiling is not None:
        checks.append(_ceiling_check(rank, ceiling, T))
    dims = str(d_h) if len(set(ranks)) == 1 else ", ".join(map(str, ranks))
    checks.append(
        Check(
            "mahdavi.capacity",
            T <= cap,
            f"T = {T} {'≤' if T <= cap else '>'} H(min(n, d_h) − 1) + 1 = {cap} "
            f"(H = {H}, d_h = {dims}: the rank of each head's W_Q^hᵀW_K^h, n = {n})",
            {"capacity": cap, "heads": H, "head_dim": d_h},
        )
    )
    checks.append(readout_check(model, att))
    return checks


def readout_check(model, att) -> Check:
    """``mahdavi.readout``: the output is computed from the heads alone, as Theorem 1's
    MHA(e, E) = Σ_h softmax(·)·E W_V^h W_O^h is (no skip connection). Our attention sub-layer
    is residual (Z + Σ_h head_h(Z)), so the query's own column reaches the output unless the
    read-out reads the stream only at lanes the stream entering the attention leaves free of
    the input: a dataflow cut (:func:`~exactmem.checks.dataflow.cut_check`) on the non-zero weights,
    with the read lanes entering the attention as targets and no unit allowed — a constant
    there (a bias) carries nothing. And the read-out must read a lane some head writes with
    W_O^h W_V^h ≠ 0 there, or the attention is dead code (review r1, F2)."""
    from exactmem.checks.dataflow import cut_check, graph

    g = graph(model)
    unembed = model.unembed
    width = stream_width(model)
    read = (
        sorted({c for row in unembed.rows for c, _ in row})
        if unembed is not None
        else list(range(width))
    )
    before = g.streams[model.sublayers.index(att)]
    cut = cut_check(
        "mahdavi.readout",
        model,
        set(),
        what="the heads (the residual copy of the stream entering the attention)",
        targets=[(before, i) for i in read],
        g=g,
        require_use=False,
    )
    if not cut.passed:
        return Check(
            "mahdavi.readout",
            False,
            "the read-out reads lanes the attention's skip connection carries: " + cut.detail,
            cut.figures,
        )
    written = {
        i for h in att.heads for i, row in enumerate(head_map(h)) if any(x != 0 for x in row)
    }
    used = [i for i in read if i in written]
    figures = {"lanes_read": len(read), "head_lanes_read": len(used)}
    if not used:
        return Check(
            "mahdavi.readout",
            False,
            f"the read-out reads {len(read)} lanes and no head writes any of them "
            "(W_O^h W_V^h = 0 there): the attention is dead code",
            figures,
        )
    return Check(
        "mahdavi.readout",
        True,
        f"the read-out reads {len(read)} lanes, none carried by the skip connection from the "
        f"input, {len(used)} written by the heads: the output is computed from the heads alone",
        figures,
    )


def _score_rank(head) -> int:
    """The rank of the head's score form W_Q^hᵀ W_K^h (exact): what its d_h rows can do."""

    def dense(a):
        m = [[mpq(0)] * a.in_dim for _ in range(a.out_dim)]
        for i, row in enumerate(a.rows):
            for j, c in row:
                m[i][j] = mpq(c, a.denominator)
        return m

    Q, K = dense(head.query), dense(head.key)
    form = [
        [sum((Q[r][i] * K[r][j] for r in range(len(Q))), mpq(0)) for j in range(head.key.in_dim)]
        for i in range(head.query.in_dim)
    ]
    return rank_of(form)


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


def _attention_inputs(model, att, ds, run) -> list[list[tuple[mpq, ...]]]:
    """Per example, the columns ``att`` reads (context tokens, then the query): the exact
    evaluation of the model up to the attention (its embedding and positional tables)."""
    trace = run(attention_inputs_model(model, att), ds.vocab, ds.sequences, positions="all")
    return [list(trace.outputs[i]) for i in range(len(ds.sequences))]


def reaches_a_margin(model, M: list[list[mpq]]) -> bool:
    """Whether a map M into the stream (rows: lanes) changes what the output decides: U·M ≠ 0
    (U the read-out, the identity without one) and, with several logits read by argmax, some
    column of U·M not the same in every logit — a column the same in every logit adds one value
    to all of them, a shift argmax ignores. Exact; the whole map at once, so parts that cancel
    one another (two lanes read +1 and −1 that always carry equal values, a value map's
    duplicated rows written +1 and −1) reach nothing."""
    if model.unembed is None:
        out = M
    else:
        U = _dense(model.unembed)
        out = [
            [sum((u[i] * M[i][k] for i in range(len(M)) if u[i]), mpq(0)) for k in range(len(M[0]))]
            for u in U
        ]
    if len(out) == 1:
        return any(out[0])
    return any(len({r[k] for r in out}) > 1 for k in range(len(out[0])))


def _read_lanes(model, width: int) -> list[int]:
    """The lanes the unembedding reads — a head writing elsewhere is read by nothing — and,
    with several logits (argmax), reads differently in some two of them: a lane whose column is
    the same in every logit adds one value to all of them, a shift argmax ignores (issue 26,
    review 4: heads writing only such lanes were credited with their rank)."""
    if model.unembed is None:
        return list(range(width))
    U = model.unembed
    columns: dict[int, list] = {}
    for r, row in enumerate(U.rows):
        for c, v in row:
            columns.setdefault(c, [0] * U.out_dim)[r] = v
    if U.out_dim == 1:
        return sorted(columns)
    return sorted(c for c, col in columns.items() if len(set(col)) > 1)


def read_value_coordinates(model, att) -> list[list[int]]:
    """Per head h, the coordinates of its value vector W_V^h Σ_j a_hj X_j credited as read:
    all of them when the output reads the head — U·W_O^h·W_V^h (exact; U the read-out, the
    identity without one) is not zero and, with several outputs (logits read by argmax), not
    the same for every output in each column (:func:`reaches_a_margin`: a column the same in
    every logit is a shift argmax ignores; parts that cancel, review 5, reach nothing) — and
    none when it does not. A head nothing reads
    carries nothing, however well it attends (issue 26).

    Heads, not single coordinates: W_O^h holds the solved readout weights, and a weight
    solved exactly 0 (the labels in the span of the other features, which structured data
    such as a shared context gives the honest builder) is the readout's choice on a feature it
    reads, indistinguishable in the weights from a coordinate cut off."""
    return [
        list(range(h.value.out_dim)) if reaches_a_margin(model, head_map(h)) else []
        for h in att.heads
    ]


def _read_features_model(model, att, read: list[list[int]]):
    """The model whose output at the query is, per head h, the read coordinates ``read[h]`` of
    W_V^h Σ_j a_hj X_j (:func:`~exactmem.checks.mixtures.mixture_model` with the value maps,
    before W_O^h): the features the output is a linear function of."""
    derived = mixture_model(model, att, values=True, keep_stream=False)
    width, at, lanes = derived.unembed.in_dim, stream_width(model), []
    for h, ks in zip(att.heads, read, strict=True):
        lanes += [at + k for k in ks]
        at += h.value.out_dim
    return replace(
        derived, unembed=Affine(width, tuple(((j, 1),) for j in lanes), (0,) * len(lanes))
    )


def _mixtures_exact(derived, ds, run) -> list[list[mpq]]:
    """The read features exactly (hardmax or uniform weights), by the exact evaluator."""
    trace = run(derived, ds.vocab, ds.sequences, positions="last")
    return [list(trace.outputs[i][-1]) for i in range(len(ds.sequences))]


def _mixtures_balls(derived, ds, precision: int):
    """The read features on Arb balls at ``precision`` bits: the model's softmax weights,
    enclosed by the ball evaluator."""
    trace = run_balls(derived, ds.vocab, ds.sequences, precision=precision, positions="last")
    return [list(out[-1]) for out in trace.outputs]


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


def _measured_feature_rank(model, att, ds, run, limit: int = 1024) -> tuple[int, bool, str]:
    """The rank of the read features (:func:`read_value_coordinates`) as the model's attention
    produces them: exact for hardmax and uniform weights; for softmax a certified lower bound,
    raising the precision up to ``limit`` bits until a full-rank minor is certified."""
    read = read_value_coordinates(model, att)
    heads = sum(1 for ks in read if ks)
    which = (
        f"the value vectors of all {heads} heads"
        if heads == len(read)
        else f"the value vectors of {heads} of the {len(read)} heads, the others read by nothing"
    )
    if not heads:
        return 0, True, "no head writes anything the output reads"
    derived = _read_features_model(model, att, read)
    if att.score != "softmax":
        Z = _mixtures_exact(derived, ds, run)
        return rank_of(Z), True, f"{which}; exact, {att.score} weights"
    T = len(ds.sequences)
    precision, best = 128, 0
    while precision <= limit:
        best = max(best, _certified_rank(_mixtures_balls(derived, ds, precision), precision))
        if best == T:
            break
        precision *= 2
    bits = min(precision, limit)
    return (
        best,
        False,
        f"{which}; softmax weights, rank ≥ {best} certified on Arb balls, {bits} bits",
    )


def dana_checks(model, ds, precision: int = 256, limit: int = 2048, run=None) -> list[Check]:
    """Dana et al. 2025, Lemma 2 and Theorem 1, from the model's weights.

    The features of a sequence t are what the attention layer adds up at the last position:
    F(t) = [W_O^h W_V^h A_h(t)]_h ++ x_S(t), the heads' terms and the skip term x_S(t) (the
    stream entering the layer, which returns Z + Σ_h head_h(Z)) — the output of
    :func:`~exactmem.checks.mixtures.mixture_model`, evaluated by the ball evaluator.
    ``dana.feature_rank`` certifies on Arb balls that the T₀ distinct sequences give features
    of rank T₀ (precision doubled from ``precision`` up to ``limit`` bits); ``dana.capacity``
    checks T₀ ≤ H·d_h + d with d_h of each head the rank of W_O^h W_V^h (at most d: the head's
    term is an image of A_h ∈ R^d) and d the rank of the skip terms e(t) + pos_S over the
    vocabulary, all exact from the weights (zero rows or lanes padding a map add nothing).

    The heads' features are W_O^h W_V^h A_h(t), what each head *adds to the stream*, on the
    lanes the unembedding reads (the skip term too) — not W_V^h A_h: a head whose W_O^h is 0,
    or writes only lanes nothing reads, is dead code and contributes rank 0, so a model whose
    skip term alone fits the labels is not credited with its heads' rank (review r1, F5)."""
    from flint import ctx

    if run is None:
        from exactmem.evaluate.reference import run
    att = _dana_layer(model)
    seqs = list(dict.fromkeys(tuple(s) for s in ds.sequences))
    T0 = len(seqs)
    w = stream_width(model)
    read = _read_lanes(model, w)
    d = _skip_rank(model, att, len(seqs[0]), run, read)
    # a head counts only if what it adds reaches a margin (review 5: heads writing lane pairs
    # that cancel across the logits were credited)
    maps = [head_map(h) for h in att.heads]
    live = [k for k, m in enumerate(maps) if reaches_a_margin(model, m)]
    widths = [rank_of([maps[k][i] for i in read]) for k in live]
    cap = sum(widths) + d
    derived = mixture_model(model, att, values=True, keep_stream=True, outputs=True)
    lanes = read + [w * (1 + k) + i for k in live for i in read]
    derived = replace(
        derived,
        unembed=Affine(derived.unembed.in_dim, tuple(((j, 1),) for j in lanes), (0,) * len(lanes)),
    )
    old = ctx.prec
    ok, bits = False, precision
    try:
        while not ok and bits <= limit and cap >= T0:
            trace = run_balls(derived, ds.vocab, seqs, precision=bits, positions="last")
            ctx.prec = bits
            ok = _certified_full_row_rank([list(out[-1]) for out in trace.outputs])
            if not ok:
                bits *= 2
    finally:
        ctx.prec = old
    bits = min(bits, limit)
    if ok:
        detail = (
            f"the features [W_O^h W_V^h A_h(t)]_h ++ x_S(t) of the {T0} sequences have rank {T0} "
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
            f"(H = {len(att.heads)} head{'s' * (len(att.heads) != 1)}"
            + (
                f", {len(att.heads) - len(live)} reaching no margin"
                if len(live) < len(att.heads)
                else ""
            )
            + f", rank W_O^h W_V^h {_widths_text(widths)}, skip rank d = {d})",
            {"capacity": cap, "heads": len(att.heads), "skip_dim": d},
        ),
    ]


def _widths_text(widths: list[int]) -> str:
    if not widths:
        return "—"
    return str(widths[0]) if len(set(widths)) == 1 else ", ".join(map(str, widths))


def _dense(a) -> list[list[mpq]]:
    """A linear map's matrix (exact)."""
    dense = [[mpq(0)] * a.in_dim for _ in range(a.out_dim)]
    for i, row in enumerate(a.rows):
        for j, c in row:
            dense[i][j] = mpq(c, a.denominator)
    return dense


def head_map(head) -> list[list[mpq]]:
    """W_O^h W_V^h exactly: the map from the mixed columns to what the head adds to the
    stream (a head is bias-free, :class:`~exactmem.core.model.AttentionHead`)."""
    O, V = _dense(head.output), _dense(head.value)
    return [
        [
            sum((o[k] * V[k][j] for k in range(len(V)) if o[k]), mpq(0))
            for j in range(head.value.in_dim)
        ]
        for o in O
    ]


def _skip_rank(model, att, S: int, run, read: list[int], chunk: int = 256) -> int:
    """d as the weights give it: the rank of the skip terms e(t) + pos_S over the vocabulary,
    on the lanes ``read`` the unembedding reads — the last column of the constant sequences
    (t, …, t) entering the attention, by the exact evaluator (zero lanes padding the stream add
    nothing). Read in chunks of tokens, stopping once the rank reaches the number of lanes read
    (a large vocabulary is not read to the end)."""
    front = attention_inputs_model(model, att)
    width = len(read)
    basis: list[list[mpq]] = []
    for start in range(0, model.input_dim, chunk):
        tokens = range(start, min(start + chunk, model.input_dim))
        vocab = [(mpq(0),)] * model.input_dim  # token ids: the embedding table reads the index
        trace = run(front, vocab, [[t] * S for t in tokens])
        rows = basis + [[trace.outputs[i][-1][c] for c in read] for i in range(len(tokens))]
        rank = rank_of(rows)
        basis = [rows[j] for j in _independent_rows(rows, rank)]
        if rank == width:
            break
    return len(basis)


def _independent_rows(rows, rank: int) -> list[int]:
    """Indices of ``rank`` linearly independent rows (the first such, greedily)."""
    chosen: list[int] = []
    for j in range(len(rows)):
        if rank_of([rows[i] for i in chosen + [j]]) > len(chosen):
            chosen.append(j)
            if len(chosen) == rank:
                break
    return chosen


def _dana_layer(model):
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
    return att


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
