"""The reference evaluator: plain, exact, obviously correct — the ground truth.

Values of one layer are held as integer numerators (one NumPy object array of Python ints per
coordinate, over the batch) over one common positive denominator, so an affine layer is integer
arithmetic followed by one multiplication of denominators. The only sharing allowed: a
token-wise sub-layer is evaluated once per distinct input column (identical inputs give
identical outputs). Hardmax ties are averaged over all maximisers (Kajitsuka & Sato 2025,
eq. (1)); softmax is exact only where all scores of a column are equal (weights 1/n) and
inconclusive otherwise.
"""

from __future__ import annotations

import math
import os
import signal
import sys
from collections.abc import Callable, Sequence
from itertools import chain

import numpy as np
from gmpy2 import mpq

from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.exact_arrays import index_type
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    LayerNorm,
    PositionalEncoding,
    Transformer,
    has_gelu,
)
from exactmem.runtime.memory import release_free_memory
from exactmem.runtime.progress import tell

__all__ = [
    "AttentionStat",
    "HeadRecord",
    "LayerStat",
    "Outputs",
    "Recording",
    "Stream",
    "Trace",
    "run",
    "run_points",
]

from exactmem.evaluate.arithmetic import Batch, _affine, _columns, _reduce
from exactmem.evaluate.records import (
    AttentionStat,
    HeadRecord,
    LayerStat,
    Outputs,
    Recording,
    Stream,
    Trace,
    _head_record,
)

# --------------------------------------------------------------------------- arithmetic


class _OneHot(Sequence):
    """The one-hot columns of the used token ids, made when the embedding table reads them:
    a table of ω = 10⁸ tokens must not cost 10⁸ arrays (Theorem E.1's inputs, eq. (78))."""

    def __init__(self, used: list[int], width: int):
        self.used, self.width = np.array(used, dtype=np.int64), width

    def __len__(self) -> int:
        return self.width

    def __getitem__(self, j):
        return (self.used == j).astype(np.int64).astype(object)


def _stat(Z: Batch, den: int, sub: int, layer: int, size: int) -> LayerStat:
    zeros = 0
    best = None
    for z in Z:
        mask = z != 0
        zeros += size - int(np.count_nonzero(mask))
        if mask.any():
            m = np.abs(z[mask]).min()
            best = m if best is None else min(best, m)
    return LayerStat(sub, layer, len(Z), size, zeros, None if best is None else mpq(int(best), den))


class KeptStats(list):
    """The ReLU layers' statistics of one run, within a budget of bits in all.

    Each keeps one exact value, its layer's least non-zero |pre-activation|, and the values of
    a deep model may grow layer by layer: 25 000 layers of 30-digit weights (an 8.6 KB
    ``.json.gz``) kept 25 000 values of up to 2.5 million bits, L²·D in all (5.6 GB), however
    well each single value was bounded. So the list counts their bits as they come and stops
    the run (:class:`InputError`, exit 2) past :data:`STATS_FACTOR` × ``--max-value-bits``;
    honest models keep a few bits a layer (Lemma C.1 memorizers: at most 20). Lists made by
    :meth:`sibling` (a sub-layer's, before it hands them on) count into the same budget."""

    def __init__(self, budget: int, spent: list[int] | None = None):
        super().__init__()
        self.budget = budget
        self._spent = spent if spent is not None else [0]

    def sibling(self) -> KeptStats:
        return KeptStats(self.budget, self._spent)

    @property
    def spent(self) -> int:
        """Bits counted so far (this list's and its siblings')."""
        return self._spent[0]

    def rewind(self, spent: int) -> None:
        """Count no more than ``spent`` again: the statistics of a sibling that was discarded
        (a sub-layer the fast evaluator handed back to this one) no longer count."""
        self._spent[0] = min(self._spent[0], spent)

    def append(self, stat: LayerStat) -> None:
        m = stat.min_nonzero
        if m is not None:
            self._spent[0] += m.numerator.bit_length() + m.denominator.bit_length()
            if self._spent[0] > self.budget:
                raise InputError(
                    f"model: the least non-zero |pre-activation| of its ReLU layers, kept for "
                    f"the certificate, take more than {self.budget} bits in all by sub-layer "
                    f"{stat.sublayer} layer {stat.layer} ({STATS_FACTOR} × the limit of "
                    "--max-value-bits): its values grow layer by layer"
                )
        super().append(stat)

    def extend(self, stats) -> None:  # type: ignore[override]
        if isinstance(stats, KeptStats) and stats._spent is self._spent:
            super().extend(stats)  # a sibling's: counted already
            return
        for stat in stats:
            self.append(stat)

    def __iadd__(self, stats):  # type: ignore[override]
        self.extend(stats)
        return self

    def __reduce__(self):  # sent to another process as the plain list it holds
        return list, (list(self),)


