"""numba kernels folding a step or match lane into per-row state (exactmem.checks.certificate's
StepFold and
MatchFold): in the row kernel's pass (:func:`_fold_block`) or apart. Imported lazily."""

from __future__ import annotations

import numpy as np

from exactmem.runtime.jit import inner, njit


@inner
def _fold_block(values, m, b0, fold, ones, flags, ramp, rise):
    """One step lane's values on rows b0..b0+m−1 folded into per-row state, as :func:`step_fold`
    (``fold`` = (probe, step index j, den, fresh count))."""
    j = fold[1]
    den = fold[2]
    # selects by arithmetic, not branches (which rows step is arbitrary in row order: a branch
    # on it is mispredicted half the time), so the loop vectorizes
    event = 0
    for i in range(m):
        v = values[i]
        r = b0 + i
        one = np.int64(v == den)
        binary = one | np.int64(v == 0)
        f = np.int64(flags[r])
        ones[r] += one
        first_rise = one & np.int64((f & 5) == 0)  # a 1 after a 0, the first such
        first_ramp = (1 - binary) & np.int64((f & 2) == 0)
        prev = (one & binary) | (f & 1 & (1 - binary))
        flags[r] = (f & 6) | prev | (first_ramp << 1) | (first_rise << 2)
        event |= first_rise | first_ramp
    if event:  # only in a broken network: a flag bit set now whose step index is still 0
        for i in range(m):
            r = b0 + i
            if flags[r] & 4 and rise[r] == 0:
                rise[r] = j
            if flags[r] & 2 and ramp[r] == 0:
                ramp[r] = j
                fold[3] += 1


@njit(cache=True)
def step_fold(values, den, j, ones, flags, ramp, rise):
    """One step lane folded into per-row state (exactmem.checks.certificate.StepFold): ``ones``
    counts
    steps equal to 1 (value = den); ``flags`` bit 0: the last binary step was 1 (it starts
    set), bit 1: a step was off {0, 1} (``ramp`` then holds the first such j), bit 2: a 1 came
    after a 0 (``rise`` holds the first such j). ``ramp`` and ``rise`` are written only then:
    a valid network's pass reads and writes 1 + ``ones``' bytes per row. Returns how many rows
    ramped now. Branch-free where it matters: which rows step is arbitrary in row order."""
    fold = np.array([0, j, den, 0], np.int64)
    _fold_block(values, values.shape[0], 0, fold, ones, flags, ramp, rise)
    return fold[3]


@njit(cache=True)
def match_fold(values, den, k, hits, slot, off):
    """One match lane (slot k) folded into per-row state (exactmem.checks.certificate.MatchFold):
    ``hits``
    counts indicators equal to 1 (value = den), ``slot`` is the least k whose indicator is 1
    (−1: none yet), ``off`` the least k whose indicator is neither 0 nor 1 (−1: none). Returns
    how many rows have ``off`` = k now."""
    changed = 0
    for r in range(values.shape[0]):
        v = values[r]
        if v == den:
            hits[r] += 1
            if slot[r] < 0 or slot[r] > k:
                slot[r] = k
        elif v != 0 and (off[r] < 0 or off[r] > k):
            changed += 1
            off[r] = k
    return changed


def warm() -> None:
    """Load (or compile) the fold kernels, on the lane types they are handed."""
    i64 = np.int64
    i16, i32, u8 = np.zeros(4, np.int16), np.zeros(4, np.int32), np.ones(4, np.uint8)
    step_fold(np.zeros(4, np.int8), 1, 1, i16, u8, i32, i32.copy())
    for values in (np.zeros(4, np.int8), np.zeros(4, i64)):  # match lanes, as probes come
        match_fold(values, 1, 0, i16.copy(), np.full(4, -1, np.int32), np.full(4, -1, np.int32))
