"""The checklist of Kim, Kim & Mozafari 2023 (``verify --construction kim23``), measured on the
evaluated network: the architecture (2n attention layers of head size 1 between a token
embedding and one memorizing MLP), the contextual mapping's value S (identical across the
tokens of equivalent sequences), the (context, token) ids the memorizer reads (distinct where
labels differ), the attention scores (hardmax ties only between equal values, the score margin
measured), and every Lemma C.1 stage of the memorizer.

Every figure comes from the trace and the weights; nothing the model says about itself is read.
The two lanes found by name — the stream's S and the memorizer's key — are validated by their
values: S must be one value per sequence, equal on equivalent sequences and apart wherever a
token's labels differ; the keys equal only where the labels are. A lane that merely carries the
name fails them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from flint import arb, ctx, fmpq
from gmpy2 import mpq

from exactmem.checks.certificate import MAX_EXAMPLES, Check, ChecklistStructureError, _examples
from exactmem.checks.memorizer import check_any_memorizer
from exactmem.core.balls import ball_bounds
from exactmem.core.exact import format_rational
from exactmem.core.model import MLP, Affine, Attention, PositionalEncoding, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import SequenceView, canonical_tokens
from exactmem.evaluate.records import HeadRecord, Recording, Stream, Trace
from exactmem.evaluate.reference import run_points

__all__ = ["check_kim23", "hardmax_limit", "has_softmax", "parts"]


def has_softmax(model: Transformer) -> bool:
    return any(isinstance(s, Attention) and s.score == "softmax" for s in model.sublayers)


def hardmax_limit(model: Transformer) -> Transformer:
    """The model with every softmax attention read as hardmax (the λ → ∞ limit): exactly
    evaluable. ``kim23.softmax`` certifies that the softmax model's values after each
    re-quantizing FFN equal the limit's; without that check the limit proves nothing."""
    subs = tuple(
        replace(s, score="hardmax") if isinstance(s, Attention) and s.score == "softmax" else s
        for s in model.sublayers
    )
    return replace(model, sublayers=subs)


def _count(a: Affine, bias: bool) -> int:
    return sum(len(r) for r in a.rows) + (sum(1 for b in a.bias if b) if bias else 0)


def parts(model: Transformer) -> dict:
    """Non-zero parameters per term of the bound Õ(d + n + √(nN)): d (E_in and a positional
    table), n (the sub-layers of the contextual mapping), √(nN) (the last MLP)."""
    d = _count(model.embed, True) if model.embed else 0
    n_part = mem = 0
    last = len(model.sublayers) - 1
    for i, s in enumerate(model.sublayers):
        if isinstance(s, PositionalEncoding):
            d += sum(1 for row in s.table for v in row if v)
        elif isinstance(s, Attention):
            n_part += sum(
                _count(m, False) for h in s.heads for m in (h.query, h.key, h.value, h.output)
            )
        elif isinstance(s, MLP):
            count = sum(_count(layer, True) for layer in s.layers)
            if i == last:
                mem += count
            else:
                n_part += count
        else:  # a LayerNorm: not part of the construction, counted with the mapping
            n_part += sum(1 for v in (*s.gain, *s.bias) if v)
    return {"d": d, "n": n_part, "sqrt_nN": mem, "total": d + n_part + mem}


