"""Exact integer arrays: NumPy int64 where the values are proved to fit, Python ints otherwise.

The checks of a million-sequence certificate run on whole arrays. An array here holds exact
integers (numerators over a denominator kept beside it): ``int64`` when every value — and every
value an operation below can produce — is below 2⁶² in magnitude, an object array of Python
ints otherwise. Nothing relies on wrap-around: each operation bounds its result first and
falls back to Python integers.
"""

from __future__ import annotations

import math

import numpy as np
from gmpy2 import mpq

__all__ = [
    "LIMIT",
    "Gathered",
    "exact",
    "first_occurrences",
    "first_seen_ids",
    "index_type",
    "int_array",
    "plus",
    "multiset_ids",
    "ratio_equal",
    "rational_table",
    "times",
    "top",
]

LIMIT = 2**62  # |value| < LIMIT: int64, with room for one addition


class Gathered(np.lib.mixins.NDArrayOperatorsMixin):
    """An exact integer array kept as ``table[index]`` — a value per class and each row's
    class — and built on access: indexing gathers only what it selects, anything else (NumPy
    functions, operators, ``astype``) sees the whole array. A read-out of class-shared lanes
    alone (Lemma C.1's Stage III keys and labels, constant on a group) is stored so: one value
    per group instead of one per input."""

    def __init__(self, table: np.ndarray, index: np.ndarray):
        self.table, self.index = table, index

    @property
    def dtype(self):
        return self.table.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.index.shape

    ndim = 1

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, key):
        return self.table[self.index[key]]

    def __array__(self, dtype=None, copy=None):
        whole = self.table[self.index]
        return whole if dtype is None else whole.astype(dtype)

    def __iter__(self):
        return iter(np.asarray(self))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(np.asarray(x) if isinstance(x, Gathered) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def astype(self, dtype) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def ravel(self) -> np.ndarray:
        return np.asarray(self)

    def tolist(self) -> list:
        return np.asarray(self).tolist()


def top(a: np.ndarray) -> int:
    """max |a| as a Python int (0 for an empty array)."""
    if a.size == 0:
        return 0
    return max(abs(int(a.max())), abs(int(a.min())))


def exact(a: np.ndarray) -> np.ndarray:
    """``a`` as int64 when every value fits, else as an object array of Python ints."""
    a = np.asarray(a)
    if a.dtype == object:  # converted first, then bounded: quicker than comparing objects
        try:
            fixed = a.astype(np.int64)
        except OverflowError:
            return a
        return fixed if top(fixed) < LIMIT else a
    return a.astype(np.int64, copy=False)


def int_array(values) -> np.ndarray:
    """``exact(np.array(values, dtype=object))`` of a (nested) sequence of Python ints (labels):
    read straight into int64 when they fit, without an object per value first."""
    try:
        a = np.array(values, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return exact(np.array(values, dtype=object))
    return a if top(a) < LIMIT else exact(np.array(values, dtype=object))


def times(a: np.ndarray, k: int) -> np.ndarray:
    """a·k exactly."""
    if k == 1:
        return a
    if a.dtype != object and abs(k) < LIMIT and top(a) * abs(k) < LIMIT:  # k itself too
        return a * k
    return a.astype(object) * k


def plus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b exactly."""
    if a.dtype != object and b.dtype != object and top(a) + top(b) < LIMIT:
        return a + b
    return a.astype(object) + b.astype(object)


def ratio_equal(a: np.ndarray, da: int, b: np.ndarray, db: int) -> np.ndarray:
    """a/da == b/db elementwise, exactly (da, db > 0)."""
    return times(a, db) == times(b, da)


def index_type(size: int) -> np.dtype:
    """The narrowest signed integer type holding every index below ``size`` (arrays of
    indices kept for a whole verification: int16 for 1000 tokens, a quarter of int64)."""
    return np.min_scalar_type(-max(size, 1))


def _odd_weights(count: int) -> np.ndarray:
    """``count`` fixed odd 64-bit multipliers, splitmix64 of 1, 2, …: well mixed like random
    ones, without importing numpy.random (≈ 20 ms of a verification's start-up). Any odd
    weights give the same ids: they only spread the rows over hash groups."""
    return _splitmix(count) | np.uint64(1)


def _splitmix(count: int) -> np.ndarray:
    """splitmix64 of 1, 2, …, ``count``."""
    with np.errstate(over="ignore"):
        z = np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


UNIQUE_BLOCK = 1 << 20  # values a block scanned by unique_first


def unique_first(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True)`` of a 1-D integer array: the distinct values,
    increasing, and where each first occurs. Few small non-negative values among many (the
    1000 tokens of 1.6 · 10⁸ at N = 10⁷) come from a table of the values present and a scan of
    the first blocks until every one has been seen, without sorting the whole array (5 s and
    1.3 GB of indices at 10⁷)."""
    n = len(values)
    if n == 0 or values.dtype.kind not in "iu" or values.min() < 0:
        return np.unique(values, return_index=True)
    top = int(values.max())
    if top >= max(1 << 20, 4 * n):
        return np.unique(values, return_index=True)
    present = np.zeros(top + 1, bool)
    present[values] = True
    distinct = np.flatnonzero(present)
    first = np.full(top + 1, -1, np.int64)
    missing = len(distinct)
    for start in range(0, n, UNIQUE_BLOCK):
        seen, at = np.unique(values[start : start + UNIQUE_BLOCK], return_index=True)
        new = first[seen] < 0
        first[seen[new]] = at[new] + start
        missing -= int(np.count_nonzero(new))
        if not missing:
            break
    return distinct.astype(values.dtype), first[distinct]


HASH_BLOCK = 1 << 22  # values hashed at a time by first_seen_ids


def first_seen_ids(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ids of the rows of M (or of its entries, for a 1-D array) numbered in order of first
    appearance, and the index of each id's first row: equal rows ↔ equal ids.

    Rows of an integer matrix become one int64 key each: exactly (mixed radix) when the
    columns' ranges multiply below 2⁶³, else by a 64-bit hash (wrapping on purpose), every row
    then compared with its group's first row and a collision falling back to sorting the rows.
    Keys are grouped by one sort (:func:`_first_seen`)."""
    if M.ndim == 2 and M.dtype != object and len(M):
        packed = _packed_rows(M)
        if packed is not None:
            return _first_seen(packed)
        ids, firsts = _first_seen(_row_hash(M))
        if np.array_equal(M, M[firsts[ids]]):
            return ids, firsts
        _, first, inverse = np.unique(M, axis=0, return_index=True, return_inverse=True)
    elif M.ndim == 2:
        where: dict[tuple, int] = {}
        inverse = np.array([where.setdefault(tuple(r), len(where)) for r in M], np.int64)
        first = np.unique(inverse, return_index=True)[1]
    elif M.dtype != object:
        return _first_seen(M)
    else:
        _, first, inverse = np.unique(M, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse], first[order]


def first_occurrences(values: np.ndarray, *, inverse: bool = False):
    """``np.unique(values, return_index=True[, return_inverse=True])`` of an integer array: the
    distinct values in increasing order, the flat index of each one's first occurrence (and
    each entry's place among them). Small non-negative values (row or token indices) are
    counted in a table as long as their range, without sorting."""
    flat = np.asarray(values).reshape(-1)
    size = flat.size
    if size == 0 or flat.dtype.kind not in "iu" or flat.min() < 0 or flat.max() > 4 * size:
        return np.unique(flat, return_index=True, return_inverse=inverse)
    first = np.full(int(flat.max()) + 1, size, np.int64)
    np.minimum.at(first, flat, np.arange(size))
    present = first < size
    distinct = np.flatnonzero(present).astype(flat.dtype)
    if not inverse:
        return distinct, first[distinct]
    place = np.cumsum(present) - 1
    return distinct, first[distinct], place[flat]


def multiset_ids(
    rows: np.ndarray, *, keep: np.ndarray | None = None, sorted_rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`first_seen_ids` of the rows of a non-negative integer matrix read as multisets
    (of their entries v with ``keep[v]``, if given); ``sorted_rows``: the rows sorted, if the
    caller has them.

    Grouped first by an order-free hash — the wrapping sum of a random word per value — with
    no sort of the rows; every row grouped with an earlier one is then compared with it as a
    sorted row, and if any such pair differs (a collision) the sorted rows are grouped
    exactly."""

    def canonical(at: np.ndarray) -> np.ndarray:
        if keep is None:
            return sorted_rows[at] if sorted_rows is not None else np.sort(rows[at], axis=1)
        r = rows[at]
        return np.sort(np.where(keep[r], r, -1), axis=1)

    everything = np.arange(len(rows))
    if rows.ndim != 2 or not len(rows) or rows.dtype.kind not in "iu" or rows.min(initial=0) < 0:
        return first_seen_ids(canonical(everything)) if len(rows) else first_seen_ids(rows)
    words = value_words(int(rows.max(initial=0)) + 1)
    if keep is not None:
        words[~keep[: len(words)]] = 0
    ids, firsts = first_seen_ids(words[rows].sum(axis=1, dtype=np.uint64))
    later = np.flatnonzero(firsts[ids] != everything)
    if later.size and not np.array_equal(canonical(later), canonical(firsts[ids[later]])):
        return first_seen_ids(canonical(everything))
    return ids, firsts


def value_words(size: int) -> np.ndarray:
    """A well-mixed 64-bit word per value below ``size`` (splitmix64, as :func:`_odd_weights`,
    without numpy.random's import): :func:`multiset_ids`' hash, whose groups are compared
    exactly afterwards, so any words give the same ids."""
    return _splitmix(size)


def _packed_rows(M: np.ndarray) -> np.ndarray | None:
    """Each row of the integer matrix M as one int64, Σ (M[:, k] − min_k)·stride_k, when the
    product of the columns' ranges stays below 2⁶³ (then equal keys ↔ equal rows); else None."""
    if M.dtype.kind not in "biu":
        return None
    lows, highs = M.min(axis=0).tolist(), M.max(axis=0).tolist()
    if not highs:  # rows of no columns: all equal
        return np.zeros(len(M), np.int64)
    if max(highs) >= 2**63:  # uint64 beyond int64
        return None
    strides, span = [], 1
    for lo, hi in zip(lows, highs, strict=True):
        strides.append(span)
        span *= hi - lo + 1
        if span >= 2**63:
            return None
    shifted = M.astype(np.int64) - np.array(lows, np.int64)
    return shifted @ np.array(strides, np.int64)


def _row_hash(M: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of the integer matrix M (equal rows, equal hashes), a block of
    rows at a time: the (N, n) uint64 temporaries cost 1.3 GB each at N = 10⁷, n = 16."""
    weights = _odd_weights(M.shape[1])
    h = np.empty(len(M), np.uint64)
    step = max(1, HASH_BLOCK // max(1, M.shape[1]))
    with np.errstate(over="ignore"):
        for start in range(0, len(M), step):
            z = M[start : start + step].astype(np.uint64) * weights  # per column, then mixed
            z ^= z >> np.uint64(29)  # (xor-shift-multiply)
            z *= np.uint64(0xBF58476D1CE4E5B9)
            z ^= z >> np.uint64(32)
            h[start : start + step] = z.sum(axis=1)
    return h


def _first_seen(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`first_seen_ids` of a 1-D array of numbers: one sort groups equal keys, a group's
    first index is the least of its indices, and the groups are numbered in the order of those
    first indices by marking them (no second sort)."""
    size = len(keys)
    if size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(keys)
    ordered = keys[order]
    new = np.empty(size, bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    first = np.minimum.reduceat(order, np.flatnonzero(new))  # per group, in key order
    group = np.empty(size, np.int64)
    group[order] = np.cumsum(new) - 1
    seen = np.zeros(size, bool)
    seen[first] = True
    rank = (np.cumsum(seen) - 1)[first]  # group → its place in order of first appearance
    firsts = np.empty(len(first), np.int64)
    firsts[rank] = first
    return rank[group], firsts


def rational_table(
    values: dict[int, int | mpq], size: int = 0, width: int = 1
) -> tuple[np.ndarray, int]:
    """Numerators over one common denominator of values indexed by small non-negative ints
    (tokens), 0 where absent, for every index below ``size`` too; returns (numerators,
    denominator). int64 only when ``width`` entries summed stay below 2⁶² (rows of
    ``width`` tokens are summed through it)."""
    den = math.lcm(1, *(int(mpq(v).denominator) for v in values.values()))
    tab = np.zeros(max(max(values, default=-1) + 1, size), object)
    for t, v in values.items():
        tab[t] = int(mpq(v) * den)
    tab = exact(tab)
    if tab.dtype != object and top(tab) * max(width, 1) >= LIMIT:
        tab = tab.astype(object)
    return tab, den
