"""Rigorous evaluation of models with softmax attention: Arb balls (python-flint).

Softmax of unequal scores is transcendental, so the exact reference evaluator stops there; so is
GELU (x·Φ(x), through Arb's erf). This
evaluator carries every value as a ball [m ± r] that is guaranteed to contain the true value
(ball arithmetic: every operation rounds outward). Where all scores of a column are exactly
equal, the weights are exactly 1/n. Balls convert to exact rational bounds
(:func:`ball_bounds`) for the downstream checks; when a ball is too wide to decide a check, the
caller raises the precision (:func:`decide`) and answers *inconclusive* at the limit — it never
guesses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from flint import arb, arb_mat, ctx, fmpq
from gmpy2 import mpq

from exactmem.core.balls import (
    activation_ball,
    ball_bounds,
    ball_midpoint,
    hardmax_balls,
    softmax_balls,
    to_ball,
)
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.model import MLP, Affine, Attention, LayerNorm, PositionalEncoding, Transformer
from exactmem.core.weight_rows import BlockRows, block_of, read_only
from exactmem.evaluate.layernorm import layer_norm_balls

__all__ = [
    "BallTrace",
    "affine_balls",
    "ball_bounds",
    "ball_midpoint",
    "decide",
    "run_balls",
    "softmax_balls",
    "to_ball",
]

MAX_PRECISION = 1 << 14


class _OneHotBall:
    """The one-hot input e_t as balls, entry by entry (an embedding table of 10⁸ tokens reads
    only its rows' columns)."""

    def __init__(self, t: int):
        self.t = t

    def __getitem__(self, j: int) -> arb:
        return arb(int(j == self.t))


DENSE_FROM = 4096  # entries of a map from which Arb's matrix product beats the Python loop
_dense: dict[int, tuple[Affine, arb_mat]] = {}  # id → (map, matrix), for one run_balls call
_columns: dict[int, tuple[Affine, dict[int, list[tuple[int, int]]]]] = {}


def _column(a: Affine, t: int) -> list[tuple[int, int]]:
    """The non-zero (row, coefficient) entries of column t (an embedding table's token t)."""
    hit = _columns.get(id(a))
    if hit is None:
        cols: dict[int, list[tuple[int, int]]] = {}
        for i, row in enumerate(a.rows):
            for j, c in row:
                cols.setdefault(j, []).append((i, c))
        hit = _columns[id(a)] = (a, cols)
    return hit[1].get(t, [])


_blocks: dict[int, tuple[Affine, Affine | None]] = {}  # id → (map, its canonical block map)


def _canonical(a: Affine) -> Affine | None:
    """``a`` as a block map whose block has no zero row and no zero column — for a block map
    and for the same map as the IR's tuples alike (None when a coefficient is not a double):
    one model, one arithmetic, whatever its representation, so an imported checkpoint and the
    model file it is saved as get the same balls, digit for digit."""
    hit = _blocks.get(id(a))
    if hit is None:
        rows = a.rows
        table = rows if isinstance(rows, BlockRows) else block_of(rows)
        if table is not None:
            nonzero = table.block != 0
            keep_rows, keep_cols = nonzero.any(axis=1), nonzero.any(axis=0)
            if not (keep_rows.all() and keep_cols.all()):
                table = BlockRows(
                    read_only(np.ascontiguousarray(table.block[keep_rows][:, keep_cols])),
                    table.rows_at[keep_rows],
                    table.cols_at[keep_cols],
                    table.height,
                )
        canonical = None if table is None else Affine(a.in_dim, table, a.bias, a.denominator)
        hit = _blocks[id(a)] = (a, canonical)
    return hit[1]


def _finite(cols) -> bool:
    """Whether every ball of ``cols`` is finite. An exact zero weight times an unbounded ball
    is 0 in the reals a ball stands for, but Arb's product gives [±inf] (0·inf): a product
    that multiplies stored zeros (a head's masked keys, a map whose coefficients no double
    holds) runs only on finite inputs, and the loops that skip zero weights take the rest; a
    block map sets its unbounded inputs aside itself (:func:`_block_batch`)."""
    return all(x.is_finite() for c in cols for x in c)


BLOCK_ENTRIES = 1 << 21  # rows of a block map made into one Arb matrix at a time
_UNBOUNDED = arb(0, math.inf)  # [±inf]: a sum with an unbounded term


def _block_batch(a: Affine, cols: list) -> list[list[arb]]:
    """A block map (:class:`exactmem.core.weight_rows.BlockRows`) on many columns of balls: its
    integer coefficients (float64 entries that are integers, so exact Arb balls) multiplied
    in Arb by the inputs at its columns, a slice of rows at a time; each output rounded once,
    plus the bias, over the denominator — as the dense product of :func:`_affine`."""
    t = a.rows
    den = arb(a.denominator)
    entries = [[c[j] for c in cols] for j in t.cols_at.tolist()]
    # an unbounded input enters as 0 (0·inf is [±inf] in Arb, 0 in the reals it stands for),
    # and the outputs that read it through a non-zero weight are unbounded, as the sum is
    unbounded = [
        (q, k) for q, row in enumerate(entries) for k, x in enumerate(row) if not x.is_finite()
    ]
    for q, k in unbounded:
        entries[q][k] = arb(0)
    inputs = arb_mat(entries)
    sums: list[list] = [[arb(b) for b in a.bias] for _ in cols]
    step = max(1, BLOCK_ENTRIES // max(1, t.block.shape[1]))
    placed = t.rows_at.tolist()
    for lo in range(0, len(placed), step):
        product = arb_mat(t.block[lo : lo + step].tolist()) * inputs
        for p, i in enumerate(placed[lo : lo + step]):
            for k, out in enumerate(sums):
                out[i] = product[p, k] + out[i]
    by_column: dict[int, list[int]] = {}
    for q, k in unbounded:
        by_column.setdefault(k, []).append(q)
    for k, qs in by_column.items():
        for p in np.flatnonzero((t.block[:, qs] != 0).any(axis=1)).tolist():
            sums[k][placed[p]] = _UNBOUNDED
    return [[x / den for x in out] for out in sums]


def _block_column(a: Affine, t: int) -> list[arb]:
    """(W e_t + b)/den of a block map: column t plus the bias, integers added exactly."""
    acc = list(a.bias)
    rows = a.rows
    q = int(np.searchsorted(rows.cols_at, t))
    if q < rows.cols_at.size and rows.cols_at[q] == t:
        column = rows.block[:, q]
        for p in np.flatnonzero(column).tolist():
            acc[int(rows.rows_at[p])] += int(column[p])
    den = arb(a.denominator)
    return [arb(x) / den for x in acc]


def _affine(a: Affine, v) -> list[arb]:
    block = _canonical(a)
    if block is not None:
        if isinstance(v, _OneHotBall):
            return _block_column(block, v.t)
        return _block_batch(block, [v])[0]
    dense_ok = isinstance(v, _OneHotBall) or _finite([v])
    den = arb(a.denominator)
    if isinstance(v, _OneHotBall) and a.in_dim * a.out_dim >= DENSE_FROM:
        # (W e_t + b)/den: column t plus the bias, integers added exactly, one rounding
        acc = list(a.bias)
        for i, c in _column(a, v.t):
            acc[i] += c
        return [arb(x) / den for x in acc]
    if dense_ok and not isinstance(v, _OneHotBall) and a.in_dim * a.out_dim >= DENSE_FROM:
        hit = _dense.get(id(a))
        if hit is None:
            dense = [[0] * a.in_dim for _ in range(a.out_dim)]
            for i, row in enumerate(a.rows):
                for j, c in row:
                    dense[i][j] = c
            hit = _dense[id(a)] = (a, arb_mat(dense))  # integer entries: exact
        product = hit[1] * arb_mat(a.in_dim, 1, list(v))
        return [(product[i, 0] + b) / den for i, b in enumerate(a.bias)]
    out = []
    for row, b in zip(a.rows, a.bias, strict=True):
        total = arb(b)
        for col, coeff in row:
            total = total + v[col] * coeff
        out.append(total / den)
    return out


BATCH_ENTRIES = 1 << 22  # a dense weight matrix up to this size is multiplied by Arb (in C)


def _affine_batch(a: Affine, cols: list[list[arb]]) -> list[list[arb]]:
    """``a`` on many columns at once: one Arb matrix product (rigorous, in C) instead of a
    Python loop per weight; the same enclosures up to rounding, which stays outward."""
    block = _canonical(a)
    if block is not None and cols and not isinstance(cols[0], _OneHotBall):
        return _block_batch(block, cols)
    if cols and not isinstance(cols[0], _OneHotBall) and not _finite(cols):
        return [_affine(a, c) for c in cols]  # zero weights skipped (see _finite)
    if len(cols) < 2 or a.in_dim * a.out_dim > BATCH_ENTRIES:
        return [_affine(a, c) for c in cols]
    W = arb_mat(a.out_dim, a.in_dim)
    for i, row in enumerate(a.rows):
        for col, coeff in row:
            W[i, col] = coeff
    Y = W * arb_mat([list(r) for r in zip(*cols, strict=True)])
    den = arb(a.denominator)
    bias = [arb(b) for b in a.bias]
    return [[(Y[i, j] + bias[i]) / den for i in range(a.out_dim)] for j in range(len(cols))]


def _mlp(mlp: MLP, v: list[arb]) -> list[arb]:
    """The token-wise sub-layer ``mlp`` on one column of balls."""
    return _mlp_batch(mlp, [v])[0]


def _mlp_batch(mlp: MLP, cols: list[list[arb]]) -> list[list[arb]]:
    """:func:`_mlp` on many columns (the token-wise sub-layer of every sequence at once)."""
    h = cols
    last = len(mlp.layers) - 1
    for i, layer in enumerate(mlp.layers):
        h = _affine_batch(layer, h)
        if i < last:
            act = activation_ball(mlp.activation)
            h = [[act(x) for x in c] for c in h]
    if mlp.residual:
        return [[a + b for a, b in zip(v, c, strict=True)] for v, c in zip(cols, h, strict=True)]
    return h


def affine_balls(a: Affine, v: Sequence[arb]) -> list[arb]:
    """Enclosures of ``a(v)`` for a vector of balls (at the caller's precision)."""
    return _affine(a, v)


def _keys(mask: str, n: int, query: int) -> list[int]:
    """The key positions of the query at ``query``: 0..query under a ``causal`` mask, all but
    the last under ``context``, else all."""
    if mask == "causal":
        return list(range(query + 1))
    return list(range(n - 1)) if mask == "context" and n > 1 else list(range(n))


def _weights(att: Attention, scores: list[arb]) -> list[arb]:
    """Softmax or uniform weights of one query's scores (as :func:`_attention` has them)."""
    tie = all(s.is_exact() for s in scores) and all(s == scores[0] for s in scores)
    if att.scale != 1 and not tie:  # scores / √scale: Arb encloses the square root
        root = arb(att.scale).sqrt()
        scores = [s / root for s in scores]
    if att.score == "uniform":
        return [arb(fmpq(1, len(scores)))] * len(scores)
    return softmax_balls(scores)


def _all_blocks(h) -> bool:
    maps = (h.query, h.key, h.value, h.output)
    return all(m.out_dim > 0 and _canonical(m) is not None for m in maps)


def _block_head(att: Attention, h, cols: list[list[arb]], only_last: bool):
    """(query position, the head's output there) for a softmax or uniform head whose maps are
    all blocks (an imported checkpoint): its maps on every column at once, and the scores
    Kᵀq and the mixing V·weights as Arb matrix products (rigorous, in C) in place of the
    Python sums of :func:`_attention` — the same enclosures up to outward rounding, tested
    against them in tests/test_weight_rows.py."""
    n = len(cols)
    first = n - 1 if only_last else 0
    values, keys = _affine_batch(h.value, cols), _affine_batch(h.key, cols)
    queries = _affine_batch(h.query, cols[first:])
    scores = arb_mat(keys) * arb_mat([list(r) for r in zip(*queries, strict=True)])
    mixing = arb_mat(n, n - first)  # weight of key k for query first + c; 0 where masked
    for c, kq in enumerate(range(first, n)):
        idx = _keys(att.mask, n, kq)
        for k, w in zip(idx, _weights(att, [scores[k, c] for k in idx]), strict=True):
            mixing[k, c] = w
    mixed = arb_mat([list(r) for r in zip(*values, strict=True)]) * mixing
    columns = [[mixed[j, c] for j in range(mixed.nrows())] for c in range(n - first)]
    return zip(range(first, n), _affine_batch(h.output, columns), strict=True)


def _attention(att: Attention, cols: list[list[arb]], only_last: bool) -> list[list[arb]]:
    n = len(cols)
    new = [list(c) for c in cols]
    finite = att.score != "hardmax" and _finite(cols)  # (the same columns for every head)
    for h in att.heads:
        if finite and _all_blocks(h):
            for kq, delta in _block_head(att, h, cols, only_last):
                new[kq] = [a + b for a, b in zip(new[kq], delta, strict=True)]
            continue
        # a block map (an imported checkpoint) on every column at once: one Arb product
        values, keys = (
            _affine_batch(m, cols) if _canonical(m) is not None else [_affine(m, c) for c in cols]
            for m in (h.value, h.key)
        )
        queries = None
        if _canonical(h.query) is not None:  # the query columns read, at once
            read = cols[n - 1 :] if only_last else cols
            queries = dict(zip(range(n - len(read), n), _affine_batch(h.query, read), strict=True))
        pending: list[tuple[int, list[arb]]] = []
        for kq in range(n - 1, n) if only_last else range(n):
            # only the columns read: the last one, or all
            q = queries[kq] if queries is not None else _affine(h.query, cols[kq])
            idx = _keys(att.mask, n, kq)
            scores = [sum((a * b for a, b in zip(keys[k], q, strict=True)), arb(0)) for k in idx]
            if att.score == "hardmax":  # a positive scale keeps the maximisers: unscaled
                mixed = hardmax_balls(scores, [values[k] for k in idx])
            else:
                tie = all(s.is_exact() for s in scores) and all(s == scores[0] for s in scores)
                if att.scale != 1 and not tie:  # scores / √scale: Arb encloses the square root
                    root = arb(att.scale).sqrt()
                    scores = [s / root for s in scores]
                if att.score == "uniform":
                    weights = [arb(fmpq(1, len(idx)))] * len(idx)
                else:
                    weights = softmax_balls(scores)
                mixed = [
                    sum((values[k][j] * w for k, w in zip(idx, weights, strict=True)), arb(0))
                    for j in range(len(values[0]))
                ]
            if _canonical(h.output) is not None:  # mapped below, every column at once
                pending.append((kq, mixed))
                continue
            delta = _affine(h.output, mixed)
            new[kq] = [a + b for a, b in zip(new[kq], delta, strict=True)]
        if pending:
            deltas = _affine_batch(h.output, [mixed for _, mixed in pending])
            for (kq, _), delta in zip(pending, deltas, strict=True):
                new[kq] = [a + b for a, b in zip(new[kq], delta, strict=True)]
    return new


@dataclass
class BallTrace:
    """Ball enclosures of the outputs, ``outputs[i][k]`` per sequence and position, and the
    attention weights of the first attention layer (for saturation certificates)."""

    outputs: list[list[list[arb]]]
    precision: int


def _unflatten(flat: list, like: list[list]) -> list[list]:
    out, at = [], 0
    for cols in like:
        out.append(flat[at : at + len(cols)])
        at += len(cols)
    return out


def _exact_prefix(model: Transformer, vocab, sequences, stop: int):
    """(columns per sequence as exact rationals, the first sub-layer not evaluated): the
    sub-layers before ``stop`` evaluated by the reference evaluator's own steps, as long as
    they are exact — up to a GELU MLP, a softmax layer with unequal scores or a layer norm
    with an irrational root, where the balls take over. Hardmax ties are then decided exactly
    (a tie of two balls of radius > 0 never is)."""
    from dataclasses import replace

    from exactmem.evaluate import arithmetic, reference
    from exactmem.evaluate.layernorm import layer_norm_exact

    # the exact values must stay within --max-value-bits, as in the reference's own run
    n = max((len(seq) for seq in sequences), default=0)
    used = sorted({t for seq in sequences for t in seq})
    X, den = None, 1
    if not model.token_inputs:
        X, den = reference._to_batch(
            [tuple(mpq(x) for x in vocab[t]) for t in used], model.input_dim
        )
    prefix = replace(model, sublayers=model.sublayers[:stop], unembed=None)
    reference._bound_values(prefix, X, den, n)
    seqs: list[list[tuple[mpq, ...]]]
    if model.token_inputs and model.embed is not None:  # (token ids always have a table)
        seqs = [[_embedded_token(model.embed, t) for t in seq] for seq in sequences]
    else:
        seqs = [[tuple(mpq(x) for x in vocab[t]) for t in seq] for seq in sequences]
        if model.embed:
            seqs = [_exact_affine(model.embed, cols) for cols in seqs]
    for si, sub in enumerate(model.sublayers[:stop]):
        try:
            if isinstance(sub, MLP):
                if sub.activation != "relu":
                    return seqs, si
                flat = [c for cols in seqs for c in cols]
                X, den = reference._to_batch(flat, len(flat[0]) if flat else sub.in_dim)
                X, den = reference._mlp(sub, X, den, len(flat), si, lambda *a: None, [])
                seqs = _unflatten(arithmetic._columns(X, den), seqs)
            elif isinstance(sub, PositionalEncoding):
                seqs = [
                    [
                        tuple(a + b for a, b in zip(c, sub.table[k], strict=True))
                        for k, c in enumerate(cols)
                    ]
                    for cols in seqs
                ]
            elif isinstance(sub, LayerNorm):
                seqs = [[layer_norm_exact(sub, c) for c in cols] for cols in seqs]
            else:
                seqs, _ = reference._attention(sub, seqs)
        except InconclusiveError:  # transcendental from here: the balls enclose it
            return seqs, si
    return seqs, stop


def _exact_affine(a: Affine, cols: list[tuple[mpq, ...]]) -> list[tuple[mpq, ...]]:
    from exactmem.evaluate import arithmetic, reference

    X, den = reference._to_batch(cols, a.in_dim)
    return arithmetic._columns(*arithmetic._affine(a, X, den, len(cols)))


def _embedded_token(a: Affine, t: int) -> tuple[mpq, ...]:
    """Column t of the embedding table plus its bias, exact (the one-hot e_t embedded)."""
    acc = list(a.bias)
    for i, c in _column(a, t):
        acc[i] += c
    return tuple(mpq(x, a.denominator) for x in acc)


def _check_inputs(model: Transformer, sequences) -> None:
    """What the exact evaluators refuse, refused here too (never read as something else): a
    token id outside the embedding table, a sequence longer than a positional table."""
    n = max((len(seq) for seq in sequences), default=0)
    if model.token_inputs:
        for i, seq in enumerate(sequences):
            for t in seq:
                if not 0 <= t < model.input_dim:
                    raise InputError(
                        f"sequences[{i}]: token {t} is outside the embedding table of "
                        f"{model.input_dim} tokens"
                    )
    for sub in model.sublayers:
        if isinstance(sub, PositionalEncoding) and n > len(sub.table):
            raise InputError(
                f"positional encoding {sub.label!r} covers {len(sub.table)} positions, the "
                f"sequences have {n}"
            )


def run_balls(
    model: Transformer,
    vocab: Sequence[Sequence[mpq]],
    sequences: Sequence[Sequence[int]],
    *,
    precision: int = 128,
    positions: str = "all",
) -> BallTrace:
    """Evaluate ``model`` in ball arithmetic at ``precision`` bits. With ``positions="last"``
    the last attention layer is computed for the last column only, and from there on only that
    column is carried: ``outputs[i]`` then holds it alone (what next-token tasks are judged
    on). Token-wise sub-layers run on the columns of all sequences at once, as Arb matrix
    products.

    Maps of at least :data:`DENSE_FROM` entries go through Arb's matrix product (integer
    entries, exact; one rounded product per output) and read an embedding table by its column;
    smaller maps are summed entry by entry. Both enclose the true values.

    A model with hardmax attention is evaluated exactly (the reference evaluator's steps) up to
    its last hardmax layer or its first transcendental step, whichever comes first, so that
    hardmax ties are decided on exact scores; a hardmax layer after a transcendental step is
    enclosed by :func:`~exactmem.core.balls.hardmax_balls`."""
    if positions not in ("all", "last"):
        raise ValueError("positions must be 'all' or 'last'")
    _check_inputs(model, sequences)
    old = ctx.prec
    ctx.prec = precision
    try:
        only_last = positions == "last"
        subs = model.sublayers
        last_attention = max(
            (i for i, s in enumerate(subs) if isinstance(s, Attention)), default=-1
        )
        hardmax = [
            i for i, s in enumerate(subs) if isinstance(s, Attention) and s.score == "hardmax"
        ]
        begin = 0
        seqs: list[list] = []
        if hardmax:
            exact, begin = _exact_prefix(model, vocab, sequences, hardmax[-1] + 1)
            seqs = [[[to_ball(x) for x in c] for c in cols] for cols in exact]
        else:
            for seq in sequences:
                cols: list
                if model.token_inputs:
                    cols = [_OneHotBall(t) for t in seq]  # read only where the table reads it
                else:
                    cols = [[to_ball(x) for x in vocab[t]] for t in seq]
                if model.embed:
                    cols = [_affine(model.embed, c) for c in cols]
                seqs.append(cols)
        first = 0  # the position of each sequence's first column carried
        if only_last and begin > last_attention >= 0:  # the exact prefix passed the last mixing
            seqs = [cols[-1:] for cols in seqs]
            first = len(sequences[0]) - 1 if sequences else 0
        for si, sub in enumerate(subs[begin:], start=begin):
            if isinstance(sub, MLP):  # token-wise: every column of every sequence at once
                seqs = _unflatten(_mlp_batch(sub, [c for cols in seqs for c in cols]), seqs)
            elif isinstance(sub, PositionalEncoding):
                seqs = [
                    [
                        [a + to_ball(b) for a, b in zip(c, sub.table[first + k], strict=True)]
                        for k, c in enumerate(cols)
                    ]
                    for cols in seqs
                ]
            elif isinstance(sub, LayerNorm):
                seqs = [[layer_norm_balls(sub, c) for c in cols] for cols in seqs]
            else:
                # every column of an earlier attention layer feeds the later ones
                final = only_last and si == last_attention
                seqs = [_attention(sub, cols, final) for cols in seqs]
                if final:
                    seqs = [cols[-1:] for cols in seqs]  # the judged column alone from here
                    first = len(sequences[0]) - 1 if sequences else 0
        if model.unembed:
            seqs = [[_affine(model.unembed, c) for c in cols] for cols in seqs]
        outs = seqs
        return BallTrace(outs, precision)
    finally:
        ctx.prec = old
        _dense.clear()
        _columns.clear()
        _blocks.clear()


def decide(
    evaluate: Callable[[int], object],
    judge: Callable[[object], bool | None],
    *,
    start: int = 64,
    limit: int = MAX_PRECISION,
) -> tuple[bool | None, int]:
    """Raise the precision until ``judge`` decides (True/False) or ``limit`` is passed.

    Returns (verdict or None for inconclusive, the last precision tried)."""
    precision = start
    while precision <= limit:
        verdict = judge(evaluate(precision))
        if verdict is not None:
            return verdict, precision
        precision *= 2
    return None, precision // 2
