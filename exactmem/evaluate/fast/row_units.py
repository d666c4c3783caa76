"""Row units: affine units over int64 rows, proved below 2^62, in the row kernels — with the
probes and the step fold computed in the same pass, and units only a probe reads kept as
recipes (made when something reads their rows)."""

from __future__ import annotations

import numpy as np

from exactmem.core.model import Affine
from exactmem.evaluate.fast import limits
from exactmem.evaluate.fast.lanes import _EMPTY_TABLE, _encode, _key, _Lane, _normal
from exactmem.evaluate.fast.limits import LIMIT, _chunks


class _RowUnits:
    """Row units of a layer (a mixin of the engine)."""

    def _linear(self, *args) -> None:
        if self.n >= limits.PARALLEL_ROWS:
            self.k.linear_rows_parallel(*args)
        else:
            self.k.linear_rows(*args)

    def _fusable(self, a, relu, probes, plans, bounds, row_units):
        """The probes computed inside the row kernel, and the kernel's probe arrays: those that
        read only row units of this layer, with partial sums proved below 2⁶² (each unit's
        bound from the layer's own proof), when the lanes stay integers (no gcd reduction
        follows: the denominator is 1)."""
        where = {u: j for j, u in enumerate(row_units)}
        fused, ptr, unit, coef = [], [0], [], []
        if relu and self.n and self.den == 1 and a.denominator == 1:
            for i, terms in enumerate(probes):
                if not terms or any(c not in where for c, _ in terms):
                    continue
                if sum(abs(w) * bounds[c] for c, w in terms) >= LIMIT:
                    continue
                fused.append(i)
                unit += [where[c] for c, _ in terms]
                coef += [w for _, w in terms]
                ptr.append(len(unit))
        pout = np.empty((len(fused), self.n), np.int8)
        flags = np.zeros(len(fused), np.int64)
        return fused, (*(np.array(v, np.int64) for v in (ptr, unit, coef)), pout, flags)

    def _elidable(self, a: Affine, nxt: Affine | None, plans, row_units, fused) -> set[int]:
        """Row units of this layer not worth storing: read by this layer's fused probes, and in
        the next layer only through the one row functional its mixed units refine on, which
        is such a probe (:meth:`_refine` then reads the probe). A guess from the structure —
        if the next layer reads them otherwise after all, their rows are made then."""
        if nxt is None or not fused:
            return set()
        lanes = self.lanes
        units = {c for terms in fused for c, _ in terms}
        units = {
            u for u in units if u in row_units and not any(lanes[c].shared for c, _ in a.rows[u])
        }
        shared = {
            u
            for u, (how, extra) in enumerate(plans)
            if how in ("shared", "mixed") or (how == "alias" and lanes[extra].shared)
        }
        functionals = set()
        for row in nxt.rows:
            rterms = [(c, w) for c, w in row if c not in shared]
            if any(c in units for c, _ in row) and len(rterms) == len(row):
                return set()  # a row unit or an alias of the next layer reads it
            if rterms and len(rterms) < len(row):
                functionals.add(_normal(rterms))
        if len(functionals) != 1 or not functionals <= {_normal(t) for t in fused}:
            return set()
        return units

    def _fold_args(self, fused: list[int], folds):
        """Kernel arguments folding the first fused probe that a fold claims (StepFold), or
        folding nothing; and (probe index, fold, j) for :meth:`take_probe`'s caller."""
        for q, i in enumerate(fused):
            if i < len(folds) and folds[i] is not None:
                fold, name = folds[i]
                j = fold.begin(name, self.n)
                arr = np.array([q, j, 1, 0], np.int64)  # fused probes are over denominator 1
                return arr, (fold.ones, fold.flags, fold.ramp, fold.rise), (i, fold, j)
        fold, *state = _no_fold()
        return fold, tuple(state), None

    def _make_read_rows(self, a: Affine, plans, mixed: dict) -> None:
        """Make the rows of every unstored unit this layer reads other than through a probe
        the refinement already has."""
        lanes = self.lanes
        if not self._recipes:
            return
        read: set[int] = set()
        for u, (how, extra) in enumerate(plans):
            if how == "alias":
                read.add(extra)
            elif how == "row":
                read.update(c for c, _ in a.rows[u])
        if mixed and not (len(mixed) == 1 and _key(next(iter(mixed)), lanes) in self._probed):
            read.update(c for g in mixed for c, _ in g)
        for c in sorted(read):
            self._rows_of(c)

    def _rows_of(self, c: int) -> None:
        """Compute and store the rows of lane ``c`` if it is an unstored unit (its recipe)."""
        lane = self.lanes[c]
        if lane.shared or lane.slot >= 0:
            return
        slots_, coefs, bias, relu = self._recipes[lane.slot]
        k = len(slots_)
        slot = self._alloc()
        ptr = np.array([0, k], np.int64)
        args = (
            self.R,
            self._cls,  # read by table terms only: a recipe has none
            _EMPTY_TABLE,
            np.array([slot], np.int64),
            ptr,
            np.array(slots_, np.int64),
            np.zeros(k, np.int64),
            np.array(coefs, np.int64),
            np.array([bias], np.int64),
            relu,
            np.zeros((1, 5), np.int64),
            *_no_probes(self.n),
            *_no_fold(),
        )
        chunks = _chunks(self.n, limits.PARALLEL_ROWS // 2)
        if chunks == 1:
            self.k._relu_rows(*args, 0, self.n)
        else:
            self.k.relu_units(*args, chunks)
        lane.slot = slot

    def _row_units(self, rows: list, biases: list[int], lanes: list) -> tuple:
        """σ of row units over ``lanes`` (their inputs stored; shared ones read as int64 per
        class), as the per-layer path's row units: their lanes, the pre-activations at 0, and
        the least non-zero |pre-activation| (None: none); None (nothing done) unless every
        weight and a bound on every unit's values are below 2^62, as the per-layer path's row
        units are."""
        for row, b in zip(rows, biases, strict=True):
            bound = abs(b) + sum(abs(w) * lanes[c].bound for c, w in row)
            if bound >= LIMIT or any(abs(w) >= LIMIT for _, w in row):
                return None
        table_of: dict[int, int] = {}
        ptr, src, kind, coef = _encode(rows, lanes, table_of)
        table = self._tables(table_of, lanes)
        slots = np.array([self._alloc() for _ in rows], np.int64)
        stats = np.zeros((len(rows), 5), np.int64)
        bias = np.array(biases, np.int64)
        args = (self.R, self.cls, table, slots, ptr, src, kind, coef, bias, True, stats)
        args = (*args, *_no_probes(self.n), *_no_fold())
        chunks = _chunks(self.n, limits.PARALLEL_ROWS // 2)
        if chunks == 1:
            self.k._relu_rows(*args, 0, self.n)
        else:
            self.k.relu_units(*args, chunks)
        out, zeros, best = [], 0, None
        for j, (z, neg, mabs, mpos, mx) in enumerate(stats.tolist()):
            zeros += z
            if mabs < LIMIT:
                best = mabs if best is None else min(best, mabs)
            least = mpos if mpos < LIMIT else None
            out.append(_Lane(False, int(slots[j]), mx, True, z + neg, least))
        return out, zeros, best


_NONE32 = np.zeros(0, np.int32)
_NO_FOLD = (
    np.array([-1, 0, 1, 0], np.int64),
    np.zeros(0, np.int16),
    np.zeros(0, np.uint8),
    _NONE32,
    _NONE32,
)


def _no_fold() -> tuple:
    """The row kernel's fold arguments when it folds nothing (the first is written to)."""
    return (_NO_FOLD[0].copy(), *_NO_FOLD[1:])


def _no_probes(n: int) -> tuple:
    """The row kernel's probe arguments when it computes no probe."""
    e = np.zeros(0, np.int64)
    return np.zeros(1, np.int64), e, e, np.empty((0, n), np.int8), e
