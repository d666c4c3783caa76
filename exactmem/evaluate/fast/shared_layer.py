"""Shared and mixed units of one layer in the multi-limb kernel
(:mod:`~exactmem.evaluate.fast.layer_kernel`): in-place updates, views on an anchor's limbs and
difference tags, each an identity checked on the layer's structure."""

from __future__ import annotations

from collections import Counter

import numpy as np

from exactmem.core.model import Affine
from exactmem.evaluate.fast import kernels, limits
from exactmem.evaluate.fast.digits import LIMB, _int_of, _limbs, _paired, _sparse
from exactmem.evaluate.fast.lanes import _Lane
from exactmem.evaluate.fast.limits import LIMIT, _chunks

_EMPTY_SIG = np.zeros((1, 1), np.int64)


class _SharedLayer:
    """A layer's shared and mixed units (a mixin of the engine)."""

    def _shared_layer(self, a, relu, plans, bounds, units, sig, out):
        """Shared and mixed units of one layer, in the multi-limb kernel."""
        lanes = self.lanes
        self._compact(max(_limbs(bounds[u]) for u in units) + 2)
        self._reserve(self.nclass)
        # in place: x + (terms) where no other lane holds x's slot; the units that also read x
        # run first (the kernel takes units in order) — a class whose terms sum to 0 keeps x
        # untouched, and otherwise only the limbs the terms reach change
        holders = Counter(lane.slot for lane in lanes if lane.shared)
        aliased = {extra for how, extra in plans if how == "alias"}
        views = self.views

        def on(c: int) -> int:  # the slot a shared lane's value lives on (a view's base)
            s = lanes[c].slot
            return views[s][0] if s in views else s

        # a slot written in place must not be the base of a view that outlives this layer
        kept_bases = {on(c) for c in aliased if lanes[c].shared}
        # of units sharing a lane, the one with the largest bias goes in place: it is positive
        # wherever the others are, so they can be its views (see _anchors). Greedily, in that
        # order: no in-place unit may read another's base (it would see the value changed)
        base = [-1] * len(units)
        reads = [{on(c) for c, _ in a.rows[u] if lanes[c].shared} for u in units]
        for j in sorted(range(len(units)), key=lambda j: -a.bias[units[j]]):
            placed = [k for k in range(len(units)) if base[k] >= 0]
            x = next(
                (
                    c
                    for c, w in a.rows[units[j]]
                    if w == 1
                    and lanes[c].shared
                    and lanes[c].nonneg
                    and holders[lanes[c].slot] == 1
                    and c not in aliased
                    and lanes[c].slot not in views
                    and lanes[c].slot not in kept_bases
                    and all(lanes[c].slot not in reads[k] for k in placed)
                    and all(lanes[base[k]].slot not in reads[j] for k in placed)
                ),
                -1,
            )
            base[j] = x
        order = sorted(range(len(units)), key=lambda j: base[j] >= 0)
        units = [units[j] for j in order]
        base = [base[j] for j in order]
        # every slot written has room for its unit's proved bound (+2, as the kernel's widths)
        slots = np.array(
            [
                lanes[x].slot if x >= 0 else self._halloc(_limbs(bounds[u]) + 2)
                for u, x in zip(units, base, strict=True)
            ],
            np.int64,
        )
        for u, x, o in zip(units, base, slots.tolist(), strict=True):
            if x >= 0:
                self.store.ensure(o, self._width(max(_limbs(bounds[u]), int(self.used[o])) + 2))
        anchor, made = self._anchors(a, plans, units, base)
        ptr, src, src2, tagd, cptr, coff, cval = [0], [], [], [], [0], [], []
        bptr, boff, bval = [0], [], []
        mix, lptr, loff, lval = [], [0], [], []
        widths = []
        for u, x in zip(units, base, strict=True):
            width = _limbs(bounds[u]) + 2
            if x >= 0:
                width = max(width, int(self.used[lanes[x].slot]) + 2)
            for c, c2, w in _paired([(c, w) for c, w in a.rows[u] if lanes[c].shared and c != x]):
                src.append(lanes[c].slot)
                src2.append(lanes[c2].slot if c2 >= 0 else -1)
                tagd.append(self.tags.get((src[-1], src2[-1]), 0) if c2 >= 0 else 0)
                offs, vals = _sparse(w)
                coff += offs
                cval += vals
                cptr.append(len(coff))
                reach = max(
                    _limbs(lanes[c].bound),
                    int(self.used[lanes[c].slot]),
                    _limbs(lanes[c2].bound) if c2 >= 0 else 0,
                    int(self.used[lanes[c2].slot]) if c2 >= 0 else 0,
                )
                width = max(width, (offs[-1] if offs else 0) + reach + 2)
            ptr.append(len(src))
            offs, vals = _sparse(a.bias[u] * self.den)
            boff += offs
            bval += vals
            bptr.append(len(boff))
            how, extra = plans[u]
            if how == "mixed":
                k, lam = extra
                mix.append(k)
                offs, vals = _sparse(lam)
                loff += offs
                lval += vals
                width = max(width, (offs[-1] if offs else 0) + 5)
            else:
                mix.append(-1)
            lptr.append(len(loff))
            widths.append(width)
        width = max(widths) + 2  # room for a magnitude one limb longer than the value
        n_u = len(units)
        zeros = np.zeros(n_u, np.int64)
        neg = np.zeros(n_u, np.int64)
        lo_abs = np.zeros((n_u, width), np.int64)
        hi_abs = np.zeros((n_u, width), np.int64)
        lo_pos = np.zeros((n_u, width), np.int64)
        flags = np.zeros(n_u, np.int64)
        out_used = np.zeros(n_u, np.int64)
        arr = lambda xs: np.array(xs, np.int64)  # noqa: E731
        sig_arr = sig if sig is not None else _EMPTY_SIG
        lens = np.zeros((n_u, 3), np.int64)
        args = (
            *self.store.args(),
            self.CL,
            slots,
            arr([lanes[x].slot if x >= 0 else -1 for x in base]),
            arr(ptr),
            arr(src),
            arr(src2),
            arr(tagd),
            arr(cptr),
            arr(coff),
            arr(cval),
            arr(bptr),
            arr(boff),
            arr(bval),
            arr(mix),
            arr(lptr),
            arr(loff),
            arr(lval),
            sig_arr,
            self.counts,
            self.V,
            *self._view_arrays(),
            *_csr_views(anchor, made, len(units)),
        )
        stats = (zeros, neg, lo_abs, hi_abs, lo_pos, lens, flags, out_used)
        chunks = _chunks(self.nclass, limits.PARALLEL_CLASSES)
        lk = kernels.layer_kernel()
        if chunks == 1:
            ok = lk._shared_classes(*args, 0, self.nclass, relu, arr(widths), *stats)
        else:
            ok = lk.shared_units(*args, self.nclass, relu, arr(widths), *stats, chunks)
        if not ok:
            raise AssertionError("multi-limb result outgrew its proved bound")
        self._forget(*(int(o) for o in slots))
        for o in slots:
            self.views.pop(int(o), None)
        for j, (offs, digits) in made.items():
            self.views[int(slots[j])] = (int(slots[anchor[j]]), offs, digits)
        self._tag(a, units, plans, slots)
        # the kernel keeps each extreme's limbs in use; the value itself where that is ≤ 2
        lo_n, hi_n, pos_n = lens[:, 0], lens[:, 1], lens[:, 2]
        lo_v, hi_v, pos_v = (M[:, 0] + (M[:, 1] << LIMB) for M in (lo_abs, hi_abs, lo_pos))
        seen = (flags & 1).astype(bool)
        best = None
        if seen.any():  # the least non-zero |z|: fewest limbs first, exact among those
            fewest = lo_n[seen].min()
            pick = np.flatnonzero(seen & (lo_n == fewest))
            best = min(int(lo_v[j]) if fewest <= 2 else _int_of(lo_abs[j]) for j in pick)
        for j, u in enumerate(units):
            self.used[slots[j]] = max(int(out_used[j]), 1)
            z, ng = int(zeros[j]), int(neg[j])
            pos = None
            if flags[j] & 2:
                pos = int(pos_v[j]) if pos_n[j] <= 2 else lo_pos[j].copy()
            out[u] = _Lane(
                True,
                int(slots[j]),
                # an exact maximum when short, else 2^(30·limbs): a valid bound either way
                int(hi_v[j]) if hi_n[j] <= 2 else 1 << (LIMB * int(hi_n[j])),
                relu or ng == 0,
                z + ng if relu else z,
                pos,
            )
        return int(zeros.sum()), best

    def _anchors(self, a: Affine, plans, units, base):
        """Views: a unit with the same linear part as an in-place unit (its anchor) and a bias
        a few digits higher or lower, σ(L + b_k) beside σ(L + b_A), is kept as the anchor's value
        plus the digits of b_k − b_A wherever both are positive — no limbs of its own.
        Returns (anchor index per unit or −1, {view index: (offsets, digits)})."""
        anchor = [-1] * len(units)
        made: dict[int, tuple[list[int], list[int]]] = {}
        for j, (u, x) in enumerate(zip(units, base, strict=True)):
            if x < 0 or plans[u][0] != "shared":
                continue
            for k, (v, y) in enumerate(zip(units, base, strict=True)):
                if y >= 0 or anchor[k] >= 0 or plans[v][0] != "shared" or a.rows[v] != a.rows[u]:
                    continue
                offs, digits = _sparse((a.bias[v] - a.bias[u]) * self.den)
                if 0 < len(digits) <= 4:
                    anchor[k] = j
                    made[k] = (offs, digits)
        return anchor, made

    def _tag(self, a: Affine, units, plans, slots) -> None:
        """Record the differences of units σ(v + b) with one linear part v (same terms)."""
        by_part: dict[tuple, list[tuple[int, int]]] = {}
        for j, u in enumerate(units):
            if plans[u][0] == "shared":
                part = tuple(a.rows[u])
                by_part.setdefault(part, []).append((int(slots[j]), a.bias[u] * self.den))
        for group in by_part.values():
            for o1, b1 in group:
                for o2, b2 in group:
                    if o1 != o2 and 0 < abs(b1 - b2) < LIMIT:
                        self.tags[(o1, o2)] = b1 - b2


def _csr_views(anchor: list[int], made: dict, n: int):
    """Kernel arrays of the views made in one layer: anchor per unit, the views of each
    anchor (CSR), and each view's digits (CSR)."""
    kptr, klist = [0], []
    nptr, noff, nval = [0], [], []
    for j in range(n):
        klist += [k for k in range(n) if anchor[k] == j]
        kptr.append(len(klist))
        offs, digits = made.get(j, ([], []))
        noff += offs
        nval += digits
        nptr.append(len(noff))
    arr = lambda xs: np.array(xs, np.int64)  # noqa: E731
    return arr(anchor), arr(kptr), arr(klist), arr(nptr), arr(noff), arr(nval)
