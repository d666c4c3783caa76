"""Certifying softmax-attention models: labels from Arb enclosures, and the checks specific to
the attention-only memorization results (Mahdavi et al. 2024, Dana et al. 2025).

A label is *certified* when the whole enclosure lies on the right side: within the stated
tolerance of a real-valued label, or with the target logit above every other logit (a positive
margin). When an enclosure is too wide at every precision up to the limit, the answer is
*inconclusive* (exit code 4), never a guess.
"""

from __future__ import annotations

from gmpy2 import mpq

from exactmem.errors import InconclusiveError
from exactmem.evaluate.softmax import ball_bounds, decide, run_balls
from exactmem.exact import format_rational
from exactmem.verify import Check, _examples

__all__ = ["ball_label_check", "exact_classification_check", "mahdavi_checks"]


def _judge_labels(trace, labels, readout: str, tol: mpq):
    """(verdict or None, worst figure, bad items) for one ball trace."""
    undecided = False
    bad = []
    worst = None
    for i, (out, y) in enumerate(zip(trace.outputs, labels, strict=True)):
        col = out[-1]
        if readout == "classification":
            target = col[y - 1]
            margin_lo = None
            for c, other in enumerate(col):
                if c == y - 1:
                    continue
                lo, hi = ball_bounds(target - other)
                if hi <= 0:
                    bad.append(f"sequences[{i}]: logit {c + 1} ≥ the target's")
                elif lo <= 0:
                    undecided = True
                margin_lo = lo if margin_lo is None else min(margin_lo, lo)
            if margin_lo is not None:
                worst = margin_lo if worst is None else min(worst, margin_lo)
        else:
            lo, hi = ball_bounds(col[0] - y)
            err = max(abs(lo), abs(hi))
            worst = err if worst is None else max(worst, err)
            if lo >= tol or hi <= -tol:
                bad.append(
                    f"sequences[{i}]: output off the label {y} by more than {format_rational(tol)}"
                )
            elif not (-tol < lo and hi < tol):
                undecided = True
    if bad:
        return False, worst, bad
    return (None if undecided else True), worst, bad


def ball_label_check(model, ds, *, limit: int = 1 << 12) -> Check:
    """Labels at the last position, certified on Arb balls with rising precision."""
    readout = model.meta.get("readout", "regression")
    tol = mpq(model.meta.get("tolerance", "0"))
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
            "label; raise the temperature (saturation) or the precision limit"
        )
    worst = state["worst"]
    if readout == "classification":
        figures = {"min_margin_lower_bound": None if worst is None else format_rational(worst)}
        detail = (
            f"all {ds.size} argmax labels certified, target logit ahead by ≥ "
            f"{figures['min_margin_lower_bound']} (Arb, {precision} bits)"
        )
    else:
        figures = {
            "max_error_upper_bound": None if worst is None else format_rational(worst),
            "tolerance": format_rational(tol),
        }
        detail = (
            f"all {ds.size} labels within {format_rational(tol)} (worst ≤ "
            f"{float(worst):.3g}; Arb, {precision} bits)"
        )
    figures["precision"] = precision
    if not verdict:
        return Check("labels", False, _examples(state["bad"]), figures)
    return Check("labels", True, detail, figures)


def exact_classification_check(outputs, labels) -> Check:
    """Argmax labels from exact outputs: the target logit strictly above the others."""
    bad, margin = [], None
    for i, (out, y) in enumerate(zip(outputs, labels, strict=True)):
        col = out[-1]
        gaps = [col[y - 1] - v for c, v in enumerate(col) if c != y - 1]
        gap = min(gaps) if gaps else None
        if gap is not None and gap <= 0:
            bad.append(
                f"sequences[{i}]: target logit {format_rational(col[y - 1])} is not "
                "above the others"
            )
        if gap is not None:
            margin = gap if margin is None else min(margin, gap)
    figures = {"min_margin": None if margin is None else format_rational(margin)}
    if bad:
        return Check("labels", False, _examples(bad), figures)
    return Check(
        "labels",
        True,
        f"all {len(labels)} argmax labels exact, margin ≥ {figures['min_margin']}",
        figures,
    )


