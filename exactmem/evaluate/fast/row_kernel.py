"""numba kernels of row units: int64 arithmetic whose bounds were proved by the caller.

Every kernel here assumes what the engine (:mod:`exactmem.evaluate.fast.row_units`) checks before
calling it: each partial sum of every affine unit stays below 2^62 in absolute value, so no
int64 operation can wrap (numba wraps int64 overflow silently). Nothing here decides a bound.
Imported lazily (numba takes ~0.5 s to import).
"""

from __future__ import annotations

import numpy as np

from exactmem.evaluate.fast.fold_kernel import _fold_block
from exactmem.runtime.jit import inner, njit, prange

BIG = np.int64(2**62)

BLOCK = 1024  # rows per block: a unit's partial sums stay in L1 while its terms are added


@inner
def _terms_block(R, cls, table, ptr, src, kind, coef, u, start, b0, m, buf):
    """buf[:m] = start + Σ coef·input over rows b0..b0+m−1 (one term at a time, so the inner
    loops are straight-line and vectorize)."""
    for i in range(m):
        buf[i] = start
    for t in range(ptr[u], ptr[u + 1]):
        w = coef[t]
        s = src[t]
        if kind[t] == 0:
            row = R[s]
            if w == 1:
                for i in range(m):
                    buf[i] += row[b0 + i]
            elif w == -1:
                for i in range(m):
                    buf[i] -= row[b0 + i]
            else:
                for i in range(m):
                    buf[i] += w * row[b0 + i]
        else:
            tab = table[s]
            for i in range(m):
                buf[i] += w * tab[cls[b0 + i]]


@njit(cache=True)
def _relu_rows(
    R, cls, table, out_slot, ptr, src, kind, coef, bias, relu, stats, pptr, punit, pcoef, pout,
    pflag, fold, ones, flags, ramp, rise, r0, r1
):  # fmt: skip
    units = out_slot.shape[0]
    ubuf = np.empty((max(units, 1), BLOCK), np.int64)  # the block's values of every unit
    buf = np.empty(BLOCK, np.int64)
    acc = np.zeros((units, 5), np.int64)  # zeros, negatives, min |z| ≠ 0, min z > 0, max |z|
    for u in range(units):
        acc[u, 2] = BIG
        acc[u, 3] = BIG
    # blocks outside, units inside: the units of a layer read the same few lanes, so a block
    # is fetched from memory once and read from cache by the others
    for b0 in range(r0, r1, BLOCK):
        m = min(BLOCK, r1 - b0)
        for u in range(units):
            ub = ubuf[u]
            _terms_block(R, cls, table, ptr, src, kind, coef, u, bias[u], b0, m, ub)
            zeros = 0
            neg = 0
            min_abs = BIG
            min_pos = BIG
            max_abs = 0
            # branch-free statistics: signs follow the rows' order, which is arbitrary
            for i in range(m):
                a = ub[i]
                ab = a if a >= 0 else -a
                zeros += 1 if a == 0 else 0
                neg += 1 if a < 0 else 0
                min_abs = min(min_abs, ab if a != 0 else BIG)
                min_pos = min(min_pos, a if a > 0 else BIG)
                max_abs = max(max_abs, ab)
                ub[i] = max(a, 0) if relu else a
            acc[u, 0] += zeros
            acc[u, 1] += neg
            acc[u, 2] = min(acc[u, 2], min_abs)
            acc[u, 3] = min(acc[u, 3], min_pos)
            acc[u, 4] = max(acc[u, 4], max_abs)
            if out_slot[u] >= 0:  # a unit only its layer's probes read is not stored
                out = R[out_slot[u]]
                for i in range(m):
                    out[b0 + i] = ub[i]
        # probes of this layer's units, read while the block is in cache; written as int8,
        # a value off [−128, 127] flags the probe (the caller then computes it apart). One
        # probe may be folded here too (a step lane of StepFold), on its exact int64 values
        for q in range(pptr.shape[0] - 1):
            for i in range(m):
                buf[i] = 0
            for t in range(pptr[q], pptr[q + 1]):
                row = ubuf[punit[t]]
                w = pcoef[t]
                for i in range(m):
                    buf[i] += w * row[i]
            dest = pout[q]
            off = 0
            for i in range(m):
                v = buf[i]
                off |= 1 if v < -128 or v > 127 else 0
                dest[b0 + i] = v
            pflag[q] |= off
            if q == fold[0]:
                _fold_block(buf, m, b0, fold, ones, flags, ramp, rise)
    for u in range(units):
        for j in range(5):
            stats[u, j] = acc[u, j]


