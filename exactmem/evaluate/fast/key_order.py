"""Stage II in key order: step layers decided from the keys sorted once
(:mod:`~exactmem.evaluate.fast.sorted_steps`), one at a time or as runs of step layers in one
compiled pass (:mod:`~exactmem.evaluate.fast.step_kernel`)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from exactmem.core.model import Affine
from exactmem.evaluate.fast import kernels, limits
from exactmem.evaluate.fast.digits import (
    LIMB,
    _int_of,
    _limb_rows,
    _limbs,
    _signed_limbs,
)
from exactmem.evaluate.fast.lanes import _key, _Lane, _Step
from exactmem.evaluate.fast.limits import LIMIT
from exactmem.evaluate.fast.sorted_steps import class_ranges, step_boundary, unit_stats


@dataclass
class _SortedKeys:
    """Stage II in key order (exactmem.evaluate.fast.sorted_steps): the carried key lane, its rows
    in ascending order, each class one run [lo, hi) of that order (``cls`` is not kept up to
    date meanwhile), and the steps folded since entering: a difference array of ones over the
    sorted positions and the last step's boundary."""

    key: _Lane
    perm: np.ndarray
    xs: np.ndarray
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    fold: object | None = None
    diff: np.ndarray | None = None
    last: int = -1


@dataclass
class _StepLayout:
    """One layer of a step run (:meth:`_Engine.step_run`): its row units and mixed units (run
    indices), the lanes its σ(x) = x units carry (a lane, or a mixed unit's index), what each
    output position holds, its probe's terms and fold claim."""

    rows: list
    mixed: list
    aliases: list
    out: list
    probe: tuple
    claim: tuple


