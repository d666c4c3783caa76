"""Datasets: the dataset file format (docs/concepts.md), validation, and exact geometry.

A dataset is either a list of points in Q^d with labels (task ``points``, plain MLP
memorization), or sequences of token indices into a vocabulary of vectors in Q^d (tasks
``next-token`` and ``seq2seq``). Labels are integers in 1..C. Every error names the offending
index or field.
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.core.exact import format_rational, parse_rational
from exactmem.core.exact_arrays import first_seen_ids
from exactmem.core.exact_arrays import top as array_top
from exactmem.core.json_input import parse_json, read_json_file
from exactmem.core.wording import plural
from exactmem.datasets.text import windows
from exactmem.runtime.gcpause import paused_gc

__all__ = [
    "FORMAT",
    "Dataset",
    "dataset_hash",
    "dataset_to_json",
    "parse_json",
    "random_points",
    "read_json_file",
    "radius_and_separation",
    "squared_radius",
    "squared_separation",
]

FORMAT = "exactmem.dataset/1"
TASKS = ("next-token", "seq2seq", "points")
FIELDS = {"format", "task", "labels", "C", "meta"}  # and the task's points or vocab + sequences

Vector = tuple[mpq, ...]


@dataclass(frozen=True)
class Dataset:
    """An exact dataset. For ``points`` only ``points`` is used; else ``vocab`` + ``sequences``.

    ``labels`` holds an int per point or sequence (a tuple of ints per sequence for seq2seq).
    ``num_classes`` is C: given in the file as ``"C"``, else the largest label. Make one with
    :meth:`from_tokens`, :meth:`from_points` or :meth:`from_text`, or read a file with
    :func:`~exactmem.files.dataset_files.load_dataset`.
    """

    task: str
    labels: tuple
    num_classes: int
    points: tuple[Vector, ...] = ()
    vocab: tuple[Vector, ...] = ()
    sequences: tuple[tuple[int, ...], ...] = ()
    meta: dict = field(default_factory=dict, compare=False)
    targets: tuple[tuple[mpq, ...], ...] = ()  # optional next-token distributions (targets.py)

    @property
    def size(self) -> int:
        """N: the number of points or sequences."""
        return len(self.points) if self.task == "points" else len(self.sequences)

    @property
    def dim(self) -> int:
        rows = self.points if self.task == "points" else self.vocab
        return len(rows[0]) if rows else 0

    # The builders write the object a dataset file holds and validate it with
    # parse_dataset, so a built dataset passes the checks a loaded one does.

    @classmethod
    def from_points(
        cls,
        points: Sequence[Sequence[object]],
        labels: Sequence[int],
        *,
        num_classes: int | None = None,
        allow_floats: bool = False,
    ) -> Dataset:
        """A ``points`` dataset: point i in Q^d with label i in 1..C.

        Coordinates are ints, exact strings (``"1/3"``, ``"0.25"``), ``Fraction`` or ``mpq``;
        floats only with ``allow_floats`` (converted exactly). ``num_classes`` is C (default:
        the largest label). Bad input raises :class:`~exactmem.core.errors.InputError` naming the
        index."""
        obj = {"points": _raw_rows(points, "points"), "labels": _raw_labels(labels)}
        return _built({**obj, "task": "points"}, num_classes, allow_floats, "Dataset.from_points")

    @classmethod
    def from_tokens(
        cls,
        sequences: Sequence[Sequence[object]],
        labels: Sequence[int] | Sequence[Sequence[int]],
        *,
        vocab: Sequence[Sequence[object]] | Mapping[object, Sequence[object]],
        task: str = "next-token",
        num_classes: int | None = None,
        allow_floats: bool = False,
    ) -> Dataset:
        """Sequences of tokens with their labels (``task`` ``next-token``: one label per
        sequence, for its last position; ``seq2seq``: one per position).

        ``vocab`` gives every token's vector in Q^d: a list (tokens are its indices) or a
        mapping (tokens are its keys, e.g. words; its order fixes the indices). Coordinates as
        in :meth:`from_points`. Bad input raises :class:`~exactmem.core.errors.InputError` naming
        the index."""
        meta: dict = {}
        rows: object
        if isinstance(vocab, Mapping):
            ids = {token: i for i, token in enumerate(vocab)}
            ids_of: list[list[int]] = []
            for i, seq in enumerate(sequences):
                if isinstance(seq, str | bytes) or not isinstance(seq, Sequence):
                    raise InputError(f"sequences[{i}]: expected a list of tokens")
                row = []
                for k, token in enumerate(seq):
                    try:
                        row.append(ids[token])
                    except (KeyError, TypeError):
                        raise InputError(
                            f"sequences[{i}][{k}]: token {token!r:.40} is not in vocab"
                        ) from None
                ids_of.append(row)
            rows = ids_of
            if all(isinstance(t, str) for t in ids):
                meta["symbols"] = list(ids)
            vectors: Sequence[Sequence[object]] = list(vocab.values())
        else:
            rows = _raw_rows(sequences, "sequences")
            vectors = vocab
        obj = {
            "task": task,
            "vocab": _raw_rows(vectors, "vocab"),
            "sequences": rows,
            "labels": _raw_labels(labels),
            "meta": meta,
        }
        return _built(obj, num_classes, allow_floats, "Dataset.from_tokens")

    @classmethod
    def from_text(
        cls,
        text: str,
        *,
        window: int,
        unit: str = "char",
        positions: str = "auto",
        source: str = "Dataset.from_text",
        progress: Callable[..., Any] | None = None,
    ) -> Dataset:
        """Next-token sequences of your own text: every window of ``window`` units
        (``unit``: ``char`` or ``word``), labelled by the unit that follows it.

        The token vectors are chosen exactly and automatically, with each token's position
        appended when two windows need it (``positions``: ``auto``, ``always`` or ``never``);
        ``meta`` records the symbols and says whether and why
        (:func:`exactmem.datasets.text.windows` finds the windows).
        Identical windows followed by different units are refused with an
        :class:`~exactmem.core.errors.InputError` naming both places. ``source`` names the text
        in messages; ``progress`` hears the steps."""
        found = windows(text, window, unit, positions=positions, source=source, progress=progress)
        ds = cls(
            task="next-token",
            labels=tuple(found.labels.tolist()),
            num_classes=len(found.symbols),
            vocab=tuple((mpq(i),) for i in range(1, len(found.symbols) + 1)),
            sequences=tuple(map(tuple, found.rows.tolist())),
            meta=found.meta,
        )
        if found.positions_because is None:
            return ds
        aware = with_positions(ds)
        return replace(aware, meta={**aware.meta, "positions_because": found.positions_because})


# --------------------------------------------------------------------------- file format


def _vector(raw: object, where: str, dim: int | None, allow_floats: bool) -> Vector:
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}: expected a non-empty list of numbers")
    if dim is not None and len(raw) != dim:
        raise InputError(f"{where}: has {len(raw)} coordinates, expected {dim}")
    return tuple(
        parse_rational(x, f"{where}[{j}]", allow_floats=allow_floats) for j, x in enumerate(raw)
    )


def _label(raw: object, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InputError(f"{where}: label must be an integer, got {raw!r:.40}")
    if raw < 1:
        raise InputError(f"{where}: label {raw} is outside 1..C (labels start at 1)")
    return raw


def _plain_token_rows(rows: list, n: int | None, vocab_size: int) -> bool:
    """Whether ``rows`` is a list of lists of ``n`` ≥ 1 plain ints in 0..vocab_size − 1,
    decided by passes at C speed (the per-token loop that names a bad entry costs seconds
    on a million sequences; it runs only when this answers no)."""
    if not n or set(map(type, rows)) != {list} or set(map(len, rows)) != {n}:
        return False
    if set(map(type, chain.from_iterable(rows))) != {int}:  # bool is a type of its own
        return False
    return 0 <= min(chain.from_iterable(rows)) and max(chain.from_iterable(rows)) < vocab_size


def parse_dataset(obj: object, *, allow_floats: bool = False, source: str = "dataset") -> Dataset:
    """Validate the JSON object of a dataset file and return the exact :class:`Dataset`."""
    if not isinstance(obj, dict):
        raise InputError(f"{source}: top level must be a JSON object")
    fmt = obj.get("format")
    if fmt != FORMAT:
        raise InputError(f"{source}: field 'format' is {fmt!r}, expected {FORMAT!r}")
    task = obj.get("task")
    if task not in TASKS:
        raise InputError(f"{source}: field 'task' is {task!r}, expected one of {', '.join(TASKS)}")
    fields = FIELDS | ({"points"} if task == "points" else {"vocab", "sequences", "targets"})
    unknown = sorted(k for k in obj if k not in fields)
    if unknown:
        raise InputError(
            f"{source}: unknown field {unknown[0]!r} for task {task!r} (fields: "
            f"{', '.join(sorted(fields))})"
        )
    if "meta" in obj and not isinstance(obj["meta"], dict):
        raise InputError(f"{source}: field 'meta' must be an object")
    labels_raw = obj.get("labels")
    if not isinstance(labels_raw, list) or not labels_raw:
        raise InputError(f"{source}: field 'labels' must be a non-empty list")
    C = obj.get("C")
    if C is not None and (isinstance(C, bool) or not isinstance(C, int) or C < 1):
        raise InputError(f"{source}: field 'C' must be a positive integer, got {C!r:.40}")

    points: tuple[Vector, ...] = ()
    vocab: tuple[Vector, ...] = ()
    sequences: tuple[tuple[int, ...], ...] = ()
    if task == "points":
        raw_points = obj.get("points")
        if not isinstance(raw_points, list) or not raw_points:
            raise InputError(f"{source}: task 'points' needs a non-empty list 'points'")
        dim = len(raw_points[0]) if isinstance(raw_points[0], list) else None
        points = tuple(
            _vector(p, f"points[{i}]", dim, allow_floats) for i, p in enumerate(raw_points)
        )
        if len(labels_raw) != len(points):
            raise InputError(
                f"{source}: {plural(len(labels_raw), 'label')} for "
                f"{plural(len(points), 'point')} (one label per point)"
            )
        labels: tuple = tuple(_label(y, f"labels[{i}]") for i, y in enumerate(labels_raw))
    else:
        raw_vocab = obj.get("vocab")
        if not isinstance(raw_vocab, list) or not raw_vocab:
            raise InputError(f"{source}: task {task!r} needs a non-empty list 'vocab'")
        dim = len(raw_vocab[0]) if isinstance(raw_vocab[0], list) else None
        vocab = tuple(_vector(v, f"vocab[{i}]", dim, allow_floats) for i, v in enumerate(raw_vocab))
        raw_seqs = obj.get("sequences")
        if not isinstance(raw_seqs, list) or not raw_seqs:
            raise InputError(f"{source}: task {task!r} needs a non-empty list 'sequences'")
        n = len(raw_seqs[0]) if isinstance(raw_seqs[0], list) else None
        plain = _plain_token_rows(raw_seqs, n, len(vocab))  # if so, the loop has nothing to name
        seqs = list(map(tuple, raw_seqs)) if plain else []
        for i, s in enumerate(() if plain else raw_seqs):
            if not isinstance(s, list) or not s:
                raise InputError(f"sequences[{i}]: expected a non-empty list of token indices")
            if len(s) != n:
                raise InputError(f"sequences[{i}]: length {len(s)}, expected {n} (as sequences[0])")
            for k, tok in enumerate(s):
                if isinstance(tok, bool) or not isinstance(tok, int) or not 0 <= tok < len(vocab):
                    raise InputError(
                        f"sequences[{i}][{k}]: {tok!r:.40} is not an index into vocab "
                        f"(0..{len(vocab) - 1})"
                    )
            seqs.append(tuple(s))
        sequences = tuple(seqs)
        if len(labels_raw) != len(sequences):
            raise InputError(
                f"{source}: {plural(len(labels_raw), 'label')} for "
                f"{plural(len(sequences), 'sequence')} "
                "(one entry per sequence)"
            )
        if task == "seq2seq":
            labs = []
            for i, ys in enumerate(labels_raw):
                if not isinstance(ys, list) or len(ys) != n:
                    raise InputError(f"labels[{i}]: seq2seq needs a list of {n} labels")
                labs.append(tuple(_label(y, f"labels[{i}][{k}]") for k, y in enumerate(ys)))
            labels = tuple(labs)
        elif set(map(type, labels_raw)) == {int} and min(labels_raw) >= 1:  # nothing to name
            labels = tuple(labels_raw)
        else:
            labels = tuple(_label(y, f"labels[{i}]") for i, y in enumerate(labels_raw))

    flat = [y for ys in labels for y in ys] if task == "seq2seq" else list(labels)
    top = max(flat)
    if C is None:
        C = top
    elif top > C:
        where = next(i for i, y in enumerate(labels) if (max(y) if task == "seq2seq" else y) > C)
        raise InputError(f"labels[{where}]: label {top} is outside 1..C with C = {C}")
    targets: tuple[tuple[mpq, ...], ...] = ()
    if "targets" in obj:
        from exactmem.datasets.targets import parse_targets

        targets = parse_targets(obj["targets"], labels, C, task=task, allow_floats=allow_floats)
    return Dataset(
        task=task,
        labels=labels,
        num_classes=C,
        points=points,
        vocab=vocab,
        sequences=sequences,
        meta=obj.get("meta", {}),
        targets=targets,
    )


def _raw_value(x: object) -> object:
    """A coordinate as a dataset file would hold it: rationals (``Fraction``, ``mpq``, NumPy
    integers) as exact text; anything else is left for :func:`parse_rational` to judge."""
    if isinstance(x, bool | int | float | str):
        return x
    if isinstance(x, numbers.Rational):
        return f"{x.numerator}/{x.denominator}"
    return x


def _raw_rows(rows: object, what: str) -> object:
    if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
        raise InputError(f"{what}: expected a list, got {type(rows).__name__}")
    return [
        [_raw_value(x) for x in row]
        if isinstance(row, Sequence) and not isinstance(row, str | bytes)
        else row
        for row in rows
    ]


def _raw_labels(labels: object) -> object:
    def one(y: object) -> object:
        return int(y) if isinstance(y, numbers.Integral) and not isinstance(y, bool) else y

    if isinstance(labels, str | bytes) or not isinstance(labels, Sequence):
        raise InputError(f"labels: expected a list, got {type(labels).__name__}")
    return [
        [one(y) for y in ys] if isinstance(ys, Sequence) and not isinstance(ys, str) else one(ys)
        for ys in labels
    ]


def _built(obj: dict, num_classes: int | None, allow_floats: bool, source: str) -> Dataset:
    obj = {**obj, "format": FORMAT}
    if num_classes is not None:
        obj["C"] = num_classes
    return parse_dataset(obj, allow_floats=allow_floats, source=source)


def dataset_to_json(ds: Dataset) -> dict:
    """The canonical JSON object of a dataset (exact rationals as strings)."""
    obj = _json_without_vectors(ds)
    if ds.task == "points":
        obj["points"] = [[str(x) for x in p] for p in ds.points]
    else:
        obj["vocab"] = [[str(x) for x in v] for v in ds.vocab]
    return obj


def _json_without_vectors(ds: Dataset) -> dict:
    """:func:`dataset_to_json` but for the points or vocabulary."""
    obj: dict = {"format": FORMAT, "task": ds.task, "C": ds.num_classes}
    if ds.task != "points":
        obj["sequences"] = list(ds.sequences)  # tuples are written as JSON arrays
    obj["labels"] = [list(y) for y in ds.labels] if ds.task == "seq2seq" else list(ds.labels)
    if ds.targets:  # absent when there are none: such files and their hashes are unchanged
        from exactmem.datasets.targets import targets_to_json

        obj["targets"] = targets_to_json(ds.targets)
    if ds.meta:
        obj["meta"] = ds.meta
    return obj


def dataset_hash(ds: Dataset, *, tokens: np.ndarray | None = None) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no whitespace), without ``meta``; its token
    rows are written from an integer array (:mod:`exactmem.datasets.canonical`), the same bytes.
    ``tokens``: ``ds.sequences`` as an (N, n) array of vocabulary indices, if the caller holds
    one (the sequence view's, when no two vocabulary vectors are equal, or the container's
    :class:`~exactmem.datasets.token_rows.TokenRows`: at N = 10⁷ their tuples would be 1.8 GB)."""
    from exactmem.datasets.canonical import canonical_sha256, int_strings_json
    from exactmem.datasets.token_rows import TokenRows
    from exactmem.datasets.vocab_arrays import vocab_arrays

    rest = ds  # everything but the rows ``tokens`` stands for
    if isinstance(ds.sequences, TokenRows):
        tokens, rest = ds.sequences.array, replace(ds, sequences=())
    with paused_gc():  # the canonical object's lists hold no cycles
        obj = _json_without_vectors(rest)
        obj.pop("meta", None)
        texts = {}
        arrays = vocab_arrays(ds) if ds.task != "points" else None
        if arrays is not None and (arrays[1] == 1).all():  # integers: their decimal strings
            text = int_strings_json(arrays[0])
            if text is not None:
                texts["vocab"] = text
        if not texts:
            obj = dataset_to_json(rest)
            obj.pop("meta", None)
        return canonical_sha256(obj, tokens=tokens, texts=texts)