@njit(parallel=True, cache=True)
def relu_units(
    R, cls, table, out_slot, ptr, src, kind, coef, bias, relu, stats, pptr, punit, pcoef, pout,
    pflag, fold, ones, flags, ramp, rise, chunks
):  # fmt: skip
    """One layer's row units: ``R[out_slot[u]] = σ(Σ coef·input + bias)`` over all rows, in
    ``chunks`` row blocks on the machine's threads (``out_slot[u] = −1``: computed for the
    statistics and probes, not stored).

    An input term reads row slot ``src`` (``kind`` 0) or the per-class table row ``src`` at the
    row's class (``kind`` 1). ``stats[u]`` receives (zeros, negatives, min non-zero |z|, min
    positive z, max |z|), with 2^62 standing for "none". Probes q of the new units
    (``Σ pcoef·unit[punit]`` over ``pptr[q]..pptr[q+1]``, partial sums proved below 2^62 by the
    caller) go to the int8 rows ``pout[q]``; ``pflag[q]`` is set if a value does not fit.
    ``fold`` = (probe q or −1, j, den, fresh): probe q is folded into (ones, flags, ramp,
    rise) as :func:`step_fold` would, and ``fresh`` receives the number of rows that ramped."""
    n = R.shape[1]
    units = out_slot.shape[0]
    probes = pptr.shape[0] - 1
    part = np.zeros((chunks, units, 5), np.int64)
    pflags = np.zeros((chunks, max(probes, 1)), np.int64)
    folds = np.zeros((chunks, 4), np.int64)
    for q in range(chunks):
        folds[q, :3] = fold[:3]
    for q in prange(chunks):
        _relu_rows(
            R,
            cls,
            table,
            out_slot,
            ptr,
            src,
            kind,
            coef,
            bias,
            relu,
            part[q],
            pptr,
            punit,
            pcoef,
            pout,
            pflags[q],
            folds[q],
            ones,
            flags,
            ramp,
            rise,
            n * q // chunks,
            n * (q + 1) // chunks,
        )
    for q in range(chunks):
        fold[3] += folds[q, 3]
    for p in range(probes):
        for q in range(chunks):
            pflag[p] |= pflags[q, p]
    for u in range(units):
        stats[u, 0] = 0
        stats[u, 1] = 0
        stats[u, 2] = BIG
        stats[u, 3] = BIG
        stats[u, 4] = 0
        for q in range(chunks):
            stats[u, 0] += part[q, u, 0]
            stats[u, 1] += part[q, u, 1]
            stats[u, 2] = min(stats[u, 2], part[q, u, 2])
            stats[u, 3] = min(stats[u, 3], part[q, u, 3])
            stats[u, 4] = max(stats[u, 4], part[q, u, 4])


@inner
def _linear_span(R, cls, table, ptr, src, kind, coef, out, r0, r1):
    buf = np.empty(BLOCK, np.int64)
    for k in range(out.shape[0]):
        dest = out[k]
        for b0 in range(r0, r1, BLOCK):
            m = min(BLOCK, r1 - b0)
            _terms_block(R, cls, table, ptr, src, kind, coef, k, np.int64(0), b0, m, buf)
            for i in range(m):
                dest[b0 + i] = buf[i]


@njit(cache=True)
def linear_rows(R, cls, table, ptr, src, kind, coef, out):
    """``out[k] = Σ coef·input`` for the functionals k (same term encoding, no bias)."""
    _linear_span(R, cls, table, ptr, src, kind, coef, out, 0, R.shape[1])