class _KeyOrder:
    """Stage II in key order (a mixin of the engine)."""

    # ---------------------------------------------------------------- runs of step layers

    def step_run(self, layers, start: int, stop_at: int, probes_at, fold_of) -> list | None:
        """Layers start.. of Stage II in key order in one compiled pass
        (:mod:`exactmem.evaluate.fast.step_kernel`), while each has the shape :meth:`_step_plan`
        checks; (zeros, least non-zero |z|) per layer done, or None (nothing done)."""
        srt = self._sorted
        if srt is None or srt.lo is None or srt.fold is None or self.den != 1:
            return None
        plan = self._step_plan(layers, start, stop_at, probes_at, fold_of)
        if plan is None:
            return None
        rows, mixed, layouts = plan
        L = len(layouts)
        limit = max(64, self.n // 4)  # as _split: beyond it sharing no longer pays
        cap = min(limit, self.nclass + L)
        self._reserve(cap)
        lanes = self.lanes
        live = {lane.slot for lane in lanes if lane.shared}
        live |= {self.views[x][0] for x in live if x in self.views}
        grow: dict[int, int] = {}  # slot → a bound on every value it takes in the run
        for slot, lam, bound in mixed:
            grow[slot] = max(grow.get(slot, 0), bound + max(lam, 0))
        for slot, most in grow.items():  # room for all of them, in place
            need = max(_limbs(most), int(self.used[slot])) + 2
            self.store.ensure(slot, self._width(need))
        lo, hi, counts = (np.zeros(cap, np.int64) for _ in range(3))
        lo[: self.nclass], hi[: self.nclass] = srt.lo, srt.hi
        counts[: self.nclass] = self.counts
        state = np.array([self.nclass, srt.last, limit, srt.last], np.int64)
        # λ normalized (top limb signed) and |λ|, as many limbs each (one more than |λ| needs);
        # the lowest non-zero limb is |λ|'s
        lams = [lam for _, lam, _ in mixed]
        ks = np.array([-(-lam.bit_length() // LIMB) + 1 for lam in lams], np.int64)
        mags = _limb_rows([abs(lam) for lam in lams], int(ks.max(initial=1)))
        within = np.arange(mags.shape[1]) < ks[:, None]
        lam_mags = mags[within]  # rows cut to their k limbs, one after another
        lam_limbs = lam_mags.copy()  # λ ≥ 0: its limbs are |λ|'s
        lptr = np.concatenate([[0], np.cumsum(ks)])
        lw = (mags != 0).argmax(axis=1)
        for m, v in enumerate(lams):
            if v >= 0:
                continue
            lam_limbs[lptr[m] : lptr[m + 1]] = _signed_limbs(v, int(lptr[m + 1] - lptr[m]))
        # limbs of a kept extreme: a stored value's, or |y + λ| < |λ| of a clipped one
        S = max(int(self.store.width.max()), max(np.diff(lptr), default=0)) + 2
        M = len(mixed)
        ustats = np.zeros((len(rows), 5), np.int64)
        P = np.zeros(L, np.int64)
        mzeros, mneg = np.zeros(M, np.int64), np.zeros(M, np.int64)
        mlo, mpos, mhi = (np.zeros((M, S), np.int64) for _ in range(3))
        mlo_n, mpos_n, mhi_n = (np.full(M, -1, np.int64) for _ in range(3))
        arr = lambda xs: np.array(xs, np.int64)  # noqa: E731
        done = kernels.step_kernel().step_run(
            srt.xs,
            lo,
            hi,
            counts,
            state,
            *self.store.args(),
            self.CL,
            self.V,
            arr(sorted(live)),
            arr(np.cumsum([0] + [len(lay.rows) for lay in layouts])),
            arr([w for w, _, _ in rows]),
            arr([b for _, b, _ in rows]),
            arr([c for _, _, c in rows]),
            arr(np.cumsum([0] + [len(lay.mixed) for lay in layouts])),
            arr([slot for slot, _, _ in mixed]),
            arr(lptr),
            arr(lam_limbs),
            arr(lw),
            arr(lam_mags),
            ustats,
            P,
            mzeros,
            mneg,
            mlo,
            mlo_n,
            mpos,
            mpos_n,
            mhi,
            mhi_n,
        )
        if done == 0:
            self._no_step_before = start + 1
            return None
        if int(state[0]) != self.nclass:
            self._classes = None
        self.nclass = int(state[0])
        self.counts = counts[: self.nclass].copy()
        srt.lo, srt.hi = lo[: self.nclass].copy(), hi[: self.nclass].copy()

        def least(ext, n, m) -> int | None:
            return _int_of(ext[m, : n[m]]) if n[m] > 0 else None

        # per layer: the least non-zero |z| of its units and of the lanes its σ(x) = x carry,
        # compared by limbs in use first (the packed integers' are long: rarely converted)
        urow = ustats[:, 0].tolist()
        uleast = ustats[:, 2].tolist()
        mz, mn = mzeros.tolist(), mneg.tolist()
        lo_n, pos_n = mlo_n.tolist(), mpos_n.tolist()
        stats = []
        for l_ in range(done):
            lay = layouts[l_]
            zeros = sum(urow[u] for u in lay.rows) + sum(mz[m] for m in lay.mixed)
            small = [uleast[u] for u in lay.rows if uleast[u] >= 0]
            long_ = [(lo_n[m], mlo, m) for m in lay.mixed if lo_n[m] > 0]
            for origin in lay.aliases:
                if isinstance(origin, _Lane):
                    zeros += origin.zeros
                    if origin.min_pos is not None:
                        small.append(origin.min_pos)
                else:
                    zeros += mz[origin] + mn[origin]
                    if pos_n[origin] > 0:
                        long_.append((pos_n[origin], mpos, origin))
            best = min(small) if small else None
            if long_:
                fewest = min(k for k, _, _ in long_)
                if best is None or fewest <= _limbs(best):
                    best = min([*small, *(_int_of(e[m, :k]) for k, e, m in long_ if k == fewest)])
            stats.append((zeros, best))
            fold, name = lay.claim
            j = fold.begin(name, self.n)
            srt.diff[P[l_]] += 1
            fold.finish(j, 0, None, 1)
        srt.last = int(P[done - 1])
        # the lanes after the last layer done: carried, updated in place, or row units kept as
        # recipes (their step is the probe the next layer refines on)
        lay = layouts[done - 1]
        out, recipes = [], {}
        made: dict[int, _Lane] = {}
        for what in lay.out:
            if isinstance(what, _Lane):
                out.append(what)
            elif what[0] == "mixed":
                m = what[1]
                if m not in made:
                    slot = mixed[m][0]
                    self.used[slot] = max(int(mhi_n[m]), 1)
                    top = least(mhi, mhi_n, m) or 0
                    zeros_m = int(mzeros[m] + mneg[m])
                    made[m] = _Lane(True, slot, top, True, zeros_m, least(mpos, mpos_n, m))
                out.append(made[m])
            else:
                u = what[1]
                w, b, _ = rows[u]
                z, neg, _, min_pos, top_abs = (int(x) for x in ustats[u])
                self._placeholders += 1
                slot = -self._placeholders
                recipes[slot] = ([srt.key.slot], [w], b, True)
                out.append(
                    _Lane(False, slot, top_abs, True, z + neg, None if min_pos < 0 else min_pos)
                )
        self._forget(*grow)
        self._let_go(lanes, out, recipes)
        self._fused, self._folded = {}, {}
        self._probed = {_key(lay.probe, out): _Step(srt.perm, srt.last)}
        return stats

    def _step_plan(self, layers, start: int, stop_at: int, probes_at, fold_of):
        """The layers from ``start`` that a step run decides, by their structure: every unit
        σ(x) = x of the key or of a shared lane, σ(w·x + b) of the key (w > 0, values below
        2^62: row units), or σ(y + λ·g) of a shared lane y in place (read by no other unit,
        not a view, held by no other lane) and g the step of the layer before (mixed); one
        probe, reading the row units, folded by the run's fold; the step in int64. At most
        STEP_RUN_LAYERS layers. Returns (row units (w, b, probe coefficient), mixed units
        (slot, λ, bound of y before), per-layer layouts) or None."""
        srt = self._sorted
        key = srt.key
        lanes = self.lanes
        if start < self._no_step_before or key.slot < 0:
            return None
        # what each position holds: a lane (unchanged), ("mixed", m) or ("row", u)
        held: list = list(lanes)
        before = next((t for t, v in self._probed.items() if isinstance(v, _Step)), None)
        if before is None or self._probed[before].p != srt.last:
            return None
        prev_probe = None  # the step before, as terms over positions (None: the engine's)
        rows, mixed, layouts = [], [], []
        views = {base for base, _, _ in self.views.values()} | set(self.views)

        def is_row(what) -> bool:  # a row unit of the layer before (read through its step)
            if isinstance(what, tuple):
                return what[0] == "row"
            return not what.shared and what is not key

        def slot_of(what) -> int | None:  # a shared value that may be updated in place
            if isinstance(what, tuple):
                return mixed[what[1]][0] if what[0] == "mixed" else None
            if not what.shared or not what.nonneg or what.slot in views:
                return None
            return what.slot

        bounds: dict[int, int] = {}  # slot → bound of its value now
        li = start
        while li < stop_at and len(layouts) < limits.STEP_RUN_LAYERS:
            a = layers[li]
            here = probes_at.get(li, ())
            if a.denominator != 1 or len(here) != 1:
                break
            probe = here[0]
            claim = fold_of(probe)
            if claim is None or claim[0] is not srt.fold:
                break
            lay = _StepLayout([], [], [], [], probe.terms, claim)
            out: list = []
            reads: dict[int, int] = {}
            for row in a.rows:
                for c, _ in row:
                    reads[c] = reads.get(c, 0) + 1
            holders = Counter(slot_of(h) for h in held)  # positions holding each slot
            ok = True
            row_units = {}
            before_g = sorted(prev_probe) if prev_probe is not None else None
            for u, (row, b) in enumerate(zip(a.rows, a.bias, strict=True)):
                if len(row) == 1 and row[0][1] == 1 and b == 0 and held[row[0][0]] is not None:
                    what = held[row[0][0]]
                    if isinstance(what, _Lane) and what is not key and not what.shared:
                        ok = False
                        break
                    if isinstance(what, tuple) and what[0] == "row":
                        ok = False
                        break
                    lay.aliases.append(what if isinstance(what, _Lane) else what[1])
                    out.append(what)
                elif len(row) == 1 and held[row[0][0]] is key and row[0][1] > 0:
                    w = row[0][1]
                    if w * max(key.bound, 1) + abs(b) >= LIMIT:
                        ok = False
                        break
                    row_units[u] = len(rows)
                    lay.rows.append(len(rows))
                    rows.append((w, b * self.den, 0))
                    out.append(("row", lay.rows[-1]))
                else:
                    shared, steps = [], []
                    for t in row:
                        (steps if is_row(held[t[0]]) else shared).append(t)
                    if b != 0 or len(shared) != 1 or shared[0][1] != 1 or not steps:
                        ok = False
                        break
                    y = shared[0][0]
                    lam = math.gcd(*[w for _, w in steps]) * (1 if steps[0][1] > 0 else -1)
                    g = sorted((c, w // lam) for c, w in steps)
                    if prev_probe is None:
                        same = _key(g, lanes) == before
                    else:
                        same = g == before_g
                    slot = slot_of(held[y])
                    if not same or slot is None or reads[y] != 1 or holders[slot] != 1:
                        ok = False
                        break
                    bound = bounds.get(slot, held[y].bound if isinstance(held[y], _Lane) else 0)
                    bounds[slot] = bound + max(lam, 0)
                    lay.mixed.append(len(mixed))
                    mixed.append((slot, lam, bound))
                    out.append(("mixed", lay.mixed[-1]))
            if not ok or not lay.rows:
                break
            terms = dict(probe.terms)
            if set(terms) != set(row_units) or len(terms) != len(row_units):
                break
            reach = 0
            for u, k in row_units.items():
                w, b, _ = rows[k]
                rows[k] = (w, b, terms[u])
                reach += abs(terms[u]) * (w * max(key.bound, 1) + abs(b))
            if reach >= LIMIT:
                break
            lay.out = out
            layouts.append(lay)
            held = out
            prev_probe = [(c, w) for c, w in probe.terms]
            li += 1
        if len(layouts) < 2:
            return None
        # (a layer refused part way has left units behind: not the run's)
        rows = rows[: sum(len(lay.rows) for lay in layouts)]
        mixed = mixed[: sum(len(lay.mixed) for lay in layouts)]
        return rows, mixed, layouts

    # ---------------------------------------------------------------- Stage II in key order

    def _sorted_plan(self, a: Affine, relu: bool, plans, probes, folds, nxt):
        """Whether this layer is a Stage II step layer that the sorted keys decide
        (:mod:`exactmem.evaluate.fast.sorted_steps`): every row unit σ(w·x + b), w > 0, of one
        stored row lane x that the layer carries on unchanged; one probe reading exactly those
        units, 0 then 1 along the sorted keys; the next layer reading the units only through
        it; its fold (if any) the one folded here, its boundary not below the last (no rise).
        Returns (keys in order, [(unit, w, b)], probe index, boundary, fold claim) or None."""
        if not (relu and self.den == 1 and a.denominator == 1 and nxt is not None):
            return None
        if self.n < max(limits.SORTED_FROM, 1):
            return None
        lanes = self.lanes
        row_units = [u for u, (how, _) in enumerate(plans) if how == "row"]
        if not row_units or any(len(a.rows[u]) != 1 or a.rows[u][0][1] <= 0 for u in row_units):
            return None
        xs_lane = {a.rows[u][0][0] for u in row_units}
        if len(xs_lane) != 1:
            return None
        c = xs_lane.pop()
        key = lanes[c]
        if key.shared or key.slot < 0 or ("alias", c) not in plans:
            return None
        reading = [i for i, t in enumerate(probes) if t and {d for d, _ in t} == set(row_units)]
        if len(reading) != 1 or len(probes[reading[0]]) != len(row_units):
            return None
        i = reading[0]
        if self._elidable(a, nxt, plans, row_units, [probes[i]]) != set(row_units):
            return None
        srt = self._sorted
        if srt is not None and srt.key is not key:
            return None
        order = self._order  # the active order, or the last one sorted (re-entry)
        if order is None or order.key is not key:
            perm = np.argsort(self.R[key.slot], kind="stable")
            order = self._order = _SortedKeys(key, perm, self.R[key.slot][perm])
        units = [(u, a.rows[u][0][1], a.bias[u] * self.den) for u in row_units]
        coef = dict(probes[i])
        p = step_boundary(order.xs, [(w, b) for _, w, b in units], [coef[u] for u, _, _ in units])
        if p is None:
            return None
        claim = folds[i] if i < len(folds) else None
        if claim is not None:
            fold = claim[0]
            if srt is not None and srt.fold is not None:
                if fold is not srt.fold or p < srt.last:
                    return None
            elif fold.ones is not None and fold.seen > 0:
                # the first step folded here: no row whose last step was 0 may step to 1
                waiting = np.flatnonzero((fold.flags & 5) == 0)
                if waiting.size:
                    where = np.empty(self.n, np.int64)
                    where[order.perm] = np.arange(self.n)
                    if where[waiting].max() >= p:
                        return None
        return order, units, i, p, claim

    def _enter_sorted(self, order: _SortedKeys) -> bool:
        """Start (or go on with) Stage II in key order: every class must be one run of the
        sorted rows (after this layer's refinement)."""
        if self._sorted is not None:
            return True
        if self._not_runs[0] == self.nclass and self._not_runs[1] is order:  # (no split since)
            return False
        runs = class_ranges(self._cls[order.perm], self.nclass)
        if runs is None:
            self._not_runs = (self.nclass, order)
            return False
        order.lo, order.hi = runs
        order.fold, order.diff, order.last = None, None, -1
        self._sorted = order
        return True

    def _sorted_rows(self, a: Affine, steps, out: list) -> tuple[int, int | None, dict]:
        """The row units and the step of a Stage II layer from the sorted keys: statistics by
        binary search, units not stored (recipes), the step kept sorted and folded as a
        difference array. Returns (zeros, least non-zero |z|, recipes)."""
        order, units, i, p, claim = steps
        zeros, best, recipes = 0, None, {}
        for u, w, b in units:
            z, neg, least, min_pos, top_abs = unit_stats(order.xs, w, b)
            zeros += z
            if least is not None:
                best = least if best is None else min(best, least)
            self._placeholders += 1
            slot = -self._placeholders
            recipes[slot] = ([order.key.slot], [w], b, True)
            out[u] = _Lane(False, slot, top_abs, True, z + neg, min_pos)
        self._fused[i] = _Step(order.perm, p)
        if claim is not None:
            fold, name = claim
            j = fold.begin(name, self.n)
            if order.fold is None:
                order.fold, order.diff = fold, np.zeros(self.n + 1, np.int32)
            order.diff[p] += 1
            order.last = p
            self._folded[i] = (fold, j, 0)
        return zeros, best, recipes

    def _leave_sorted(self) -> None:
        """Back to rows: each row's class from its run, the folded steps added to the fold's
        per-row state (ones; the last step is every row's last binary step)."""
        srt, self._sorted = self._sorted, None
        if srt is None:
            return
        self._classes = None
        by_start = np.argsort(srt.lo)
        runs = np.repeat(by_start, (srt.hi - srt.lo)[by_start])
        self._cls[srt.perm] = runs.astype(self._cls.dtype)
        if srt.fold is not None:
            fold = srt.fold
            fold.ones[srt.perm] += np.cumsum(srt.diff[:-1]).astype(fold.ones.dtype)
            last = np.zeros(self.n, np.uint8)
            last[srt.perm[srt.last :]] = 1
            np.bitwise_and(fold.flags, 6, out=fold.flags)
            fold.flags |= last