def check_kim23(trace: Trace, model: Transformer, ds: Dataset, sv: SequenceView) -> list[Check]:
    """The kim23 checklist; a model without the parts it reads raises
    :class:`ChecklistStructureError` (the caller refutes)."""
    if model.token_inputs or model.embed is None or model.unembed is not None:
        raise ChecklistStructureError(
            "kim23 reads token vectors through a token projection E_in and has no E_out"
        )
    subs = model.sublayers
    if not subs or not isinstance(subs[-1], MLP):
        raise ChecklistStructureError("the last sub-layer must be the memorizing MLP")
    if any(isinstance(s, PositionalEncoding) for s in subs[1:]) or len(subs) < 2:
        raise ChecklistStructureError(
            "kim23 is E_in, an optional positional encoding, the contextual mapping, then the "
            "memorizer"
        )
    if trace.embedded is None or len(trace.streams) != len(subs):
        raise ChecklistStructureError("the evaluation kept no stream of the contextual mapping")
    n = len(ds.sequences[0])
    seq2seq = ds.task == "seq2seq"
    positional = isinstance(subs[0], PositionalEncoding)
    checks = [_architecture(model, n)]
    before = trace.streams[-2]  # the stream the memorizer reads
    if "S" not in before.names:
        raise ChecklistStructureError("the stream before the memorizer has no lane S")
    canon = canonical_tokens(ds, sv.canonical)
    if positional:
        _, context = np.unique(canon, axis=0, return_inverse=True)
        context = context.reshape(-1)
    else:
        context = np.asarray(sv.multiset_ids)
    labels = np.array(ds.labels, dtype=object).reshape(ds.size, -1)
    context_check = _context(before, context, seq2seq, canon, labels, positional)
    read = {c for row in subs[-1].layers[0].rows for c, _ in row}
    if before.names.index("S") not in read:  # a lane named S the memorizer never reads
        why = (
            "the memorizer's first layer does not read the lane named S: the context value "
            "checked is not the one the ids are made of"
        )
        if not context_check.passed:
            why += "; " + context_check.detail
        context_check = Check("kim23.context", False, why, context_check.figures)
    checks.append(context_check)
    mem = subs[-1]
    prefix = f"{mem.label}." if mem.label else ""
    key, kden, kindex = trace.lane_raw(prefix + "key")
    checks.append(_ids(key, kden, kindex, labels, seq2seq))
    heads = _heads(model, ds)
    checks.append(_attention(model, heads))
    if has_softmax(model):
        checks.append(_softmax(model, trace, heads))
    rows, where = np.unique(before.index.reshape(-1), return_index=True)
    expected = dict(zip(rows.tolist(), labels.reshape(-1)[where].tolist(), strict=True))
    P = before.index.shape[1]

    def describe(r: int) -> str:
        m = int(where[np.searchsorted(rows, r)])
        return f"sequences[{m // P}][{m % P if seq2seq else n - 1}]"

    checks += check_any_memorizer(trace, mem, expected, describe)
    checks += _dataflow(model, before.names)
    return checks


TOKEN_LANES = ("t",)  # the token lane the ids z = A(S − S_min) + t read besides S


def _dataflow(model: Transformer, names) -> list[Check]:
    """The checked lanes produce the output (:mod:`exactmem.checks.dataflow`, over the non-zero
    weights): ``kim23.dataflow.memorizer`` — every path from the input to the output crosses
    the memorizer's checked read-out (Lemma C.1 Stage III's matches and labels), so a lookup
    beside it, or a memorizer left as dead code, fails; ``kim23.dataflow.lanes`` — every path
    into that read-out crosses the lanes the ids are made of, S (checked by ``kim23.context``)
    and the token lane t, located by the trace's names ``names`` of the stream before the
    memorizer (a lane named falsely is tied to the weights here)."""
    from exactmem.checks.dataflow import (
        cut_check,
        graph,
        lane_units,
        memorizer_cut,
        memorizer_dataflow,
    )

    at = len(model.sublayers) - 1
    mem = model.sublayers[at]
    assert isinstance(mem, MLP)
    g = graph(model)
    readout, missing = memorizer_cut(g, at, mem)
    lanes = ("S", *TOKEN_LANES)
    return [
        memorizer_dataflow("kim23.dataflow.memorizer", model, at),
        cut_check(
            "kim23.dataflow.lanes",
            model,
            lane_units(g, at, names, lanes),
            targets=readout,
            what="the lanes S and t before the memorizer",
            missing=[*missing, *(x for x in lanes if x not in names)],
            g=g,
        ),
    ]


