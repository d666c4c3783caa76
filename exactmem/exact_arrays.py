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
    "first_seen_ids",
    "index_type",
    "plus",
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
    if a.dtype == object:
        return a.astype(np.int64) if top(a) < LIMIT else a
    return a.astype(np.int64, copy=False)


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

    Rows of an int64 matrix are grouped by a 64-bit hash (wrapping on purpose) and every row is
    then compared with its group's first row; a collision falls back to sorting the rows."""
    if M.ndim == 2 and M.dtype != object and len(M):
        weights = np.random.default_rng(0).integers(1, 2**63, M.shape[1], np.uint64) * 2 + 1
        h = np.empty(len(M), np.uint64)
        step = max(1, HASH_BLOCK // M.shape[1])  # rows a block: (N, n) uint64 temporaries
        with np.errstate(over="ignore"):  # cost 1.3 GB each at N = 10⁷, n = 16
            for start in range(0, len(M), step):
                z = M[start : start + step].astype(np.uint64) * weights  # per column, then
                z ^= z >> np.uint64(29)  # mixed (xor-shift-multiply)
                z *= np.uint64(0xBF58476D1CE4E5B9)
                z ^= z >> np.uint64(32)
                h[start : start + step] = z.sum(axis=1)
        _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        if not np.array_equal(M, M[first[inverse]]):
            _, first, inverse = np.unique(M, axis=0, return_index=True, return_inverse=True)
    elif M.ndim == 2:
        where: dict[tuple, int] = {}
        inverse = np.array([where.setdefault(tuple(r), len(where)) for r in M], np.int64)
        first = np.unique(inverse, return_index=True)[1]
    else:
        _, first, inverse = np.unique(M, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse], first[order]


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
