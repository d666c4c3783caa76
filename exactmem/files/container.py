"""The binary container: datasets and models as a small JSON header and raw integer arrays.

JSON stays the interchange format; a file whose name ends in :data:`SUFFIX` (``.exm``) holds
the same content in a form that is read without parsing text. Layout (every number little-
endian, docs/files.md has it field by field)::

    magic    8 bytes   b"EXMB\\r\\n\\x1a\\n"
    version  u32       1
    flags    u32       0
    header   u64       length H of the header in bytes
    header   H bytes   strict JSON (exactmem.core.json_input), at most HEADER_BYTES
    arrays             each at an offset that is a multiple of 8, in header order

An array is ``{"dtype", "shape", "offset", "bytes", "sha256"}``: ``dtype`` ``<u1`` … ``<u4``,
``<i1`` … ``<i8`` for integers that fit, ``big`` for any integers (``count`` int64 signed
byte lengths — the sign is the value's — then the magnitudes, little-endian, no leading zero
byte). The reader checks every offset and length against the file's size before it reads,
every array's SHA-256, and every value as the JSON reader would (the model goes through
:func:`exactmem.files.model_json.model_from_json`; the dataset through vectorised equivalents of
:func:`exactmem.datasets.dataset.parse_dataset`'s checks). No pickle, no object arrays; the file is
memory-mapped and integer arrays are views of it.

A model's header holds its JSON content with every affine map's ``rows`` and ``bias`` moved
to five arrays (``row_start``, ``entry_start``, ``col``, ``value``, ``bias``); the reader puts
them back, so the canonical content, and its SHA-256, are those of the JSON file.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import math
import mmap
import os
import struct
from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np

from exactmem.core import limits
from exactmem.core.errors import InputError
from exactmem.core.json_input import parse_json

__all__ = [
    "HEADER_BYTES",
    "MAGIC",
    "SUFFIX",
    "VERSION",
    "is_container",
    "read_dataset",
    "read_header",
    "read_model",
    "write_dataset",
    "write_model",
    "write_model_of",
]

SUFFIX = ".exm"
MAGIC = b"EXMB\r\n\x1a\n"  # PNG's trick: a text-mode transfer or a truncation to 7 bits shows
VERSION = 1
HEADER_BYTES = 256 << 20  # a model of 10⁷ sequences has a header of a few MB
_PREFIX = struct.Struct("<8sIIQ")
_FIXED = {k: np.dtype(k) for k in ("<u1", "<u2", "<u4", "<i1", "<i2", "<i4", "<i8")}
DTYPES = (*_FIXED, "big")
ARRAY_FIELDS = ("dtype", "shape", "offset", "bytes", "sha256")


def is_container(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a binary container (by its extension)."""
    return os.fspath(path).endswith(SUFFIX)


# --------------------------------------------------------------------------- encode


def _narrowest(values: np.ndarray) -> str:
    low, top = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for dtype in ("<u1", "<u2", "<u4") if low >= 0 else ("<i1", "<i2", "<i4"):
        info = np.iinfo(_FIXED[dtype])
        if info.min <= low and top <= info.max:
            return dtype
    return "<i8"


