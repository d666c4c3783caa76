"""Folds of a memorizer's probe lanes: Stage II's step lanes and Stage III's match lanes read
as the evaluation produces them (Lemma G.3; Lemma C.1's matches), so that what the verifier
needs per row is kept and the rows × groups lanes themselves never are.

Folds only read lanes; their counts come from the probes, never from the model's meta. The
checks of :mod:`exactmem.checks.certificate` judge what the folds kept.
"""

from __future__ import annotations

import numpy as np
from gmpy2 import mpq

from exactmem.core.model import MLP
from exactmem.evaluate.records import Trace

__all__ = ["MatchFold", "StepFold", "step_folds"]

MAX_EXAMPLES = 5  # as many offending rows as a check's message shows (every check's)


def _first_rows(by_row: dict) -> dict:
    """The entries of the first rows only, as many as a message shows (and one more)."""
    if len(by_row) <= MAX_EXAMPLES + 1:
        return by_row
    return {r: by_row[r] for r in sorted(by_row)[: MAX_EXAMPLES + 1]}


class StepFold:
    """Stage II of one memorizer (Lemma G.3) read as its step lanes arrive: per row the number
    of steps equal to 1, the first step off {0, 1} and the first rise. Memory O(rows) where the
    lanes themselves take rows × groups (7.6 · 10⁹ values at N = 10⁶)."""

    def __init__(self, prefix: str, steps: int):
        self.prefix = prefix
        self.steps = steps
        self.seen = 0
        self.ones = self.ramp = self.rise = self.flags = None
        self.ramp_values: dict[int, mpq] = {}  # the first offending rows only

    @property
    def key(self) -> str:
        """Where the trace keeps this fold (:attr:`Trace.folds`)."""
        return self.prefix

    def claims(self, name: str) -> bool:
        return name.startswith(self.prefix + "step[") and name[len(self.prefix) + 5 : -1].isdigit()

    def __call__(self, name: str, values: np.ndarray, den: int) -> None:
        j = self.begin(name, len(values))
        if values.dtype != object and den < 2**62:  # one compiled pass over the rows
            from exactmem.evaluate.fast.fold_kernel import step_fold

            fresh = step_fold(values, den, j, self.ones, self.flags, self.ramp, self.rise)
            self.finish(j, int(fresh), values, den)
            return
        one = np.asarray(values == den, bool)
        binary = one | np.asarray(values == 0, bool)
        fresh = ~binary & ((self.flags & 2) == 0)
        risen = one & ((self.flags & 5) == 0)
        self.ramp[fresh] = j
        self.rise[risen] = j
        self.ones += one
        prev = np.where(binary, one, self.flags & 1)
        self.flags = (self.flags & 6) | prev | np.where(fresh, 2, 0) | np.where(risen, 4, 0)
        self.flags = self.flags.astype(np.uint8)
        self.finish(j, int(np.count_nonzero(fresh)), values, den)

    def begin(self, name: str, rows: int) -> int:
        """Step lane ``name`` is about to be folded (here, or by an evaluator that folds it in
        the pass computing it, on ``ones``, ``flags``, ``ramp``, ``rise`` as
        :func:`exactmem.evaluate.fast.fold_kernel.step_fold` does): checks the order, makes the
        state; returns its index j."""
        j = int(name[len(self.prefix) + 5 : -1])
        if j == 1:  # (again, if an evaluator re-runs the sub-layer): start over
            self.seen = 0
            self.ones = None
            self.ramp_values = {}
        if j != self.seen + 1:
            raise AssertionError(f"step lanes out of order: {name} after step[{self.seen}]")
        if self.ones is None:
            # the narrowest type for a count of steps (steps = groups − 1): the pass that
            # reads and writes it per row is memory-bound. ramp and rise are written only
            # where a step is wrong (flags bits 1 and 2; bit 0 is the last binary step)
            kind = np.int32 if self.steps < 2**31 - 1 else np.int64
            self.ones = np.zeros(rows, np.int16 if self.steps < 2**15 - 1 else kind)
            self.ramp = np.zeros(rows, kind)
            self.rise = np.zeros(rows, kind)
            self.flags = np.ones(rows, np.uint8)
        return j

    def finish(self, j: int, fresh: int, values: np.ndarray, den: int) -> None:
        """Step j is folded and ``fresh`` rows ramped at it: keep the first offending values
        (``values``: the exact numerators of the lane over ``den``)."""
        if fresh:
            for r in np.flatnonzero(self.ramp == j)[: MAX_EXAMPLES + 1]:
                self.ramp_values[int(r)] = mpq(int(values[r]), den)
            self.ramp_values = _first_rows(self.ramp_values)
        self.seen = j

    @classmethod
    def of_lanes(cls, trace: Trace, prefix: str, steps: int) -> StepFold:
        fold = cls(prefix, steps)
        for j in range(1, steps + 1):
            numerators, den, _ = trace.lane_raw(f"{prefix}step[{j}]")
            fold(f"{prefix}step[{j}]", numerators, den)
        return fold