def _architecture(model: Transformer, n: int) -> Check:
    """2n attention layers, one head each of size 1 (the n part of the bound)."""
    atts = [s for s in model.sublayers if isinstance(s, Attention)]
    bad = []
    for i, s in enumerate(model.sublayers):
        if not isinstance(s, Attention):
            continue
        if len(s.heads) != 1:
            bad.append(f"sublayers[{i}] has {len(s.heads)} heads")
        elif s.heads[0].query.out_dim != 1 or s.heads[0].value.out_dim != 1:
            bad.append(f"sublayers[{i}] has a head of size > 1")
    if len(atts) != 2 * n:
        bad.append(f"{len(atts)} attention layers, 2n = {2 * n}")
    figures = {"attention_layers": len(atts), "parameters_by_part": parts(model)}
    return Check(
        "kim23.architecture",
        not bad,
        _examples(bad) if bad else f"2n = {2 * n} attention layers, one head of size 1 each",
        figures,
    )


def _context(
    stream: Stream,
    context: np.ndarray,
    seq2seq: bool,
    canon: np.ndarray,
    labels: np.ndarray,
    positional: bool = False,
) -> Check:
    """The context value S is one value per sequence (at every judged position), the same for
    equivalent sequences (equal multisets; equal sequences with positions), and tells the
    contexts apart wherever the data needs it: two judged items with one S and one token carry
    one label (the memorizer reads only (S, token)). The lane is found by its name, so these
    are also what validates it: a lane renamed S that is not the context value fails them."""
    S = np.asarray(stream.numerators("S"), dtype=object)[stream.index]  # (N, P)
    bad = []
    if seq2seq:
        for i in np.nonzero((S != S[:, :1]).any(axis=1))[0][: MAX_EXAMPLES + 1]:
            bad.append(f"sequences[{i}]: the context value differs across its positions")
    value = S[:, -1]
    owner: dict[int, int] = {}
    for i, c in enumerate(context.tolist()):
        j = owner.setdefault(c, i)
        if value[j] != value[i] and len(bad) <= MAX_EXAMPLES:
            bad.append(
                f"sequences[{j}] and sequences[{i}] are equivalent but have context values "
                f"{format_rational(mpq(int(value[j]), stream.den))} and "
                f"{format_rational(mpq(int(value[i]), stream.den))}"
            )
    # distinct where the data needs it: (S, token) must determine the label (with positions,
    # the token's key carries its position)
    positions = range(canon.shape[1]) if seq2seq else [canon.shape[1] - 1]
    seen: dict = {}
    merged = 0
    for i in range(len(value)):
        for k in positions:
            y = labels[i, k] if seq2seq else labels[i, -1]
            key = (value[i], int(canon[i, k]), k if positional else 0)
            j, m, z = seen.setdefault(key, (i, k, y))
            if z != y:
                merged += 1
                if len(bad) <= MAX_EXAMPLES:
                    bad.append(
                        f"sequences[{j}][{m}] and sequences[{i}][{k}] share the context value "
                        f"{format_rational(mpq(int(value[i]), stream.den))} and their token but "
                        f"are labelled {z} and {y}: the contexts are not told apart"
                    )
    distinct_values = len({value[j] for j in owner.values()})
    figures = {
        "contexts": len(owner),
        "distinct_context_values": distinct_values,
        "merged_items": merged,
    }
    detail = (
        f"one context value per sequence, equal across equivalent sequences, apart wherever a "
        f"token's labels differ; {len(owner)} contexts, {distinct_values} distinct values"
    )
    return Check("kim23.context", not bad, _examples(bad) if bad else detail, figures)


