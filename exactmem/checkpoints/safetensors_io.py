"""Reading safetensors checkpoints as exact dyadic rationals, without PyTorch and without pickle.

A safetensors file is an 8-byte little-endian header length ``N``, ``N`` bytes of JSON (each
tensor's ``dtype``, ``shape`` and ``data_offsets`` ``[begin, end)`` into the byte buffer that
follows, plus an optional ``__metadata__`` object of strings), then the raw little-endian
tensor bytes. The header is parsed as hostile data: strict JSON within the limits of
:mod:`exactmem.core.limits`, exactly these fields, offsets inside the buffer, tensors neither
overlapping nor leaving gaps, byte lengths equal to shape × item size, no empty tensor (a
zero dimension would make the others sizes the file never pays for). The file must be a
regular file (:func:`exactmem.core.limits.open_regular`).

IEEE binary floats are dyadic rationals. A finite value with sign s, biased exponent e and
fraction f of a format with ``p`` fraction bits and bias ``b`` is

* ``(−1)^s · (2^p + f) · 2^(e − b − p)`` when e ≠ 0 (normal),
* ``(−1)^s · f · 2^(1 − b − p)`` when e = 0 (subnormal and ±0),

and the all-ones exponent is ±inf (f = 0) or NaN: refused, naming the tensor and the flat index
of the first such entry. The decoding works on the bits (:func:`numpy.ndarray.view` as unsigned
integers), never on a float conversion.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gmpy2 import mpq

from exactmem.core import limits
from exactmem.core.errors import InputError
from exactmem.core.json_input import parse_json

__all__ = [
    "DTYPES",
    "HEADER_BYTES",
    "DyadicTensor",
    "FloatFormat",
    "decode",
    "read_safetensors",
]

HEADER_BYTES = 100 << 20  # the reference implementation's own cap on the JSON header


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-style binary format: ``fraction`` bits, ``exponent`` bits, little-endian words
    of ``bits`` bits (bfloat16 is binary32 with the low 16 fraction bits dropped)."""

    name: str
    bits: int
    exponent: int
    fraction: int

    @property
    def bias(self) -> int:
        return (1 << (self.exponent - 1)) - 1

    @property
    def word(self) -> str:
        return f"<u{self.bits // 8}"


DTYPES = {
    "F64": FloatFormat("float64", 64, 11, 52),
    "F32": FloatFormat("float32", 32, 8, 23),
    "F16": FloatFormat("float16", 16, 5, 10),
    "BF16": FloatFormat("bfloat16", 16, 8, 7),
}


