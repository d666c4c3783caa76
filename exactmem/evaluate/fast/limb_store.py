"""The fast evaluator's class-shared multi-limb values: one block of limbs per slot.

Kajitsuka & Sato 2025, Lemma C.1, Stage III extracts segments from packed integers of
thousands of bits; the fast evaluator keeps such a lane once per class of inputs, as 30-bit
limbs. Lanes differ wildly in length (a packed integer of 700 limbs beside a 0/1 indicator), so
each slot is its own (classes × limbs) block, sized for the values it holds, inside one flat
buffer the kernels index as ``buffer[offset[s] + c · limbs[s] + i]``
(:func:`exactmem.evaluate.fast.limb_kernel._hi`). One rectangular array of slots × classes ×
the longest lane's limbs took 5.4 GB at N = 10⁷ where the values take about 1.

Blocks are placed first-fit in the holes freed blocks leave; the buffer is repacked only when it
must grow, when the classes outgrow their room, or when it is mostly holes. Limbs above a
class's length are never read (the engine keeps the lengths), so a block is not zeroed when
placed.

A repack moves the blocks inside the buffer, resized in place (a private anonymous memory map:
``mremap`` moves no page, new ones cost nothing until written, and a shrink returns the pages
at once), rather than into a second buffer: at N = 10⁷
the store holds 3–5 GB, and a copy beside it raised the peak by as much. Blocks keep their
order; those moving down go first, lowest first, then those moving up, highest first, so no
block is written over before it has moved (a class's limbs are a prefix of its block, so a
block keeps its place relative to its neighbours when the classes grow). The room left for
growth is an eighth of the blocks, not a half: memory follows the values.
"""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["LimbStore"]


