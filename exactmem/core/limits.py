"""Size limits on everything read from a file, each with a clear error and a flag to raise it.

Files are hostile: a few bytes must not hang the tool or exhaust memory. The limits bound the
work per number and per file, never the size of an honest instance: the defaults admit the
N = 10⁷ next-token dataset (667 MB of JSON) and models whose weights have hundreds of
thousands of bits.

* ``max_digits``: decimal or hex digits of one number (a JSON integer, a string such as
  ``"1/3"`` or ``"0.25"``, a hex weight). Python converts decimal text in quadratic time, so a
  10⁷-digit integer would take minutes; hex and GMP conversions are fast, the cap still bounds
  the memory per number.
* ``max_exponent``: |e| of a decimal exponent (``"1e100000000"`` is 10¹⁰⁰⁰⁰⁰⁰⁰⁰ exactly).
* ``max_depth``: nesting depth of JSON arrays and objects (a million ``[`` would exhaust the
  parser's recursion).
* ``max_bytes``: bytes of a file, and of its content after gzip decompression.
* ``max_value_bits``: bits of any number an exact evaluation may produce. The weights' digit
  cap bounds each weight, not what weights compound to across layers (880 layers of 140-digit
  weights in a 1 KB file make a 490 000-bit output); before evaluating, the evaluator bounds
  every numerator from the inputs' and the weights' sizes, the widths and the depth
  (:mod:`exactmem.evaluate.value_bits`) and refuses a model whose values could exceed this.
* ``max_gzip_ratio``: decompressed size over compressed size of a ``.gz`` file, above a floor
  of :data:`GZIP_FLOOR` bytes. Text JSON compresses 3–10×; a gzip bomb reaches about 1000×
  (949 KB → 1 GB) and is refused after decompressing at most ratio × its size.

Inputs are regular files (:func:`open_regular`): a character device such as ``/dev/zero`` or
a FIFO has no size to check before reading, and opening a FIFO would wait for a writer.

Sizes a file declares (an array's shape, a claim's N and d) are checked before anything of
that size is made: :func:`generated_size_problem` is the budget of the datasets ``generate``
and claim files ask the random generators for.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path

from exactmem.core.errors import InputError

__all__ = [
    "DEFAULT",
    "GZIP_FLOOR",
    "MAX_GENERATED_COORDINATES",
    "MAX_GENERATED_TOKENS",
    "Limits",
    "add_limit_arguments",
    "current",
    "generated_size_problem",
    "json_depth",
    "limits_from_args",
    "open_regular",
    "read_limited",
    "use",
]

GiB = 1 << 30
GZIP_FLOOR = 16 << 20  # a small .gz may expand to this much whatever its ratio


@dataclass(frozen=True)
class Limits:
    """What one run of the tool accepts from files (see the module docstring)."""

    max_digits: int = 100_000
    max_exponent: int = 10_000
    max_depth: int = 100
    max_bytes: int = 4 * GiB
    max_gzip_ratio: int = 100
    max_value_bits: int = 1 << 20

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"limit {f.name} must be a positive integer, got {value!r}")


DEFAULT = Limits()
_current = DEFAULT


def current() -> Limits:
    """The limits in force (the defaults unless a command set others)."""
    return _current


def set_limits(limits: Limits) -> None:
    global _current
    _current = limits


@contextlib.contextmanager
def use(limits: Limits) -> Iterator[Limits]:
    """Put ``limits`` in force inside a ``with`` block."""
    old = _current
    set_limits(limits)
    try:
        yield limits
    finally:
        set_limits(old)


# --------------------------------------------------------------------------- reading


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def open_regular(path: str | os.PathLike, where: str):
    """``path`` opened for binary reading, if it is a regular file; anything else (a device
    such as ``/dev/zero``, a FIFO, a directory) is an :class:`InputError` naming ``where``.

    Opened without blocking, then checked on the open file (``fstat``, so the file checked is
    the file read): opening a FIFO would otherwise wait for a writer, and a device's size is 0
    whatever it yields. A stream is refused rather than read up to ``--max-bytes``: every
    reader checks a file's size before it reads, which a stream does not have."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(f"{where}: cannot read ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "this kind of file")
            why = (
                ""
                if stat.S_ISDIR(mode)
                else (" (a stream has no size to check before it is read: save it to a file)")
            )
            raise InputError(f"{where}: cannot read {kind}: not a regular file{why}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_limited(path: Path, what: str) -> bytes | bytearray:
    """The bytes of ``path``, decompressed when they are gzip, within ``max_bytes`` and
    ``max_gzip_ratio``; every failure is an :class:`InputError` naming the file."""
    lim = current()
    where = f"{what} file {path}"
    too_big = f"more than the limit of {lim.max_bytes} (--max-bytes)"
    with open_regular(path, where) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size > lim.max_bytes:
                raise InputError(f"{where}: {size} bytes, {too_big}")
            # a regular file that says 0 may still have content (/proc): read, capped
            raw = f.read(size + 1) if size else _read_capped(f, lim.max_bytes)
        except OSError as exc:
            raise InputError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > lim.max_bytes:
        raise InputError(f"{where}: {too_big}")
    if raw[:2] != b"\x1f\x8b":
        return raw
    by_ratio = max(lim.max_gzip_ratio * len(raw), GZIP_FLOOR)
    cap = min(lim.max_bytes, by_ratio)
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            data = _read_capped(stream, cap)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{where}: corrupt or truncated gzip data ({exc})") from None
    if len(data) > cap:
        flag = "--max-bytes" if cap == lim.max_bytes else "--max-gzip-ratio"
        raise InputError(
            f"{where}: the gzip data expands beyond {cap} bytes ({len(raw)} compressed; limits "
            f"{lim.max_bytes} bytes and {lim.max_gzip_ratio}× the compressed size, {flag})"
        )
    return data


def _read_capped(stream, cap: int) -> bytearray:
    """At most ``cap + 1`` bytes of ``stream``, read in pieces (``read(n)`` would reserve n
    bytes at once, and a stream of unknown length may be endless)."""
    data = bytearray()
    while len(data) <= cap:
        piece = stream.read(min(_CHUNK, cap + 1 - len(data)))
        if not piece:
            break
        data += piece
    return data


# what the random generators may be asked to hold (`generate`, claim files): every item is
# kept in memory, a coordinate as an exact rational (about 100 bytes), a token in an array.
# The N = 10⁷ benchmark (1.6·10⁸ tokens, 8 000 coordinates) fits ten times over; a 300-byte
# claim asking for 10⁸ points in Q^10⁴ (10¹² coordinates) does not.
MAX_GENERATED_TOKENS = 2 * 10**9
MAX_GENERATED_COORDINATES = 2 * 10**8


def generated_size_problem(*, tokens: int = 0, coordinates: int = 0) -> str | None:
    """Why a generated dataset of ``tokens`` token indices and ``coordinates`` rational
    coordinates is too large to make, or None. Checked before anything is generated."""
    for count, most, what in (
        (tokens, MAX_GENERATED_TOKENS, "token indices"),
        (coordinates, MAX_GENERATED_COORDINATES, "exact rational coordinates"),
    ):
        if count > most:
            return (
                f"{count} {what}, more than the {most} the random generators hold in "
                "memory (write larger datasets with your own tools, as .exm containers)"
            )
    return None


_CHUNK = 1 << 24
_CLASS = bytes(
    {ord("["): 1, ord("{"): 1, ord("]"): 2, ord("}"): 2, ord('"'): 3, ord("\\"): 4}.get(b, 0)
    for b in range(256)
)  # the kind of each byte: 1 opens, 2 closes, 3 quote, 4 backslash, 0 anything else


def _escaped(at, kinds, carry: int, size: int):
    """Which entries directly follow an odd run of backslashes (an escaped quote), and the
    length of the run of backslashes that ends the chunk. ``at``: positions of the bracket,
    quote and backslash bytes of a chunk; ``carry``: the run that ended the chunk before;
    ``size``: the chunk's length."""
    import numpy as np

    bs = kinds == 4
    follows = np.zeros(len(at), bool)  # the byte just before is a backslash of this chunk
    follows[1:] = (at[1:] - at[:-1] == 1) & bs[:-1]
    starts = np.where(bs & ~follows, at, -1)
    run_start = np.maximum.accumulate(starts) if len(at) else starts
    length = np.zeros(len(at), np.int64)
    prev = np.flatnonzero(follows)
    length[prev] = at[prev] - run_start[prev - 1]
    from_start = follows & (run_start[np.maximum(np.arange(len(at)) - 1, 0)] == 0)
    length[from_start] += carry  # the run began in the chunk before
    if len(at) and at[0] == 0 and not bs[0]:
        length[0] = carry
    tail = 0
    if len(at) and bs[-1] and at[-1] == size - 1:
        tail = int(at[-1] - run_start[-1] + 1) + (carry if run_start[-1] == 0 else 0)
    return (length % 2) == 1, tail


def json_depth(raw: bytes | bytearray, limit: int) -> int | None:
    """The byte offset where the nesting of JSON arrays and objects first exceeds ``limit``,
    or None. Brackets inside strings do not count (escaped quotes respected). Vectorised over
    chunks of 16 MB, so the parser never meets a document deeper than its recursion allows."""
    import numpy as np  # here: the command line imports this module for its flags

    table = np.frombuffer(_CLASS, np.int8)
    depth = 0
    in_string = 0
    carry = 0
    view = np.frombuffer(raw, np.uint8)
    for start in range(0, len(view), _CHUNK):
        chunk = view[start : start + _CHUNK]
        cls = table[chunk]
        at = np.flatnonzero(cls)
        kinds = cls[at]
        quote = kinds == 3
        if carry or (kinds == 4).any():
            escaped, carry_next = _escaped(at, kinds, carry, len(chunk))
            quote &= ~escaped
            carry = carry_next
        before = np.cumsum(quote) - quote  # real quotes before each entry
        outside = (before + in_string) % 2 == 0
        if len(at):
            in_string = int(before[-1] + quote[-1] + in_string) % 2
        bracket = outside & ((kinds == 1) | (kinds == 2))
        levels = depth + np.cumsum(np.where(kinds[bracket] == 1, 1, -1))
        over = np.flatnonzero(levels > limit)
        if over.size:
            return start + int(at[bracket][over[0]])
        if levels.size:
            depth = int(levels[-1])
    return None


# --------------------------------------------------------------------------- command line

_FLAGS = {
    "max_digits": "digits of one number, decimal or hex (default {})",
    "max_exponent": "largest |e| of a decimal exponent such as 1e-3 (default {})",
    "max_depth": "nesting depth of JSON arrays and objects (default {})",
    "max_bytes": "bytes of an input file, and of a .gz file once decompressed (default {})",
    "max_gzip_ratio": "a .gz file may expand to this many times its size, or 16 MiB if more "
    "(default {})",
    "max_value_bits": "bits of any number an exact evaluation may produce, bounded from the "
    "weights, widths and depth before evaluating (default {})",
}


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return int(text)


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--max-*`` flags of the commands that read files."""
    group = parser.add_argument_group(
        "input limits", "hostile or damaged files are refused (exit 2) beyond these"
    )
    for name, text in _FLAGS.items():
        group.add_argument(
            "--" + name.replace("_", "-"),
            type=_positive,
            default=getattr(DEFAULT, name),
            metavar="N",
            help=text.format(getattr(DEFAULT, name)),
        )


def limits_from_args(args: argparse.Namespace) -> Limits:
    """The limits the flags of :func:`add_limit_arguments` ask for (defaults where absent)."""
    return replace(DEFAULT, **{k: getattr(args, k) for k in _FLAGS if hasattr(args, k)})