def _pack(values, shape: tuple[int, ...]) -> tuple[str, bytes | np.ndarray]:
    """(dtype, payload) of integers given as an int64 array or any iterable of ints."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu" and values.dtype != np.uint64:
        dtype = _narrowest(values)
        return dtype, np.ascontiguousarray(values, _FIXED[dtype]).reshape(shape)
    ints = [int(v) for v in values]
    try:
        array = np.array(ints, np.int64) if ints else np.zeros(0, np.int64)
    except OverflowError:
        sizes = [(abs(v).bit_length() + 7) // 8 for v in ints]
        lengths = np.array([-s if v < 0 else s for v, s in zip(ints, sizes, strict=True)], "<i8")
        mags = b"".join(abs(v).to_bytes(s, "little") for v, s in zip(ints, sizes, strict=True))
        return "big", lengths.tobytes() + mags
    return _pack(array.reshape(shape), shape)


class _Writer:
    """Arrays laid out one after another; the header is written before them."""

    def __init__(self) -> None:
        self.arrays: dict[str, dict] = {}
        self.payloads: list[bytes | np.ndarray] = []

    def add(self, name: str, values, shape: tuple[int, ...]) -> None:
        dtype, payload = _pack(values, shape)
        view = payload.data.cast("B") if isinstance(payload, np.ndarray) else payload
        self.arrays[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "offset": 0,  # fixed once the header's length is known
            "bytes": len(view),
            "sha256": hashlib.sha256(view).hexdigest(),
        }
        self.payloads.append(payload)

    def pieces(self, header: dict) -> Iterator[bytes | memoryview]:
        """The file: prefix, header, then each array at its 8-byte-aligned offset."""
        header = {**header, "arrays": self.arrays}
        # the offsets change the header's length only through their digits, and only upwards:
        # a few rounds reach the fixed point
        while True:
            text = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode()
            at = _align(_PREFIX.size + len(text))
            changed = False
            for meta in self.arrays.values():
                if meta["offset"] != at:
                    meta["offset"], changed = at, True
                at = _align(at + meta["bytes"])
            if not changed:
                break
        yield _PREFIX.pack(MAGIC, VERSION, 0, len(text))
        yield text
        at = _PREFIX.size + len(text)
        for meta, payload in zip(self.arrays.values(), self.payloads, strict=True):
            yield bytes(meta["offset"] - at)
            yield payload.data.cast("B") if isinstance(payload, np.ndarray) else payload
            at = meta["offset"] + meta["bytes"]


def _align(n: int) -> int:
    return -(-n // 8) * 8


def _write(writer: _Writer, header: dict, path: str | os.PathLike) -> None:
    from exactmem.core.outputs import write_atomic

    write_atomic(path, writer.pieces(header))


def write_dataset(ds, path: str | os.PathLike) -> None:
    """Write the dataset ``ds`` as a container (the content of ``dataset_to_json``); ``ds`` is
    a :class:`~exactmem.datasets.dataset.Dataset` or the arrays of one
    (:class:`~exactmem.datasets.sequences.TokenArrays`, written without a tuple per sequence)."""
    from exactmem.datasets.dataset import FORMAT
    from exactmem.datasets.sequences import token_array

    w = _Writer()
    arrays = isinstance(ds.labels, np.ndarray)
    if ds.task == "points":
        rows = ds.points
    else:
        rows = ds.vocab
        tokens = ds.tokens if arrays else token_array(ds)
        w.add("sequences", tokens, tokens.shape)
    d = len(rows[0])
    flat = [x for r in rows for x in r]
    w.add("numerator", (x.numerator for x in flat), (len(rows), d))
    w.add("denominator", (x.denominator for x in flat), (len(rows), d))
    if arrays:
        w.add("labels", ds.labels, ds.labels.shape)
    elif ds.task == "seq2seq":
        n = len(ds.labels[0])
        w.add("labels", (y for ys in ds.labels for y in ys), (ds.size, n))
    else:
        w.add("labels", ds.labels, (ds.size,))
    header = {"format": FORMAT, "task": ds.task, "C": ds.num_classes, "meta": ds.meta}
    _write(w, header, path)


AFFINE_FIELDS = ("in", "den", "names", "rows", "bias")
PACKED_FIELDS = ("in", "den", "names", "packed")
# a model container's arrays and their shapes (docs/files.md): each has one dimension
MODEL_ARRAYS = {
    "row_start": "(maps + 1)",
    "entry_start": "(rows + 1)",
    "col": "(entries)",
    "value": "(entries)",
    "bias": "(rows)",
}


def write_model(content: dict, digest: str, path: str | os.PathLike) -> None:
    """Write a model's JSON ``content`` (``model_to_json``) and its SHA-256 as a container."""
    from exactmem.core.exact import from_hex

    row_start, entry_start, cols, values, bias = [0], [0], [], [], []

    def pack(obj):
        if isinstance(obj, list):
            return [pack(v) for v in obj]
        if not isinstance(obj, dict):
            return obj
        if set(obj) == set(AFFINE_FIELDS):
            for row in obj["rows"]:
                cols.extend(c for c, _ in row)
                values.extend(from_hex(v, "value") for _, v in row)
                entry_start.append(len(cols))
            bias.extend(from_hex(b, "bias") for b in obj["bias"])
            row_start.append(len(bias))
            k = len(row_start) - 2
            return {"in": obj["in"], "den": obj["den"], "names": obj["names"], "packed": k}
        return {k: (v if k == "meta" else pack(v)) for k, v in obj.items()}

    skeleton = pack(content)
    _write_packed(skeleton, digest, path, row_start, entry_start, cols, values, bias)