def mahdavi_checks(model, ds) -> list[Check]:
    """A1/A2 as measured, capacity, and — for the exact hardmax model — the rank of the
    features the model's own attention produces, or the shared-context rank ceiling."""
    from exactmem.constructions.mahdavi24 import (
        capacity,
        check_assumptions,
        examples,
        rank_ceiling,
        rank_of,
    )

    queries, contexts = examples(ds)
    report = check_assumptions(queries, contexts)
    T, n, d = len(queries), len(contexts[0]), len(queries[0])
    att = model.sublayers[0]
    H = len(att.heads)
    checks = [
        Check(
            "mahdavi.assumptions",
            True,
            f"A2: all {T} contexts have rank n = {n}; A1: {report.describe()}",
            {"subsets_tried": report.subsets_tried, "exhaustive": report.exhaustive},
        )
    ]
    cap = capacity(H, n, d)
    ceiling = rank_ceiling(contexts, H)
    if att.score == "hardmax":
        Z = _hardmax_features(att, queries, contexts)
        rank = rank_of(Z)
        ok = rank == T
        detail = (
            f"the features [Eᵀa_h]_h of the model's attention have rank {rank} = T"
            if ok
            else f"the features have rank {rank} < T = {T}: some labels cannot be "
            "fitted by any readout on this attention"
        )
        checks.append(Check("mahdavi.feature_rank", ok, detail, {"rank": rank, "T": T}))
    if ceiling is not None:
        ok = T <= ceiling
        checks.append(
            Check(
                "mahdavi.rank_ceiling",
                ok,
                f"shared context: every attention pattern gives rank Z ≤ H·(n − 1) + 1 = {ceiling}"
                + (
                    f" ≥ T = {T}"
                    if ok
                    else f" < T = {T}, so for any attention weights the readout "
                    "reaches only a proper subspace of the labels (Proposition 2)"
                ),
                {"ceiling": ceiling, "T": T},
            )
        )
    checks.append(
        Check(
            "mahdavi.capacity",
            T <= cap,
            f"T = {T} {'≤' if T <= cap else '>'} H(min(n, d_h) − 1) + 1 = {cap}",
            {"capacity": cap, "heads": H},
        )
    )
    return checks


def _hardmax_features(att, queries, contexts) -> list[list[mpq]]:
    """Z from the model's weights: row t = [E^(t)ᵀ a_h^(t)]_h with exact hardmax weights."""
    from exactmem.evaluate.reference import _apply_linear

    Z = []
    for e, E in zip(queries, contexts, strict=True):
        width = att.heads[0].query.in_dim
        pad = (mpq(0),) * (width - len(e))
        q_in = tuple(e) + pad
        row: list[mpq] = []
        for h in att.heads:
            q = _apply_linear(h.query, q_in)
            scores = [
                sum(
                    (a * b for a, b in zip(_apply_linear(h.key, tuple(x) + pad), q, strict=True)),
                    mpq(0),
                )
                for x in E
            ]
            top = max(scores)
            tied = [j for j, s in enumerate(scores) if s == top]
            for i in range(len(e)):
                row.append(sum((E[j][i] for j in tied), mpq(0)) / len(tied))
        Z.append(row)
    return Z


def dana_checks(model, ds, precision: int = 256) -> list[Check]:
    """Lemma 2's rank, certified: the attention features Φ(t) = [W_V^h A_h(t)]_h that the model's
    own weights produce at the last position form a T₀ × (H d_h + d) matrix whose first T₀
    columns are non-singular (Arb solve); and the capacity H·d_h + d."""
    from flint import arb_mat, ctx

    from exactmem.evaluate.softmax import softmax_balls, to_ball
    from exactmem.model import Attention, PositionalEncoding

    pos = next(s for s in model.sublayers if isinstance(s, PositionalEncoding))
    att = next(s for s in model.sublayers if isinstance(s, Attention))
    pairs = {tuple(s): y for s, y in zip(ds.sequences, ds.labels, strict=True)}
    T0 = len(pairs)
    old = ctx.prec
    ctx.prec = precision
    try:
        rows = []
        for seq in pairs:
            xs = []
            for k, t in enumerate(seq):
                col = [
                    sum(
                        (to_ball(mpq(c, model.embed.denominator)) for j, c in row if j == t),
                        to_ball(mpq(0)),
                    )
                    for row in model.embed.rows
                ]
                xs.append([a + to_ball(b) for a, b in zip(col, pos.table[k], strict=True)])
            feats = []
            for h in att.heads:

                def lin(a, v):
                    return [
                        sum(
                            (v[j] * to_ball(mpq(c, a.denominator)) for j, c in row), to_ball(mpq(0))
                        )
                        for row in a.rows
                    ]

                q = lin(h.query, xs[-1])
                scores = [
                    sum((x * y for x, y in zip(lin(h.key, x_), q, strict=True)), to_ball(mpq(0)))
                    for x_ in xs
                ]
                a = softmax_balls(scores)
                A = [
                    sum((a[s] * xs[s][i] for s in range(len(xs))), to_ball(mpq(0)))
                    for i in range(len(xs[0]))
                ]
                feats += lin(h.value, A)
            rows.append(feats[:T0])
        try:
            if len(rows[0]) < T0:  # fewer features than associations: rank < T₀ for sure
                raise ZeroDivisionError
            arb_mat(rows).solve(
                arb_mat([[to_ball(mpq(int(i == j))) for j in range(T0)] for i in range(T0)])
            )
            ok = True
        except ZeroDivisionError:
            ok = False
    finally:
        ctx.prec = old
    cap = sum(h.value.out_dim for h in att.heads)  # H·d_h + d, read off the model's heads
    detail = (
        f"the {T0} attention feature vectors are linearly independent (Arb, {precision} bits)"
        if ok
        else f"the {T0} attention features are not certifiably independent at {precision} bits"
    )
    return [
        Check("dana.feature_rank", ok, detail, {"associations": T0}),
        Check(
            "dana.capacity",
            T0 <= cap,
            f"T₀ = {T0} {'≤' if T0 <= cap else '>'} H·d_h + d = {cap}",
            {"capacity": cap, "paper_parameters": model.meta.get("paper_parameters")},
        ),
    ]
