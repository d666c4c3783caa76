"""Verification beyond one process: the token-wise sub-layers sharded over Dask workers.

An MLP sub-layer acts on each distinct row of the residual stream alone, so its rows can be
evaluated anywhere and merged. :class:`Cluster` splits them into shards that follow Stage I's
key ranges — rows are ordered by the first pre-activation of the sub-layer's first layer (for
the Vardi–Yehudai–Shamir memorizer, Theorem 3.1, that is the projection key ⟨v, x⟩), and a
shard is a contiguous range of that order — so rows of one key class meet in one shard and
the fast evaluator's class sharing survives. Each shard runs :func:`exactmem.evaluate.fast.mlp`
on a worker, folding its step and match lanes there as one process folds them; the parent
merges values, probes and statistics over the least common denominator, as
:func:`exactmem.evaluate.reference._mlp_parallel` does for its processes. Lanes constant on a
class of rows (Lemma C.1's Stage III read-outs) travel and stay as a table per class with one
class index per row, never a value per row and lane. The values are exact, so the certificate
is the one a single process writes.

The model travels once per worker, as the bytes of its own ``.exm`` container file (scattered
with ``broadcast=True``; read back through the container's checks); row values travel from
the parent (for a local cluster and a remote one alike) as int64 arrays or packed bytes, never
as Python integers one by one. Dask is optional:
``pip install 'exactmem[dask]'``.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from exactmem.core.errors import InputError
from exactmem.core.exact_arrays import LIMIT, Gathered, index_type, times, top
from exactmem.evaluate.arithmetic import Batch, _reduce
from exactmem.evaluate.reference import merged_stats

# rows per shard: few, large shards — each shard pays a cost per layer (Python, kernel calls)
# besides its rows: 0.1–0.5 ms per layer measured (VYS at 3·10⁵ and 10⁶ points)
ROWS_PER_SHARD = 1_000_000

_MISSING = (
    "distributed verification needs Dask: pip install 'exactmem[dask]' "
    "(the packages dask and distributed)"
)


def require_dask():
    """``distributed``, or an :class:`InputError` (exit 2) naming the extra to install."""
    try:
        import distributed
    except ImportError as exc:
        raise InputError(_MISSING) from exc
    return distributed


# --------------------------------------------------------------------------- row values on the wire


def pack_column(col: np.ndarray) -> tuple[str, object]:
    """A column of integer numerators as a compact payload: int64 as is; else signed byte
    lengths and little-endian magnitudes (no pickled Python integers)."""
    if col.dtype != object:
        return "i8", np.ascontiguousarray(col, np.int64)
    ints = [int(v) for v in col]
    sizes = [(abs(v).bit_length() + 7) // 8 for v in ints]
    lengths = np.array([-s if v < 0 else s for v, s in zip(ints, sizes, strict=True)], np.int64)
    mags = b"".join(abs(v).to_bytes(s, "little") for v, s in zip(ints, sizes, strict=True))
    return "big", (lengths, mags)


def unpack_column(payload: tuple[str, object]) -> np.ndarray:
    kind, data = payload
    if kind == "i8":
        return np.asarray(data)
    lengths, mags = data
    out = np.empty(len(lengths), dtype=object)
    at = 0
    for i, m in enumerate(lengths.tolist()):
        size = abs(m)
        v = int.from_bytes(mags[at : at + size], "little")
        out[i] = -v if m < 0 else v
        at += size
    return out


def _pack(X: Batch) -> list:
    return [pack_column(np.asarray(c)) for c in X]


def _unpack(payloads: list) -> Batch:
    return [unpack_column(p) for p in payloads]


# --------------------------------------------------------------------------- worker side

_MODELS: dict[str, object] = {}  # per worker process: the parsed model of each digest


def _model_on_worker(blob: bytes, digest: str):
    """The model of the scattered container bytes, read (and its hash checked) once."""
    if digest not in _MODELS:
        _MODELS.clear()  # one model at a time: a worker's memory is the shard's
        _MODELS[digest] = model_from_bytes(blob)
    return _MODELS[digest]


def model_bytes(model) -> tuple[bytes, str]:
    """The model as the bytes of its ``.exm`` container file (exactmem.files.container: arrays of
    integers, big ones packed) and its SHA-256."""
    from exactmem.files.model_files import save_model

    with tempfile.TemporaryDirectory(prefix="exactmem-dask-") as folder:
        path = os.path.join(folder, "model.exm")
        digest = save_model(model, path)
        with open(path, "rb") as f:
            return f.read(), digest


def model_from_bytes(blob: bytes):
    """:func:`model_bytes` read back through the container's checks (hash included)."""
    from exactmem.files.model_files import load_model

    with tempfile.TemporaryDirectory(prefix="exactmem-dask-") as folder:
        path = os.path.join(folder, "model.exm")
        with open(path, "wb") as f:
            f.write(blob)
        return load_model(path)[0]