def _write_packed(skeleton, digest, path, row_start, entry_start, cols, values, bias) -> None:
    """The model container: its JSON skeleton (each affine map replaced by its index) and the
    maps' rows packed into five arrays."""
    from exactmem.files.model_json import MODEL_FORMAT

    w = _Writer()
    w.add("row_start", np.array(row_start, np.int64), (len(row_start),))
    w.add("entry_start", np.array(entry_start, np.int64), (len(entry_start),))
    w.add("col", np.array(cols, np.int64), (len(cols),))
    w.add("value", values, (len(values),))
    w.add("bias", bias, (len(bias),))
    _write(w, {"format": MODEL_FORMAT, "sha256": digest, "model": skeleton}, path)


def write_model_of(model, digest: str, path: str | os.PathLike) -> None:
    """Write ``model`` (with its SHA-256 ``digest``) as a container: the file
    :func:`write_model` writes from its JSON content, built from the weights themselves —
    no hex text of the values on the way."""
    from exactmem.core.exact import to_hex
    from exactmem.files.model_json import model_to_json

    row_start, entry_start = [0], [0]
    cols: list[int] = []
    values: list = []
    bias: list = []

    def packed(a) -> dict:
        for row in a.rows:
            cols.extend(c for c, _ in row)
            values.extend(v for _, v in row)
            entry_start.append(len(cols))
        bias.extend(a.bias)
        row_start.append(len(bias))
        k = len(row_start) - 2
        return {"in": a.in_dim, "den": to_hex(a.denominator), "names": list(a.names), "packed": k}

    skeleton = model_to_json(model, packed)
    _write_packed(skeleton, digest, path, row_start, entry_start, cols, values, bias)


# --------------------------------------------------------------------------- decode


