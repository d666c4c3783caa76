"""Runs of class-shared layers in one compiled pass: the engine's side of
:mod:`~exactmem.evaluate.fast.shared_runs` (the plan) and :mod:`~exactmem.evaluate.fast.
run_kernel` (the pass) — it supplies the values and turns the per-unit statistics into the
per-layer ones the reference reports."""

from __future__ import annotations

import numpy as np

from exactmem.core.model import Affine
from exactmem.evaluate.fast import kernels, limits, shared_runs
from exactmem.evaluate.fast.digits import _int_of, _limbs
from exactmem.evaluate.fast.lanes import _Lane


class _SharedRuns:
    """Runs of class-shared layers (a mixin of the engine)."""

    # ---------------------------------------------------------------- runs of shared layers

    def shared_run(self, layers, start: int, stop_at: int, probes_at, hand) -> list | None:
        """Layers start.. of a run of class-shared layers
        (:mod:`exactmem.evaluate.fast.shared_runs`) in one compiled pass, then its row units
        layer by layer (from the lanes they read, the shared values among them stored by the
        kernel) and ``hand(layer, lanes)`` for each
        layer with probes (``probes_at``), its output lanes; returns (zeros, least non-zero |z|)
        per layer as :meth:`layer`, or None (nothing done) where no run starts, its values are
        long, one outgrew the limbs given to it, or a row unit would not be int64."""
        lanes = self.lanes
        if self.den != 1 or self.nclass == 0 or start < self._no_run_before:
            return None
        if not self._short_lanes(x for x in lanes if x.shared):  # before planning: it is cheap
            return None
        blocked = self._no_run_before
        p = shared_runs.plan(
            layers,
            start,
            stop_at,
            lambda li: [q.terms for q in probes_at.get(li, ())],
            [x.shared for x in lanes],
            [x.nonneg for x in lanes],
        )
        got = None if p is None else self._run_program(p)
        if got is None:
            if p is not None:  # refused: its layers go one by one, none starts a run again
                self._no_run_before = p.stop
            return None
        made, (zpre, zneg, lo, lo_n, pos, pos_n) = got
        rows: dict[int, _Lane] = {}

        def refuse(at: int) -> list | None:
            """Layer ``at`` of the run has a row unit beyond int64: nothing of the run is kept;
            the layers before it run again as a shorter run, it goes the per-layer way (which
            splits the classes on it), and runs may start again after it."""
            self.hfree.extend(lane.slot for lane in made.values())
            self.free.extend(lane.slot for lane in rows.values())
            self._no_run_before = blocked
            shorter = self.shared_run(layers, start, start + at, probes_at, hand) if at else None
            self._no_run_before = max(self._no_run_before, start + at + 1)
            return shorter

        def lane_of(v: tuple[str, int]) -> _Lane | None:
            kind, i = v
            if kind == "in":
                return lanes[i]
            return made.get(i) if kind == "unit" else rows[i]

        stats = []
        zp, zn, lo_k, pos_k = zpre.tolist(), zneg.tolist(), lo_n.tolist(), pos_n.tolist()
        least_of: dict[int, int | None] = {}  # unit → its least positive value
        for l_ in range(p.layers):
            units = range(p.layer_units[l_], p.layer_units[l_ + 1])
            zeros = sum(zp[units.start : units.stop])
            best = _least(lo, lo_k, units)
            if p.rows[l_]:  # row units: per row, from the lanes before the layer
                ins = [lane_of(v) for v in p.positions[l_]]
                got = self._row_units(
                    [row for _, row, _, _ in p.rows[l_]], [b for _, _, b, _ in p.rows[l_]], ins
                )
                if got is None:
                    return refuse(l_)
                made_rows, z, b = got
                for (_, _, _, r), lane in zip(p.rows[l_], made_rows, strict=True):
                    rows[r] = lane
                zeros += z
                if b is not None:
                    best = b if best is None else min(best, b)
            for kind, i in p.origins[l_]:  # σ(x) = x: x's zeros and least positive value
                if kind == "unit":
                    zeros += zp[i] + zn[i]
                    if i not in least_of:
                        least_of[i] = _least(pos, pos_k, range(i, i + 1))
                    least = least_of[i]
                else:
                    carried = lane_of((kind, i))
                    zeros += carried.zeros
                    least = carried.min_pos
                if least is not None:
                    best = least if best is None else min(best, least)
            stats.append((zeros, best))
        for l_ in range(p.layers):  # handed on once every layer of the run is done
            if start + l_ in probes_at:
                hand(start + l_, [lane_of(v) for v in p.positions[l_ + 1]])
        out = [lane_of(v) for v in p.final]
        kept_rows = {lane.slot for lane in out if not lane.shared}  # (row and shared slots are
        kept_shared = {lane.slot for lane in out if lane.shared}  # numbered apart)
        for lane in rows.values():  # rows and stored shared values read only inside the run
            if lane.slot not in kept_rows:
                self.free.append(lane.slot)
        for lane in made.values():
            if lane.slot not in kept_shared:
                self.hfree.append(lane.slot)
        self._let_go(lanes, out, {})
        self._fused, self._folded = {}, {}
        return stats

    def _shared_units(self, a: Affine, units: list[int], out: list) -> tuple | None:
        """A ReLU layer's shared units (no mixed ones) as a one-layer program of the run kernel
        (their inputs short): fills ``out`` and returns (zeros, least non-zero |z|) over them, or
        None where the per-layer kernel is to do it."""
        lanes = self.lanes
        if not self._short_lanes(lanes[c] for u in units for c, _ in a.rows[u]):
            return None
        p = shared_runs.units_program(
            [a.rows[u] for u in units], [a.bias[u] for u in units], len(lanes)
        )
        got = self._run_program(p)
        if got is None:
            return None
        made, (zpre, _, lo, lo_n, _, _) = got
        for u, (_, k) in zip(units, p.final, strict=True):
            out[u] = made[k]
        return int(zpre.sum()), _least(lo, lo_n, range(len(units)))

    @staticmethod
    def _short_lanes(lanes) -> bool:
        """Whether every one of ``lanes`` is short enough for the run kernel (RUN_LIMBS)."""
        return all(_limbs(lane.bound) <= shared_runs.RUN_LIMBS for lane in lanes)

    def _run_program(self, p: shared_runs.Plan):
        """Run a shared-run program over every class; the new lanes (by unit) and per-unit
        statistics (pre-activations 0, negative; least non-zero |z|, least positive z, each with
        its limbs in use), or None."""
        lanes = self.lanes
        inputs = [_limbs(lanes[i].bound) for i, _ in p.loads]
        if max(inputs, default=0) > shared_runs.RUN_LIMBS:
            return None
        width = shared_runs.register_limbs(p, inputs)
        self._leave_sorted()
        views = [self.views[lanes[i].slot] for i, _ in p.loads if lanes[i].slot in self.views]
        scratch = max(
            [width + p.reach, *(int(self.used[b]) + max(o, default=0) for b, o, _ in views)]
        )
        finals = sorted({k for kind, k in p.final if kind == "unit"})
        new = sorted({*finals, *p.taps})
        self._reserve(self.nclass)
        slots = [self._halloc(width) for _ in new]
        self._forget(*slots)
        for s in slots:
            self.views.pop(s, None)
            self.V[s, : self.nclass] = 0
        slot_of = dict(zip(new, slots, strict=True))
        tap_slot = np.full(p.arrays[0].shape[0], -1, np.int64)
        for k in p.taps:
            tap_slot[k] = slot_of[k]
        carried = set(p.final)
        for l_, units in enumerate(p.rows):
            carried.update(p.positions[l_][c] for _, row, _, _ in units for c, _ in row)
        for kind, i in sorted(carried):
            if kind == "in":  # a row unit not stored (a recipe) carried along or read: make it
                self._rows_of(i)
        K = p.arrays[0].shape[0]
        S = scratch + 4
        zpre, zneg = np.zeros(K, np.int64), np.zeros(K, np.int64)
        extremes = [(np.zeros((K, S), np.int64), np.full(K, -1, np.int64)) for _ in range(3)]
        arr = lambda xs: np.array(xs, np.int64)  # noqa: E731
        args = (
            *self.store.args(),
            self.CL,
            self.V,
            *self._view_arrays(),
            arr([lanes[i].slot for i, _ in p.loads]),
            arr([r for _, r in p.loads]),
            p.registers,
            width,
            S,
            *p.arrays,
            arr([p.arrays[0][k] for k in finals]),
            arr([slot_of[k] for k in finals]),
            tap_slot,
            self.counts,
            zpre,
            zneg,
            *(x for pair in extremes for x in pair),
        )
        if not kernels.run_kernel().run(args, self.nclass, limits.PARALLEL_CLASSES):
            self.hfree.extend(slots)
            return None
        (lo, lo_n), (pos, pos_n), (hi, hi_n) = extremes
        made = {}
        for k, s in zip(new, slots, strict=True):
            self.used[s] = max(int(hi_n[k]), 1)
            top = _int_of(hi[k, : hi_n[k]]) if hi_n[k] > 0 else 0
            least = _int_of(pos[k, : pos_n[k]]) if pos_n[k] > 0 else None
            made[k] = _Lane(True, s, top, True, int(zpre[k] + zneg[k]), least)
        return made, (zpre, zneg, lo, lo_n, pos, pos_n)


def _least(lo: np.ndarray, lo_n: np.ndarray | list[int], units: range) -> int | None:
    """The least of the kept extremes lo[k] (lo_n[k] limbs in use; none kept: −1) for k in
    ``units``: fewest limbs first, exact among those."""
    found = [k for k in units if lo_n[k] > 0]
    if not found:
        return None
    fewest = min(lo_n[k] for k in found)
    return min(_int_of(lo[k, :fewest]) for k in found if lo_n[k] == fewest)