def _ids(key: np.ndarray, den: int, index: np.ndarray, labels: np.ndarray, seq2seq) -> Check:
    """The memorizer's (context, token) ids: equal ids only where the labels are equal."""
    ids = np.asarray(key, dtype=object)[index]  # (N, P)
    want = labels if seq2seq else labels[:, -1:]
    owner: dict = {}
    bad: list[str] = []
    clashes = 0
    P = ids.shape[1]
    for m, (z, y) in enumerate(
        zip(ids.reshape(-1).tolist(), want.reshape(-1).tolist(), strict=True)
    ):
        o = owner.setdefault(z, m)
        if want.reshape(-1)[o] != y:
            clashes += 1
            if len(bad) <= MAX_EXAMPLES:
                bad.append(
                    f"{_item(o, P, seq2seq)} and {_item(m, P, seq2seq)} share the id "
                    f"{format_rational(mpq(int(z), den))} but are labelled "
                    f"{want.reshape(-1)[o]} and {y}"
                )
    detail = f"{len(owner)} distinct (context, token) ids, equal only where labels are"
    return Check(
        "kim23.token_ids",
        not bad,
        _examples(bad, clashes) if bad else detail,
        {"distinct_ids": len(owner)},
    )


def _item(m: int, P: int, seq2seq: bool) -> str:
    return f"sequences[{m // P}][{m % P}]" if seq2seq else f"sequences[{m // P}]"


def _heads(model: Transformer, ds: Dataset) -> dict[int, HeadRecord]:
    """Every attention head's scores, values and pattern as the reference evaluator computes
    them (:class:`~exactmem.evaluate.records.Recording`), by sub-layer. A softmax model is
    recorded on its hardmax limit: the scores are the model's wherever ``kim23.softmax``
    certifies the streams equal to the limit's, which is what the checks below then rely on."""
    from exactmem.evaluate.fast import run as fast_run  # its hardmax step records, on arrays

    record = Recording(attention=True)
    evaluated = hardmax_limit(model) if has_softmax(model) else model
    last = max((i for i, s in enumerate(model.sublayers) if isinstance(s, Attention)), default=-1)
    # the sub-layers up to the last attention: the memorizer after it records no head
    prefix = replace(evaluated, sublayers=evaluated.sublayers[: last + 1], unembed=None)
    fast_run(prefix, ds.vocab, ds.sequences, record=record)
    return {h.sublayer: h for h in record.heads if h.head == 0}


def _attention(model: Transformer, heads: dict[int, HeadRecord]) -> Check:
    """Every attention layer is a score attention (hardmax or softmax) whose scores, as the
    reference evaluator records them, are equal in every column (weights exactly 1/n) or
    whose maximisers carry equal values (tie averaging is then exact); the least gap between
    the top score and the next is measured. Softmax layers with unequal scores are judged
    further by ``kim23.softmax``."""
    bad = []
    margin: mpq | None = None
    mixing = 0
    for si, s in enumerate(model.sublayers):
        if not isinstance(s, Attention):
            continue
        h = s.heads[0]
        if len(s.heads) != 1 or any(m.out_dim != 1 for m in (h.query, h.key, h.value)):
            bad.append(f"sublayers[{si}]: scores not read (not one head of size 1)")
            continue
        if s.score not in ("hardmax", "softmax"):
            # Kim et al.'s layers are softmax attention (hardmax its λ → ∞ limit); a uniform
            # layer computes no scores, so no maximum can be read through it
            bad.append(f"sublayers[{si}]: {s.score} attention has no scores to read a maximum by")
            continue
        values, vis, top, at_top, second, mixed = _scores(heads[si])
        if not mixed.any():
            continue
        mixing += 1
        rows, cols = np.indices(top.shape)
        first = values[rows, cols, at_top.argmax(axis=2)]  # the value of one maximiser
        unequal = (at_top & (values != first[:, :, None])).any(axis=2)
        for i, qk in np.argwhere(unequal)[: MAX_EXAMPLES + 1].tolist():
            bad.append(f"sublayers[{si}]: sequences[{i}] column {qk} ties unequal values")
        gap = mpq(int((top - second)[mixed].min()), heads[si].score_den)
        margin = gap if margin is None or gap < margin else margin
    detail = (
        f"{mixing} layers with unequal scores, ties only between equal values; the "
        f"others exactly uniform; least score margin {format_rational(margin) if margin else '—'}"
    )
    return Check(
        "kim23.attention",
        not bad,
        _examples(bad) if bad else detail,
        {"score_margin": None if margin is None else format_rational(margin)},
    )


