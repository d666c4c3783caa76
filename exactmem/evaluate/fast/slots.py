"""Where the engine keeps values: row slots (int64 per row) and shared slots (limbs per class,
in a :class:`~exactmem.evaluate.fast.limb_store.LimbStore`), with the views and difference tags
that let a shared unit live on another's limbs."""

from __future__ import annotations

import numpy as np

from exactmem.evaluate.fast import kernels
from exactmem.evaluate.fast.digits import LIMB, _int_of, _limbs, _signed_limbs
from exactmem.evaluate.fast.lanes import _EMPTY_TABLE, _Lane
from exactmem.evaluate.fast.limits import SHORT


class _Slots:
    """Allocation and reading of row and shared slots (a mixin of the engine)."""

    def _alloc(self) -> int:
        if not self.free:
            grow = max(4, self.R.shape[0])
            self.free = list(range(self.R.shape[0] + grow - 1, self.R.shape[0] - 1, -1))
            self.R = np.concatenate([self.R, np.zeros((grow, self.n), np.int64)])
        return self.free.pop()

    def _width(self, limbs: int) -> int:
        """Limbs per class of a block for values of ``limbs`` limbs: short blocks have SHORT,
        long ones all have ``self.long`` (grown to the longest need, compacted when the values
        have shrunk to half): blocks of one kind are interchangeable, so a freed slot's block
        takes the next values without a new block."""
        if limbs <= SHORT:
            return SHORT
        if limbs > self.long:  # longer blocks from here on (Stage III: the classes are made):
            self.store.trim(self.nclass)  # room for the classes there are, not half as many again
            self.long = limbs
        return self.long

    def _halloc(self, limbs: int) -> int:
        """A free shared slot with a block for values of ``limbs`` limbs: preferably one whose
        block is already that long (no new block), else the one with the longest block."""
        limbs = self._width(limbs)
        if not self.hfree:
            slots, cap = self.CL.shape
            grow = max(4, slots)
            self.hfree = list(range(slots + grow - 1, slots - 1, -1))
            self.store.add_slots(grow)
            self.CL = np.concatenate([self.CL, np.zeros((grow, cap), np.int64)])
            self.V = np.concatenate([self.V, np.zeros((grow, cap), np.int8)])
            self.used = np.concatenate([self.used, np.zeros(grow, np.int64)])
        widths = self.store.width[self.hfree].tolist()
        fits = [(w, s) for w, s in zip(widths, self.hfree, strict=True) if w >= limbs]
        w, s = min(fits) if fits else max(zip(widths, self.hfree, strict=True))
        self.hfree.remove(s)
        if w < limbs:
            self.store.ensure(s, limbs, keep=False)
        return s

    def _reserve(self, classes: int) -> None:
        """Room for ``classes`` classes in every shared slot."""
        cap = self.CL.shape[1]
        self.store.reserve(classes)
        cap2 = self.store.cap
        if cap2 > cap:
            CL = np.zeros((self.CL.shape[0], cap2), np.int64)
            CL[:, :cap] = self.CL
            self.CL = CL
            V = np.zeros((self.V.shape[0], cap2), np.int8)
            V[:, :cap] = self.V
            self.V = V

    def _compact(self, need: int) -> None:
        """When the live values (and this layer's ``need``) have shrunk to half the long
        blocks (peeling empties the top limbs), shrink every long block to half as much again:
        memory follows the values, and a class's limbs stay adjacent. Free slots keep at most
        two long blocks for the next values."""
        live = {lane.slot for lane in self.lanes if lane.shared}
        live |= {self.views[s][0] for s in live if s in self.views}  # the bases views read
        width = self.store.width
        spare = [s for s in self.hfree if width[s] > SHORT]
        for s in spare[:-2]:
            self.store.release(s)
        top = max([need, *(int(self.used[s]) for s in live)]) + 2
        if self.long <= SHORT or 2 * top > self.long:
            return
        self.long = max(top + top // 2, SHORT + 1)
        for s in np.flatnonzero(width > self.long).tolist():
            self.store.shrink(s, self.long)  # free ones too: their stale limbs are dropped
            np.minimum(self.CL[s], self.long, out=self.CL[s])
        self.store.trim(self.nclass)

    def shared_values(self, slot: int) -> np.ndarray:
        """Exact values of a shared slot, one Python int per class."""
        n = self.CL[slot]
        block = self.store.block(slot)
        values = [_int_of(block[c, : n[c]]) for c in range(self.nclass)]
        if slot in self.views:
            base, offs, digits = self.views[slot]
            d = sum(v << (LIMB * o) for o, v in zip(offs, digits, strict=True))
            b = self.CL[base]
            held = self.store.block(base)
            for c in np.flatnonzero(self.V[slot, : self.nclass]):
                values[c] = _int_of(held[c, : b[c]]) + d
        return np.array(values, dtype=object)

    def _buffer(self, k: int) -> np.ndarray:
        """A reused (k × rows) int64 scratch array: fresh large arrays cost page faults."""
        if self._scratch.shape[0] < k:
            self._scratch = np.zeros((k, self.n), np.int64)
        return self._scratch[:k]

    def _table(self, lane: _Lane) -> np.ndarray:
        if lane.slot in self.views:
            return self.shared_values(lane.slot).astype(np.int64)
        out = np.zeros(self.nclass, np.int64)
        kernels.limb_kernel().limbs_to_int64(
            *self.store.args(), self.CL, lane.slot, self.nclass, out
        )
        return out

    def _tables(self, table_of: dict[int, int], lanes) -> np.ndarray:
        """The int64 value per class of each shared lane the row kernels read (``table_of``:
        lane → table row, from :func:`_encode`)."""
        if not table_of:
            return _EMPTY_TABLE
        table = np.zeros((len(table_of), self.nclass), np.int64)
        for c, j in table_of.items():
            table[j] = self._table(lanes[c])
        return table

    def _view_arrays(self):
        """Base slot per slot (−1: explicit) and the digits of every view, for the kernel."""
        VB = np.full(self.store.slots, -1, np.int64)
        sizes = np.zeros(self.store.slots + 1, np.int64)
        voff: list[int] = []
        vval: list[int] = []
        for s in sorted(self.views):  # in slot order, as vptr counts them
            b, offs, digits = self.views[s]
            VB[s] = b
            sizes[s + 1] = len(offs)
            voff += offs
            vval += digits
        return VB, np.cumsum(sizes), np.array(voff, np.int64), np.array(vval, np.int64)

    def _store(self, slot: int, values: np.ndarray) -> None:
        """Write Python ints (one per class) into a shared slot."""
        top = max((abs(int(v)) for v in values), default=0)
        self._reserve(self.nclass)
        self.store.ensure(slot, self._width(_limbs(top)), keep=False)
        NL = int(self.store.width[slot])
        block = self.store.block(slot)
        self._forget(slot)
        self.views.pop(slot, None)
        self.V[slot] = 0
        for c, v in enumerate(values):
            v = int(v)
            # a negative value keeps its sign in limb NL − 1, so it uses all NL limbs
            self.CL[slot, c] = NL if v < 0 else -(-v.bit_length() // LIMB)
            block[c, :NL] = _signed_limbs(v, NL)  # (in linear time: digits.py)
        self.used[slot] = NL

    def _forget(self, *slots: int) -> None:
        """Drop the difference tags of slots about to be overwritten."""
        gone = set(slots)
        if self.tags and gone:
            self.tags = {k: d for k, d in self.tags.items() if not gone.intersection(k)}