def _fold_specs(folds) -> list[tuple[str, str, int]]:
    """What a worker needs to make the folds afresh: (kind, prefix, steps or K)."""
    from exactmem.checks.folds import MatchFold, StepFold

    specs = []
    for f in folds:
        if isinstance(f, StepFold):
            specs.append(("step", f.prefix, f.steps))
        elif isinstance(f, MatchFold):
            specs.append(("match", f.prefix, f.K))
    return specs


def _make_folds(specs) -> list:
    from exactmem.checks.folds import MatchFold, StepFold

    return [StepFold(p, n) if kind == "step" else MatchFold(p, n) for kind, p, n in specs]


def _shard(blob: bytes, digest: str, sub: int, X: list, den: int, size: int, specs: list):
    """One shard on a worker: the fast MLP step on its rows, its probes folded here as in one
    process (:func:`exactmem.checks.certificate.step_folds`: the step and match lanes are never
    stored);
    returns values, statistics, the unfolded probes and the folds' per-row state."""
    from exactmem.evaluate.fast import mlp as fast_mlp

    model = _model_on_worker(blob, digest)
    folds = _make_folds(specs)
    probes: dict = {}
    classes: list = []  # the class index of each family of class-shared lanes, sent once

    def on_probe(name, values, vden):  # as exactmem.evaluate.reference.run dispatches
        for fold in folds:
            if fold.claims(name):
                fold(name, values, vden)
                return
        if isinstance(values, Gathered):  # a value per class: the classes travel once
            g = next((g for g, c in enumerate(classes) if c is values.index), len(classes))
            if g == len(classes):
                classes.append(values.index)
            probes[name] = (("classes", g, pack_column(values.table)), vden)
            return
        probes[name] = (pack_column(np.asarray(values)), vden)

    on_probe.fold_of = lambda name: next(
        (f for f in folds if f.claims(name) and hasattr(f, "begin")), None
    )
    stats: list = []
    out, oden = fast_mlp(model.sublayers[sub], _unpack(X), den, size, sub, on_probe, stats, jobs=1)
    states = {f.key: dict(vars(f)) for f in folds if f.seen}
    return _pack(out), oden, stats, probes, states, [pack_column(c) for c in classes]


# --------------------------------------------------------------------------- parent side


def key_order(mlp, X: Batch) -> np.ndarray:
    """Rows in the order of the first pre-activation of the sub-layer's first layer (Stage I's
    key for the VYS memorizer; its positive denominator and bias do not change the order)."""
    size = len(X[0]) if X else 0
    row = mlp.layers[0].rows[0] if mlp.layers and mlp.layers[0].rows else ()
    if not row or size == 0:
        return np.arange(size)
    terms = [(np.asarray(X[col]), int(coeff)) for col, coeff in row if coeff]
    # in int64 when no partial sum can reach 2⁶² (the rows' numerators are usually small):
    # 10⁷ Python integers per term would cost the parent gigabytes
    wide = sum(top(c) * abs(w) for c, w in terms) >= LIMIT
    key = np.zeros(size, dtype=object if wide else np.int64)
    for c, w in terms:
        key += (c.astype(object) if wide else c.astype(np.int64)) * w
    return np.argsort(key, kind="stable")