class _Container:
    """An open container: its header checked, its arrays read on demand (views of a memory
    map, after their bounds and SHA-256 are checked). Errors name the file and the field."""

    def __init__(self, path: str | os.PathLike, what: str) -> None:
        self.where = f"{what} file {os.fspath(path)}"
        lim = limits.current()
        try:
            with limits.open_regular(path, self.where) as f:
                size = os.fstat(f.fileno()).st_size
                if size > lim.max_bytes:
                    self.fail(f"{size} bytes, more than the limit of {lim.max_bytes} (--max-bytes)")
                if size < _PREFIX.size:
                    self.fail(f"{size} bytes: too short for the {_PREFIX.size}-byte prefix")
                self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise InputError(f"{self.where}: cannot read ({exc.strerror or exc})") from None
        self.size = size
        magic, version, flags, length = _PREFIX.unpack_from(self.map, 0)
        if magic != MAGIC:
            self.fail(f"not an exactmem binary container (magic {magic!r}, expected {MAGIC!r})")
        if version != VERSION:
            self.fail(f"container version {version} is not supported (expected {VERSION})")
        if flags != 0:
            self.fail(f"flags {flags:#x}: no flags are defined in version {VERSION}")
        cap = min(HEADER_BYTES, lim.max_bytes)
        if length > cap:
            self.fail(f"header of {length} bytes, more than the {cap} allowed")
        if _PREFIX.size + length > size:
            self.fail(f"header of {length} bytes runs past the end of the file ({size} bytes)")
        raw = self.map[_PREFIX.size : _PREFIX.size + length]
        header = parse_json(raw, f"{self.where}: header")
        if not isinstance(header, dict):
            self.fail("header: expected a JSON object")
        self.header: dict = header
        self.data_start = _PREFIX.size + length
        arrays = header.get("arrays")
        if not isinstance(arrays, dict):
            self.fail("header.arrays: expected an object of arrays")
        self.arrays: dict = arrays
        self._check_layout()

    def fail(self, message: str) -> NoReturn:
        raise InputError(f"{self.where}: {message}")

    def _check_layout(self) -> None:
        end = self.data_start
        for name, meta in self.arrays.items():
            at = f"header.arrays.{name}"
            if not isinstance(meta, dict) or set(meta) != set(ARRAY_FIELDS):
                self.fail(f"{at}: expected an object of exactly {', '.join(ARRAY_FIELDS)}")
            dtype, shape = meta["dtype"], meta["shape"]
            if dtype not in DTYPES:
                self.fail(f"{at}.dtype: {dtype!r:.40} is not one of {', '.join(DTYPES)}")
            if (
                not isinstance(shape, list)
                or not 1 <= len(shape) <= 2
                or not all(_count(s) for s in shape)
            ):
                self.fail(f"{at}.shape: expected 1 or 2 non-negative integers")
            if len(shape) == 2 and 0 in shape:
                # [E, 0] holds no byte but reads as E empty rows: E is a size the file never
                # pays for, so no 2-D array of the format is empty (an empty list is [0])
                self.fail(f"{at}.shape: {shape} has an empty dimension (a 2-D array is non-empty)")
            for key in ("offset", "bytes"):
                if not _count(meta[key]):
                    self.fail(f"{at}.{key}: expected a non-negative integer")
            offset, nbytes = meta["offset"], meta["bytes"]
            count = math.prod(shape)
            if dtype == "big":
                if nbytes < 8 * count:
                    self.fail(
                        f"{at}: {count} big integers need at least {8 * count} bytes of lengths, "
                        f"the array has {nbytes}"
                    )
            elif nbytes != count * np.dtype(_FIXED[dtype]).itemsize:
                self.fail(
                    f"{at}: shape {shape} of {dtype} is {count * np.dtype(_FIXED[dtype]).itemsize}"
                    f" bytes, the header says {nbytes}"
                )
            if offset % 8:
                self.fail(f"{at}.offset: {offset} is not a multiple of 8")
            if offset < end:
                self.fail(f"{at}.offset: {offset} overlaps the header or the array before")
            if offset + nbytes > self.size:
                self.fail(
                    f"{at}: bytes {offset}..{offset + nbytes} run past the end of the file "
                    f"({self.size} bytes; truncated?)"
                )
            sha = meta["sha256"]
            if not isinstance(sha, str) or len(sha) != 64:
                self.fail(f"{at}.sha256: expected 64 hex digits")
            end = offset + nbytes

    def names(self, expected: set[str]) -> None:
        if set(self.arrays) != expected:
            extra = sorted(set(self.arrays) - expected)
            missing = sorted(expected - set(self.arrays))
            what = f"unknown array {extra[0]!r}" if extra else f"missing array {missing[0]!r}"
            self.fail(f"header.arrays: {what} (arrays: {', '.join(sorted(expected))})")

    def rank(self, name: str, rank: int, what: str) -> None:
        """Array ``name`` has ``rank`` dimensions, as its field is defined (docs/files.md): a
        value beyond the shape the reader reads could hide under the content's hash."""
        shape = self.arrays[name]["shape"]
        if len(shape) != rank:
            self.fail(f"header.arrays.{name}.shape: {shape}, expected {what}")

    def shape(self, name: str) -> list[int]:
        return self.arrays[name]["shape"]

    def ints(self, name: str) -> np.ndarray | list[int]:
        """The array ``name``: a NumPy view of the file (fixed width) or a list of ints."""
        meta = self.arrays[name]
        at = f"header.arrays.{name}"
        view = memoryview(self.map)[meta["offset"] : meta["offset"] + meta["bytes"]]
        if hashlib.sha256(view).hexdigest() != meta["sha256"]:
            self.fail(f"{at}: the bytes do not match the array's sha256 (damaged file)")
        shape = tuple(meta["shape"])
        if meta["dtype"] != "big":
            return np.frombuffer(view, _FIXED[meta["dtype"]]).reshape(shape)
        count = math.prod(shape)
        lengths = np.frombuffer(view[: 8 * count], "<i8")
        sizes = np.abs(lengths)
        cap = (limits.current().max_digits + 1) // 2  # hex digits → bytes
        if count and (lengths.min() < -(2**62) or sizes.max() > cap):
            i = int(np.argmax(sizes > cap)) if lengths.min() >= -(2**62) else 0
            self.fail(f"{at}[{i}]: more than {cap} bytes (--max-digits)")
        ends = 8 * count + np.cumsum(sizes)
        if (int(ends[-1]) if count else 8 * count) != meta["bytes"]:
            self.fail(
                f"{at}: the lengths add up to {int(ends[-1]) if count else 0} bytes of "
                f"magnitudes, the array holds {meta['bytes'] - 8 * count}"
            )
        buf = np.frombuffer(view, np.uint8)
        nonzero = np.flatnonzero(sizes)
        if nonzero.size and (buf[ends[nonzero] - 1] == 0).any():
            i = int(nonzero[np.argmax(buf[ends[nonzero] - 1] == 0)])
            self.fail(f"{at}[{i}]: a magnitude with a leading zero byte (not canonical)")
        starts = (ends - sizes).tolist()
        raw = bytes(view)
        out = [
            int.from_bytes(raw[s : s + m], "little") if m else 0
            for s, m in zip(starts, sizes.tolist(), strict=True)
        ]
        for i in np.flatnonzero(lengths < 0).tolist():
            out[i] = -out[i]
        return out

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # arrays still view it: the map closes with the last of them
            pass


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of tuples are made: they hold only
    ints, so no cycle can form, and each collection pass would walk every tuple made so far
    (at N = 10⁶ the passes took twice as long as the making)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def read_header(path: str | os.PathLike, what: str = "input") -> dict:
    """The checked header of a container (its ``format`` says what it holds)."""
    c = _Container(path, what)
    try:
        return c.header
    finally:
        c.close()