class MatchFold:
    """Stage III's match indicators of one memorizer (Lemma C.1) read as their lanes arrive:
    per row how many of the K slots match (indicator 1), the least slot that does, and the least
    slot whose indicator is off {0, 1} (its value kept for the first offending rows). Memory
    O(rows) where the lanes take rows × K (4.7 · 10⁹ values at N = 10⁷)."""

    def __init__(self, prefix: str, K: int):
        self.prefix = prefix
        self.K = K
        self.seen: set[int] = set()
        self.hits = self.slot = self.off = None
        self.off_values: dict[int, tuple[int, mpq]] = {}  # the first offending rows only

    @property
    def key(self) -> str:
        """Where the trace keeps this fold (:attr:`Trace.folds`)."""
        return self.prefix + "match"

    def claims(self, name: str) -> bool:
        head = self.prefix + "match["
        return name.startswith(head) and name[len(head) : -1].isdigit()

    def __call__(self, name: str, values, den: int) -> None:
        k = int(name[len(self.prefix) + 6 : -1])
        if k in self.seen:  # an evaluator re-runs the sub-layer: start over
            self.seen = set()
            self.hits = None
            self.off_values = {}
        rows = len(values)
        if self.hits is None:
            self.hits = np.zeros(rows, np.int16 if self.K < 2**15 - 1 else np.int64)
            self.slot = np.full(rows, -1, np.int32 if self.K < 2**31 - 1 else np.int64)
            self.off = np.full(rows, -1, self.slot.dtype)
        values = np.asarray(values)
        if values.dtype != object and den < 2**62:  # one compiled pass over the rows
            from exactmem.evaluate.fast.fold_kernel import match_fold

            changed = int(match_fold(values, den, k, self.hits, self.slot, self.off))
        else:
            one = np.asarray(values == den, bool)
            wrong = ~one & ~np.asarray(values == 0, bool)
            lowered = wrong & ((self.off < 0) | (self.off > k))
            changed = int(np.count_nonzero(lowered))
            self.hits += one
            self.slot[one & ((self.slot < 0) | (self.slot > k))] = k
            self.off[lowered] = k
        if changed:
            for r in np.flatnonzero(self.off == k)[: MAX_EXAMPLES + 1].tolist():
                self.off_values[r] = (k, mpq(int(values[r]), den))
            self.off_values = _first_rows(self.off_values)
        self.seen.add(k)

    @classmethod
    def of_lanes(cls, trace: Trace, prefix: str, K: int) -> MatchFold:
        fold = cls(prefix, K)
        for k in range(K):
            numerators, den, _ = trace.lane_raw(f"{prefix}match[{k}]")
            fold(f"{prefix}match[{k}]", numerators, den)
        return fold


def _match_fold(trace: Trace, prefix: str, K: int) -> MatchFold:
    """The fold of ``prefix``'s match lanes made during the evaluation, else one made now from
    the stored lanes."""
    fold = trace.folds.get(prefix + "match")
    if fold is None or fold.K != K:
        fold = MatchFold.of_lanes(trace, prefix, K)
    return fold


def step_folds(model) -> list[StepFold | MatchFold]:
    """A :class:`StepFold` and a :class:`MatchFold` for every memorizer (and sub-network) of
    a model: what the evaluation hands them is never stored."""
    folds: list[StepFold | MatchFold] = []
    for sub in model.sublayers:
        if not isinstance(sub, MLP):
            continue
        base = f"{sub.label}." if sub.label else ""
        nets = sorted({p.name.split(".", 1)[0] for p in sub.probes if p.name.startswith("net")})
        for prefix in [f"{base}{net}." for net in nets] or [base]:
            K, steps = _lane_counts(sub, prefix)
            # a fold only reads lanes, counted from the probes (not the meta); step lanes are
            # folded as they come, so only when they come as step[1], step[2], …: otherwise
            # they are stored and the check reads them in order (StepFold.of_lanes)
            if steps and _steps_in_order(sub, prefix):
                folds.append(StepFold(prefix, steps))
            if K:
                folds.append(MatchFold(prefix, K))
    return folds


def _steps_in_order(mlp: MLP, prefix: str) -> bool:
    """Whether ``mlp``'s step probes under ``prefix`` are computed in the order step[1],
    step[2], … (by layer, then by their place in the probe list)."""
    base = f"{mlp.label}." if mlp.label else ""
    head = prefix[len(base) :] + "step["
    found = [
        (p.layer, i, int(p.name[len(head) : -1]))
        for i, p in enumerate(mlp.probes)
        if p.name.startswith(head) and p.name[len(head) : -1].isdigit()
    ]
    return [j for _, _, j in sorted(found)] == list(range(1, len(found) + 1))


def _lane_counts(mlp: MLP, prefix: str) -> tuple[int, int]:
    """(match lanes, step lanes) that ``mlp`` probes under ``prefix`` (its label included)."""
    base = f"{mlp.label}." if mlp.label else ""
    local = prefix[len(base) :]
    K = steps = 0
    for p in mlp.probes:
        if p.name.startswith(local + "match[") and p.name[len(local) + 6 : -1].isdigit():
            K += 1
        elif p.name.startswith(local + "step[") and p.name[len(local) + 5 : -1].isdigit():
            steps += 1
    return K, steps
