"""The fast exact evaluator: same values as the reference evaluator, computed with less work.

Two honest savings, both exact for every model the IR expresses:

* **Row lanes in int64.** Before each layer the engine proves, from the actual largest
  |value| of every input lane, that every partial sum of a unit stays below 2^62; such units
  run in a numba kernel over all rows. A unit that could exceed the bound never touches int64.
* **Class-shared lanes.** Rows are partitioned into classes; a *shared* lane holds one Python
  integer per class, and all rows of a class have that value. A unit reading only shared lanes
  is computed once per class (the packed integers a Lemma C.1 group selects, for instance).
  A big unit that also reads row lanes splits the classes by the exact values of the row
  functionals it reads (:func:`~exactmem.evaluate.kernels.refine`), so the invariant holds
  after it: the split is computed, never assumed. If a functional is itself too big for int64
  every row becomes its own class — reference speed, same values.

Stage II's step layers (σ(x − t), σ(x − t − 1) of a carried key x, read through their
difference) are decided from the keys sorted once — statistics and the step's boundary by
binary search, classes as runs of the sorted rows — when the layer has exactly that shape
(:mod:`exactmem.evaluate.sorted_steps`, :meth:`_Engine._sorted_plan`); otherwise row by row.

Stretches of such layers run in one compiled pass instead of layer by layer: runs of
class-shared layers (:mod:`exactmem.evaluate.shared_runs`, Stage III's peel and read-outs while
its values are short) and runs of step layers in key order (:meth:`_Engine.step_run`, Stage
II) — their shapes checked on the structure, every value and statistic the same (docs/fast.md,
"Runs of layers in one compiled pass").

Shared lanes that peel bits off a packed integer cost a few limbs per class and layer, not its
length: exact lengths, in-place updates after their readers, difference tags and views (units
kept as an anchor's value plus a few digits) — docs/fast.md, "Keeping the packed integers
cheap"; each is an identity checked on the layer's structure, never assumed of the data.

Statistics (zeros, least non-zero |pre-activation|) count every row: a class contributes its
row count. Lanes are returned per row; the numerators equal the reference evaluator's after its
gcd reduction, and the differential tests compare the two on outputs, lanes and statistics.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpq

from exactmem.evaluate import reference, shared_runs
from exactmem.evaluate.digits import LIMB, MASK, _int_of, _limb_rows, _limbs, _paired, _sparse
from exactmem.evaluate.limb_store import LimbStore
from exactmem.evaluate.reference import Batch, LayerStat
from exactmem.evaluate.sorted_steps import class_ranges, step_boundary, unit_stats
from exactmem.exact_arrays import Gathered, first_seen_ids, plus, times, top
from exactmem.model import MLP, Affine
from exactmem.progress import tell

__all__ = ["LIMIT", "run", "run_points"]

LIMIT = 2**62  # every partial sum of an int64 unit is proved below this
PARALLEL_ROWS = 1 << 16  # below this many rows (classes) a thread pool costs more than it saves
PARALLEL_CLASSES = 1024  # a class costs ~0.3 µs: fewer are not worth waking threads for
# Stage II in key order from this many rows: its runs of step layers (step_kernel) cost O(log N +
# classes) a layer against the row kernel's O(N) (N = 10⁴: 0.147 s against 0.252 s in all; one
# layer at a time, ~60 µs of Python each, it paid only from 3·10⁴ rows)
SORTED_FROM = 0
# layers per run of step layers: its statistics take (mixed units × limbs) per layer (N = 10⁷:
# 2 × 1534 limbs), so a long Stage II goes in several runs, each a few µs to set up
STEP_RUN_LAYERS = 256


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


@dataclass
class _SortedKeys:
    """Stage II in key order (exactmem.evaluate.sorted_steps): the carried key lane, its rows
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


class _Fallback(Exception):
    """The fast path cannot prove int64 safety for a row functional: use the reference."""


def _kernels():
    from exactmem.evaluate import kernels  # numba: imported only when evaluating

    return kernels


def step_kernel():
    from exactmem.evaluate import step_kernel  # numba, as _kernels

    return step_kernel


def run_kernel():
    from exactmem.evaluate import run_kernel  # numba, as _kernels

    return run_kernel


def _obj(a: np.ndarray) -> np.ndarray:
    """int64 → object array of Python ints."""
    return a.astype(object)