@dataclass(frozen=True)
class DyadicTensor:
    """A tensor of exact values ``mantissa[i] · 2^exponent[i]`` (flat, row-major), decoded from
    ``dtype``. ``mantissa`` is a signed int64 array (|m| < 2^54), ``exponent`` an int64 array;
    ±0 has mantissa 0."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    mantissa: np.ndarray
    exponent: np.ndarray

    @property
    def size(self) -> int:
        return int(self.mantissa.size)

    def value(self, index: int) -> mpq:
        m, e = int(self.mantissa[index]), int(self.exponent[index])
        return mpq(m << e) if e >= 0 else mpq(m, 1 << -e)

    def values(self) -> Iterator[mpq]:
        for i in range(self.size):
            yield self.value(i)

    def as_float64(self) -> np.ndarray:
        """The values rounded to float64 (exact for float32, float16 and bfloat16) — for the
        float evaluation printed beside a certificate, never for a verdict."""
        return np.ldexp(self.mantissa.astype(np.float64), self.exponent).reshape(self.shape)


def decode(words: np.ndarray, fmt: FloatFormat, name: str = "tensor") -> tuple[np.ndarray, ...]:
    """(mantissa, exponent) of each word, exactly (see the module docstring); NaN and ±inf are
    an :class:`InputError` naming ``name`` and the flat index."""
    w = words.astype(np.uint64, copy=False).ravel()
    p, b = fmt.fraction, fmt.bias
    top = (1 << fmt.exponent) - 1
    sign = (w >> np.uint64(fmt.bits - 1)).astype(bool)
    biased = ((w >> np.uint64(p)) & np.uint64(top)).astype(np.int64)
    frac = (w & np.uint64((1 << p) - 1)).astype(np.int64)
    special = np.flatnonzero(biased == top)
    if special.size:
        i = int(special[0])
        what = "NaN" if frac[i] else ("-inf" if sign[i] else "+inf")
        raise InputError(
            f"tensor {name!r}: entry {i} (flat index) is {what}; only finite weights have an "
            f"exact value ({special.size} such entries)"
        )
    normal = biased != 0
    mantissa = np.where(normal, frac | (1 << p), frac)
    exponent = np.where(normal, biased, 1) - (b + p)
    mantissa = np.where(sign, -mantissa, mantissa)
    return mantissa, exponent


def _header(raw: bytes, where: str, total: int) -> tuple[dict, int]:
    if total < 8:
        raise InputError(f"{where}: {total} bytes, too short for a safetensors header length")
    (n,) = struct.unpack("<Q", raw[:8])
    cap = min(HEADER_BYTES, limits.current().max_bytes)
    if n > cap:
        raise InputError(f"{where}: header length {n} exceeds the limit of {cap} bytes")
    if 8 + n > total:
        raise InputError(f"{where}: header length {n} runs past the end of the file ({total})")
    text = raw[8 : 8 + n]
    if not text.startswith(b"{"):
        raise InputError(f"{where}: the header is not a JSON object")
    header = parse_json(bytes(text).rstrip(b" "), f"{where}: header")
    if not isinstance(header, dict):
        raise InputError(f"{where}: the header is not a JSON object")
    return header, 8 + n


def _entry(name: str, spec: object, where: str) -> tuple[str, tuple[int, ...], int, int]:
    at = f"{where}: tensor {name!r}"
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data_offsets"}:
        raise InputError(f"{at}: expected exactly the fields dtype, shape, data_offsets")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise InputError(
            f"{at}: dtype {str(dtype)[:20]!r} is not a binary float with an exact reading "
            f"({', '.join(DTYPES)})"
        )
    if not isinstance(shape, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape
    ):
        raise InputError(f"{at}: shape must be a list of non-negative integers")
    if 0 in shape:
        # [0, 10¹²] holds no byte, yet its other dimensions are sizes a reader would build
        # (lanes, rows) before it met the emptiness: no architecture has an empty tensor
        raise InputError(f"{at}: shape {shape} is empty (every tensor needs at least one entry)")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
        and offsets[0] <= offsets[1]
    ):
        raise InputError(f"{at}: data_offsets must be [begin, end] with 0 ≤ begin ≤ end")
    return dtype, tuple(shape), offsets[0], offsets[1]


def read_safetensors(path: str | os.PathLike) -> tuple[dict[str, DyadicTensor], dict[str, str]]:
    """Every tensor of a safetensors file, decoded exactly, and the file's ``__metadata__``
    (strings; labels only). Every failure is an :class:`InputError` naming the file and the
    tensor."""
    path = Path(path)
    where = f"checkpoint {path}"
    with limits.open_regular(path, where) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size > limits.current().max_bytes:
                raise InputError(f"{where}: {size} bytes, more than the limit (--max-bytes)")
            raw = f.read(size + 1)
        except OSError as exc:
            raise InputError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(raw) != size:
        raise InputError(f"{where}: the file changed size while it was read")
    header, start = _header(raw, where, len(raw))
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
    ):
        raise InputError(f"{where}: __metadata__ must be an object of strings")
    buffer = memoryview(raw)[start:]
    spans = []
    entries = {}
    for name, spec in header.items():
        dtype, shape, begin, end = _entry(name, spec, where)
        fmt = DTYPES[dtype]
        count = 1
        for s in shape:
            count *= s
        if count * fmt.bits // 8 != end - begin:
            raise InputError(
                f"{where}: tensor {name!r}: shape {list(shape)} of {dtype} needs "
                f"{count * fmt.bits // 8} bytes, data_offsets give {end - begin}"
            )
        if end > len(buffer):
            raise InputError(
                f"{where}: tensor {name!r}: data_offsets end at {end}, past the "
                f"{len(buffer)} bytes of data"
            )
        spans.append((begin, end, name))
        entries[name] = (fmt, dtype, shape, begin, end)
    spans.sort()
    at = 0
    for begin, end, name in spans:
        if begin != at:
            what = "overlaps the tensor before it" if begin < at else "leaves a gap before it"
            raise InputError(f"{where}: tensor {name!r}: data_offsets start at {begin}, {what}")
        at = end
    if at != len(buffer):
        raise InputError(f"{where}: {len(buffer) - at} bytes after the last tensor's data")
    tensors = {}
    for name, (fmt, dtype, shape, begin, end) in entries.items():
        words = np.frombuffer(buffer[begin:end], dtype=fmt.word)
        try:
            mantissa, exponent = decode(words, fmt, name)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        tensors[name] = DyadicTensor(name, dtype, shape, mantissa, exponent)
    return tensors, dict(meta)