STATS_FACTOR = 64  # the statistics' bits in all, in units of --max-value-bits


def kept_like(stats: list) -> list:
    """An empty list for a sub-layer's statistics, within ``stats``'s budget if it has one."""
    return stats.sibling() if isinstance(stats, KeptStats) else []


def merged_stats(chunks: Sequence[Sequence[LayerStat]], size: int) -> list[LayerStat]:
    """One statistic per layer from those of the chunks the rows were split into (processes
    or shards): zeros summed, the least non-zero magnitude kept."""
    merged = []
    for layer_stats in zip(*chunks, strict=True):
        mins = [s.min_nonzero for s in layer_stats if s.min_nonzero is not None]
        first = layer_stats[0]
        merged.append(
            LayerStat(
                first.sublayer,
                first.layer,
                first.units,
                size,
                sum(s.zeros for s in layer_stats),
                min(mins) if mins else None,
            )
        )
    return merged


def _mlp(
    mlp: MLP,
    X: Batch,
    den: int,
    size: int,
    sub: int,
    on_probe: Callable,
    stats: list,
    progress: Callable[[str], None] | None = None,
    keep_pre: Callable[[int, Batch, int], None] | None = None,
) -> tuple[Batch, int]:
    if mlp.activation != "relu":  # (run refuses such models first; a step never reads GELU as ReLU)
        raise InconclusiveError(f"MLP {mlp.label!r}: {mlp.activation} is transcendental")
    probes_at: dict[int, list] = {}
    for p in mlp.probes:
        probes_at.setdefault(p.layer, []).append(p)
    H, hden = X, den
    last = len(mlp.layers) - 1
    for li, layer in enumerate(mlp.layers):
        if progress and li % _report_every(progress, len(mlp.layers), 200) == 0:
            tell(
                progress,
                f"{mlp.label or 'mlp'}: layer {li}/{len(mlp.layers)} on {size} inputs",
                phase=f"evaluating {mlp.label or 'mlp'}",
                done=li,
                total=len(mlp.layers),
            )
        Z, zden = _affine(layer, H, hden, size)
        if li == last:
            H, hden = Z, zden
            break
        stats.append(_stat(Z, zden, sub, li, size))
        if keep_pre is not None:
            keep_pre(li, Z, zden)
        H = [np.maximum(z, 0) for z in Z]
        H, hden = _reduce(H, zden)
        for p in probes_at.get(li, ()):
            acc = np.zeros(size, dtype=object)
            for col, coeff in p.terms:
                acc = acc + H[col] * coeff
            on_probe(f"{mlp.label}.{p.name}" if mlp.label else p.name, acc, hden)
    return _residual(mlp, X, den, H, hden)