# --------------------------------------------------------------------------- generators


def random_points(
    N: int,
    d: int,
    C: int,
    seed: int = 0,
    *,
    coord_bound: int = 1000,
    denominator: int = 1,
    progress: Callable[..., Any] | None = None,
) -> Dataset:
    """N distinct points with integer coordinates in [−B, B] (divided by ``denominator``) and
    labels uniform in 1..C. Deterministic in ``seed``; ``progress`` hears the points drawn
    (:func:`exactmem.runtime.progress.counter`)."""
    if N < 1 or d < 1 or C < 1:
        raise InputError(f"random_points needs N, d, C ≥ 1, got N={N}, d={d}, C={C}")
    if (2 * coord_bound + 1) ** d < N:
        raise InputError(
            f"cannot draw {N} distinct points from [−{coord_bound}, {coord_bound}]^{d}"
        )
    from exactmem.runtime.progress import counter

    drawn = counter(progress, "generating points", N)
    rng = random.Random(seed)
    seen: set[tuple[int, ...]] = set()
    pts: list[Vector] = []
    while len(pts) < N:
        p = tuple(rng.randint(-coord_bound, coord_bound) for _ in range(d))
        if p not in seen:
            seen.add(p)
            pts.append(tuple(mpq(x, denominator) for x in p))
            drawn(len(pts))
    labels = tuple(rng.randint(1, C) for _ in range(N))
    return Dataset(
        task="points",
        labels=labels,
        num_classes=C,
        points=tuple(pts),
        meta={"generator": "random_points", "seed": seed, "coord_bound": coord_bound},
    )