@njit(parallel=True, cache=True)
def linear_rows_parallel(R, cls, table, ptr, src, kind, coef, out):
    """:func:`linear_rows` with the rows spread over the machine's threads."""
    n = R.shape[1]
    chunks = max(1, min(n // (16 * BLOCK), 64))
    for q in prange(chunks):
        _linear_span(
            R, cls, table, ptr, src, kind, coef, out, n * q // chunks, n * (q + 1) // chunks
        )


@inner
def _same(sigs, r, table, i):
    for j in range(sigs.shape[0]):
        if sigs[j, r] != table[i, j]:
            return False
    return True


@njit(cache=True)
def refine(cls, sigs, nclass):
    """Split classes by signature: rows of class c whose signature differs from the first row
    of c move to a new class, one per distinct (c, signature), numbered in row order.

    Updates ``cls`` in place (a fresh array per layer costs more in page faults than the whole
    pass) and returns (parent of each new class, signature of every class — old ones get the
    signature of their first row —, rows moved to each new class). The first other signature
    of a class is remembered beside it, so the usual two-way split needs no hashing."""
    k, n = sigs.shape
    rep = np.zeros((nclass, k), np.int64)
    second = np.full(nclass, -1, np.int64)  # id of the class's first child
    seen = np.zeros(nclass, np.bool_)
    parent = np.zeros(16, np.int64)
    moved = np.zeros(16, np.int64)
    child_sig = np.zeros((16, k), np.int64)
    made = 0
    cap = 0
    slot_class = np.zeros(0, np.int64)
    new = cls
    for r in range(n):
        c = cls[r]
        if not seen[c]:
            seen[c] = True
            for j in range(k):
                rep[c, j] = sigs[j, r]
            continue
        if _same(sigs, r, rep, c):
            continue
        s2 = second[c]
        if s2 >= 0 and _same(sigs, r, child_sig, s2):
            new[r] = nclass + s2
            moved[s2] += 1
            continue
        if s2 < 0:
            found = -1
        else:  # a third signature in one class: open addressing on (c, signature)
            if cap == 0:
                cap = 1024
                slot_class = np.full(cap, -1, np.int64)
            h = np.uint64(c) * np.uint64(0x9E3779B97F4A7C15)
            for j in range(k):
                h = (h ^ np.uint64(sigs[j, r])) * np.uint64(0xBF58476D1CE4E5B9)
            i = np.int64(h >> np.uint64(20)) & (cap - 1)
            found = -1
            while slot_class[i] >= 0:
                id_ = slot_class[i]
                if parent[id_] == c and _same(sigs, r, child_sig, id_):
                    found = id_
                    break
                i = (i + 1) & (cap - 1)
        if found >= 0:
            new[r] = nclass + found
            moved[found] += 1
            continue
        if made == parent.shape[0]:
            parent = np.concatenate((parent, np.zeros(made, np.int64)))
            moved = np.concatenate((moved, np.zeros(made, np.int64)))
            child_sig = np.concatenate((child_sig, np.zeros((made, k), np.int64)))
        parent[made] = c
        for j in range(k):
            child_sig[made, j] = sigs[j, r]
        if s2 < 0:
            second[c] = made
        else:
            slot_class[i] = made
            if 2 * made > cap:  # keep the table at most half full: rebuild twice as large
                cap *= 4
                slot_class = np.full(cap, -1, np.int64)
                for id_ in range(made + 1):
                    if second[parent[id_]] == id_:
                        continue
                    h = np.uint64(parent[id_]) * np.uint64(0x9E3779B97F4A7C15)
                    for j in range(k):
                        h = (h ^ np.uint64(child_sig[id_, j])) * np.uint64(0xBF58476D1CE4E5B9)
                    i = np.int64(h >> np.uint64(20)) & (cap - 1)
                    while slot_class[i] >= 0:
                        i = (i + 1) & (cap - 1)
                    slot_class[i] = id_
        new[r] = nclass + made
        moved[made] = 1
        made += 1
    # element by element: a slice assignment compiles numba's shape-mismatch message (≈ 3 s of
    # the first run's compiling), and these shapes match by construction
    every = np.zeros((nclass + made, k), np.int64)
    for c in range(nclass):
        for j in range(k):
            every[c, j] = rep[c, j]
    for i in range(made):
        for j in range(k):
            every[nclass + i, j] = child_sig[i, j]
    return parent[:made].copy(), every, moved[:made].copy()


@njit(cache=True)
def gcd_rows(R, slots, g):
    """gcd of ``g`` and every value in the given row slots (stops early at 1)."""
    for s in slots:
        for r in range(R.shape[1]):
            a = R[s, r]
            if a < 0:
                a = -a
            while a:
                g, a = a, g % a
            if g == 1:
                return g
    return g


# --------------------------------------------------------------------------- multi-limb
#
# Shared lanes hold one integer per class as little-endian limbs of 30 bits: limbs below the
# top are in [0, 2^30), the top limb is signed. Products of a coefficient limb and a value limb
# stay below 2^60, so a handful can be accumulated in int64 before carries are propagated.


def warm() -> None:
    """Call every row kernel once on tiny inputs: loads them from numba's on-disk cache, or
    compiles and caches them (the first-run cost, see docs/fast.md)."""
    i64 = np.int64
    R = np.zeros((2, 4), i64)
    cls = np.zeros(4, np.int32)  # class ids: int32 halves the bytes a refinement moves
    table = np.zeros((1, 1), i64)
    one = np.array([0, 1], i64)
    terms = (np.array([0], i64), np.array([0], i64), np.array([1], i64))
    stats = np.zeros((1, 5), i64)
    probe = (one, np.zeros(1, i64), one[1:], np.zeros((1, 4), np.int8), np.zeros(1, i64))
    for rows in (4, 0):  # a folded step lane, or none
        fold = (np.array([0 if rows else -1, 1, 1, 0], i64), np.zeros(rows, np.int16))
        fold = (*fold, np.ones(rows, np.uint8), np.zeros(rows, np.int32), np.zeros(rows, np.int32))
        args = (R, cls, table, one[1:], one, *terms, np.zeros(1, i64), True, stats, *probe, *fold)
        _relu_rows(*args, 0, 4)
        relu_units(*args, 2)
    linear_rows(R, cls, table, one, *terms, np.zeros((1, 4), i64))
    linear_rows_parallel(R, cls, table, one, *terms, np.zeros((1, 4), i64))
    refine(cls.copy(), np.array([[0, 1, 0, 1]], i64), 1)
    gcd_rows(R, one[:1], i64(0))