def _residual(mlp: MLP, X: Batch, den: int, H: Batch, hden: int) -> tuple[Batch, int]:
    """The sub-layer's output: H, plus the input X for a residual MLP, reduced."""
    if mlp.residual:
        common = math.lcm(den, hden)
        H = [x * (common // den) + h * (common // hden) for x, h in zip(X, H, strict=True)]
        hden = common
    return _reduce(H, hden)


MIN_ROWS_PER_JOB = 256


def _mlp_chunk(args):
    """One worker: the sub-layer on a chunk of rows; returns values, stats and probes."""
    mlp, X, den, size, sub = args
    stats: list = []
    probes: dict = {}

    def keep(name, values, vden):
        probes[name] = (values, vden)

    X, den = _mlp(mlp, X, den, size, sub, keep, stats)
    return X, den, stats, probes


def _common(parts: list[tuple[list, int]]) -> tuple[list, int]:
    """Concatenate (numerator arrays, denominator) chunks over their least common denominator."""
    common = math.lcm(*[d for _, d in parts])
    arrays = [[col * (common // d) if d != common else col for col in cols] for cols, d in parts]
    return [np.concatenate([a[j] for a in arrays]) for j in range(len(arrays[0]))], common


def _report_every(progress: Callable, layers: int, plain: int) -> int:
    """Layers between reports: a hundredth of the MLP to a reporter that draws a bar (it
    throttles itself), every ``plain`` layers to a plain callable (a line each)."""
    return max(1, layers // 100) if hasattr(progress, "fraction") else plain


def _mlp_parallel(mlp, X, den, size, sub, on_probe, stats, jobs, progress=None):
    """:func:`_mlp` on ``jobs`` contiguous row chunks in worker processes, merged in order.

    Every value is computed exactly as in one process; chunks only change how numerators share
    a denominator, and the merge brings them back to the least common one."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    bounds = [size * i // jobs for i in range(jobs + 1)]
    tasks = [
        (mlp, [x[a:b] for x in X], den, b - a, sub)
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    if progress:
        progress(
            f"{mlp.label or 'mlp'}: {len(mlp.layers)} layers on {size} inputs in {jobs} processes"
        )
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_die_with, initargs=(os.getpid(),)
    ) as pool:
        results = list(pool.map(_mlp_chunk, tasks))
    X_out, den_out = _common([(r[0], r[1]) for r in results])
    stats += merged_stats([r[2] for r in results], size)
    for name in results[0][3]:
        values, vden = _common([([r[3][name][0]], r[3][name][1]) for r in results])
        on_probe(name, values[0], vden)
    return _reduce(X_out, den_out)


def _die_with(parent: int) -> None:
    """A worker's first step: on Linux, ask the kernel to kill it when the process that forked
    it ends. A signal that ends the command (SIGTERM, Ctrl-C) kills the workers it knows of
    (exactmem.commands.main), but one being forked at that moment would survive, holding the
    command's output pipes open, and whoever waits for them would wait for ever."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: the parent's kill is all there is
        return
    if os.getppid() != parent:  # the parent ended before prctl took effect
        os._exit(1)


def _apply_linear(a: Affine, v: Sequence[mpq]) -> list[mpq]:
    return [sum((v[c] * mpq(w, a.denominator) for c, w in row), mpq(0)) for row in a.rows]


def _keys(mask: str, n: int, query: int) -> list[int]:
    """The key positions of the query at ``query`` in a sequence of ``n`` under ``mask``."""
    if mask == "causal":
        return list(range(query + 1))
    return list(range(n - 1)) if mask == "context" and n > 1 else list(range(n))


def _attention(
    att: Attention,
    seq_cols: list[list[tuple[mpq, ...]]],
    record: list[HeadRecord] | None = None,
    sublayer: int = -1,
) -> tuple[list[list[tuple]], int]:
    """Exact attention on each sequence (columns as tuples of mpq); also counts the query
    columns whose scores were not all equal. With ``mask="context"`` the last position is not
    a key; with ``mask="causal"`` position k reads the keys 0..k. With ``record`` (a list) every
    head's queries, keys, values, scores and weights are appended to it as a
    :class:`HeadRecord`, and a softmax column of unequal scores is recorded (weights None)
    before the layer is given up as transcendental."""
    result = []
    unequal = 0
    transcendental = False
    n = len(seq_cols[0]) if seq_cols else 0
    if record is not None:
        N = len(seq_cols)
        visible = np.zeros((n, n), bool)
        for q in range(n):
            visible[q, _keys(att.mask, n, q)] = True
        books = [
            {
                "queries": np.full((N, n, h.query.out_dim), None, dtype=object),
                "keys": np.full((N, n, h.key.out_dim), None, dtype=object),
                "values": np.full((N, n, h.value.out_dim), None, dtype=object),
                "scores": np.full((N, n, n), None, dtype=object),
                "weights": np.full((N, n, n), None, dtype=object),
            }
            for h in att.heads
        ]
    for si, cols in enumerate(seq_cols):
        new = [list(c) for c in cols]
        for hi, h in enumerate(att.heads):
            values = [_apply_linear(h.value, c) for c in cols]
            scored: list[list[mpq]] = []
            queries = keys = None
            if att.score == "uniform" and att.mask != "causal":  # one row for every query
                keys_at = _keys(att.mask, n, 0)
                weights = [[(k, mpq(1, len(keys_at))) for k in keys_at]] * n
            elif att.score == "uniform":
                weights = [[(k, mpq(1, q + 1)) for k in range(q + 1)] for q in range(n)]
            else:
                keys = [_apply_linear(h.key, c) for c in cols]
                queries = [_apply_linear(h.query, c) for c in cols]
                weights = []
                for kq, q in enumerate(queries):
                    keys_at = _keys(att.mask, n, kq)
                    scores = [
                        sum((a * b for a, b in zip(keys[k], q, strict=True)), mpq(0))
                        for k in keys_at
                    ]
                    scored.append(scores)
                    top = max(scores)
                    if min(scores) != top:
                        unequal += 1
                        if att.score == "softmax":
                            transcendental = True
                            if record is None:
                                raise _softmax_inconclusive(att)
                            weights.append(None)
                            continue
                    if att.score == "softmax":
                        weights.append([(k, mpq(1, len(keys_at))) for k in keys_at])
                    else:
                        tied = [k for k, s in zip(keys_at, scores, strict=True) if s == top]
                        weights.append([(k, mpq(1, len(tied))) for k in tied])
            if record is not None:
                _book(books[hi], si, queries, keys, values, scored, weights, visible)
            if transcendental:
                continue
            for kq, ws in enumerate(weights):
                mixed = [
                    sum((values[k][j] * w for k, w in ws), mpq(0)) for j in range(len(values[0]))
                ]
                delta = _apply_linear(h.output, mixed)
                new[kq] = [a + b for a, b in zip(new[kq], delta, strict=True)]
        result.append([tuple(c) for c in new])
    if record is not None:
        for hi, book in enumerate(books):
            record.append(_head_record(sublayer, hi, att, book, visible))
    if transcendental:
        raise _softmax_inconclusive(att)
    return result, unequal


def _softmax_inconclusive(att: Attention) -> InconclusiveError:
    return InconclusiveError(
        f"softmax attention {att.label!r}: unequal scores in a column are "
        "transcendental; evaluate with the ball evaluator "
        "(exactmem.evaluate.softmax)"
    )


def _book(book: dict, i: int, queries, keys, values, scored, weights, visible) -> None:
    """Sequence ``i``'s vectors, scores and weights of one head into the arrays of ``book``."""
    n = len(values)
    for k in range(n):
        book["values"][i, k, :] = values[k]
        if queries is not None:
            book["queries"][i, k, :] = queries[k]
            book["keys"][i, k, :] = keys[k]
    for q in range(n):
        at = np.flatnonzero(visible[q]).tolist()
        if scored:
            for k, v in zip(at, scored[q], strict=True):
                book["scores"][i, q, k] = v
        if weights[q] is None:  # transcendental softmax weights: not exact
            continue
        row = [mpq(0)] * n
        for k, w in weights[q]:
            row[k] = w
        book["weights"][i, q, :] = row


def _to_batch(columns: list[tuple[mpq, ...]], dim: int) -> tuple[Batch, int]:
    den = math.lcm(*[int(v.denominator) for c in columns for v in c]) if columns else 1
    X = [np.array([int(c[j] * den) for c in columns], dtype=object) for j in range(dim)]
    return X, den


# --------------------------------------------------------------------------- driver


def _stream_names(trace: Trace) -> tuple[str, ...]:
    if trace.streams:
        return trace.streams[-1].names
    return trace.embedded.names if trace.embedded else ()


RELEASE_FROM = 1 << 20  # tokens: below this the heap is small and trimming it costs more


def _used_tokens(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(flat, return_inverse=True)``; for token ids below a few times their count
    by a table of the ids present instead of a sort (16·10⁶ tokens: 0.1 s against 1.5 s)."""
    if flat.size and flat.min() >= 0 and flat.max() < max(2**20, 4 * flat.size):
        present = np.zeros(int(flat.max()) + 1, bool)
        present[flat] = True
        rank = np.cumsum(present) - 1  # in the narrowest type: N·n of them are made
        return np.flatnonzero(present), rank.astype(index_type(len(rank)))[flat]
    return np.unique(flat, return_inverse=True)


def run(
    model: Transformer,
    vocab: Sequence[Sequence[mpq]],
    sequences: Sequence[Sequence[int]],
    *,
    positions: str = "all",
    progress: Callable[[str], None] | None = None,
    jobs: int = 1,
    mlp_step: Callable | None = None,
    mix_step: Callable | None = None,
    folds: Sequence = (),
    record: Recording | None = None,
) -> Trace:
    """Evaluate ``model`` exactly on ``sequences`` of indices into ``vocab``.

    ``positions="last"`` computes, after the last attention layer, only the last column of
    each sequence (what next-token memorization is judged on). ``jobs > 1`` evaluates the
    token-wise sub-layers on contiguous chunks of the rows in that many processes; the values,
    lanes and statistics are the same as with one job. ``mlp_step`` replaces the evaluation of
    token-wise sub-layers (the fast evaluator passes its own; same signature as ``_mlp`` plus
    ``jobs``); ``mix_step`` may evaluate a token-mixing sub-layer whose scores are all equal
    (returns None to leave it to this module). ``folds`` consume the probes they claim as they
    are computed instead of storing them (:class:`exactmem.checks.certificate.StepFold`,
    :class:`exactmem.checks.certificate.MatchFold`). ``record`` (a :class:`Recording`) asks for the
    attention heads' scores and patterns and the ReLU layers' pre-activations; the sub-layers
    it asks about then run on the plain path of this module, with the same values.
    """
    if positions not in ("all", "last"):
        raise ValueError("positions must be 'all' or 'last'")
    if has_gelu(model):
        raise InconclusiveError(
            "a GELU MLP is transcendental: the exact evaluators do not run it; evaluate with the "
            "ball evaluator (exactmem.evaluate.softmax)"
        )
    if record is not None and record.preactivations:
        mlp_step, jobs = None, 1
    if any(isinstance(s, Attention) and s.mask == "causal" for s in model.sublayers):
        mix_step = None  # a shortcut for all-equal scores would weigh every position 1/n
    N = len(sequences)
    n = len(sequences[0]) if N else 0
    rows = getattr(sequences, "array", None)  # a TokenRows: one array, equal lengths already
    if rows is None and sum(map(len, sequences)) != N * n:
        raise ValueError("sequences must all have the same length")
    if N * n >= RELEASE_FROM:  # start a large evaluation without the last phase's freed heap
        release_free_memory()
    if rows is not None:
        flat = rows.reshape(-1)
    else:
        flat = np.fromiter(chain.from_iterable(sequences), np.int64, N * n)
    tokens, inverse = _used_tokens(flat)  # rows: the used tokens, ascending
    del flat
    used = tokens.tolist()
    index = inverse.reshape(N, n).astype(index_type(len(used)))  # kept through the evaluation
    del inverse
    size = len(used)
    if model.token_inputs:
        if used and used[-1] >= model.input_dim:
            raise InputError(
                f"token {used[-1]} is outside the embedding table of {model.input_dim} tokens"
            )
        X, den = _OneHot(used, model.input_dim), 1
    else:
        X, den = _to_batch([tuple(mpq(v) for v in vocab[tok]) for tok in used], model.input_dim)
    _bound_values(model, None if model.token_inputs else X, den, n)
    trace = Trace(outputs=[], stats=KeptStats(STATS_FACTOR * _limits().max_value_bits))
    if record is not None:
        record.trace = trace
    last_attention = max(
        (i for i, s in enumerate(model.sublayers) if not isinstance(s, MLP | LayerNorm)),
        default=-1,
    )

    trace.folds = {fold.key: fold for fold in folds}

    def on_probe(name: str, values: np.ndarray, vden: int) -> None:
        for fold in folds:  # a fold reads its lanes as they come and keeps O(rows) state
            if fold.claims(name):
                fold(name, values, vden)
                return
        trace._lanes[name] = (values, vden, index)

    def fold_of(name: str):
        """The fold that claims probe ``name`` if it can be folded in the pass computing it
        (an mlp_step may then fold it itself, through the fold's ``begin``/``finish``)."""
        return next((f for f in folds if f.claims(name) and hasattr(f, "begin")), None)

    on_probe.fold_of = fold_of

    if model.embed:
        X, den = _affine(model.embed, X, den, size)
        X, den = _reduce(X, den)
        trace.embedded = Stream(model.embed.names, X, den, index)
    for si, sub in enumerate(model.sublayers):
        if progress:
            progress(f"sub-layer {si + 1}/{len(model.sublayers)} on {size} distinct columns")
        if isinstance(sub, MLP):
            if mlp_step is not None:
                X, den = mlp_step(sub, X, den, size, si, on_probe, trace.stats, progress, jobs)
            elif jobs > 1 and size >= 2 * MIN_ROWS_PER_JOB:
                X, den = _mlp_parallel(sub, X, den, size, si, on_probe, trace.stats, jobs, progress)
            else:
                keep_pre = None
                if record is not None and record.preactivations:

                    def keep_pre(li, Z, zden, si=si, index=index):
                        record.pre[(si, li)] = (Z, zden, index)

                X, den = _mlp(sub, X, den, size, si, on_probe, trace.stats, progress, keep_pre)
            names = sub.layers[-1].names
            if sub.residual or not names:
                names = _stream_names(trace) or names
            trace.streams.append(Stream(tuple(names), X, den, index))
            continue
        if isinstance(sub, LayerNorm):  # token-wise; exact only where the root is rational
            from exactmem.evaluate.layernorm import layer_norm_exact

            cols = [layer_norm_exact(sub, c) for c in _columns(X, den)]
            X, den = _to_batch(cols, len(cols[0]) if cols else sub.width)
            trace.streams.append(Stream(tuple(_stream_names(trace)), X, den, index))
            continue
        if isinstance(sub, PositionalEncoding) and n > len(sub.table):
            raise InputError(
                f"positional encoding {sub.label!r} covers {len(sub.table)} "
                f"positions, the sequences have {n}"
            )
        keep = range(n - 1, n) if positions == "last" and si == last_attention else range(n)
        # recording heads: no shortcut for all-equal scores (it computes none to record)
        heads = record.heads if record is not None and record.attention else None
        heads = heads if isinstance(sub, Attention) else None
        shortcut = None
        if mix_step is not None and heads is None:
            shortcut = mix_step(sub, X, den, index, keep)
        if shortcut is not None:  # all scores equal: weights exactly 1/n, nothing to decide
            X, den, index = shortcut
            if isinstance(sub, Attention):
                trace.attention.append(AttentionStat(si, N * n * len(sub.heads), 0))
            size = len(X[0]) if X else 0
            trace.streams.append(Stream(tuple(_stream_names(trace)), X, den, index))
            continue
        if mix_step is not None and isinstance(sub, Attention) and sub.score == "hardmax":
            from exactmem.evaluate.hardmax import hardmax_mix  # the fast path, on arrays

            X, den, index, unequal = hardmax_mix(sub, X, den, index, keep, heads, si)
            trace.attention.append(AttentionStat(si, N * n * len(sub.heads), unequal))
            size = len(X[0]) if X else 0
            trace.streams.append(Stream(tuple(_stream_names(trace)), X, den, index))
            continue
        cols = _columns(X, den)
        seq_cols = [[cols[r] for r in row] for row in index]
        if isinstance(sub, PositionalEncoding):
            mixed = [
                [
                    tuple(a + b for a, b in zip(col, sub.table[k], strict=True))
                    for k, col in enumerate(seq)
                ]
                for seq in seq_cols
            ]
        else:
            try:
                mixed, unequal = _attention(sub, seq_cols, heads, si)
            except InconclusiveError as exc:
                if record is not None:
                    record.stopped = (si, str(exc))
                raise
            trace.attention.append(AttentionStat(si, N * n * len(sub.heads), unequal))
        distinct: dict[tuple, int] = {}
        new_index = np.zeros((N, len(keep)), dtype=np.int64)
        for i, seq in enumerate(mixed):
            for j, k in enumerate(keep):
                new_index[i, j] = distinct.setdefault(seq[k], len(distinct))
        index = new_index
        X, den = _to_batch(list(distinct), len(mixed[0][0]) if mixed else 0)
        size = len(distinct)
        trace.streams.append(Stream(tuple(_stream_names(trace)), X, den, index))
    if model.unembed:
        X, den = _affine(model.unembed, X, den, size)
        X, den = _reduce(X, den)
    trace.outputs = Outputs(X, den, index)
    return trace


def _limits():
    from exactmem.core import limits

    return limits.current()


def _bound_values(model: Transformer, X: Batch | None, den: int, n: int) -> None:
    """Refuse, before any work, a model whose values could exceed ``--max-value-bits``
    (:mod:`exactmem.evaluate.value_bits`); ``X`` None: one-hot token ids."""
    from exactmem.core.exact_arrays import top
    from exactmem.evaluate.value_bits import check_value_bits

    inputs = None if X is None else [top(np.asarray(col)) for col in X]
    check_value_bits(model, inputs, den, n, _limits().max_value_bits)


def run_points(model: Transformer, points: Sequence[Sequence[mpq]], **kw) -> Trace:
    """Evaluate a token-wise model on points (sequences of length one)."""
    return run(model, points, [[i] for i in range(len(points))], **kw)
