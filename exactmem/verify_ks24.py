"""Kajitsuka & Sato 2024's checklist, measured on the model (Arb balls), and seq-to-seq labels of
softmax models certified on balls.

The model the checklist reads is one softmax self-attention layer with a single head of rank
one (W_Q, W_K, W_V of one row, W_O of one column) followed by one token-wise FFN, on the raw
tokens. Its *context id* of a token is what the FFN's first layer reads: wᵀz after the
attention, w the common direction of that layer's rows (every row a multiple of w, else the
model has not the structure the checklist reads).

* ``ks24.separation``: tokenwise (r_min, r_max, ε)-separatedness, exact (r_min > 0);
* ``ks24.contextual_mapping``: the tokens of every sequence are pairwise distinct (equal tokens
  of one sequence get one id: refuted) and the ids of different (multiset, token) classes are
  certified apart — the least distance between the enclosures of two classes, against their
  widest enclosure — reported beside the paper's worst-case margin δ, which is exponentially
  small and not what the model is held to;
* ``ks24.requantization``: every unit of the FFN's last hidden layer takes an exact value in
  {0, 1} at every token (the ball of an id off every ramp gives exact steps), so the outputs
  after it are exact.

A figure that stays undecided up to the precision limit is *inconclusive* (exit 4), naming the
precision tried. Models of this shape are evaluated through the FFN's rank-one first layer
(:mod:`exactmem.rank_one`: the same function, O(log K) per token); any other seq-to-seq softmax
model through the plain ball evaluator.
"""

from __future__ import annotations

from fractions import Fraction

from flint import arb, ctx
from gmpy2 import mpq

from exactmem.errors import InconclusiveError
from exactmem.evaluate.softmax import (
    MAX_PRECISION,
    BallTrace,
    _attention,
    _mlp,
    ball_bounds,
    decide,
    run_balls,
    to_ball,
)
from exactmem.exact import format_rational
from exactmem.model import MLP, Attention
from exactmem.rank_one import RankOneFFN, rank_one_direction
from exactmem.separation import Separation, separation
from exactmem.verify import Check, ChecklistStructureError, _examples
from exactmem.verify_attention import brief, judge_columns

__all__ = ["ball_seq2seq_label_check", "check_ks24", "paper_delta_exponent"]


# --------------------------------------------------------------------------- labels on balls


def _judge(trace, labels, readout: str, tol: mpq):
    """(verdict or None, worst figure, bad items) over every position."""
    items = (
        (f"sequences[{i}][{k}]", col, y)
        for i, (out, ys) in enumerate(zip(trace.outputs, labels, strict=True))
        for k, (col, y) in enumerate(zip(out, ys, strict=True))
    )
    return judge_columns(items, readout, tol)


def _fast_path(model):
    """A :class:`RankOneFFN` for a model that is one attention layer and one plain FFN with a
    rank-one first layer on raw tokens (the ks24 shape), else None."""
    subs = model.sublayers
    if (
        len(subs) != 2
        or not isinstance(subs[0], Attention)
        or not isinstance(subs[1], MLP)
        or subs[1].residual
        or len(subs[1].layers) < 2
        or model.embed is not None
        or model.unembed is not None
        or model.token_inputs
    ):
        return None
    found = rank_one_direction(subs[1].layers[0])
    return None if found is None else RankOneFFN(subs[1], *found)


_LAST_RUN: list = []  # (model, dataset, precision, fast?, result): the labels check and the
# checklist evaluate the same model at the same precisions; the entry holds its objects, so an
# `is` match cannot be a recycled id


def _run(model, ds, precision: int, fast: RankOneFFN | None):
    """Per sequence and position: the ids x = wᵀz after the attention (None without the fast
    path) and the FFN's layers from the second on (hidden activations, then the output)."""
    for m, d, p, f, result in _LAST_RUN:
        if m is model and d is ds and p == precision and f == (fast is not None):
            return result
    result = _evaluate(model, ds, precision, fast)
    _LAST_RUN[:] = [(model, ds, precision, fast is not None, result)]
    return result