# --------------------------------------------------------------------------- geometry


def squared_radius(vectors: Sequence[Vector]) -> mpq:
    """r² = max ‖x‖² (exact)."""
    return max(sum((x * x for x in v), mpq(0)) for v in vectors)


SEPARATION_LIMIT = 20_000


def squared_separation(vectors: Sequence[Vector]) -> mpq | None:
    """δ² = min ‖x − x'‖² over pairs of distinct vectors (exact); ``None`` if all are equal.

    Exact but quadratic: on whole blocks of pairs in int32 or int64 when the scaled
    coordinates provably fit, otherwise Python integers. Callers skip it above
    :data:`SEPARATION_LIMIT` vectors."""
    return radius_and_separation(vectors)[1]


def radius_and_separation(vectors: Sequence[Vector]) -> tuple[mpq, mpq | None]:
    """(r², δ²) of a non-empty list of vectors (:func:`squared_radius`,
    :func:`squared_separation`), both from one conversion to integers over a common
    denominator; equal vectors are found on those integers (hashing a fresh rational costs
    more than the rest)."""
    vectors = list(vectors)
    d = len(vectors[0])
    flat = list(chain.from_iterable(vectors))  # C-speed passes: a thousand tokens cost ~1 ms
    scale = math.lcm(*map(int, set(map(attrgetter("denominator"), flat))))
    flat = list(map(int, flat)) if scale == 1 else [int(x * scale) for x in flat]
    r2, delta2 = integer_geometry(flat, len(vectors), d)
    square = scale * scale
    return mpq(r2, square), None if delta2 is None else mpq(delta2, square)