@dataclass
class Cluster:
    """A Dask client and the model scattered to its workers; :meth:`run` is an evaluator with
    :func:`exactmem.evaluate.fast.run`'s signature whose MLP sub-layers run sharded."""

    client: object
    rows_per_shard: int = ROWS_PER_SHARD
    own: list = field(default_factory=list)  # a LocalCluster this object started
    _sent: dict = field(default_factory=dict)  # model digest → scattered bytes

    @classmethod
    def start(cls, workers: int | None = None, scheduler: str | None = None, **kw) -> Cluster:
        """Connect to ``scheduler`` (an address), or start a LocalCluster of ``workers``
        single-threaded processes."""
        distributed = require_dask()
        if scheduler is not None:
            try:
                return cls(distributed.Client(scheduler, timeout="20s"), **kw)
            except (OSError, TimeoutError, ValueError) as exc:
                raise InputError(f"--scheduler {scheduler}: cannot connect ({exc})") from exc
        local = distributed.LocalCluster(
            n_workers=workers or 1,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            silence_logs=40,
        )
        return cls(distributed.Client(local), own=[local], **kw)

    def close(self) -> None:
        self.client.close()
        for local in self.own:
            local.close()
        self.own.clear()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def _model(self, model):
        blob, digest = model_bytes(model)
        if digest not in self._sent:
            self._sent.clear()
            self._sent[digest] = self.client.scatter(blob, broadcast=True, hash=False)
        return self._sent[digest], digest

    def shards(self, size: int) -> int:
        return max(1, min(size, max(self.workers, math.ceil(size / self.rows_per_shard))))

    def mlp_step(self, model, folds=()) -> Callable:
        """An ``mlp_step`` for :func:`exactmem.evaluate.reference.run` on ``model``, whose
        shards fold their probes into ``folds`` (the run's)."""
        text, digest = self._model(model)
        specs = _fold_specs(folds)
        sub_of = {id(s): i for i, s in enumerate(model.sublayers)}

        def step(mlp, X, den, size, sub, on_probe, stats, progress=None, jobs=1):
            if sub_of.get(id(mlp)) != sub:  # not the scattered model's sub-layer: run here
                from exactmem.evaluate.fast import mlp as fast_mlp

                return fast_mlp(mlp, X, den, size, sub, on_probe, stats, progress, jobs)
            X = [np.asarray(X[j]) for j in range(len(X))]  # (a one-hot input: its columns)
            k = self.shards(size)
            rows = shard_rows(key_order(mlp, X), k)
            if progress:
                progress(
                    f"{mlp.label or 'mlp'}: {len(mlp.layers)} layers on {size} inputs in {k} "
                    f"shards on {self.workers} Dask workers"
                )
            futures = []
            for r in rows:  # each shard's rows scattered as data, not embedded in the graph
                (payload,) = self.client.scatter([_pack([x[r] for x in X])], hash=False)
                futures.append(
                    self.client.submit(
                        _shard, text, digest, sub, payload, den, len(r), specs, pure=False
                    )
                )
            return merge(_one_by_one(futures), rows, on_probe, stats, folds)

        return step

    def run(self, model, vocab, sequences, **kw):
        """:func:`exactmem.evaluate.fast.run` with the MLP sub-layers sharded on the cluster."""
        from exactmem.evaluate import reference
        from exactmem.evaluate.fast import mix

        kw.pop("mlp_step", None)
        step = self.mlp_step(model, kw.get("folds", ()))
        return reference.run(model, vocab, sequences, mlp_step=step, mix_step=mix, **kw)