def _scores(head: HeadRecord):
    """(values, visible, top, at_top, second, mixed) of a one-head size-1 layer, read from the
    evaluator's record of it (integer numerators: values over ``head.value_den``, scores over
    ``head.score_den``), masked as the evaluators mask: per (sequence, query), the top visible
    score, the visible keys at it, the best visible score below it, and whether the visible
    scores are unequal (hardmax and softmax heads only: a uniform head records no scores)."""
    if head.scores is None:  # pragma: no cover - uniform layers fail before their scores
        raise ChecklistStructureError(f"sublayers[{head.sublayer}]: no scores recorded")
    scores: np.ndarray = head.scores
    N, n, _ = scores.shape
    vis = np.broadcast_to(head.visible[None, :, :], (N, n, n))
    low = scores.min() - 1 if scores.size else 0
    masked = np.where(vis, scores, low)
    top = masked.max(axis=2)
    at_top = (masked == top[:, :, None]) & vis
    second = np.where(at_top | ~vis, low, masked).max(axis=2)
    mixed = (at_top != vis).any(axis=2)
    values = np.broadcast_to(head.values[:, None, :, 0], (N, n, n))
    return values, vis, top, at_top, second, mixed


# --------------------------------------------------------------------------- softmax


def _upper(x: arb) -> mpq:
    return ball_bounds(x)[1]


def _softmax(model: Transformer, trace: Trace, heads: dict[int, HeadRecord]) -> Check:
    """The softmax model equals its hardmax limit after every re-quantizing FFN (our
    reconstruction of Kim et al.'s softmax regime), certified layer by layer:

    * a softmax layer's output differs from the limit's (the maximisers' common value v*) by at
      most ε = (k − 1)·max|v_k − v*|·e^{−g}, g the least gap between the top score and the
      next, k the keys a query sees — all over the visible keys only, as the evaluators mask
      (weights off the top are ≤ e^{−gap}); ε is bounded above on Arb balls;
    * the next sub-layer is an FFN that is constant on the segment the error moves the stream
      along: evaluated exactly at both ends (limit ∓ ε along W_O), no unit changes sign
      between them (so the FFN is affine on the segment) and both ends give the limit's output.
    """
    bad: list[str] = []
    worst: mpq | None = None
    layers = 0
    for si, s in enumerate(model.sublayers):
        if not (isinstance(s, Attention) and s.score == "softmax"):
            continue
        h = s.heads[0]
        if len(s.heads) != 1 or any(m.out_dim != 1 for m in (h.query, h.key, h.value)):
            bad.append(f"sublayers[{si}]: not one head of size 1")
            continue
        if s.scale != 1:  # the gaps below are W_Q, W_K's: the softmax's are √scale smaller
            bad.append(f"sublayers[{si}]: scores divided by √{s.scale}, not read here")
            continue
        values, vis, top, at_top, second, mixed = _scores(heads[si])
        if not mixed.any():
            continue  # every column exactly uniform over its visible keys
        layers += 1
        rows, cols = np.indices(top.shape)
        star = values[rows, cols, at_top.argmax(axis=2)]
        # the weights off the top, over the visible keys only, are ≤ e^{−gap} each
        spread = np.where(vis, np.abs(values - star[:, :, None]), 0).max()
        gap = mpq(int((top - second)[mixed].min()), heads[si].score_den)
        keys = int(vis.sum(axis=2).max())
        eps = _epsilon(keys, mpq(int(spread), heads[si].value_den), gap)
        worst = eps if worst is None or eps > worst else worst
        nxt = model.sublayers[si + 1] if si + 1 < len(model.sublayers) else None
        if not isinstance(nxt, MLP):
            bad.append(f"sublayers[{si}]: no FFN after the softmax layer re-quantizes it")
            continue
        bad += _flat(nxt, h.output, trace.streams[si], trace.streams[si + 1], eps, si)
    detail = (
        f"{layers} softmax layers with unequal scores: error ≤ {_brief(worst)} "
        "(Arb), erased by the next FFN (affine and equal at both ends of the error segment)"
        if worst is not None
        else "every softmax layer has equal scores (weights exactly 1/n)"
    )
    return Check(
        "kim23.softmax",
        not bad,
        _examples(bad) if bad else detail,
        {"max_error_upper_bound": None if worst is None else format_rational(worst)},
    )