def _ints_list(values: np.ndarray | list[int]) -> list[int]:
    return values.ravel().tolist() if isinstance(values, np.ndarray) else values


@_no_cycle_collection()
def read_model(path: str | os.PathLike):
    """The model a container holds and its SHA-256, checked as
    :func:`exactmem.files.model_files.load_model`
    checks a JSON file: the affine maps are built from the arrays (their values never pass
    through text), the rest of the header goes through
    :func:`exactmem.files.model_json.model_from_json`,
    and the canonical hash must be the one the header states."""
    from exactmem.files.model_json import MODEL_FORMAT, model_from_json, model_hash

    c = _Container(path, "model")
    try:
        unknown = sorted(set(c.header) - {"format", "sha256", "model", "arrays"})
        if unknown:
            c.fail(f"header: unknown field {unknown[0]!r} (fields: format, sha256, model, arrays)")
        fmt, stated = c.header.get("format"), c.header.get("sha256")
        if fmt != MODEL_FORMAT:
            c.fail(f"format {fmt!r:.60} is not supported (expected {MODEL_FORMAT!r})")
        if not isinstance(stated, str) or not isinstance(c.header.get("model"), dict):
            c.fail("header: needs fields 'model' (object) and 'sha256' (string)")
        skeleton = _affines(c)
        try:
            model = model_from_json(skeleton, "model")
        except InputError as exc:
            c.fail(str(exc))
        digest = model_hash(model)
        if digest != stated:
            c.fail(
                f"SHA-256 mismatch — the content hashes to {digest[:16]}…, the file states "
                f"{stated[:16]}…; the file was modified or damaged"
            )
        return model, digest
    finally:
        c.close()