def shard_rows(order: np.ndarray, k: int) -> list[np.ndarray]:
    """``k`` shards: contiguous ranges of the key ``order``, each listing its rows in row
    order (so a fold's "first offending rows" of a shard are the first in the dataset too)."""
    size = len(order)
    bounds = [size * i // k for i in range(k + 1)]
    return [np.sort(order[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _one_by_one(futures):
    """Shard results as they are fetched, one at a time, each future released once read (a
    result's arrays share one received buffer: it is freed only when all of them are)."""
    for f in futures:
        result = f.result()
        f.release()
        yield result


def put(acc: dict, key, col: np.ndarray, d: int, rows: np.ndarray, size: int) -> None:
    """Place one shard's column (numerators over ``d``) at its ``rows`` of ``acc[key]``, kept
    over the least common denominator so far: int64 while no shard needs more, else Python
    integers (an int64 rescaled could overflow)."""
    if key not in acc:
        acc[key] = (np.zeros(size, col.dtype), d)
    arr, den = acc[key]
    common = math.lcm(den, d)
    if common != den:
        arr, den = arr.astype(object) * (common // den), common
    if d != common:
        col = col.astype(object) * (common // d)
    if col.dtype == object and arr.dtype != object:
        arr = arr.astype(object)
    elif arr.dtype != object and np.result_type(arr, col) != arr.dtype:
        arr = arr.astype(np.result_type(arr, col))  # int8 in one shard, int64 in the next
    arr[rows] = col
    acc[key] = (arr, den)


def place(chunks: list[tuple[np.ndarray, int]], rows: list[np.ndarray], size: int):
    """Shard columns (numerators, denominator) put back at their rows over the least common
    denominator, in one array (:func:`put`)."""
    acc: dict = {}
    for (col, d), r in zip(chunks, rows, strict=True):
        put(acc, 0, col, d, r, size)
    return acc[0]


def merge(results, rows: list[np.ndarray], on_probe, stats: list, folds=()):
    """Per-shard (values, den, statistics, probes, fold states, class indices), an iterable
    in shard order, back to row order: values over the least common denominator, statistics
    per layer (zeros summed, smallest non-zero |pre-activation| the least), probes handed on
    in the order they came — class-shared ones (Stage III's ``key[k]``, ``label[k]``) still
    class-shared (:func:`join_classes`), the others whole — and each fold's per-row arrays
    joined and its first offending rows renumbered and kept as one process keeps them. Each
    shard is placed and dropped before the next is read."""
    from exactmem.checks.folds import _first_rows

    size = sum(len(r) for r in rows)
    outs: dict = {}
    names: dict = {}  # every probe, in the order the first shard handed them on
    per_row: dict = {}
    shared: dict[str, list] = {}  # name → [(shard, group, table, den)]
    classes: list[list[np.ndarray]] = []
    shard_stats: list = []
    states: list = []
    for s, (result, r) in enumerate(zip(results, rows, strict=True)):
        out, oden, st, probes, fold_states, groups = result
        for j, payload in enumerate(out):
            put(outs, j, unpack_column(payload), oden, r, size)
        classes.append([unpack_column(c) for c in groups])
        for name, (payload, vden) in probes.items():
            names.setdefault(name, None)
            if payload[0] == "classes":
                _, g, table = payload
                shared.setdefault(name, []).append((s, g, unpack_column(table), vden))
            else:
                put(per_row, name, unpack_column(payload), vden, r, size)
        shard_stats.append(st)
        states.append(fold_states)
        del result, out, probes
    X_out = [outs[j][0] for j in range(len(outs))]
    den_out = outs[0][1] if outs else 1  # every column of a shard shares its denominator
    stats += merged_stats(shard_stats, size)
    lanes = join_classes(shared, classes, rows, size, per_row)
    for name in names:
        values, vden = per_row.pop(name) if name in per_row else lanes.pop(name)
        on_probe(name, values, vden)
    for fold in folds:
        mine = [st.get(fold.key) for st in states]
        if any(st is None for st in mine):
            continue
        for attr, first in mine[0].items():
            if isinstance(first, np.ndarray):
                value = np.empty(size, first.dtype)
                for st, r in zip(mine, rows, strict=True):
                    value[r] = st[attr]
            elif isinstance(first, dict):  # {shard row: example}: renumbered to dataset rows
                joined = {
                    int(r[int(i)]): v
                    for st, r in zip(mine, rows, strict=True)
                    for i, v in st[attr].items()
                }
                value = _first_rows(dict(sorted(joined.items())))
            else:
                value = first
            setattr(fold, attr, value)
    return _reduce(X_out, den_out)


def join_classes(shared: dict, classes: list, rows: list[np.ndarray], size: int, per_row: dict):
    """Class-shared lanes of the shards as one :class:`~exactmem.core.exact_arrays.Gathered` each:
    the shards' class tables one after the other (over each lane's least common denominator)
    and one class index per row, shared — as one process shares it — by every lane that shares
    it in every shard. A lane class-shared in some shards only (a shard stores a lane of small
    values per row until it keeps a class index) is put per row into ``per_row`` instead."""
    k = len(rows)
    by_groups: dict[tuple, list[str]] = {}
    for name, parts in shared.items():
        if name in per_row or len(parts) != k:
            for s, g, table, d in parts:
                put(per_row, name, table[classes[s][g]], d, rows[s], size)
            continue
        by_groups.setdefault(tuple(g for _, g, _, _ in parts), []).append(name)
    lanes: dict = {}
    for groups, members in by_groups.items():
        counts = [len(shared[members[0]][s][2]) for s in range(k)]
        if any(len(shared[m][s][2]) != counts[s] for m in members for s in range(k)):
            raise AssertionError("lanes sharing a class index have tables of unequal lengths")
        offsets = np.cumsum([0, *counts])
        index = np.empty(size, index_type(int(offsets[-1])))
        for s, (g, r) in enumerate(zip(groups, rows, strict=True)):
            index[r] = classes[s][g] + offsets[s]
        for name in members:
            parts = shared.pop(name)
            common = math.lcm(*(d for _, _, _, d in parts))
            tables = [times(_wide(t), common // d) for _, _, t, d in parts]
            if any(t.dtype == object for t in tables):
                tables = [t.astype(object) for t in tables]
            table = np.concatenate(tables) if tables else np.zeros(0, np.int64)
            lanes[name] = (Gathered(table, index), common)
    return lanes


def _wide(table: np.ndarray) -> np.ndarray:
    """int8 tables as int64 (the shards' may differ), Python integers as they are."""
    return table if table.dtype == object else table.astype(np.int64)