def integer_geometry(flat: Any, rows: int, d: int) -> tuple[int, int | None]:
    """(max ‖x‖², min ‖x − x'‖² over distinct x, x') of ``rows`` integer vectors of dimension
    ``d`` given row after row in ``flat`` (a list of ints or an int64 array); None for δ² when
    all are equal. On NumPy blocks when every square sum provably fits, else Python ints."""
    top = array_top(flat) if isinstance(flat, np.ndarray) else max(map(abs, flat), default=0)
    if d * (2 * top) ** 2 < 2**62:
        X = np.asarray(flat, dtype=np.int32 if d * (2 * top) ** 2 < 2**31 else np.int64)
        X = X.reshape(rows, d)
        r2 = int(np.einsum("ij,ij->i", X.astype(np.int64), X.astype(np.int64)).max())
        X = X[first_seen_ids(X)[1]] if d else X[:1]  # the distinct vectors
        return r2, (_least_square_distance(X) if len(X) > 1 else None)
    flat = flat.tolist() if isinstance(flat, np.ndarray) else flat
    ints = [tuple(flat[i : i + d]) for i in range(0, len(flat), d)] if d else [()]
    r2 = max(sum(x * x for x in v) for v in ints)
    distinct = list(dict.fromkeys(ints))
    best: int | None = None
    for i in range(len(distinct)):
        for j in range(i + 1, len(distinct)):
            m = sum((a - b) ** 2 for a, b in zip(distinct[i], distinct[j], strict=True))
            best = m if best is None else min(best, m)
    return r2, best


