"""The lanes of a layer as the engine keeps them, and the row functionals they are read by."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from exactmem.evaluate.fast.digits import _int_of


@dataclass
class _Lane:
    """One coordinate of the current layer: a row slot (int64 per row) or a shared slot
    (multi-limb integer per class)."""

    shared: bool
    slot: int
    bound: int  # max |value| over all rows (exact)
    nonneg: bool
    zeros: int  # rows where the value is 0
    pos: int | np.ndarray | None  # least positive value (limbs until first needed)

    @property
    def min_pos(self) -> int | None:
        if isinstance(self.pos, np.ndarray):
            self.pos = _int_of(self.pos)
        return self.pos


@dataclass
class _Step:
    """A step lane kept as its sorted form: 1 on the rows ``perm[p:]``, 0 on the others."""

    perm: np.ndarray
    p: int

    def rows(self) -> np.ndarray:
        values = np.zeros(len(self.perm), np.int8)
        values[self.perm[self.p :]] = 1
        return values


class _Fallback(Exception):
    """The fast path cannot prove int64 safety for a row functional: use the reference."""


def _obj(a: np.ndarray) -> np.ndarray:
    """int64 → object array of Python ints."""
    return a.astype(object)


def _normal(terms) -> tuple:
    """A row functional up to a non-zero factor: lanes in order, coprime coefficients, the
    first positive."""
    terms = sorted(terms)
    lam = math.gcd(*[w for _, w in terms]) * (1 if terms[0][1] > 0 else -1)
    return tuple((c, w // lam) for c, w in terms)


def _key(terms, lanes: list[_Lane]) -> tuple:
    """A row functional by the slots it reads (lanes of one layer)."""
    return tuple(sorted((lanes[c].slot, lanes[c].shared, w) for c, w in terms))


_EMPTY_TABLE = np.zeros((0, 1), np.int64)


def _encode(functionals, lanes: list[_Lane], table_of: dict[int, int]):
    """Flatten unit terms for the row kernels: row slot (kind 0) or table row (kind 1)."""
    ptr = [0]
    src, kind, coef = [], [], []
    for terms in functionals:
        for c, w in terms:
            lane = lanes[c]
            if lane.shared:
                src.append(table_of.setdefault(c, len(table_of)))
                kind.append(1)
            else:
                src.append(lane.slot)
                kind.append(0)
            coef.append(w)
        ptr.append(len(src))
    return (
        np.array(ptr, np.int64),
        np.array(src, np.int64),
        np.array(kind, np.int64),
        np.array(coef, np.int64),
    )