SHORT = 8  # limbs per class of a short block (a long one has _Engine.long)


class _Engine:
    """State of one MLP evaluation: row slots, classes, shared slots, current lanes."""

    def __init__(self, X: Batch, den: int, n: int):
        self.k = _kernels()
        self.n = n
        self.den = den
        self._cls = np.zeros(n, np.int32)  # refinement stops below n/4 classes
        self.nclass = 1 if n else 0
        self.counts = np.array([n], np.int64)
        self.R = np.zeros((0, n), np.int64)
        self.free: list[int] = []
        self.store = LimbStore()  # shared slots' limbs, a block of its own length per slot
        self.long = 0  # limbs per class of every long block (see _width)
        self.used = np.zeros(0, np.int64)  # per slot: the most limbs any class uses
        self.CL = np.zeros((0, 1), np.int64)  # per slot and class: exact limbs in use
        # views: slot → (base slot, digit offsets, digits); in a class c with V[slot, c] = 1
        # the value is H[base, c] + Σ digits, with no limbs of its own (see _anchors)
        self.V = np.zeros((0, 1), np.int8)
        self.views: dict[int, tuple[int, list[int], list[int]]] = {}
        # (x, y) → d: in every class where both are non-zero, H[x] − H[y] = d (the two were
        # written as σ(v + b₁), σ(v + b₂) from one lane v, d = b₁ − b₂; neither was clipped)
        self.tags: dict[tuple[int, int], int] = {}
        self._probed: dict[tuple, np.ndarray] = {}  # row functionals probed since the last layer
        self._fused: dict[int, np.ndarray] = {}  # probes of the last layer made in its pass
        self._folded: dict[int, tuple] = {}  # of those, the ones folded there: (fold, j, fresh)
        # units of the last layer that only its probes read are not stored: each has a recipe
        # (input slots, coefficients, bias) on row slots held for one more layer, and a
        # negative placeholder slot; anything that reads its rows makes them (_rows_of)
        self._recipes: dict[int, tuple] = {}
        self._held: set[int] = set()
        self._placeholders = 0
        self._sorted: _SortedKeys | None = None  # Stage II in key order, while it applies
        self._no_run_before = 0  # a run refused by the kernel: its layers go one by one
        self._no_step_before = 0  # likewise for a run of step layers
        self._order: _SortedKeys | None = None  # the last key lane sorted (kept for re-entry)
        # (class count, sorted keys) at which the classes were found not to be runs
        self._not_runs: tuple = (-1, None)
        self._classes: np.ndarray | None = None  # a copy of cls kept by Gathered read-outs
        self.hfree: list[int] = []
        self._scratch = np.zeros((0, n), np.int64)
        self.lanes = []
        for col in X:
            bound = top(np.asarray(col))
            if bound >= LIMIT:
                raise _Fallback(f"an input value has {bound.bit_length()} bits")
            s = self._alloc()
            self.R[s] = np.array(col, dtype=np.int64) if n else 0
            v = self.R[s]
            pos = v[v > 0]
            self.lanes.append(
                _Lane(
                    False,
                    s,
                    bound,
                    bool(n == 0 or v.min() >= 0),
                    int(n - np.count_nonzero(v)),
                    int(pos.min()) if pos.size else None,
                )
            )

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

    # ---------------------------------------------------------------- storage

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
        self.long = max(self.long, limbs)
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
        self.store.trim()

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

    def _linear(self, *args) -> None:
        if self.n >= PARALLEL_ROWS:
            self.k.linear_rows_parallel(*args)
        else:
            self.k.linear_rows(*args)

    def _buffer(self, k: int) -> np.ndarray:
        """A reused (k × rows) int64 scratch array: fresh large arrays cost page faults."""
        if self._scratch.shape[0] < k:
            self._scratch = np.zeros((k, self.n), np.int64)
        return self._scratch[:k]

    def _table(self, lane: _Lane) -> np.ndarray:
        if lane.slot in self.views:
            return self.shared_values(lane.slot).astype(np.int64)
        out = np.zeros(self.nclass, np.int64)
        self.k.limbs_to_int64(*self.store.args(), self.CL, lane.slot, self.nclass, out)
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
            sigs = known[None, :]  # a probe of the layer before read the same functional
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

    # ---------------------------------------------------------------- layers

    def layer(
        self, a: Affine, relu: bool = True, probes=(), nxt: Affine | None = None, folds=()
    ) -> tuple[int, int | None]:
        """Apply ``a`` (then σ if ``relu``); returns (zeros, least non-zero |z| numerator) over
        all pre-activations, as the reference counts them. ``probes``: read-outs (terms over
        the new lanes) that may be computed in the same pass (:meth:`take_probe`); ``folds``
        (beside them: a fold and the probe's name, or None) may be folded in it too.
        ``nxt``, the layer after, tells which new units only the probes will read."""
        lanes = self.lanes
        self._fused = {}
        self._folded = {}
        plans = []
        bounds = []
        mixed: dict[tuple, int] = {}
        for row, b in zip(a.rows, a.bias, strict=True):
            bias = b * self.den
            rterms = [(c, w) for c, w in row if not lanes[c].shared]
            bound = abs(bias) + sum(abs(w) * lanes[c].bound for c, w in row)
            bounds.append(bound)
            if relu and len(row) == 1 and row[0][1] == 1 and b == 0 and lanes[row[0][0]].nonneg:
                plans.append(("alias", row[0][0]))
            elif not rterms:
                plans.append(("shared", None))
            elif bound < LIMIT and all(abs(w) < LIMIT for _, w in row):
                plans.append(("row", None))
            else:
                lam = math.gcd(*[w for _, w in rterms]) * (1 if rterms[0][1] > 0 else -1)
                g = tuple((c, w // lam) for c, w in rterms)
                if sum(max(abs(w), 1) * max(lanes[c].bound, 1) for c, w in g) >= LIMIT:
                    raise _Fallback("a row functional read by a shared unit exceeds int64")
                plans.append(("mixed", (mixed.setdefault(g, len(mixed)), lam)))
        steps = self._sorted_plan(a, relu, plans, probes, folds, nxt)
        if steps is None:
            self._leave_sorted()
        self._make_read_rows(a, plans, mixed)
        sig = self._refine([list(g) for g in mixed]) if mixed else None
        if steps is not None and not self._enter_sorted(steps[0]):
            steps = None

        out: list[_Lane | None] = [None] * len(plans)
        recipes: dict[int, tuple] = {}
        zeros = 0
        best: int | None = None
        row_units = [u for u, p in enumerate(plans) if p[0] == "row"]
        if steps is not None:
            zeros, best, recipes = self._sorted_rows(a, steps, out)
        elif row_units:
            table_of: dict[int, int] = {}
            ptr, src, kind, coef = _encode([a.rows[u] for u in row_units], lanes, table_of)
            table = self._tables(table_of, lanes)
            bias = np.array([a.bias[u] * self.den for u in row_units], np.int64)
            stats = np.zeros((len(row_units), 5), np.int64)
            fused, pargs = self._fusable(a, relu, probes, plans, bounds, row_units)
            elided = self._elidable(a, nxt, plans, row_units, [probes[i] for i in fused])
            slots = np.array([-1 if u in elided else self._alloc() for u in row_units], np.int64)
            fold, state, folding = self._fold_args(fused, folds)
            chunks = self.k._chunks(self.n, PARALLEL_ROWS // 2)
            args = (self.R, self.cls, table, slots, ptr, src, kind, coef, bias, relu, stats)
            if chunks == 1:  # a thread pool costs more than it saves on a small layer
                self.k._relu_rows(*args, *pargs, fold, *state, 0, self.n)
            else:
                self.k.relu_units(*args, *pargs, fold, *state, chunks)
            pout, pflag = pargs[3], pargs[4]
            self._fused = {i: pout[q] for q, i in enumerate(fused) if not pflag[q]}
            if folding is not None:  # folded exactly, whether or not the int8 copy fits
                self._folded[folding[0]] = (*folding[1:], int(fold[3]))
            for j, u in enumerate(row_units):
                z, neg, mabs, mpos, mx = (int(x) for x in stats[j])
                zeros += z
                if mabs < LIMIT:
                    best = mabs if best is None else min(best, mabs)
                if u in elided:
                    self._placeholders += 1
                    slots[j] = -self._placeholders
                    terms = a.rows[u]
                    recipes[int(slots[j])] = (
                        [lanes[c].slot for c, _ in terms],
                        [w for _, w in terms],
                        int(bias[j]),
                        relu,
                    )
                out[u] = _Lane(
                    False,
                    int(slots[j]),
                    mx,
                    relu or neg == 0,
                    z + neg if relu else z,
                    mpos if mpos < LIMIT else None,
                )
        big_units = [u for u, p in enumerate(plans) if p[0] in ("shared", "mixed")]
        if big_units:
            got = None
            if (
                relu
                and steps is None
                and self.den == 1
                and all(plans[u][0] == "shared" for u in big_units)
                and all(lanes[c].nonneg for u in big_units for c, _ in a.rows[u])
            ):
                got = self._shared_units(a, big_units, out)
            z, b = got or self._shared_layer(a, relu, plans, bounds, big_units, sig, out)
            zeros += z
            if b is not None:
                best = b if best is None else min(best, b)
        for u, (how, extra) in enumerate(plans):
            if how == "alias":
                src_lane = lanes[extra]
                zeros += src_lane.zeros
                if src_lane.min_pos is not None:
                    best = src_lane.min_pos if best is None else min(best, src_lane.min_pos)
                out[u] = src_lane
        self._let_go(lanes, out, recipes)
        self.den *= a.denominator
        return zeros, best

    def _let_go(self, lanes: list[_Lane], out: list[_Lane], recipes: dict) -> None:
        """``out`` replaces ``lanes``: slots no lane holds any more are free (a view keeps its
        base); the rows this layer's ``recipes`` read stay one more layer, the last layer's go."""
        keep_r = {lane.slot for lane in out if not lane.shared}
        keep_h = {lane.slot for lane in out if lane.shared}
        keep_h |= {self.views[s][0] for s in keep_h if s in self.views}
        gone = {lane.slot for lane in lanes if lane.shared} | {
            self.views[lane.slot][0] for lane in lanes if lane.shared and lane.slot in self.views
        }
        for s in gone - keep_h:
            if s not in self.hfree:
                self.hfree.append(s)
                self.views.pop(s, None)
        held, self._held = self._held, {s for slots_, *_ in recipes.values() for s in slots_}
        self._recipes = recipes
        for s in [lane.slot for lane in lanes if not lane.shared] + sorted(held):
            if s >= 0 and s not in keep_r and s not in self._held and s not in self.free:
                self.free.append(s)
        self.lanes = out
        self._probed = {}

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
        chunks = self.k._chunks(self.n, PARALLEL_ROWS // 2)
        if chunks == 1:
            self.k._relu_rows(*args, 0, self.n)
        else:
            self.k.relu_units(*args, chunks)
        lane.slot = slot

    # ---------------------------------------------------------------- runs of step layers

    def step_run(self, layers, start: int, stop_at: int, probes_at, fold_of) -> list | None:
        """Layers start.. of Stage II in key order in one compiled pass
        (:mod:`exactmem.evaluate.step_kernel`), while each has the shape :meth:`_step_plan`
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
            for i in range(lptr[m], lptr[m + 1] - 1):
                lam_limbs[i] = v & MASK
                v >>= LIMB
            lam_limbs[lptr[m + 1] - 1] = v
        # limbs of a kept extreme: a stored value's, or |y + λ| < |λ| of a clipped one
        S = max(int(self.store.width.max()), max(np.diff(lptr), default=0)) + 2
        M = len(mixed)
        ustats = np.zeros((len(rows), 5), np.int64)
        P = np.zeros(L, np.int64)
        mzeros, mneg = np.zeros(M, np.int64), np.zeros(M, np.int64)
        mlo, mpos, mhi = (np.zeros((M, S), np.int64) for _ in range(3))
        mlo_n, mpos_n, mhi_n = (np.full(M, -1, np.int64) for _ in range(3))
        arr = lambda xs: np.array(xs, np.int64)  # noqa: E731
        done = step_kernel().step_run(
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
        while li < stop_at and len(layouts) < STEP_RUN_LAYERS:
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

    # ---------------------------------------------------------------- runs of shared layers

    def shared_run(self, layers, start: int, stop_at: int, probes_at, hand) -> list | None:
        """Layers start.. of a run of class-shared layers (:mod:`exactmem.evaluate.shared_runs`)
        in one compiled pass, then its row units layer by layer (from the lanes they read, the
        shared values among them stored by the kernel) and ``hand(layer, lanes)`` for each
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
        chunks = self.k._chunks(self.n, PARALLEL_ROWS // 2)
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
        if not run_kernel().run(args, self.nclass, PARALLEL_CLASSES):
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

    def take_probe(self, i: int, terms) -> np.ndarray:
        """Probe ``i`` of the last layer (its ``terms``): computed in the layer's own pass when
        it could be, else now (:meth:`probe`). A step kept sorted is handed on as rows unless
        the layer folded it."""
        values = self._fused.pop(i, None)
        if values is None:
            return self.probe(terms)
        self._probed[_key(terms, self.lanes)] = values  # the next layer may refine on it
        if isinstance(values, _Step) and i not in self._folded:
            return values.rows()
        return values

    # ---------------------------------------------------------------- Stage II in key order

    def _sorted_plan(self, a: Affine, relu: bool, plans, probes, folds, nxt):
        """Whether this layer is a Stage II step layer that the sorted keys decide
        (:mod:`exactmem.evaluate.sorted_steps`): every row unit σ(w·x + b), w > 0, of one
        stored row lane x that the layer carries on unchanged; one probe reading exactly those
        units, 0 then 1 along the sorted keys; the next layer reading the units only through
        it; its fold (if any) the one folded here, its boundary not below the last (no rise).
        Returns (keys in order, [(unit, w, b)], probe index, boundary, fold claim) or None."""
        if not (relu and self.den == 1 and a.denominator == 1 and nxt is not None):
            return None
        if self.n < max(SORTED_FROM, 1):
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
        chunks = self.k._chunks(self.nclass, PARALLEL_CLASSES)
        if chunks == 1:
            ok = self.k._shared_classes(*args, 0, self.nclass, relu, arr(widths), *stats)
        else:
            ok = self.k.shared_units(*args, self.nclass, relu, arr(widths), *stats, chunks)
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

    def reduce(self) -> None:
        """Divide numerators and denominator by their gcd, as the reference does."""
        if self.den == 1:
            return
        g = self.den
        for c in range(len(self.lanes)):
            self._rows_of(c)
        slots = np.array(sorted({lane.slot for lane in self.lanes if not lane.shared}), np.int64)
        if slots.size:  # the denominator may exceed int64: gcd of the rows first
            g = math.gcd(g, int(self.k.gcd_rows(self.R, slots, np.int64(0))))
        hslots = sorted({lane.slot for lane in self.lanes if lane.shared})
        for s in hslots:
            for v in self.shared_values(s):
                g = math.gcd(g, int(v))
                if g == 1:
                    return
        if g == 1:
            return
        self.tags = {}  # differences shrink by g too; rarely worth keeping
        for s in slots:  # a row value divisible by g ≥ 2^62 > |value| is 0
            self.R[s] = self.R[s] // g if g < LIMIT else 0
        for s in hslots:
            values = self.shared_values(s) // g
            self._store(s, values)
        for lane in self.lanes:
            lane.bound //= g
            if lane.min_pos is not None:
                lane.pos = lane.min_pos // g
        self.den //= g

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
            for i in range(NL - 1):
                block[c, i] = v & MASK
                v >>= LIMB
            block[c, NL - 1] = v
        self.used[slot] = NL

    def _forget(self, *slots: int) -> None:
        """Drop the difference tags of slots about to be overwritten."""
        gone = set(slots)
        if self.tags and gone:
            self.tags = {k: d for k, d in self.tags.items() if not gone.intersection(k)}

    def probe(self, terms) -> np.ndarray:
        """Numerators of a linear read-out, per row (int64 when proved to fit, else ints)."""
        lanes = self.lanes
        for c, _ in terms:
            self._rows_of(c)
        # every coefficient, value and partial sum fits int64
        reach = sum(max(abs(w), 1) * max(lanes[c].bound, 1) for c, w in terms)
        if reach < LIMIT:
            table_of: dict[int, int] = {}
            ptr, src, kind, coef = _encode([list(terms)], lanes, table_of)
            table = self._tables(table_of, lanes)
            if table_of and len(table_of) == len(terms):  # class-shared lanes alone
                return self._per_class(terms, table, reach)
            # kept until the verifier reads it: the narrowest exact type (steps are 0/1)
            if reach < 128:  # every value fits int8: written so, in the one pass
                values = np.empty(self.n, np.int8)
                self._linear(self.R, self.cls, table, ptr, src, kind, coef, values[None, :])
            else:
                out = self._buffer(1)
                self._linear(self.R, self.cls, table, ptr, src, kind, coef, out)
                small = self.n and -128 <= out[0].min() and out[0].max() < 128
                values = out[0].astype(np.int8 if small else np.int64)
            if table is _EMPTY_TABLE:  # the next layer may refine on this very functional
                self._probed[_key(terms, lanes)] = values
            return values
        acc = np.zeros(self.n, dtype=object)
        for c, w in terms:
            acc = acc + self.column(c) * w
        return acc

    def _per_class(self, terms, table: np.ndarray, reach: int):
        """A read-out of class-shared lanes alone: its value per class, gathered per row on
        access (:class:`~exactmem.exact_arrays.Gathered`) — when the rows' classes are already
        kept for another such read-out, or when its rows would take 8 bytes each (the classes
        take 4): never more memory than the rows."""
        per_class = np.zeros(self.nclass, np.int64)
        for j, (_, w) in enumerate(terms):
            per_class += w * table[j]  # |partial sums| ≤ reach < 2⁶²
        small = reach < 128 or (-128 <= per_class.min(initial=0) and per_class.max(initial=0) < 128)
        if self._classes is None and small:
            return per_class.astype(np.int8)[self.cls]
        if self._classes is None:
            self._classes = self.cls.copy()
        return Gathered(per_class.astype(np.int8 if small else np.int64), self._classes)

    def column(self, c: int) -> np.ndarray:
        self._rows_of(c)
        lane = self.lanes[c]
        if lane.shared:
            return self.shared_values(lane.slot)[self.cls]
        return _obj(self.R[lane.slot])

    def batch(self) -> Batch:
        return [self.column(c) for c in range(len(self.lanes))]


_EMPTY_TABLE = np.zeros((0, 1), np.int64)
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


def _least(lo: np.ndarray, lo_n: np.ndarray | list[int], units: range) -> int | None:
    """The least of the kept extremes lo[k] (lo_n[k] limbs in use; none kept: −1) for k in
    ``units``: fewest limbs first, exact among those."""
    found = [k for k in units if lo_n[k] > 0]
    if not found:
        return None
    fewest = min(lo_n[k] for k in found)
    return min(_int_of(lo[k, :fewest]) for k in found if lo_n[k] == fewest)


def _normal(terms) -> tuple:
    """A row functional up to a non-zero factor: lanes in order, coprime coefficients, the
    first positive."""
    terms = sorted(terms)
    lam = math.gcd(*[w for _, w in terms]) * (1 if terms[0][1] > 0 else -1)
    return tuple((c, w // lam) for c, w in terms)


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


def _key(terms, lanes: list[_Lane]) -> tuple:
    """A row functional by the slots it reads (lanes of one layer)."""
    return tuple(sorted((lanes[c].slot, lanes[c].shared, w) for c, w in terms))


_EMPTY_SIG = np.zeros((1, 1), np.int64)


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


def mlp(
    mlp: MLP,
    X: Batch,
    den: int,
    size: int,
    sub: int,
    on_probe: Callable,
    stats: list,
    progress: Callable[[str], None] | None = None,
    jobs: int = 1,
) -> tuple[Batch, int]:
    """Drop-in for the reference's MLP step: same values, lanes and statistics. Falls back to
    the reference evaluator (whole sub-layer) where int64 safety cannot be proved."""
    threads(jobs)
    try:
        return _mlp_fast(mlp, X, den, size, sub, on_probe, stats, progress)
    except _Fallback as why:
        if progress:
            progress(f"{mlp.label or 'mlp'}: reference evaluator ({why})")
        if jobs > 1 and size >= 2 * reference.MIN_ROWS_PER_JOB:
            return reference._mlp_parallel(mlp, X, den, size, sub, on_probe, stats, jobs, progress)
        return reference._mlp(mlp, X, den, size, sub, on_probe, stats, progress)


def threads(jobs: int) -> None:
    """Run the parallel kernels on ``jobs`` threads (at most numba's pool; results do not
    depend on it: chunk statistics are merged in chunk order and values are exact)."""
    import numba

    numba.set_num_threads(max(1, min(jobs, numba.config.NUMBA_NUM_THREADS)))


def _mlp_fast(mlp, X, den, size, sub, on_probe, stats, progress):
    probes_at: dict[int, list] = {}
    for p in mlp.probes:
        probes_at.setdefault(p.layer, []).append(p)
    fold_of = getattr(on_probe, "fold_of", lambda name: None)

    def name_of(p) -> str:
        return f"{mlp.label}.{p.name}" if mlp.label else p.name

    def claim_of(p):  # a probe's fold and its name, if a fold takes it in the layer's pass
        name = name_of(p)
        fold = fold_of(name)
        return None if fold is None else (fold, name)

    def hand_at(li: int, lanes: list) -> None:
        """The probes of layer li inside a shared run, over that layer's output ``lanes``."""
        now, eng.lanes = eng.lanes, lanes
        eng._fused, eng._folded = {}, {}
        try:
            hand_on(li)
        finally:
            eng.lanes = now

    def hand_on(li: int) -> None:
        """The probes of layer li, the layer just done, to their folds or ``on_probe``."""
        for i, p in enumerate(probes_at.get(li, ())):
            values = eng.take_probe(i, p.terms)
            if eng.den != 1 and values.dtype != object:
                values = _obj(values)
            # handed on at once (a fold reads step lanes as they come; a fallback re-runs
            # the sub-layer and hands every probe on again); folded in the layer's pass: the
            # fold only keeps the first offending values
            folded = eng._folded.get(i)
            if folded is not None:
                fold, j, fresh = folded
                fold.finish(j, fresh, values, eng.den)
            else:
                on_probe(name_of(p), values, eng.den)

    eng = _Engine(X, den, size)
    my_stats: list = []
    last = len(mlp.layers) - 1
    li, report = 0, 0
    while li <= last:
        layer = mlp.layers[li]
        if progress and li >= report:
            tell(
                progress,
                f"{mlp.label or 'mlp'}: layer {li}/{len(mlp.layers)} on {size} inputs",
                phase=f"evaluating {mlp.label or 'mlp'}",
                done=li,
                total=len(mlp.layers),
            )
            step = reference._report_every(progress, len(mlp.layers), 1000)
            report = (li // step + 1) * step
        if li == last:
            eng.layer(layer, relu=False)
            break
        run = eng.step_run(mlp.layers, li, last, probes_at, claim_of)  # (folds its probes)
        if run is None:
            run = eng.shared_run(mlp.layers, li, last, probes_at, hand_at)
        if run is not None:  # layers li.. in one pass: their statistics, as one by one
            for zeros, best in run:
                my_stats.append(
                    LayerStat(
                        sub,
                        li,
                        len(mlp.layers[li].rows),
                        size,
                        zeros,
                        None if best is None else mpq(best, eng.den),
                    )
                )
                li += 1
            continue
        here = probes_at.get(li, ())
        names = [name_of(p) for p in here]
        folds = [(f, name) if (f := fold_of(name)) is not None else None for name in names]
        zeros, best = eng.layer(
            layer, probes=[p.terms for p in here], nxt=mlp.layers[li + 1], folds=folds
        )
        my_stats.append(
            LayerStat(
                sub, li, len(layer.rows), size, zeros, None if best is None else mpq(best, eng.den)
            )
        )
        eng.reduce()
        hand_on(li)
        li += 1
    H, hden = eng.batch(), eng.den
    stats.extend(my_stats)
    return reference._residual(mlp, X, den, H, hden)


# --------------------------------------------------------------------------- token mixing


def _zero_map(a: Affine) -> bool:
    return all(not row for row in a.rows) and not any(a.bias)


def _affine_exact(a: Affine, X: Batch, den: int, size: int) -> tuple[Batch, int]:
    """:func:`reference._affine` on columns that may be int64: as Python integers wherever a
    product or sum could pass int64 (numpy would wrap around or overflow)."""
    fixed = [x for x in X if np.asarray(x).dtype != object]
    if fixed:
        t = max(1, *(top(np.asarray(x)) for x in fixed))  # a weight ≥ 2⁶³ fails on zeros too
        rows = zip(a.rows, a.bias, strict=True)
        reach = max((sum(abs(w) for _, w in r) * t + abs(b) * den for r, b in rows), default=0)
        if reach >= LIMIT:
            X = [np.asarray(x).astype(object) for x in X]
    return reference._affine(a, X, den, size)


def _as_matrix(columns: list[np.ndarray], rows: int) -> np.ndarray:
    """Numerator columns → one (rows × dim) array: int64 when every value fits, else ints."""
    if not columns:
        return np.zeros((rows, 0), np.int64)
    big = max((top(np.asarray(col)) for col in columns), default=0)
    dtype = np.int64 if big < LIMIT else object
    return np.stack([np.asarray(col).astype(dtype) for col in columns], axis=1)


def mix(sub, X: Batch, den: int, index: np.ndarray, keep: range):
    """A positional encoding, or attention whose scores are all equal (uniform scores, or a
    zero key or query map: every score is 0), evaluated on whole arrays of sequences.

    Kajitsuka & Sato 2025, eq. (39): equal scores give weights exactly 1/n under softmax and
    hardmax alike, so the output at q is x_q + Σ_h W_O^h (1/n_k) Σ_k W_V^h x_k. Returns
    (numerators per distinct row in first-seen order, denominator, index), or None when scores
    may differ (the reference evaluator decides those)."""
    from exactmem.model import Attention, PositionalEncoding

    N, n = index.shape
    size = len(X[0]) if X else 0
    if isinstance(sub, PositionalEncoding):
        D = math.lcm(den, *[int(v.denominator) for row in sub.table[:n] for v in row])
        base = times(_as_matrix(X, size), D // den)
        shift = _as_matrix(
            [
                np.array([int(row[j] * D) for row in sub.table[:n]], dtype=object)
                for j in range(len(X))
            ],
            n,
        )
        cols = list(keep)
        Y = plus(base[index[:, cols]], shift[cols][None, :, :])
        return _distinct(Y.reshape(N * len(cols), -1), D, N, len(cols))
    if not isinstance(sub, Attention):
        return None
    if sub.score != "uniform" and not all(
        _zero_map(h.key) or _zero_map(h.query) for h in sub.heads
    ):
        return None
    keys = n - 1 if sub.mask == "context" and n > 1 else n
    deltas = []
    for h in sub.heads:
        V, vden = _affine_exact(h.value, X, den, size)
        Vm = _as_matrix(V, size)
        picked = Vm[index[:, :keys]]  # (N, keys, dv)
        if Vm.dtype != object and int(np.abs(Vm).max(initial=0)) * keys >= LIMIT:
            picked = picked.astype(object)
        S = picked.sum(axis=1)  # Σ_k W_V x_k, over vden
        O, oden = _affine_exact(h.output, [S[:, j] for j in range(S.shape[1])], vden, N)
        deltas.append((_as_matrix(O, N), oden * keys))
    D = math.lcm(den, *[d for _, d in deltas])
    total = np.zeros((N, len(X)), np.int64)
    for M, d in deltas:
        total = plus(total, times(M, D // d))
    base = times(_as_matrix(X, size), D // den)
    cols = list(keep)
    Y = plus(base[index[:, cols]], total[:, None, :])
    return _distinct(Y.reshape(N * len(cols), -1), D, N, len(cols))


def _distinct(Y: np.ndarray, D: int, N: int, width: int):
    """Rows of Y (numerators over D) deduplicated in first-seen order, as the reference."""
    if Y.dtype != object:  # hashed rows, each compared with its group's first
        ids, first = first_seen_ids(Y)
        rows_num = Y[first]
        new_index = ids.reshape(N, width)
        # reference._reduce's gcd of D and every numerator, at numpy's speed (int64 here;
        # all numerators 0: g = D, which may not be an int64 — the values are 0 over 1)
        top = int(np.gcd.reduce(rows_num, axis=None)) if D != 1 else 1
        if top == 0:
            D = 1
        elif (g := math.gcd(D, top)) > 1:
            rows_num, D = rows_num // g, D // g
        return [rows_num[:, j].astype(object) for j in range(rows_num.shape[1])], D, new_index
    else:
        where: dict[tuple, int] = {}
        ids = np.array([where.setdefault(tuple(r), len(where)) for r in Y], np.int64)
        rows_num = np.array(list(where), dtype=object).reshape(len(where), Y.shape[1])
        new_index = ids.reshape(N, width)
    batch = [rows_num[:, j].astype(object) for j in range(rows_num.shape[1])]
    batch, bden = reference._reduce(batch, D)
    return batch, bden, new_index


def run(model, vocab, sequences, **kw):
    """:func:`exactmem.evaluate.reference.run` with the fast MLP and mixing steps."""
    return reference.run(model, vocab, sequences, mlp_step=mlp, mix_step=mix, **kw)


def run_points(model, points, **kw):
    return run(model, points, [[i] for i in range(len(points))], **kw)