def _least_square_distance(X: np.ndarray, block: int = 64) -> int:
    """min over i < j of ‖X[i] − X[j]‖², for rows whose every such sum fits X's dtype: a
    block of rows against all the rows after its first, one coordinate at a time."""
    M = len(X)
    columns = [np.ascontiguousarray(X[:, k]) for k in range(X.shape[1])]
    ceiling = np.iinfo(X.dtype).max
    best = ceiling
    for i0 in range(0, M - 1, block):
        i1 = min(M, i0 + block)
        d2 = np.zeros((i1 - i0, M - i0 - 1), X.dtype)
        for c in columns:
            diff = c[i0:i1, None] - c[None, i0 + 1 :]
            d2 += diff * diff
        # row i0 + a against column i0 + 1 + b: a pair i < j when b ≥ a
        d2[np.arange(M - i0 - 1)[None, :] < np.arange(i1 - i0)[:, None]] = ceiling
        best = min(best, int(d2.min()))
    return best


def with_positions(ds: Dataset) -> Dataset:
    """Position-aware tokens: token k of every sequence becomes (x, k + 1) ∈ Q^{d+1}."""
    index: dict[tuple, int] = {}
    vocab: list[tuple] = []
    seqs = []
    for seq in ds.sequences:
        row = []
        for k, t in enumerate(seq):
            vec = (*ds.vocab[t], mpq(k + 1))
            if vec not in index:
                index[vec] = len(vocab)
                vocab.append(vec)
            row.append(index[vec])
        seqs.append(tuple(row))
    meta = {**ds.meta, "position_aware": True}
    return Dataset(
        ds.task, ds.labels, ds.num_classes, vocab=tuple(vocab), sequences=tuple(seqs), meta=meta
    )


