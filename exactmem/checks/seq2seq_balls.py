"""Seq-to-seq labels of softmax models certified on Arb balls at rising precision, every position
read, and the ball values the Kajitsuka & Sato 2024 checklist (:mod:`exactmem.checks.measures.ks24`)
reads from the same evaluation.

Every value comes from :func:`exactmem.evaluate.softmax.run_balls` on the model as its file
defines it, or — for a ReLU FFN with a rank-one first layer — through
:func:`exactmem.checks.rank_one.shortcut`, the same function exactly rearranged (tested against
the ball evaluator). Without a tolerance an output must be *exactly* its label (an enclosure of
radius 0); a label left open at the precision limit is inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flint import arb, ctx
from gmpy2 import mpq

from exactmem.checks.attention import judge_columns
from exactmem.checks.certificate import Check, _examples
from exactmem.checks.rank_one import RankOneFFN, shortcut
from exactmem.core.errors import InconclusiveError
from exactmem.core.exact import format_rational
from exactmem.core.model import Affine
from exactmem.evaluate.softmax import (
    MAX_PRECISION,
    BallTrace,
    _attention,
    _mlp,
    affine_balls,
    decide,
    run_balls,
    to_ball,
)

__all__ = ["ball_seq2seq_label_check"]


def _judge(trace, labels, readout: str, tol: mpq):
    """(verdict or None, worst figure, bad items) over every position."""
    items = (
        (f"sequences[{i}][{k}]", col, y)
        for i, (out, ys) in enumerate(zip(trace.outputs, labels, strict=True))
        for k, (col, y) in enumerate(zip(out, ys, strict=True))
    )
    return judge_columns(items, readout, tol)


@dataclass
class _Balls:
    """Ball enclosures of one model on one dataset at one precision, per sequence and
    position: the outputs, and — when asked — the ids wᵀc read after the attention and the
    activations of the FFN's last hidden layer."""

    outputs: list | None = None
    ids: list | None = None
    hidden: list | None = None


_LAST_RUN: list = []  # (model, dataset, precision, values): the labels check and the checklist


def _cached(model, ds, precision: int) -> _Balls:
    for m, d, p, values in _LAST_RUN:
        if m is model and d is ds and p == precision:
            return values
    values = _Balls()
    _LAST_RUN[:] = [(model, ds, precision, values)]
    return values


def _balls(model, ds, precision: int, *, ids=None, hidden: bool = False) -> _Balls:
    """The enclosures asked for (``ids``: the id direction w), from the ball evaluator
    (:func:`~exactmem.evaluate.softmax.run_balls`) on the model, or on its prefix up to the
    attention / its FFN cut after the last hidden layer — or, for the one shape it evaluates,
    from the same function rearranged (:func:`exactmem.checks.rank_one.shortcut`)."""
    values = _cached(model, ds, precision)
    want_ids = ids is not None and values.ids is None
    want_hidden = hidden and values.hidden is None
    if values.outputs is not None and not want_ids and not want_hidden:
        return values
    fast = shortcut(model)
    if fast is not None and (ids is None or list(ids) == list(fast.w)):
        _shortcut(model, ds, precision, fast, values)
        return values
    if values.outputs is None:
        values.outputs = _run(model, ds, precision)
    if want_ids:
        att = model.sublayers[0]
        cols = _run(replace(model, sublayers=(att,), unembed=None), ds, precision)
        values.ids = [[_dot(ids, c) for c in seq] for seq in cols]
    if want_hidden:
        values.hidden = _run(_to_last_hidden(model), ds, precision)
    return values


def _run(model, ds, precision: int) -> list:
    return run_balls(model, ds.vocab, ds.sequences, precision=precision, positions="all").outputs


def _dot(w, column) -> arb:
    return sum((c * wj for c, wj in zip(column, w, strict=True) if wj), arb(0))


def _to_last_hidden(model):
    """The model with its FFN cut after the last hidden layer's activation: its outputs are
    that layer's units (an identity read-out keeps the activation, which the evaluator applies
    between layers)."""
    att, ffn = model.sublayers
    width = ffn.layers[-2].out_dim
    identity = Affine(width, tuple(((j, 1),) for j in range(width)), (0,) * width)
    cut = replace(ffn, layers=(*ffn.layers[:-1], identity), residual=False, probes=())
    return replace(model, sublayers=(att, cut), unembed=None)


def _shortcut(model, ds, precision: int, fast: RankOneFFN, values: _Balls) -> None:
    old = ctx.prec
    ctx.prec = precision
    try:
        att, ffn = model.sublayers
        ids, hidden, outputs = [], [], []
        for seq in ds.sequences:
            cols = _attention(att, [[to_ball(x) for x in ds.vocab[t]] for t in seq], False)
            xs = [_dot(fast.w, c) for c in cols]
            layers = [
                fast.layers(x, c) if x.is_finite() else [_mlp(ffn, c)]
                for x, c in zip(xs, cols, strict=True)
            ]
            ids.append(xs)
            hidden.append([token[-2] if len(token) > 1 else None for token in layers])
            outs = [token[-1] for token in layers]
            if model.unembed is not None:
                outs = [affine_balls(model.unembed, c) for c in outs]
            outputs.append(outs)
        values.ids, values.outputs = ids, outputs
        if len(ffn.layers) > 2:
            values.hidden = hidden
    finally:
        ctx.prec = old


def ball_seq2seq_label_check(
    model, ds, *, readout: str = "label", tolerance: mpq | None = None, limit: int = MAX_PRECISION
) -> Check:
    """Labels at every position of a softmax model, certified on Arb balls at rising precision:
    without ``tolerance`` an output must be *exactly* its label (an enclosure of radius 0)."""
    tol = mpq(0) if tolerance is None else mpq(tolerance)
    state: dict = {}

    def evaluate(precision):
        return BallTrace(_balls(model, ds, precision).outputs, precision)

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