def _evaluate(model, ds, precision: int, fast: RankOneFFN | None):
    if fast is None:
        trace = run_balls(model, ds.vocab, ds.sequences, precision=precision, positions="all")
        return None, [[[col] for col in out] for out in trace.outputs]
    old = ctx.prec
    ctx.prec = precision
    try:
        att, ffn = model.sublayers
        ids, layers = [], []
        for seq in ds.sequences:
            cols = _attention(att, [[to_ball(x) for x in ds.vocab[t]] for t in seq], False)
            xs = [sum((c[j] * wj for j, wj in enumerate(fast.w) if wj), arb(0)) for c in cols]
            ids.append(xs)
            layers.append(
                [
                    fast.layers(x) if x.is_finite() else [_mlp(ffn, c)]
                    for x, c in zip(xs, cols, strict=True)
                ]
            )
        return ids, layers
    finally:
        ctx.prec = old


def ball_seq2seq_label_check(
    model, ds, *, readout: str = "label", tolerance: mpq | None = None, limit: int = MAX_PRECISION
) -> Check:
    """Labels at every position of a softmax model, certified on Arb balls at rising precision:
    without ``tolerance`` an output must be *exactly* its label (an enclosure of radius 0)."""
    tol = mpq(0) if tolerance is None else mpq(tolerance)
    state: dict = {}

    fast = _fast_path(model)

    def evaluate(precision):
        _, layers = _run(model, ds, precision, fast)
        return BallTrace([[token[-1] for token in seq] for seq in layers], precision)

    def judge(trace):
        verdict, worst, bad = _judge(trace, ds.labels, readout, tol)
        state.update(worst=worst, bad=bad)
        return verdict

    verdict, precision = decide(evaluate, judge, start=min(64, limit), limit=limit)
    count = sum(len(y) for y in ds.labels)
    if verdict is None:
        raise InconclusiveError(
            f"the enclosures of the outputs stay too wide at {precision} bits to decide every "
            "label" + (" exactly (pass --tolerance Q)" if tol == 0 and readout == "label" else "")
        )
    worst = state["worst"]
    figures = {
        "precision": precision,
        ("min_margin_lower_bound" if readout == "argmax" else "max_error_upper_bound"): (
            None if worst is None else format_rational(worst)
        ),
    }
    if not verdict:
        return Check("labels", False, _examples(state["bad"]), figures)
    if readout == "argmax":
        detail = f"all {count} argmax labels certified (Arb, {precision} bits)"
    elif worst == 0:
        detail = (
            f"all {count} outputs exactly their labels (enclosures of radius 0; Arb, "
            f"{precision} bits)"
        )
    else:
        detail = (
            f"all {count} outputs within {format_rational(tol)} of their labels (Arb, "
            f"{precision} bits)"
        )
    return Check("labels", True, detail, figures)


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
            "tokens"
        )
    att, ffn = subs
    if att.score != "softmax" or att.mask != "none" or len(att.heads) != 1:
        raise ChecklistStructureError("its attention is not one softmax head over every position")
    h = att.heads[0]
    if (h.query.out_dim, h.key.out_dim, h.value.out_dim, h.output.in_dim) != (1, 1, 1, 1):
        raise ChecklistStructureError("its W_Q, W_K, W_V, W_O are not of rank one (1 row/column)")
    if len(ffn.layers) < 3:
        raise ChecklistStructureError("its FFN has fewer than two hidden layers to re-quantize")
    if ffn.residual:
        raise ChecklistStructureError("its FFN is residual; the checklist reads a plain FFN")
    found = rank_one_direction(ffn.layers[0])
    if found is None:
        raise ChecklistStructureError(
            "the rows of its FFN's first layer are not multiples of one direction: it reads no "
            "single context id"
        )
    w, factors = found
    return att, ffn, w, factors


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


def _gap(ids, keys):
    """(certified least gap between classes or None, widest enclosure, collision): the
    collision names two classes whose ids are the same exact number (certified equal)."""
    hull: dict = {}
    where: dict = {}
    width = mpq(0)
    for i, (row, krow) in enumerate(zip(ids, keys, strict=True)):
        for k, (c, key) in enumerate(zip(row, krow, strict=True)):
            if not c.is_finite():
                return None, None, None
            lo, hi = ball_bounds(c)
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
    from exactmem.balls import ball_midpoint

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