def _affines(c: _Container) -> dict:
    """The header's model with each packed map replaced by its :class:`Affine`."""
    from exactmem.core.exact import from_hex
    from exactmem.core.model import Affine

    c.names(set(MODEL_ARRAYS))
    for name, what in MODEL_ARRAYS.items():
        c.rank(name, 1, what)
    arrays: dict[str, np.ndarray] = {}
    for name in ("row_start", "entry_start", "col"):
        a = c.ints(name)
        if not isinstance(a, np.ndarray):
            c.fail(f"header.arrays.{name}: must be fixed-width integers, not big")
        arrays[name] = a
    values, bias = c.ints("value"), c.ints("bias")
    _offsets(c, "row_start", arrays["row_start"], len(bias))
    _offsets(c, "entry_start", arrays["entry_start"], len(arrays["col"]))
    if len(arrays["entry_start"]) != len(bias) + 1:
        c.fail(
            f"header.arrays.entry_start: {len(arrays['entry_start'])} offsets for {len(bias)} rows"
        )
    if len(values) != len(arrays["col"]):
        c.fail(f"header.arrays.value: {len(values)} values for {len(arrays['col'])} columns")
    vals = _ints_list(values)
    zero = (
        np.flatnonzero(values == 0)
        if isinstance(values, np.ndarray)
        else [i for i, v in enumerate(vals) if v == 0]
    )
    if len(zero):
        c.fail(f"header.arrays.value[{zero[0]}]: zero entries are left out of a sparse row")
    rs, es = arrays["row_start"].tolist(), arrays["entry_start"].tolist()
    entries = list(zip(arrays["col"].tolist(), vals, strict=True))
    biases = _ints_list(bias)
    seen = 0

    def affine(obj: dict, where: str) -> Affine:
        nonlocal seen
        if set(obj) != set(PACKED_FIELDS):
            c.fail(f"{where}: a packed map has exactly {', '.join(PACKED_FIELDS)}")
        k = obj["packed"]
        if not _count(k) or k != seen or seen >= len(rs) - 1:
            c.fail(f"{where}.packed: expected {seen}, maps are numbered in order")
        seen += 1
        in_dim, names = obj["in"], obj["names"]
        if not _count(in_dim):
            c.fail(f"{where}.in: expected a non-negative integer")
        try:
            den = from_hex(obj["den"], f"{where}.den")
        except InputError as exc:
            c.fail(str(exc))
        if den < 1:
            c.fail(f"{where}.den: denominator must be a positive integer, got {den}")
        lo, hi = rs[k], rs[k + 1]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            c.fail(f"{where}.names: expected a list of strings")
        if names and len(names) != hi - lo:
            c.fail(f"{where}.names: {len(names)} names for {hi - lo} rows")
        rows = tuple(tuple(entries[es[r] : es[r + 1]]) for r in range(lo, hi))
        try:
            return Affine(in_dim, rows, tuple(biases[lo:hi]), den, tuple(names))
        except ValueError as exc:
            c.fail(f"{where}: {exc}")

    def unpack(obj, where: str):
        if isinstance(obj, list):
            return [unpack(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if not isinstance(obj, dict):
            return obj
        if "packed" in obj:
            return affine(obj, where)
        return {k: (v if k == "meta" else unpack(v, f"{where}.{k}")) for k, v in obj.items()}

    model = unpack(c.header["model"], "header.model")
    if seen != len(rs) - 1:
        c.fail(f"header.arrays.row_start: {len(rs) - 1} maps, the model packs {seen}")
    return model


def _offsets(c: _Container, name: str, starts: np.ndarray, total: int) -> None:
    """``starts`` begins at 0, never decreases and ends at ``total``."""
    at = f"header.arrays.{name}"
    if starts.ndim != 1 or len(starts) < 1:
        c.fail(f"{at}: expected at least one offset")
    if int(starts[0]) != 0 or int(starts[-1]) != total:
        c.fail(f"{at}: must run from 0 to {total}, runs from {starts[0]} to {starts[-1]}")
    if len(starts) > 1 and (np.diff(starts.astype(np.int64)) < 0).any():
        i = int(np.argmax(np.diff(starts.astype(np.int64)) < 0))
        c.fail(f"{at}[{i + 1}]: offsets must not decrease")


DATASET_FIELDS = ("format", "task", "C", "meta", "arrays")


@_no_cycle_collection()
def read_dataset(path: str | os.PathLike):
    """The dataset a container holds, with the checks of
    :func:`exactmem.datasets.dataset.parse_dataset`
    done on whole arrays."""
    from gmpy2 import mpq

    from exactmem.datasets.dataset import FORMAT, TASKS, Dataset

    c = _Container(path, "dataset")
    try:
        h = c.header
        unknown = sorted(set(h) - set(DATASET_FIELDS))
        if unknown:
            c.fail(f"header: unknown field {unknown[0]!r} (fields: {', '.join(DATASET_FIELDS)})")
        if h.get("format") != FORMAT:
            c.fail(f"header.format is {h.get('format')!r:.60}, expected {FORMAT!r}")
        task = h.get("task")
        if task not in TASKS:
            c.fail(f"header.task is {task!r:.40}, expected one of {', '.join(TASKS)}")
        C = h.get("C")
        if isinstance(C, bool) or not isinstance(C, int) or C < 1:
            c.fail(f"header.C must be a positive integer, got {C!r:.40}")
        meta = h.get("meta", {})
        if not isinstance(meta, dict):
            c.fail("header.meta must be an object")
        tokens = task != "points"
        c.names({"numerator", "denominator", "labels"} | ({"sequences"} if tokens else set()))
        rows = "vocab" if tokens else "points"
        for name in ("numerator", "denominator", *(("sequences",) if tokens else ())):
            c.rank(name, 2, "(N, n)" if name == "sequences" else "(rows, d)")
        c.rank("labels", 2 if task == "seq2seq" else 1, "(N, n)" if task == "seq2seq" else "(N)")
        shape = c.shape("numerator")
        if len(shape) != 2 or shape != c.shape("denominator") or 0 in shape:
            c.fail(
                "header.arrays: numerator and denominator must share a non-empty shape (rows, d)"
            )
        num_read, den_read = c.ints("numerator"), c.ints("denominator")
        num, den = _ints_list(num_read), _ints_list(den_read)
        if min(den) < 1:
            i = next(i for i, q in enumerate(den) if q < 1)
            c.fail(f"{rows}[{i // shape[1]}][{i % shape[1]}]: denominator {den[i]} must be ≥ 1")
        flat = [mpq(p, q) for p, q in zip(num, den, strict=True)]
        d = shape[1]
        vectors = tuple(tuple(flat[i : i + d]) for i in range(0, len(flat), d))
        labels_raw = c.ints("labels")
        size = shape[0]
        sequences: Any = ()  # a TokenRows, read as the tuple of tuples a Dataset holds
        if tokens:
            seqs = c.ints("sequences")
            if not isinstance(seqs, np.ndarray) or seqs.ndim != 2 or 0 in seqs.shape:
                c.fail("header.arrays.sequences: expected a non-empty (N, n) fixed-width array")
            bad = (seqs < 0) | (seqs >= len(vectors))
            if bad.any():
                i, k = (int(x) for x in np.argwhere(bad)[0])
                c.fail(
                    f"sequences[{i}][{k}]: {int(seqs[i, k])} is not an index into vocab "
                    f"(0..{len(vectors) - 1})"
                )
            # one array, read as tuples (exactmem.datasets.token_rows): 2 bytes a token, not a tuple
            from exactmem.core.exact_arrays import index_type
            from exactmem.datasets.token_rows import TokenRows

            sequences = TokenRows(np.array(seqs, dtype=index_type(len(vectors))))
            size = len(sequences)
        labels = _labels(c, task, labels_raw, size, sequences, C)
        ds = Dataset(
            task=task,
            labels=labels,
            num_classes=C,
            points=() if tokens else vectors,
            vocab=vectors if tokens else (),
            sequences=sequences,
            meta=meta,
        )
        if tokens:  # the checks read these arrays again: keep copies (not the map's)
            _remember_arrays(ds, num_read, den_read)
        return ds
    finally:
        c.close()


def _remember_arrays(ds, num, den) -> None:
    """Keep the vocabulary's parts, when fixed-width and in lowest terms, beside ``ds``
    (:mod:`exactmem.datasets.vocab_arrays`)."""
    from exactmem.datasets import vocab_arrays as dataset_arrays

    vocab = None
    if isinstance(num, np.ndarray) and isinstance(den, np.ndarray):
        num, den = num.astype(np.int64), den.astype(np.int64)
        if (np.gcd(num, den) == 1).all():  # as the rationals are kept
            vocab = (num, den)
    # (the token rows need no copy here: they are the dataset's sequences,
    # exactmem.datasets.token_rows)
    dataset_arrays.remember(ds, vocab=vocab)


def _labels(c: _Container, task: str, raw, size: int, sequences: tuple, C: int) -> tuple:
    shape = c.shape("labels")
    want = [size, len(sequences[0])] if task == "seq2seq" else [size]
    if shape != want:
        c.fail(
            f"header.arrays.labels: shape {shape}, expected {want} (one label per "
            f"{'position' if task == 'seq2seq' else 'item'})"
        )
    values = raw if isinstance(raw, np.ndarray) else np.array(raw, dtype=object).reshape(shape)
    if values.size and (values < 1).any():
        where = np.argwhere(values < 1)[0].tolist()
        at = "".join(f"[{i}]" for i in where)
        c.fail(f"labels{at}: label {values[tuple(where)]} is outside 1..C (labels start at 1)")
    if values.size and (values > C).any():
        where = np.argwhere(values > C)[0].tolist()
        at = "".join(f"[{i}]" for i in where)
        c.fail(f"labels{at}: label {values[tuple(where)]} is outside 1..C with C = {C}")
    if task == "seq2seq":
        return tuple(map(tuple, values.tolist()))
    return tuple(values.tolist())
