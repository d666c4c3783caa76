"""numba kernels of the fast evaluator: int64 arithmetic whose bounds were proved by the caller.

Every kernel here assumes what :mod:`exactmem.evaluate.fast` checks before calling it: each
partial sum of every affine unit stays below 2^62 in absolute value, so no int64 operation can
wrap (numba wraps int64 overflow silently). Nothing here decides a bound.

Imported lazily (numba takes ~0.5 s to import); compiled functions are cached on disk
(``cache=True``), so only the first run on a machine pays for compilation.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = [
    "gcd_rows",
    "limbs_to_int64",
    "linear_rows",
    "match_fold",
    "linear_rows_parallel",
    "refine",
    "relu_units",
    "shared_units",
    "step_fold",
    "warm",
]

BIG = np.int64(2**62)


def _chunks(n: int, grain: int) -> int:
    return max(1, min(n // grain, 64))


BLOCK = 1024  # rows per block: a unit's partial sums stay in L1 while its terms are added


@njit(cache=True)
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


@njit(cache=True)
def _linear_span(R, cls, table, ptr, src, kind, coef, out, r0, r1):
    buf = np.empty(BLOCK, np.int64)
    for k in range(out.shape[0]):
        dest = out[k]
        for b0 in range(r0, r1, BLOCK):
            m = min(BLOCK, r1 - b0)
            _terms_block(R, cls, table, ptr, src, kind, coef, k, 0, b0, m, buf)
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


@njit(cache=True)
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
    every = np.zeros((nclass + made, k), np.int64)
    every[:nclass] = rep
    every[nclass:] = child_sig[:made]
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

LIMB = 30
MASK = (1 << LIMB) - 1


@njit(cache=True)
def _normalize(acc, top):
    """Propagate carries so limbs 0..top−1 are in [0, 2^30); limb ``top`` keeps the sign."""
    for i in range(top):
        c = acc[i] >> LIMB
        acc[i] -= c << LIMB
        acc[i + 1] += c


@njit(cache=True)
def _length(a, n):
    """Limbs in use of a non-negative normalized vector (index of the top non-zero + 1)."""
    while n > 0 and a[n - 1] == 0:
        n -= 1
    return n


@njit(cache=True, inline="always")
def _hi(HO, HW, s, c):
    """Where class c of shared slot s starts in the limb store (HB, HO, HW): slot s is a
    (classes × HW[s]) block of the buffer HB at HO[s]. Limb i of it is read as
    ``HB[np.uintp(b + i)]``: an unsigned index spares numba's negative-index fix-up, which
    keeps a limb loop from vectorizing (2× on a micro-benchmark of one; no change measured on
    the whole Stage III kernel, 20–25 % slower than 2-D indexing into one 3-D array was)."""
    return HO[s] + c * HW[s]


@njit(cache=True)
def _widest(HW):
    """The most limbs per class of any slot (scratch sizes)."""
    w = 0
    for s in range(HW.shape[0]):
        w = max(w, HW[s])
    return w


@njit(cache=True)
def _less(a, la, b, lb):
    """a < b for non-negative normalized limb vectors with la, lb limbs in use."""
    if la != lb:
        return la < lb
    for i in range(la - 1, -1, -1):
        if a[i] != b[i]:
            return a[i] < b[i]
    return False


@njit(cache=True)
def _cmp(x, lx, R, u, lr):
    """Sign of x − R[u] for non-negative normalized limb vectors (lx, lr limbs in use). Indexes
    R in place: a row view per call costs reference counting in the hot loop."""
    if lx != lr:
        return 1 if lx > lr else -1
    for i in range(lx - 1, -1, -1):
        if x[i] != R[u, i]:
            return 1 if x[i] > R[u, i] else -1
    return 0


@njit(cache=True)
def _put(R, u, x, lx, lr):
    for i in range(lx):
        R[u, i] = x[i]
    for i in range(lx, lr):
        R[u, i] = 0


@njit(cache=True, inline="always")
def _may_record(u, lx, top, positive, lo_abs, hi_abs, lo_pos, lens, flags):
    """False when a value of lx limbs with top limb ``top`` can change none of unit u's
    extremes: decided by lengths and top limbs alone, before any limb-by-limb comparison."""
    f = flags[u]
    if not (f & 1):
        return True
    tie = lx > 1  # equal top limbs decide nothing unless the top limb is the whole value
    l0 = lens[u, 0]
    if lx < l0 or (lx == l0 and (top < lo_abs[u, lx - 1] or (tie and top == lo_abs[u, lx - 1]))):
        return True
    l1 = lens[u, 1]
    if lx > l1 or (lx == l1 and (top > hi_abs[u, lx - 1] or (tie and top == hi_abs[u, lx - 1]))):
        return True
    if positive:
        if not (f & 2):
            return True
        l2 = lens[u, 2]
        t2 = lo_pos[u, lx - 1] if lx == l2 else 0
        if lx < l2 or (lx == l2 and (top < t2 or (tie and top == t2))):
            return True
    return False


@njit(cache=True)
def _cmp_h(HB, HO, HW, s, c, lx, R, u, lr):
    """Sign of H[s, c] − R[u] (non-negative normalized, lx and lr limbs in use)."""
    if lx != lr:
        return 1 if lx > lr else -1
    b = _hi(HO, HW, s, c)
    for i in range(lx - 1, -1, -1):
        if HB[np.uintp(b + i)] != R[u, i]:
            return 1 if HB[np.uintp(b + i)] > R[u, i] else -1
    return 0


@njit(cache=True)
def _put_h(R, u, HB, HO, HW, s, c, lx, lr):
    b = _hi(HO, HW, s, c)
    for i in range(lx):
        R[u, i] = HB[np.uintp(b + i)]
    for i in range(lx, lr):
        R[u, i] = 0


@njit(cache=True)
def _record_h(u, HB, HO, HW, s, c, lx, lo_abs, hi_abs, lo_pos, lens, flags):
    """:func:`_record` for a positive value held in H[s, c]."""
    if not (flags[u] & 1) or _cmp_h(HB, HO, HW, s, c, lx, lo_abs, u, lens[u, 0]) < 0:
        _put_h(lo_abs, u, HB, HO, HW, s, c, lx, lens[u, 0])
        lens[u, 0] = lx
    if _cmp_h(HB, HO, HW, s, c, lx, hi_abs, u, lens[u, 1]) > 0:
        _put_h(hi_abs, u, HB, HO, HW, s, c, lx, lens[u, 1])
        lens[u, 1] = lx
    if not (flags[u] & 2) or _cmp_h(HB, HO, HW, s, c, lx, lo_pos, u, lens[u, 2]) < 0:
        _put_h(lo_pos, u, HB, HO, HW, s, c, lx, lens[u, 2])
        lens[u, 2] = lx
        flags[u] |= 2
    flags[u] |= 1


@njit(cache=True)
def _record(u, x, lx, positive, lo_abs, hi_abs, lo_pos, lens, flags):
    """Fold a non-zero magnitude x (lx limbs) into unit u's least/greatest |z| and least z > 0
    (their limbs in use in lens[u, 0..2])."""
    if not (flags[u] & 1) or _cmp(x, lx, lo_abs, u, lens[u, 0]) < 0:
        _put(lo_abs, u, x, lx, lens[u, 0])
        lens[u, 0] = lx
    if _cmp(x, lx, hi_abs, u, lens[u, 1]) > 0:
        _put(hi_abs, u, x, lx, lens[u, 1])
        lens[u, 1] = lx
    if positive and (not (flags[u] & 2) or _cmp(x, lx, lo_pos, u, lens[u, 2]) < 0):
        _put(lo_pos, u, x, lx, lens[u, 2])
        lens[u, 2] = lx
        flags[u] |= 2
    flags[u] |= 1


@njit(parallel=True, cache=True)
def shared_units(
    HB,
    HO,
    HW,
    CL,
    out_slot,
    base,
    ptr,
    src,
    src2,
    tagd,
    cptr,
    coff,
    cval,
    bptr,
    boff,
    bval,
    mix,
    lptr,
    loff,
    lval,
    sig,
    counts,
    V,
    VB,
    vptr,
    voff,
    vval,
    anchor,
    kptr,
    klist,
    nptr,
    noff,
    nval,
    nclass,
    relu,
    uwidth,
    zeros,
    neg,
    lo_abs,
    hi_abs,
    lo_pos,
    lens,
    flags,
    out_used,
    chunks,
):
    """:func:`_shared_classes` on ``chunks`` blocks of classes in parallel, statistics merged.

    Returns False if a result needs more limbs than H has."""
    units = out_slot.shape[0]
    full = lo_abs.shape[1]
    p_zeros = np.zeros((chunks, units), np.int64)
    p_neg = np.zeros((chunks, units), np.int64)
    p_lo = np.zeros((chunks, units, full), np.int64)
    p_hi = np.zeros((chunks, units, full), np.int64)
    p_pos = np.zeros((chunks, units, full), np.int64)
    p_lens = np.zeros((chunks, units, 3), np.int64)
    p_flags = np.zeros((chunks, units), np.int64)
    p_used = np.zeros((chunks, units), np.int64)
    ok = np.ones(chunks, np.bool_)
    for q in prange(chunks):
        ok[q] = _shared_classes(
            HB,
            HO,
            HW,
            CL,
            out_slot,
            base,
            ptr,
            src,
            src2,
            tagd,
            cptr,
            coff,
            cval,
            bptr,
            boff,
            bval,
            mix,
            lptr,
            loff,
            lval,
            sig,
            counts,
            V,
            VB,
            vptr,
            voff,
            vval,
            anchor,
            kptr,
            klist,
            nptr,
            noff,
            nval,
            nclass * q // chunks,
            nclass * (q + 1) // chunks,
            relu,
            uwidth,
            p_zeros[q],
            p_neg[q],
            p_lo[q],
            p_hi[q],
            p_pos[q],
            p_lens[q],
            p_flags[q],
            p_used[q],
        )
    for q in range(chunks):
        if not ok[q]:
            return False
    lo_len = lens[:, 0]
    hi_len = lens[:, 1]
    pos_len = lens[:, 2]
    for u in range(units):
        for q in range(chunks):
            zeros[u] += p_zeros[q, u]
            neg[u] += p_neg[q, u]
            out_used[u] = max(out_used[u], p_used[q, u])
            f = p_flags[q, u]
            if f & 1:
                if not (flags[u] & 1) or _less(p_lo[q, u], p_lens[q, u, 0], lo_abs[u], lo_len[u]):
                    lo_abs[u, :] = p_lo[q, u]
                    lo_len[u] = p_lens[q, u, 0]
                if _less(hi_abs[u], hi_len[u], p_hi[q, u], p_lens[q, u, 1]):
                    hi_abs[u, :] = p_hi[q, u]
                    hi_len[u] = p_lens[q, u, 1]
            if f & 2:
                if not (flags[u] & 2) or _less(p_pos[q, u], p_lens[q, u, 2], lo_pos[u], pos_len[u]):
                    lo_pos[u, :] = p_pos[q, u]
                    pos_len[u] = p_lens[q, u, 2]
            flags[u] |= f
    return True


@njit(cache=True)
def _extend(acc, lw, hw, a, b):
    """Grow the live region [lw, hw) of acc to cover [a, b), zeroing what it gains."""
    if hw <= lw:
        for i in range(a, b):
            acc[i] = 0
        return a, b
    if a < lw:
        for i in range(a, lw):
            acc[i] = 0
        lw = a
    if b > hw:
        for i in range(hw, b):
            acc[i] = 0
        hw = b
    return lw, hw


@njit(cache=True)
def _normalize_from(acc, lo, top):
    """:func:`_normalize` over limbs lo..top−1 only (below lo nothing is live)."""
    for i in range(lo, top):
        c = acc[i] >> LIMB
        acc[i] -= c << LIMB
        acc[i + 1] += c


@njit(cache=True)
def _settle(acc, a, b, top):
    """Carry acc[a..] upward, stopping past limb b − 1 once no carry is left: limbs below
    ``top`` end in [0, 2^30) (if they were outside a..b − 1 already), acc[top] keeps the rest."""
    i = a
    while i < top:
        c = acc[i] >> LIMB
        if c == 0 and i >= b:
            return
        acc[i] -= c << LIMB
        acc[i + 1] += c
        i += 1


@njit(cache=True)
def _grow(acc, hw, new):
    """Zero limbs hw..new − 1 and settle the old top limb (now below the top)."""
    for i in range(hw, new):
        acc[i] = 0
    _settle(acc, hw - 1, hw, new - 1)
    return new


@njit(cache=True)
def _view_value(HB, HO, HW, CL, B, c, voff, vval, d0, d1, out):
    """out[:n] = H[B, c] + Σ digits (a view, positive by construction); returns n, the exact
    number of limbs in use."""
    nb = CL[B, c]
    b = _hi(HO, HW, B, c)
    for i in range(nb):
        out[i] = HB[np.uintp(b + i)]
    out[nb] = 0
    hw = nb + 1
    for j in range(d0, d1):
        off = voff[j]
        if off + 2 > hw:
            hw = _grow(out, hw, off + 2)
        out[off] += vval[j]
        _settle(out, off, off + 1, hw - 1)
    return _length(out, hw)


@njit(cache=True)
def _view_signed(HB, HO, HW, CL, B, c, mode, src, src_hw, doff, dval, d0, d1, out, width):
    """out = z + Σ digits in the signed normalized form (returns hw: out[:hw − 1] in
    [0, 2^30), out[hw − 1] signed), z = H[B, c] (mode 1), 0 (mode 0) or src[:src_hw] (mode −1,
    already in that form)."""
    if mode == 1:
        hw = CL[B, c]
        b = _hi(HO, HW, B, c)
        for i in range(hw):
            out[i] = HB[np.uintp(b + i)]
    elif mode == 0:
        hw = 0
    else:
        hw = src_hw
        for i in range(hw):
            out[i] = src[i]
    if hw == 0:
        out[0] = 0
        hw = 1
    else:  # a limb above the old top, which may carry the sign down into it
        hw = _grow(out, hw, hw + 1)
    for j in range(d0, d1):
        off = doff[j]
        if off + 2 > hw:
            hw = _grow(out, hw, off + 2)
        out[off] += dval[j]
        _settle(out, off, off + 1, hw - 1)
    while hw < width and not (-MASK - 1 <= out[hw - 1] <= MASK):
        hw = _grow(out, hw, hw + 1)
    return hw


@njit(cache=True)
def _pair_diff(HB, HO, HW, CL, V, VB, vptr, voff, vval, s, s2, c, diff, xa, xb):
    """|H[s] − H[s2]| at class c into diff (views built in xa, xb first), normalized: returns
    (limbs in use, sign). The paths that read the pair without a difference tag — rare, so a
    call here costs nothing that matters."""
    la = CL[s, c]
    lb = CL[s2, c]
    va = VB[s] >= 0 and V[s, c] == 1
    vb = VB[s2] >= 0 and V[s2, c] == 1
    if va:
        la = _view_value(HB, HO, HW, CL, VB[s], c, voff, vval, vptr[s], vptr[s + 1], xa)
    if vb:
        lb = _view_value(HB, HO, HW, CL, VB[s2], c, voff, vval, vptr[s2], vptr[s2 + 1], xb)
    nx = max(la, lb)
    ba = _hi(HO, HW, s, c)
    bb = _hi(HO, HW, s2, c)
    for i in range(nx):
        a_i = 0
        if i < la:
            a_i = xa[i] if va else HB[np.uintp(ba + i)]
        b_i = 0
        if i < lb:
            b_i = xb[i] if vb else HB[np.uintp(bb + i)]
        diff[i] = a_i - b_i
    diff[nx] = 0
    _normalize(diff, nx)
    sg = 1
    if diff[nx] < 0:
        for i in range(nx + 1):
            diff[i] = -diff[i]
        _normalize(diff, nx)
        sg = -1
    return _length(diff, nx + 1), sg


@njit(cache=True, inline="always")
def _zlimb(HB, HO, HW, B, c, nb, pidx, pval, n, i):
    """Limb i of a patched value: the patched limb if any, else H's own (view creation in
    :func:`_shared_classes`)."""
    for k in range(n):
        if pidx[k] == i:
            return pval[k]
    if i < nb:
        return HB[np.uintp(_hi(HO, HW, B, c) + i)]
    return 0


@njit(cache=True)
def _zcmp(HB, HO, HW, B, c, nb, pidx, pval, n, lz, i0, R, u, lr):
    """Sign of |z| − R[u] for a patched z of lz limbs (lengths first, then limbs from the top,
    each read as it is needed). i0 < 0: z > 0; else z < 0 and |z| = 2^(30e) − (z's limbs),
    i0 the lowest non-zero limb of z."""
    if lz != lr:
        return 1 if lz > lr else -1
    for i in range(lz - 1, -1, -1):
        if i0 < 0:
            m = _zlimb(HB, HO, HW, B, c, nb, pidx, pval, n, i)
        elif i > i0:
            m = MASK - _zlimb(HB, HO, HW, B, c, nb, pidx, pval, n, i)
        elif i == i0:
            m = (1 << LIMB) - _zlimb(HB, HO, HW, B, c, nb, pidx, pval, n, i)
        else:
            m = 0
        if m != R[u, i]:
            return 1 if m > R[u, i] else -1
    return 0


@njit(cache=True)
def _z_may_record(
    HB, HO, HW, B, c, nb, pidx, pval, n, lz, i0, u, lo_abs, hi_abs, lo_pos, lens, flags
):
    """:func:`_may_record` for a patched value, comparing as many limbs as it takes."""
    f = flags[u]
    if not (f & 1):
        return True
    if _zcmp(HB, HO, HW, B, c, nb, pidx, pval, n, lz, i0, lo_abs, u, lens[u, 0]) < 0:
        return True
    if _zcmp(HB, HO, HW, B, c, nb, pidx, pval, n, lz, i0, hi_abs, u, lens[u, 1]) > 0:
        return True
    if i0 < 0:
        if not (f & 2):
            return True
        if _zcmp(HB, HO, HW, B, c, nb, pidx, pval, n, lz, i0, lo_pos, u, lens[u, 2]) < 0:
            return True
    return False


@njit(cache=True)
def _add_in_place(HB, HO, HW, CL, bs, c, acc, lw, hw, tmp):
    """H[bs, c] (non-negative, CL[bs, c] limbs) + acc[lw:hw] (normalized, top limb signed),
    touching only the limbs the sum changes: carries stop where they die. Returns the new
    length, or −1 (H untouched) when the sum is negative."""
    nb = CL[bs, c]
    b = _hi(HO, HW, bs, c)
    # limbs from nb up are undefined (a block is not cleared when it is reused), and those
    # below lw are not written below: the value's zeros there are made explicit
    for i in range(nb, lw):
        HB[np.uintp(b + i)] = 0
    carry = 0
    i = lw
    while i < hw or (carry != 0 and i < nb):
        v = carry
        if i < nb:
            v += HB[np.uintp(b + i)]
        if i < hw:
            v += acc[i]
        carry = v >> LIMB
        tmp[i] = v - (carry << LIMB)
        i += 1
    e = i
    if e < nb:  # limbs from e up are H's own, its top among them: same length
        for j in range(lw, e):
            HB[np.uintp(b + j)] = tmp[j]
        return nb
    if carry < 0:
        return -1
    if carry > 0:
        tmp[e] = carry
        e += 1
    n = e
    while n > lw and tmp[n - 1] == 0:
        n -= 1
    if n > HW[bs]:  # more limbs than the proved bound allowed: the caller reports it
        return n
    for j in range(lw, max(n, nb)):  # tmp is 0 from n up
        HB[np.uintp(b + j)] = tmp[j]
    if n == lw:
        n = _length(HB[b : b + HW[bs]], lw)
    return n


@njit(cache=True)
def _shared_classes(
    HB,
    HO,
    HW,
    CL,
    out_slot,
    base,
    ptr,
    src,
    src2,
    tagd,
    cptr,
    coff,
    cval,
    bptr,
    boff,
    bval,
    mix,
    lptr,
    loff,
    lval,
    sig,
    counts,
    V,
    VB,
    vptr,
    voff,
    vval,
    anchor,
    kptr,
    klist,
    nptr,
    noff,
    nval,
    c0,
    c1,
    relu,
    uwidth,
    zeros,
    neg,
    lo_abs,
    hi_abs,
    lo_pos,
    lens,
    flags,
    out_used,
):
    """One layer's shared units over classes c0..c1−1, in exact multi-limb arithmetic.

    Unit u: bias (sparse limbs) + Σ_t coefficient_t (sparse limbs) · term_t + λ_u·sig[c, mix_u]
    (when ``mix[u] ≥ 0``), then σ if ``relu``; written to H[out_slot[u]]. A term is a slot
    H[src_t], or the difference H[src_t] − H[src2_t] when ``src2_t ≥ 0``: the difference of a
    step's two units is 0 or 1, so it is formed first and the product stays short. When the
    two were written as σ(x + b₁) and σ(x + b₂) from one lane x, ``tagd_t`` = b₁ − b₂ (else 0)
    and, in a class where both are non-zero (so neither was clipped), the difference is tagd_t
    without reading either. ``CL[s, c]`` is the exact number of limbs in use of class c in slot
    s (every limb above is 0); it is kept exact by every write. With ``base[u] ≥ 0`` the unit is
    H[base] + (those terms), in place: only the limbs the terms reach, plus carries, change.
    (HB, HO, HW) is the limb store (buffer, offset and limbs per class per slot; :func:`_hi`): each
    slot has as many limbs as its own values need, and a result longer than its slot's is
    refused. Statistics count each class ``counts[c]`` times; ``lens`` holds the limbs in use of the
    three extremes; ``flags[u]`` bit 0: a non-zero value was seen, bit 1: a positive one.
    Returns False if a result needs more limbs than its slot has."""
    NL = _widest(HW)
    full = lo_abs.shape[1]
    acc = np.zeros(full + NL + 2, np.int64)
    mag = np.zeros(full + NL + 2, np.int64)
    tmp = np.zeros(full + NL + 2, np.int64)
    diff = np.zeros(NL + 4, np.int64)
    xa = np.zeros(NL + 4, np.int64)
    xb = np.zeros(NL + 4, np.int64)
    acc2 = np.zeros(full + NL + 4, np.int64)
    pidx = np.zeros(64, np.int64)
    pval = np.zeros(64, np.int64)
    for u in range(out_slot.shape[0]):
        if anchor[u] >= 0:  # a view: formed with its anchor, class by class
            continue
        o = out_slot[u]
        bs = base[u]
        width = uwidth[u]
        hi_used = 0
        t0 = ptr[u]
        copy = (
            bs < 0
            and t0 < ptr[u + 1]
            and src2[t0] < 0
            and cptr[t0 + 1] - cptr[t0] == 1
            and coff[cptr[t0]] == 0
            and cval[cptr[t0]] == 1
        )
        for c in range(c0, c1):
            if copy:
                s0 = src[t0]
                if VB[s0] >= 0 and V[s0, c]:
                    nx = _view_value(
                        HB, HO, HW, CL, VB[s0], c, voff, vval, vptr[s0], vptr[s0 + 1], acc
                    )
                else:
                    nx = CL[s0, c]
                    b0 = _hi(HO, HW, s0, c)
                    for i in range(nx):
                        acc[i] = HB[np.uintp(b0 + i)]
                acc[nx] = 0
                hw = nx + 1
                for j in range(bptr[u], bptr[u + 1]):
                    off = boff[j]
                    if off + 2 > hw:
                        hw = _grow(acc, hw, off + 2)
                    acc[off] += bval[j]
                    _settle(acc, off, off + 1, hw - 1)
                for t in range(t0 + 1, ptr[u + 1]):
                    s = src[t]
                    s2 = src2[t]
                    sg = 1
                    direct = s2 < 0
                    if direct:
                        nx = CL[s, c]
                        if VB[s] >= 0 and V[s, c]:
                            nx = _view_value(
                                HB, HO, HW, CL, VB[s], c, voff, vval, vptr[s], vptr[s + 1], diff
                            )
                            direct = False
                    elif tagd[t] != 0 and CL[s, c] > 0 and CL[s2, c] > 0:
                        d = tagd[t]
                        if d < 0:
                            sg = -1
                            d = -d
                        nx = 0
                        while d:
                            diff[nx] = d & MASK
                            d >>= LIMB
                            nx += 1
                    else:
                        nx, sg = _pair_diff(
                            HB, HO, HW, CL, V, VB, vptr, voff, vval, s, s2, c, diff, xa, xb
                        )
                    if nx == 0:
                        continue
                    for j in range(cptr[t], cptr[t + 1]):
                        off = coff[j]
                        w = cval[j] * sg
                        if off + nx + 1 > hw:
                            hw = _grow(acc, hw, off + nx + 1)
                        if direct:
                            bsc = _hi(HO, HW, s, c)
                            for i in range(nx):
                                acc[off + i] += w * HB[np.uintp(bsc + i)]
                        else:
                            for i in range(nx):
                                acc[off + i] += w * diff[i]
                        _settle(acc, off, off + nx, hw - 1)
                if mix[u] >= 0 and sig[c, mix[u]] != 0:
                    sv = sig[c, mix[u]]
                    sgn = 1
                    if sv < 0:
                        sgn = -1
                        sv = -sv
                    for j in range(lptr[u], lptr[u + 1]):
                        off = loff[j]
                        w = sgn * lval[j]
                        if off + 4 > hw:
                            hw = _grow(acc, hw, off + 4)
                        acc[off] += w * (sv & MASK)
                        acc[off + 1] += w * ((sv >> LIMB) & MASK)
                        acc[off + 2] += w * (sv >> (2 * LIMB))
                        _settle(acc, off, off + 3, hw - 1)
                # the top limb keeps the sign; one more limb while it overflows
                while hw < width and not (-MASK - 1 <= acc[hw - 1] <= MASK):
                    hw = _grow(acc, hw, hw + 1)
                lw = 0
            else:
                # live limbs acc[lw:hw]; a fresh unit's value is formed from limb 0, an in-place
                # unit's delta only where its terms reach
                if bs >= 0:
                    lw, hw = 1, 0
                else:
                    lw, hw = 0, 1
                    acc[0] = 0
                for j in range(bptr[u], bptr[u + 1]):
                    lw, hw = _extend(acc, lw, hw, boff[j], boff[j] + 1)
                    acc[boff[j]] += bval[j]
                pending = 1
                for t in range(ptr[u], ptr[u + 1]):
                    s = src[t]
                    s2 = src2[t]
                    sg = 1
                    direct = s2 < 0
                    if direct:  # read H[s, c] in place (a row view per term costs refcounting)
                        nx = CL[s, c]
                        if VB[s] >= 0 and V[s, c]:
                            nx = _view_value(
                                HB, HO, HW, CL, VB[s], c, voff, vval, vptr[s], vptr[s + 1], diff
                            )
                            direct = False
                    elif tagd[t] != 0 and CL[s, c] > 0 and CL[s2, c] > 0:
                        d = tagd[t]
                        if d < 0:
                            sg = -1
                            d = -d
                        nx = 0
                        while d:
                            diff[nx] = d & MASK
                            d >>= LIMB
                            nx += 1
                    else:  # H[s] − H[s2], normalized, as a magnitude with a sign
                        nx, sg = _pair_diff(
                            HB, HO, HW, CL, V, VB, vptr, voff, vval, s, s2, c, diff, xa, xb
                        )
                    if nx == 0:
                        continue
                    for j in range(cptr[t], cptr[t + 1]):
                        off = coff[j]
                        w = cval[j] * sg
                        lw, hw = _extend(acc, lw, hw, off, off + nx)
                        if direct:
                            bsc = _hi(HO, HW, s, c)
                            for i in range(nx):
                                acc[off + i] += w * HB[np.uintp(bsc + i)]
                        else:
                            for i in range(nx):
                                acc[off + i] += w * diff[i]
                        pending += 1
                        if pending >= 6:
                            _normalize_from(acc, lw, hw - 1)
                            pending = 0
                if mix[u] >= 0 and sig[c, mix[u]] != 0:
                    sv = sig[c, mix[u]]
                    sgn = 1
                    if sv < 0:
                        sgn = -1
                        sv = -sv
                    s0 = sv & MASK
                    s1 = (sv >> LIMB) & MASK
                    s2v = sv >> (2 * LIMB)
                    for j in range(lptr[u], lptr[u + 1]):
                        off = loff[j]
                        w = sgn * lval[j]
                        lw, hw = _extend(acc, lw, hw, off, off + 3)
                        acc[off] += w * s0
                        acc[off + 1] += w * s1
                        acc[off + 2] += w * s2v
                        pending += 1
                        if pending >= 6:
                            _normalize_from(acc, lw, hw - 1)
                            pending = 0
                # normalize the touched limbs; the top one keeps the sign, one more if it overflows
                if hw > lw:
                    while True:
                        _normalize_from(acc, lw, hw - 1)
                        if -MASK - 1 <= acc[hw - 1] <= MASK or hw >= width:
                            break
                        acc[hw] = 0
                        hw += 1
            k = counts[c]
            if bs >= 0:
                delta = False
                for i in range(lw, hw):
                    if acc[i] != 0:
                        delta = True
                        break
                n_new = CL[bs, c]
                if delta:
                    n_new = _add_in_place(HB, HO, HW, CL, bs, c, acc, lw, hw, tmp)
                    if n_new > HW[bs]:
                        return False
                if n_new >= 0:  # z = H[bs, c] ≥ 0, now current
                    CL[bs, c] = n_new
                    if n_new == 0:
                        zeros[u] += k
                    else:
                        if _may_record(
                            u,
                            n_new,
                            HB[np.uintp(_hi(HO, HW, bs, c) + n_new - 1)],
                            True,
                            lo_abs,
                            hi_abs,
                            lo_pos,
                            lens,
                            flags,
                        ):
                            _record_h(
                                u, HB, HO, HW, bs, c, n_new, lo_abs, hi_abs, lo_pos, lens, flags
                            )
                        if n_new > hi_used:
                            hi_used = n_new
                    zmode = 1 if n_new > 0 else 0
                else:
                    # negative: form H[bs] + delta in full (H[bs] is untouched)
                    nb = CL[bs, c]
                    lw, hw = _extend(acc, lw, hw, 0, max(nb, 1))
                    bb = _hi(HO, HW, bs, c)
                    for i in range(nb):
                        acc[i] += HB[np.uintp(bb + i)]
                    while hw < width:
                        _normalize(acc, hw - 1)
                        top = acc[hw - 1]
                        if -MASK - 1 <= top <= MASK:
                            break
                        acc[hw] = 0
                        hw += 1
                    _normalize(acc, hw - 1)
                    zmode = -1
                # the views of this anchor: z_k = z + d_k (same linear part, bias d_k higher)
                for kk in range(kptr[u], kptr[u + 1]):
                    vk = klist[kk]
                    ov = out_slot[vk]
                    d0 = nptr[vk]
                    d1 = nptr[vk + 1]
                    done = False
                    if zmode == 1:
                        # the limbs in which z_k = z + digits differs from z, carries followed
                        # only while alive: z_k = Σ_{i<e} z_i·2^(30i) + cout·2^(30e), z_i the
                        # patched limb (pidx, pval) or H's own; npch −1 if pidx overflows
                        # (inlined: a call per class costs more than the patch)
                        nb = CL[bs, c]
                        bb = _hi(HO, HW, bs, c)
                        npch = 0
                        cout = 0
                        carry = 0
                        jd = d0
                        i = noff[d0]
                        while True:
                            v = carry
                            if i < nb:
                                v += HB[np.uintp(bb + i)]
                            if jd < d1 and noff[jd] == i:
                                v += nval[jd]
                                jd += 1
                            carry = v >> LIMB
                            v -= carry << LIMB
                            if npch == pidx.shape[0]:
                                npch = -1
                                break
                            pidx[npch] = i
                            pval[npch] = v
                            npch += 1
                            i += 1
                            if carry == 0:
                                if jd >= d1:
                                    e = max(nb, i)
                                    break
                                i = noff[jd]
                            elif i >= nb and jd >= d1:
                                cout = carry
                                e = i
                                break
                        if npch >= 0 and 0 <= cout <= MASK:  # z_k ≥ 0: a view where positive
                            if cout > 0:
                                lv = e + 1
                                top = cout
                            else:
                                lv = e
                                while (
                                    lv > 0
                                    and _zlimb(HB, HO, HW, bs, c, nb, pidx, pval, npch, lv - 1) == 0
                                ):
                                    lv -= 1
                                top = 0
                                if lv > 0:
                                    top = _zlimb(HB, HO, HW, bs, c, nb, pidx, pval, npch, lv - 1)
                            if lv > HW[ov]:
                                return False
                            if lv == 0:
                                zeros[vk] += k
                                V[ov, c] = 0
                            else:
                                if _may_record(
                                    vk, lv, top, True, lo_abs, hi_abs, lo_pos, lens, flags
                                ) and _z_may_record(
                                    HB,
                                    HO,
                                    HW,
                                    bs,
                                    c,
                                    nb,
                                    pidx,
                                    pval,
                                    npch,
                                    lv,
                                    -1,
                                    vk,
                                    lo_abs,
                                    hi_abs,
                                    lo_pos,
                                    lens,
                                    flags,
                                ):
                                    lr = _view_value(
                                        HB, HO, HW, CL, bs, c, noff, nval, d0, d1, acc2
                                    )
                                    _record(vk, acc2, lr, True, lo_abs, hi_abs, lo_pos, lens, flags)
                                V[ov, c] = 1
                                if lv > out_used[vk]:
                                    out_used[vk] = lv
                            CL[ov, c] = lv
                            done = True
                        elif relu and npch >= 0 and cout == -1:
                            # z_k < 0, clipped: |z_k| = 2^(30e) − (limbs below e), read from the
                            # top and bottom limbs only
                            i0 = -1
                            for i in range(e):
                                if _zlimb(HB, HO, HW, bs, c, nb, pidx, pval, npch, i) != 0:
                                    i0 = i
                                    break
                            if i0 < 0:
                                lm = e + 1
                                top = 1
                            else:
                                i = e - 1
                                while (
                                    i > i0
                                    and _zlimb(HB, HO, HW, bs, c, nb, pidx, pval, npch, i) == MASK
                                ):
                                    i -= 1
                                if i > i0:
                                    lm = i + 1
                                    top = MASK - _zlimb(HB, HO, HW, bs, c, nb, pidx, pval, npch, i)
                                else:
                                    lm = i0 + 1
                                    top = (1 << LIMB) - _zlimb(
                                        HB, HO, HW, bs, c, nb, pidx, pval, npch, i0
                                    )
                            neg[vk] += k
                            # (|z| = 2^(30e) when no limb below e is set: rare, compared in full)
                            if _may_record(
                                vk, lm, top, False, lo_abs, hi_abs, lo_pos, lens, flags
                            ) and (
                                i0 < 0
                                or _z_may_record(
                                    HB,
                                    HO,
                                    HW,
                                    bs,
                                    c,
                                    nb,
                                    pidx,
                                    pval,
                                    npch,
                                    lm,
                                    i0,
                                    vk,
                                    lo_abs,
                                    hi_abs,
                                    lo_pos,
                                    lens,
                                    flags,
                                )
                            ):
                                h2 = _view_signed(
                                    HB,
                                    HO,
                                    HW,
                                    CL,
                                    bs,
                                    c,
                                    1,
                                    acc,
                                    0,
                                    noff,
                                    nval,
                                    d0,
                                    d1,
                                    acc2,
                                    width,
                                )
                                for i in range(h2):
                                    mag[i] = -acc2[i]
                                mag[h2] = 0
                                _normalize(mag, h2)
                                lr = _length(mag, h2 + 1)
                                _record(vk, mag, lr, False, lo_abs, hi_abs, lo_pos, lens, flags)
                            CL[ov, c] = 0
                            V[ov, c] = 0
                            done = True
                    if not done:  # in full: z_k = z + d_k, stored explicitly
                        h2 = _view_signed(
                            HB, HO, HW, CL, bs, c, zmode, acc, hw, noff, nval, d0, d1, acc2, width
                        )
                        neg2 = acc2[h2 - 1] < 0
                        if neg2:
                            while h2 > 1 and acc2[h2 - 1] == -1 and acc2[h2 - 2] == MASK:
                                acc2[h2 - 2] = -1
                                h2 -= 1
                        n2 = h2 if neg2 else _length(acc2, h2)
                        if n2 == 0:
                            zeros[vk] += k
                        elif neg2:
                            for i in range(h2):
                                mag[i] = -acc2[i]
                            mag[h2] = 0
                            _normalize(mag, h2)
                            neg[vk] += k
                            lr = _length(mag, h2 + 1)
                            if _may_record(
                                vk, lr, mag[lr - 1], False, lo_abs, hi_abs, lo_pos, lens, flags
                            ):
                                _record(vk, mag, lr, False, lo_abs, hi_abs, lo_pos, lens, flags)
                        elif _may_record(
                            vk, n2, acc2[n2 - 1], True, lo_abs, hi_abs, lo_pos, lens, flags
                        ):
                            _record(vk, acc2, n2, True, lo_abs, hi_abs, lo_pos, lens, flags)
                        if relu and neg2:
                            n2 = 0
                        if n2 > HW[ov]:
                            return False
                        bo = _hi(HO, HW, ov, c)
                        for i in range(n2):
                            HB[np.uintp(bo + i)] = acc2[i]
                        CL[ov, c] = n2
                        V[ov, c] = 0
                        if n2 > out_used[vk]:
                            out_used[vk] = n2
                if zmode >= 0:
                    continue
            negative = acc[hw - 1] < 0
            if negative:  # shortest form: (…, 2^30 − 1, −1) is (…, −1)
                while hw > 1 and acc[hw - 1] == -1 and acc[hw - 2] == MASK:
                    acc[hw - 2] = -1
                    hw -= 1
            n_acc = hw if negative else _length(acc, hw)
            if n_acc == 0:
                zeros[u] += k
            else:
                if negative:
                    for i in range(hw):
                        mag[i] = -acc[i]
                    mag[hw] = 0
                    _normalize(mag, hw)
                    neg[u] += k
                    lm = _length(mag, hw + 1)
                    if _may_record(u, lm, mag[lm - 1], False, lo_abs, hi_abs, lo_pos, lens, flags):
                        _record(u, mag, lm, False, lo_abs, hi_abs, lo_pos, lens, flags)
                else:
                    if _may_record(
                        u, n_acc, acc[n_acc - 1], True, lo_abs, hi_abs, lo_pos, lens, flags
                    ):
                        _record(u, acc, n_acc, True, lo_abs, hi_abs, lo_pos, lens, flags)
            if relu and negative:
                n_acc = 0
            if n_acc > HW[o]:
                return False
            if not (relu and negative):
                bo = _hi(HO, HW, o, c)
                for i in range(n_acc):
                    HB[np.uintp(bo + i)] = acc[i]
            CL[o, c] = n_acc  # limbs from CL up are never read
            V[o, c] = 0
            if n_acc > hi_used:
                hi_used = n_acc
        out_used[u] = hi_used
    return True


@njit(cache=True)
def limbs_to_int64(HB, HO, HW, CL, slot, nclass, out):
    """Values of an explicit shared lane known to be below 2^62 in magnitude, as int64."""
    for c in range(nclass):
        v = np.int64(0)
        b = _hi(HO, HW, slot, c)
        for i in range(CL[slot, c] - 1, -1, -1):
            v = v * (1 << LIMB) + HB[np.uintp(b + i)]
        out[c] = v


def warm() -> None:
    """Call every kernel once on tiny inputs: loads them from numba's on-disk cache, or compiles
    and caches them on a machine that has none (the first-run cost, see docs/fast.md)."""
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
    linear_rows(R, cls, table, one, *terms, np.zeros((1, 4), np.int8))  # step probes
    linear_rows_parallel(R, cls, table, one, *terms, np.zeros((1, 4), np.int8))
    refine(cls.copy(), np.array([[0, 1, 0, 1]], i64), 1)
    refine(cls.copy(), np.array([[0, 1, 0, 1]], np.int8), 1)  # a probed step lane
    gcd_rows(R, one[:1], i64(0))
    H = (np.zeros(12, i64), np.array([0, 6], i64), np.array([3, 3], i64))  # 2 slots × 2 × 3
    out = np.zeros(2, i64)
    limbs_to_int64(*H, np.zeros((2, 2), i64), 0, 2, out)
    e = np.zeros(0, i64)
    z = np.zeros(1, i64)
    common = (
        *H,
        np.zeros((2, 2), i64),
        one[1:],
        np.array([-1], i64),
        np.array([0, 1], i64),
        np.array([0], i64),
        np.array([-1], i64),
        np.array([0], i64),
        np.array([0, 1], i64),
        np.array([0], i64),
        np.array([1], i64),
        np.array([0, 0], i64),
        e,
        e,
        np.array([-1], i64),
        np.array([0, 0], i64),
        e,
        e,
        np.zeros((1, 1), i64),
        np.ones(2, i64),
        np.zeros((2, 2), np.int8),  # views: none
        np.array([-1, -1], i64),
        np.zeros(3, i64),
        e,
        e,
        np.array([-1], i64),
        np.array([0, 0], i64),
        e,
        np.array([0, 0], i64),
        e,
        e,
    )
    stats = (
        z.copy(),
        z.copy(),
        np.zeros((1, 7), i64),
        np.zeros((1, 7), i64),
        np.zeros((1, 7), i64),
        np.zeros((1, 3), i64),
        z.copy(),
        z.copy(),
    )
    _shared_classes(*common, 0, 2, True, np.array([5], i64), *stats)
    shared_units(*common, 2, True, np.array([5], i64), *stats, 2)
    i16, i32, u8 = np.zeros(4, np.int16), np.zeros(4, np.int32), np.ones(4, np.uint8)
    step_fold(np.zeros(4, np.int8), 1, 1, i16, u8, i32, i32.copy())
    for values in (np.zeros(4, np.int8), np.zeros(4, i64)):  # match lanes, as probes come
        match_fold(values, 1, 0, i16.copy(), np.full(4, -1, np.int32), np.full(4, -1, np.int32))
    from exactmem.evaluate import run_kernel, step_kernel  # (they import this module)

    run_kernel.warm()
    step_kernel.warm()


@njit(cache=True)
def step_fold(values, den, j, ones, flags, ramp, rise):
    """One step lane folded into per-row state (exactmem.verify.StepFold): ``ones`` counts
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
    """One match lane (slot k) folded into per-row state (exactmem.verify.MatchFold): ``hits``
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
