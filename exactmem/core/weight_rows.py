"""An affine map's integer coefficients as one dense block that reads as the IR's rows.

:class:`exactmem.core.model.Affine` keeps row i as the tuple of its non-zero ``(column, integer)``
pairs. A trained checkpoint of 10⁸ weights as such pairs takes about 12 GB (a pair is a tuple
of two Python ints) and every pass over them — resources, the model hash, the float64 and ball
matrices — costs microseconds per weight in Python. :class:`BlockRows` keeps the coefficients as
a read-only float64 array ``block`` (``[len(rows_at), len(cols_at)]``) whose entries are
integers, placed at the increasing row indices ``rows_at`` and column indices ``cols_at`` of a
map with ``height`` rows; every other coefficient is 0. A float64 holds an integer *exactly*
when its value is one (a float32 weight p·2^e over the map's power-of-two denominator is the
integer p·2^(e+k), 24 significant bits): :meth:`BlockRows.__init__` refuses any entry that is
not a finite integer, so ``int(entry)`` is the coefficient, bit for bit.

``rows[i]`` is then the tuple of pairs it stands for (made on demand), equality and hashing are
those of the tuple of tuples, so every reader of ``Affine.rows`` is unchanged; the readers that
matter for size (:func:`exactmem.core.model.resources`,
:func:`exactmem.files.model_files.model_hash`, the float64
and Arb evaluators) take the block instead. Each of those shortcuts is tested against the tuple
path on random models over every IR feature (tests/test_weight_rows.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["BlockRows", "block_bits", "block_of", "rows_text"]


def _index(values, name: str) -> np.ndarray:
    at = np.array(values, dtype=np.int64).reshape(-1)  # a copy: the caller's stays theirs
    if at.size and (at[0] < 0 or (np.diff(at) <= 0).any()):
        raise ValueError(f"{name} must be non-negative and strictly increasing")
    at.setflags(write=False)
    return at


_MADE_READ_ONLY: dict[int, weakref.ref] = {}  # id → the array read_only() was given


def _frozen(a: np.ndarray) -> bool:
    """Whether nobody can write to ``a``'s numbers: it and every array it views are read-only,
    down to immutable bytes or to an array :func:`read_only` was given by the code that made
    it (a caller's own read-only array is not: its owner may make it writable again)."""
    base: object = a
    root = a
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        root, base = base, base.base
    made = _MADE_READ_ONLY.get(id(root))
    return isinstance(base, bytes) or (base is None and made is not None and made() is root)


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only in place, by the code that made it and holds it alone, and handed
    to :class:`BlockRows` without a copy."""
    a.setflags(write=False)
    key = id(a)
    _MADE_READ_ONLY[key] = weakref.ref(a, lambda _: _MADE_READ_ONLY.pop(key, None))
    return a


class BlockRows(Sequence):
    """Read-only rows of integer coefficients: ``block[p, q]`` at row ``rows_at[p]``, column
    ``cols_at[q]`` of a map with ``height`` rows (see the module docstring)."""

    __slots__ = ("block", "rows_at", "cols_at", "height")

    def __init__(self, block, rows_at, cols_at, height: int):
        block = np.asarray(block, dtype=np.float64)
        self.rows_at = _index(rows_at, "rows_at")
        self.cols_at = _index(cols_at, "cols_at")
        if block.shape != (self.rows_at.size, self.cols_at.size):
            raise ValueError(
                f"block of shape {block.shape} for {self.rows_at.size} rows and "
                f"{self.cols_at.size} columns"
            )
        if self.rows_at.size and self.rows_at[-1] >= height:
            raise ValueError(f"row {int(self.rows_at[-1])} of a map with {height} rows")
        # every entry an integer, exactly: the coefficient is int(entry), nothing rounded
        if block.size and not (np.isfinite(block).all() and (block == np.trunc(block)).all()):
            raise ValueError("a block's entries must be finite integers")
        if not _frozen(block):  # the caller may still write to it: the weights get a copy
            block = np.array(block, dtype=np.float64)
            block.setflags(write=False)  # shared by the maps cut from it: nobody may change it
        self.block = block
        self.height = int(height)

    def __len__(self) -> int:
        return self.height

    def __reduce__(self):  # a copy or an unpickled one is made (and made read-only) as this one
        return BlockRows, (self.block, self.rows_at, self.cols_at, self.height)

    def _row(self, p: int) -> tuple[tuple[int, int], ...]:
        r = self.block[p]
        nz = np.flatnonzero(r)
        return tuple(zip(self.cols_at[nz].tolist(), map(int, r[nz].tolist()), strict=True))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(self.height)))
        i = int(i)
        if i < 0:
            i += self.height
        if not 0 <= i < self.height:
            raise IndexError("row index out of range")
        p = int(np.searchsorted(self.rows_at, i))
        return self._row(p) if p < self.rows_at.size and self.rows_at[p] == i else ()

    def __iter__(self) -> Iterator[tuple[tuple[int, int], ...]]:
        p, placed = 0, self.rows_at.tolist()
        for i in range(self.height):
            if p < len(placed) and placed[p] == i:
                yield self._row(p)
                p += 1
            else:
                yield ()

    def __eq__(self, other) -> bool:
        if isinstance(other, BlockRows | tuple):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __add__(self, other):  # joined with tuples of rows: the tuples it stands for
        return tuple(self) + other if isinstance(other, tuple) else NotImplemented

    def __radd__(self, other):
        return other + tuple(self) if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"BlockRows({self.block.shape[0]} × {self.block.shape[1]} of {self.height} rows)"

    def nonzero(self) -> int:
        return int(np.count_nonzero(self.block))

    def max_column(self) -> int:
        return int(self.cols_at[-1]) if self.cols_at.size else -1

    def dense(self, in_dim: int) -> np.ndarray:
        """The ``[height, in_dim]`` coefficient matrix (float64, exact integers)."""
        out = np.zeros((self.height, in_dim))
        out[np.ix_(self.rows_at, self.cols_at)] = self.block
        return out


def block_of(rows: Sequence) -> BlockRows | None:
    """``rows`` (the IR's tuples of pairs) as a :class:`BlockRows`, or None when a coefficient
    is not exactly a float64 (more than 53 significant bits, or beyond 2^1023)."""
    count = len(rows)
    cols = sorted({j for row in rows for j, _ in row})
    placed = [i for i, row in enumerate(rows) if row]
    where = {j: q for q, j in enumerate(cols)}
    block = np.zeros((len(placed), len(cols)))
    for p, i in enumerate(placed):
        for j, c in rows[i]:
            try:
                value = float(c)
            except OverflowError:
                return None
            if int(value) != c:
                return None
            block[p, where[j]] = value
    return BlockRows(read_only(block), placed, cols, count)


# --------------------------------------------------------------------------- bits


def bit_length(v: np.ndarray) -> np.ndarray:
    """bitlen(|v|) of non-zero integer-valued floats, exactly: |v| = f·2^e, f ∈ [½, 1)."""
    return np.frexp(np.abs(v))[1].astype(np.int64)


def _trailing_zeros(v: np.ndarray) -> np.ndarray:
    """The number of trailing zero bits of non-zero integer-valued floats, exactly."""
    f, e = np.frexp(np.abs(v))
    m = np.ldexp(f, 53).astype(np.int64)  # the 53-bit significand, an exact integer
    low = m & -m
    return np.frexp(low.astype(np.float64))[1].astype(np.int64) - 1 + (e.astype(np.int64) - 53)


def block_bits(rows: BlockRows, denominator: int) -> tuple[int, int, int] | None:
    """(non-zero count, total bits, max bits) of the weights coefficient/``denominator``,
    each in lowest terms p/q counted as bitlen(|p|) + ⌈log₂ q⌉ + 1
    (:func:`exactmem.core.exact.parameter_bits`); None unless ``denominator`` is a power of two,
    where lowest terms are a shift: p = c/2^min(t, k), q = 2^(k − min(t, k)) for c = odd·2^t."""
    if denominator < 1 or denominator & (denominator - 1):
        return None
    k = denominator.bit_length() - 1
    count = total = top = 0
    step = max(1, (1 << 22) // max(1, rows.block.shape[1]))
    for lo in range(0, rows.block.shape[0], step):
        chunk = rows.block[lo : lo + step]
        v = chunk[chunk != 0]
        if not v.size:
            continue
        common = np.minimum(_trailing_zeros(v), k)  # the power of two p/q loses to 1/q
        bits = bit_length(v) - common + (k - common) + 1
        count += int(v.size)
        total += int(bits.sum())
        top = max(top, int(bits.max()))
    return count, total, top


# --------------------------------------------------------------------------- text

_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _hex_parts(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(leading hex value N, trailing zero digits z) with |v| = N·16^z, N < 2^62 an int64, for
    non-zero integer-valued floats: below 2^62 N = |v|; above, |v| = m·2^t with m the 53-bit
    significand and N = m·2^(t mod 4), z = ⌊t/4⌋."""
    a = np.abs(v)
    small = a < 2.0**62
    lead = np.zeros(a.shape, np.int64)
    zeros = np.zeros(a.shape, np.int64)
    lead[small] = a[small].astype(np.int64)  # an integer below 2^62: exact
    big = ~small
    if big.any():
        f, e = np.frexp(a[big])
        t = e.astype(np.int64) - 53
        lead[big] = np.ldexp(f, 53).astype(np.int64) << (t % 4)
        zeros[big] = t // 4
    return lead, zeros


def _hex_digits(lead: np.ndarray) -> np.ndarray:
    """The number of hex digits of positive int64s, by comparison (exact, no float)."""
    count = np.ones(lead.shape, np.int64)
    for k in range(1, 16):
        count += lead >= (1 << (4 * k))
    return count


def rows_text(rows: BlockRows) -> bytes:
    """The canonical JSON text of ``rows`` exactly as
    :func:`exactmem.files.model_files.canonical_hash` writes
    the IR's ``[[[column, "0x…"], …], …]`` (``json.dumps`` with no spaces), made from the
    block in NumPy."""
    parts: list[bytes] = [b"["]
    col_text = [f'[{j},"'.encode() for j in rows.cols_at.tolist()]
    width = max((len(c) for c in col_text), default=0)
    table = np.zeros((len(col_text), width), np.uint8)
    lengths = np.zeros(len(col_text), np.int64)
    for q, c in enumerate(col_text):
        table[q, : len(c)] = np.frombuffer(c, np.uint8)
        lengths[q] = len(c)
    step = max(1, (1 << 20) // max(1, rows.block.shape[1]))
    pending = 0  # rows written so far (a comma before every row but the first)
    p_rows = rows.rows_at.tolist()
    # empty rows before, between and after the placed ones are "[]"
    i = 0
    for lo in range(0, rows.block.shape[0], step):
        chunk = rows.block[lo : lo + step]
        texts = _chunk_text(chunk, table, lengths)
        for p, text in enumerate(texts, start=lo):
            row = p_rows[p]
            while i < row:
                parts.append(b",[]" if pending else b"[]")
                pending += 1
                i += 1
            parts.append(b",[" if pending else b"[")
            parts.append(text)
            parts.append(b"]")
            pending += 1
            i += 1
    while i < rows.height:
        parts.append(b",[]" if pending else b"[]")
        pending += 1
        i += 1
    parts.append(b"]")
    return b"".join(parts)


def _chunk_text(chunk: np.ndarray, table: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """Per row of ``chunk``: its entries ``[j,"0x…"]`` joined by commas, as bytes."""
    r_idx, q_idx = np.nonzero(chunk)
    v = chunk[r_idx, q_idx]
    n = v.size
    if n == 0:
        return [b""] * chunk.shape[0]
    lead, zeros = _hex_parts(v)
    ndig = _hex_digits(lead)
    neg = (v < 0).astype(np.int64)
    col_len = lengths[q_idx]
    # entry: [j," + '-' + '0x' + digits + zeros + "] + ',' (the comma dropped at a row's end)
    size = col_len + neg + 2 + ndig + zeros + 2 + 1
    last = np.ones(n, bool)
    last[:-1] = r_idx[1:] != r_idx[:-1]
    size = size - last
    start = np.zeros(n, np.int64)
    np.cumsum(size[:-1], out=start[1:])
    out = np.empty(int(start[-1] + size[-1]), np.uint8)
    for k in range(table.shape[1]):
        m = k < col_len
        out[start[m] + k] = table[q_idx[m], k]
    at = start + col_len
    out[at[neg == 1]] = ord("-")
    at = at + neg
    out[at] = ord("0")
    out[at + 1] = ord("x")
    at = at + 2
    for k in range(int(ndig.max())):  # digit k from the left: (lead >> 4(ndig − 1 − k)) & 15
        m = k < ndig
        shift = 4 * (ndig[m] - 1 - k)
        out[at[m] + k] = _DIGITS[(lead[m] >> shift) & 15]
    at = at + ndig
    for k in range(int(zeros.max()) if zeros.size else 0):
        m = k < zeros
        out[at[m] + k] = ord("0")
    at = at + zeros
    out[at] = ord('"')
    out[at + 1] = ord("]")
    comma = ~last
    out[at[comma] + 2] = ord(",")
    # cut per row
    ends = np.flatnonzero(last)
    row_of = r_idx[ends]
    stop = start[ends] + size[ends]
    first = np.concatenate([[0], stop[:-1]])
    raw = out.tobytes()
    texts = [b""] * chunk.shape[0]
    for r, a, b in zip(row_of.tolist(), first.tolist(), stop.tolist(), strict=True):
        texts[r] = raw[a:b]
    return texts