def point_conflicts(dataset: Dataset) -> None:
    """Equal points with different labels cannot be memorized: exit 2 naming both indices."""
    first: dict[tuple, int] = {}
    for i, p in enumerate(dataset.points):
        j = first.setdefault(tuple(p), i)
        if j != i and dataset.labels[j] != dataset.labels[i]:
            raise InputError(
                f"points[{j}] and points[{i}] are equal but labelled "
                f"{dataset.labels[j]} and {dataset.labels[i]}"
            )


def _geometry(
    vectors: Sequence[Vector],
    what: str,
    geometry: Callable[[], tuple[Any, Any]] | None = None,
) -> dict:
    """The count, r² and δ² of ``vectors``; ``geometry()`` gives (r², δ²) if the caller has
    them (measured once)."""
    if len(vectors) > SEPARATION_LIMIT:
        r2, delta2 = squared_radius(vectors), None
    else:
        r2, delta2 = geometry() if geometry else radius_and_separation(vectors)
    figures = {what: len(vectors), "r2": format_rational(r2)}
    if len(vectors) <= SEPARATION_LIMIT:
        figures["delta2"] = None if delta2 is None else format_rational(delta2)
    else:
        figures["delta2"] = f"not measured (more than {SEPARATION_LIMIT} vectors)"
    return figures