def _brief(eps: mpq | None) -> str:
    """``2^-k`` with eps ≤ 2^-k (k = ⌊log₂(q // p)⌋), or the rational itself when ≥ 1/2."""
    if eps is None or eps == 0:
        return "0"
    k = (int(eps.denominator) // int(eps.numerator)).bit_length() - 1
    return f"2^-{k}" if k >= 1 else format_rational(eps)


def _epsilon(keys: int, spread: mpq, gap: mpq) -> mpq:
    """An exact rational upper bound of (keys − 1)·spread·e^{−gap}."""
    old = ctx.prec
    ctx.prec = 128
    try:
        g = arb(fmpq(int(gap.numerator), int(gap.denominator)))
        x = (-g).exp() * (keys - 1) * arb(fmpq(int(spread.numerator), int(spread.denominator)))
        return max(_upper(x), mpq(0))
    finally:
        ctx.prec = old


def _flat(mlp: MLP, output: Affine, after: Stream, limit: Stream, eps: mpq, si: int) -> list[str]:
    """The FFN on the segment limit ∓ ε·W_O: the ends of every row are fed to a derived model —
    the FFN alone, on points — that the reference evaluator runs, recording its pre-activations
    (:class:`~exactmem.evaluate.records.Recording`): no unit may change sign between the ends
    (the FFN is then affine on the segment) and both ends must give the limit's next stream."""
    direction = [mpq(dict(row).get(0, 0), output.denominator) for row in output.rows]
    rows = after.rows
    ends = [
        tuple(x + sign * eps * c for x, c in zip(row, direction, strict=True))
        for sign in (-1, 1)
        for row in rows
    ]
    if mlp.activation != "relu":
        return [f"sublayers[{si + 1}]: the FFN after the softmax layer is not a ReLU network"]
    ffn = Transformer(len(direction), (replace(mlp, probes=()),))
    record = Recording(preactivations=True)
    outputs = run_points(ffn, ends, record=record).outputs
    size = len(rows)
    for (_, layer), (Z, _, index) in sorted(record.pre.items()):
        lo, hi = index[:size, 0], index[size:, 0]
        for u, z in enumerate(Z):
            a, b = np.asarray(z, dtype=object)[lo], np.asarray(z, dtype=object)[hi]
            cross = np.nonzero(((a < 0) & (b > 0)) | ((a > 0) & (b < 0)))[0]
            if cross.size:
                return [
                    f"sublayers[{si + 1}]: hidden unit {u} of layer {layer} changes sign "
                    f"within the softmax error ({_column(after, int(cross[0]))})"
                ]
    want = limit.rows
    for r in range(size):
        (low,), (high,) = outputs[r], outputs[size + r]
        for lane, (a, b, w) in enumerate(zip(low, high, want[r], strict=True)):
            if a != b or a != w:
                return [
                    f"sublayers[{si + 1}]: lane {lane} is not constant on the softmax error "
                    f"segment ({_column(after, r)})"
                ]
    return []


def _column(stream: Stream, r: int) -> str:
    """The first (sequence, position) whose column is the stream's distinct row ``r``."""
    i, k = np.argwhere(stream.index == r)[0].tolist()
    if stream.index.shape[1] == 1:  # only the last position is carried (next-token data)
        return f"first at sequences[{i}]"
    return f"first at sequences[{i}][{k}]"
