"""Classes of rows: the partition whose classes share every shared lane's value, split by the
exact values of the row functionals a big unit reads (:func:`~exactmem.evaluate.fast.row_kernel.
refine`) — the split is computed, never assumed."""

from __future__ import annotations

import numpy as np

from exactmem.evaluate.fast.lanes import _EMPTY_TABLE, _encode, _Fallback, _key, _Step


class _Classes:
    """The rows' classes and their refinement (a mixin of the engine)."""

    @property
    def cls(self) -> np.ndarray:
        """Each row's class. In key order the classes are runs of the sorted rows and this
        array is stale: reading it leaves key order first (:meth:`_leave_sorted`)."""
        self._leave_sorted()
        return self._cls

    @cls.setter
    def cls(self, value: np.ndarray) -> None:
        self._leave_sorted()
        self._cls = value

    def _refine(self, functionals: list[list[tuple[int, int]]]) -> np.ndarray:
        """Split classes by the exact values of row functionals; returns the value of each
        functional per (new) class."""
        known = (
            self._probed.get(_key(functionals[0], self.lanes)) if len(functionals) == 1 else None
        )
        if isinstance(known, _Step) and self._sorted is not None and self._sorted.lo is not None:
            return self._range_refine(known.p)
        if isinstance(known, _Step):
            known = known.rows()
        if known is not None:
            # a probe of the layer before read the same functional; copied into int64 scratch,
            # so the kernel has one compiled form whatever the probe's type
            sigs = self._buffer(1)
            sigs[0] = known
        else:
            ptr, src, kind, coef = _encode(functionals, self.lanes, {})
            sigs = self._buffer(len(functionals))
            self._linear(self.R, self.cls, _EMPTY_TABLE, ptr, src, kind, coef, sigs)
        parent, every, moved = self.k.refine(self.cls, sigs, self.nclass)
        self._split(parent, moved)
        return every

    def _split(self, parent: np.ndarray, moved: np.ndarray) -> None:
        """New classes (children of ``parent``, ``moved`` rows each) get their parents' shared
        values; the row counts follow."""
        if parent.size:
            self._classes = None  # the rows' classes change: a later read-out keeps its own
            total = self.nclass + int(parent.size)
            if total > max(64, self.n // 4):
                # classes near one per row: sharing no longer pays; the reference is faster
                raise _Fallback(f"{total} classes for {self.n} rows")
            self._reserve(total)
            live = {lane.slot for lane in self.lanes if lane.shared}
            for s in live | {self.views[v][0] for v in live if v in self.views}:
                block = self.store.block(s)
                block[self.nclass : total] = block[parent]
                self.CL[s, self.nclass : total] = self.CL[s, parent]
                self.V[s, self.nclass : total] = self.V[s, parent]
            self.nclass = total
            counts = np.concatenate([self.counts, moved])  # rows per class, without a pass
            np.subtract.at(counts, parent, moved)
            self.counts = counts

    def _range_refine(self, p: int) -> np.ndarray:
        """:meth:`_refine` on a step kept sorted (1 from sorted position p on): a class whose
        run [lo, hi) straddles p keeps [lo, p) and its child takes [p, hi). Returns the step's
        value per class."""
        srt = self._sorted
        split = np.flatnonzero((srt.lo < p) & (p < srt.hi))
        moved = srt.hi[split] - p
        self._split(split.astype(np.int64), moved.astype(np.int64))
        srt.lo = np.concatenate([srt.lo, np.full(len(split), p, np.int64)])
        srt.hi = np.concatenate([srt.hi, srt.hi[split]])
        srt.hi[split] = p
        return (srt.lo >= p).astype(np.int64)[:, None]