def _steps_judge(hidden, ds):
    """(verdict or None, bad items) for 'every last-hidden unit exact in {0, 1}'."""
    bad, undecided = [], False
    one = arb(1)
    for i, rows in enumerate(hidden):
        for k, units in enumerate(rows):
            if units is None:  # an id beyond the exponent range: nothing decided here
                undecided = True
                continue
            for j, g in enumerate(units):
                if g.is_exact() and (g == 0 or g == one):
                    continue
                if not g.is_finite():
                    undecided = True
                    continue
                lo, hi = ball_bounds(g)
                if hi < 0 or lo > 1 or (0 < lo and hi < 1) or g.is_exact():
                    bad.append(f"sequences[{i}][{k}] unit {j}: {brief(lo, up=False)}…{brief(hi)}")
                else:
                    undecided = True
    if bad:
        return False, bad
    return (None if undecided else True), bad


def check_ks24(model, ds, *, limit: int = MAX_PRECISION) -> list[Check]:
    """The ks24 checklist (module docstring), from the model's weights on ``ds``."""
    att, ffn, w, factors = _layers(model)
    sep = separation(ds)
    n = len(ds.sequences[0])
    zero = sep.zero_tokens
    checks = [
        Check(
            "ks24.separation",
            not zero,
            ("tokenwise separated: " + sep.describe())
            if not zero
            else f"vocab[{zero[0]}] is the zero vector: r_min = 0",
            sep.figures(),
        )
    ]
    keys = _classes(ds)
    state: dict = {}

    fast = RankOneFFN(ffn, w, factors)

    def evaluate(precision):
        return _run(model, ds, precision, fast)

    def judge(result):
        ids, layers = result
        hidden = [[token[-2] if len(token) > 1 else None for token in seq] for seq in layers]
        gap, width, collision = _gap(ids, keys)
        steps, bad = _steps_judge(hidden, ds)
        state.update(gap=gap, width=width, steps=steps, bad=bad, collision=collision)
        if steps is False or collision:
            return False
        return None if gap is None or steps is None else True

    try:
        _, precision = decide(evaluate, judge, start=min(64, limit), limit=limit)
    finally:
        _LAST_RUN.clear()
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
    if sep.repeats:
        i, k, j = sep.repeats[0]
        checks.append(
            Check(
                "ks24.contextual_mapping",
                False,
                f"sequences[{i}][{j}] and sequences[{i}][{k}] are equal tokens: they receive one "
                "context id, and a contextual mapping gives every position of a sequence its own",
                figures,
            )
        )
    elif state["collision"]:
        (i, k), (j, m), value = state["collision"]
        checks.append(
            Check(
                "ks24.contextual_mapping",
                False,
                f"sequences[{i}][{k}] and sequences[{j}][{m}] are of different (multiset, token) "
                f"classes but share the context id {format_rational(value)} exactly",
                figures,
            )
        )
    elif state["gap"] is None:
        raise InconclusiveError(
            f"ks24.contextual_mapping: the context ids of two classes still overlap at "
            f"{precision} bits (the precision limit); their gap is not certified"
            + _bits_needed(_run(model, ds, min(max(4 * limit, 512), 1 << 16), fast)[0], keys)
        )
    else:
        gap, width = state["gap"], state["width"]
        figures.update(gap_lower_bound=format_rational(gap), max_enclosure=format_rational(width))
        checks.append(
            Check(
                "ks24.contextual_mapping",
                True,
                f"{figures['classes']} (multiset, token) classes get context ids ≥ "
                f"{brief(gap, up=False)} apart (enclosures ≤ {brief(width)} wide; Arb, "
                f"{precision} bits); {delta_text}",
                figures,
            )
        )
    steps = state["steps"]
    units = ffn.layers[-2].out_dim
    if steps is None and state["collision"]:
        return checks
    if steps is None:
        raise InconclusiveError(
            f"ks24.requantization: some step units stay undecided at {precision} bits"
        )
    checks.append(
        Check(
            "ks24.requantization",
            steps,
            f"all {units} step units exact in {{0, 1}} at every token (Arb, {precision} bits)"
            if steps
            else "step units off {0, 1}: " + _examples(state["bad"]),
            {"units": units, "precision": precision},
        )
    )
    return checks