class LimbStore:
    """Per slot a (``cap`` classes × ``width[s]`` limbs) int64 block of one buffer."""

    def __init__(self) -> None:
        self.buf = np.zeros(0, np.int64)
        self._mem: mmap.mmap | None = None  # the memory map under buf, when it has one
        self.off = np.zeros(0, np.int64)  # where each slot's block starts in buf
        self.width = np.zeros(0, np.int64)  # limbs per class of each slot's block (0: none)
        self.cap = 1  # classes every block has room for
        self._holes: list[list[int]] = []  # [start, size], by start, never adjacent
        self._top = 0  # buf[_top:] is free

    # ------------------------------------------------------------------ reading

    @property
    def slots(self) -> int:
        return len(self.off)

    def args(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the kernels take as H."""
        return self.buf, self.off, self.width

    def block(self, s: int) -> np.ndarray:
        """Slot s as a (cap × width) view: writes go to the store."""
        w = int(self.width[s])
        start = int(self.off[s])
        return self.buf[start : start + self.cap * w].reshape(self.cap, w)

    @property
    def live(self) -> int:
        """Elements in blocks (the rest of buf is holes and room at the top)."""
        return int(self.width.sum()) * self.cap

    # ------------------------------------------------------------------ shaping

    def add_slots(self, k: int) -> None:
        self.off = np.concatenate([self.off, np.zeros(k, np.int64)])
        self.width = np.concatenate([self.width, np.zeros(k, np.int64)])

    def ensure(self, s: int, limbs: int, *, keep: bool = True) -> None:
        """Room for ``limbs`` limbs per class in slot s; ``keep`` its values, with zero limbs
        above them (else the block is about to be written afresh: its limbs are undefined)."""
        if self.width[s] < limbs:
            self._resize(s, limbs, keep)

    def shrink(self, s: int, limbs: int) -> None:
        """Slot s down to ``limbs`` limbs per class (its values must fit in them)."""
        if self.width[s] > limbs:
            self._resize(s, limbs, True)

    def release(self, s: int) -> None:
        """Slot s holds nothing any more: its block becomes a hole."""
        w = int(self.width[s])
        if w:
            self._free(int(self.off[s]), self.cap * w)
            self.width[s] = 0
            self.off[s] = 0

    def reserve(self, classes: int) -> None:
        """Room for ``classes`` classes in every block (grown by half at least: amortized)."""
        if classes > self.cap:
            self._repack(max(classes, self.cap + self.cap // 2), 0)

    def trim(self, classes: int | None = None) -> None:
        """Give memory back when a quarter of the buffer or more is holes (after blocks shrank)
        or room for classes that never came (``classes``: as many as there are now; never
        fewer than the blocks hold values for). A repack moves blocks inside the buffer: it
        costs a copy of the live limbs, no more memory."""
        cap = self.cap if classes is None else max(min(classes, self.cap), 1)
        live = int(self.width.sum()) * cap
        if len(self.buf) > live + live // 4 + (1 << 20):
            self._repack(cap, 0)

    # ------------------------------------------------------------------ placement

    def _resize(self, s: int, limbs: int, keep: bool) -> None:
        size = self.cap * limbs
        start = self._alloc(size)  # may repack: read the old block's place after it
        w = int(self.width[s])
        if keep:
            m = min(w, limbs)
            new = self.buf[start : start + size].reshape(self.cap, limbs)
            new[:, :m] = self.block(s)[:, :m]
            new[:, m:] = 0
        self.release(s)
        self.off[s] = start
        self.width[s] = limbs

    def _alloc(self, size: int) -> int:
        for h in self._holes:  # first fit
            if h[1] >= size:
                start = h[0]
                h[0] += size
                h[1] -= size
                if h[1] == 0:
                    self._holes.remove(h)
                return start
        if self._top + size > len(self.buf):
            self._repack(self.cap, size)
        start = self._top
        self._top += size
        return start

    def _free(self, start: int, size: int) -> None:
        if start + size == self._top:
            self._top = start
            if self._holes and sum(self._holes[-1]) == self._top:
                self._top = self._holes.pop()[0]
            return
        holes = self._holes
        i = 0
        while i < len(holes) and holes[i][0] < start:
            i += 1
        holes.insert(i, [start, size])
        if i + 1 < len(holes) and start + size == holes[i + 1][0]:  # merge with the next
            holes[i][1] += holes.pop(i + 1)[1]
        if i > 0 and sum(holes[i - 1]) == start:  # and with the one before
            holes[i - 1][1] += holes.pop(i)[1]

    def _repack(self, cap: int, extra: int) -> None:
        """Every block packed from the start of the buffer with room for ``cap`` classes, and
        ``extra`` more elements (plus an eighth: growth is amortized): in place where the
        buffer can be resized, else copied into a new one."""
        need = int(self.width.sum()) * cap + extra
        size = need + need // 8 + 64
        if self._repack_in_place(cap, size):
            return
        mem, buf = _new_buffer(size)
        top = 0
        old_cap = self.cap
        for s in np.flatnonzero(self.width).tolist():
            w = int(self.width[s])
            new = buf[top : top + cap * w].reshape(cap, w)
            new[: min(cap, old_cap)] = self.block(s)[: min(cap, old_cap)]
            self.off[s] = top
            top += cap * w
        self.buf, self._mem = buf, mem
        self.cap = cap
        self._holes = []
        self._top = top

    def _repack_in_place(self, cap: int, size: int) -> bool:
        """:meth:`_repack` inside the buffer, resized to ``size`` elements; False (nothing
        done) when a view of the buffer is alive, which a resize would leave dangling."""
        live = np.flatnonzero(self.width)
        order = live[np.argsort(self.off[live], kind="stable")]  # their order in the buffer
        width = self.width[order]
        old_off = self.off[order].tolist()
        new_off = np.cumsum(width * cap) - width * cap
        kept = (width * min(cap, self.cap)).tolist()  # each block's classes that stay
        if size > len(self.buf) and not self._resize_buffer(size):
            return False
        buf = self.buf
        for i, dst in enumerate(new_off.tolist()):  # down, lowest first
            if dst < old_off[i]:
                _move(buf, old_off[i], dst, kept[i])
        for i in range(len(old_off) - 1, -1, -1):  # up, highest first
            dst = int(new_off[i])
            if dst > old_off[i]:
                _move(buf, old_off[i], dst, kept[i])
        del buf  # (a reference of our own would refuse the resize below)
        self.off[order] = new_off
        self.cap = cap
        self._holes = []
        self._top = int((width * cap).sum())
        if size < len(self.buf):
            self._resize_buffer(size)  # a view alive: the buffer stays longer, still valid
        return True

    def _resize_buffer(self, size: int) -> bool:
        """The buffer resized to ``size`` elements in place; False where it cannot be: no memory
        map under it, or a view of it alive (resizing would move the pages under the view)."""
        mem = self._mem
        if mem is None:
            return False
        self.buf = None  # our own export of the map (another one refuses the resize)
        done = False
        try:
            mem.resize(size * 8)
            done = True
        except (BufferError, OSError, SystemError, ValueError):
            pass
        finally:
            self.buf = np.frombuffer(mem, np.int64)
        return done


def _new_buffer(size: int) -> tuple[mmap.mmap | None, np.ndarray]:
    """A buffer of ``size`` int64 on a private anonymous memory map (resizable in place), or a
    plain array where the platform has none."""
    flags = getattr(mmap, "MAP_PRIVATE", None)
    if flags is None or not hasattr(mmap, "MAP_ANONYMOUS"):
        return None, np.empty(size, np.int64)
    mem = mmap.mmap(-1, max(size, 1) * 8, flags=flags | mmap.MAP_ANONYMOUS)
    return mem, np.frombuffer(mem, np.int64)


MOVE_CHUNK = 1 << 20  # elements a step: overlapping copies go through a buffer of this size


def _move(buf: np.ndarray, src: int, dst: int, n: int) -> None:
    """buf[dst : dst + n] = buf[src : src + n] (the ranges may overlap), a chunk at a time in
    the direction that reads each element before it is overwritten."""
    starts = range(0, n, MOVE_CHUNK)
    for k in starts if dst < src else reversed(starts):
        m = min(MOVE_CHUNK, n - k)
        buf[dst + k : dst + k + m] = buf[src + k : src + k + m]
