"""The engine of one MLP evaluation: its lanes layer by layer, each unit where it is proved to
fit — int64 rows, limbs per class, key order, runs of layers — its parts one idea each
(:mod:`~exactmem.evaluate.fast.slots`, :mod:`~.classes`, :mod:`~.row_units`,
:mod:`~.shared_layer`, :mod:`~.run_layers`, :mod:`~.key_order`)."""

from __future__ import annotations

import math

import numpy as np

from exactmem.core.exact_arrays import Gathered, top
from exactmem.core.model import Affine
from exactmem.evaluate.arithmetic import Batch
from exactmem.evaluate.fast import kernels, limits
from exactmem.evaluate.fast.classes import _Classes
from exactmem.evaluate.fast.digits import _reach
from exactmem.evaluate.fast.key_order import _KeyOrder, _SortedKeys
from exactmem.evaluate.fast.lanes import _EMPTY_TABLE, _encode, _Fallback, _key, _Lane, _obj, _Step
from exactmem.evaluate.fast.limb_store import LimbStore
from exactmem.evaluate.fast.limits import LIMIT, _chunks
from exactmem.evaluate.fast.row_units import _RowUnits
from exactmem.evaluate.fast.run_layers import _SharedRuns
from exactmem.evaluate.fast.shared_layer import _SharedLayer
from exactmem.evaluate.fast.slots import _Slots


class _Engine(_KeyOrder, _SharedRuns, _SharedLayer, _RowUnits, _Classes, _Slots):
    """State of one MLP evaluation: row slots, classes, shared slots, current lanes."""

    def __init__(self, X: Batch, den: int, n: int):
        self.k = kernels.row_kernel()
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
            bound = _reach(bias, [(w, lanes[c].bound) for c, w in row])
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
            chunks = _chunks(self.n, limits.PARALLEL_ROWS // 2)
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
            # computed in int64 (one compiled form of the kernel), kept until the verifier reads
            # it in the narrowest exact type (steps are 0/1)
            out = self._buffer(1)
            self._linear(self.R, self.cls, table, ptr, src, kind, coef, out)
            small = reach < 128 or (self.n and -128 <= out[0].min() and out[0].max() < 128)
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
        access (:class:`~exactmem.core.exact_arrays.Gathered`) — when the rows' classes are already
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
