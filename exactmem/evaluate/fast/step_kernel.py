"""numba kernel of a run of Stage II step layers in key order
(:mod:`exactmem.evaluate.fast.key_order`).

Each layer: split the class that straddles the previous step's boundary (classes are runs of the
sorted keys), add λ·step to each selected packed integer in place (only the classes above the
boundary change; those below it never change again in the run, so each slot keeps a summary of
them and a layer costs O(classes above the boundary), not O(classes)), and find this layer's
step boundary and its units' statistics by binary search on the sorted keys
(:mod:`exactmem.evaluate.fast.sorted_steps`, here in int64 — the caller proved every value of the
units and of the step below 2^62). A layer whose step is not 0 then 1 along the keys, or that
would step back below the boundary before it, or split the classes past their limit, ends the
run before anything of it is written. Imported lazily.
"""

from __future__ import annotations

import numpy as np

from exactmem.evaluate.fast.limb_kernel import _add_in_place, _hi, _less, _widest
from exactmem.runtime.jit import inner, njit

__all__ = ["step_run", "warm"]


@inner
def _first_at_least(xs, v):
    """First index i with xs[i] ≥ v in the sorted keys (``np.searchsorted(xs, v)``, written out:
    numba's compiles a comparator family for every dtype, a part of the first run's compiling)."""
    lo = 0
    hi = xs.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if xs[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@inner
def _first_above(xs, v):
    """First index i with xs[i] > v in the sorted keys (``np.searchsorted(xs, v, "right")``)."""
    lo = 0
    hi = xs.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if xs[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@inner
def _unit_stats(xs, w, b, out):
    """:func:`~exactmem.evaluate.fast.sorted_steps.unit_stats` in int64: out = (zeros, negatives,
    least non-zero |z|, least positive z, greatest |z|), −1 for "none"."""
    n = xs.shape[0]
    neg = _first_at_least(xs, -(b // w))
    zeros = 0
    if b % w == 0:
        zeros = _first_above(xs, -b // w) - neg
    first = neg + zeros
    min_pos = w * xs[first] + b if first < n else -1
    least = min_pos
    if neg > 0:
        m = -(w * xs[neg - 1] + b)
        if least < 0 or m < least:
            least = m
    top = 0
    if n > 0:
        top = max(abs(w * xs[0] + b), abs(w * xs[n - 1] + b))
    out[0] = zeros
    out[1] = neg
    out[2] = least
    out[3] = min_pos
    out[4] = top


@inner
def _boundary(xs, w, b, coef, u0, u1, starts, cuts):
    """:func:`~exactmem.evaluate.fast.sorted_steps.step_boundary` of units u0..u1−1 in int64: p, or
    −1 when the sum is not a step along the keys."""
    n = xs.shape[0]
    k = 0
    cuts[k] = 0
    k += 1
    cuts[k] = n
    k += 1
    for u in range(u0, u1):
        at = _first_at_least(xs, -(b[u] // w[u]))
        if b[u] % w[u] == 0:
            at = _first_above(xs, -b[u] // w[u])
        starts[u - u0] = at
        cuts[k] = at
        k += 1
    # the k ≤ units + 2 cuts sorted in place (insertion sort: np.sort compiles a quicksort)
    for i in range(1, k):
        x = cuts[i]
        j = i - 1
        while j >= 0 and cuts[j] > x:
            cuts[j + 1] = cuts[j]
            j -= 1
        cuts[j + 1] = x
    cs = cuts
    p = -1
    for i in range(k - 1):
        s = cs[i]
        e = cs[i + 1]
        if s == e:
            continue
        alpha = 0
        beta = 0
        for u in range(u0, u1):
            if starts[u - u0] <= s:
                alpha += coef[u] * w[u]
                beta += coef[u] * b[u]
        if alpha != 0 and xs[s] != xs[e - 1]:
            return -1
        value = alpha * xs[s] + beta
        if value == 0 and p < 0:
            continue
        if value == 1:
            if p < 0:
                p = s
            continue
        return -1
    return n if p < 0 else p


@inner
def _compare(HB, HO, HW, CL, s, c, d):
    """Sign of H[s, c] − H[s, d] (non-negative values, exact lengths)."""
    a = CL[s, c]
    e = CL[s, d]
    if a != e:
        return 1 if a > e else -1
    bc = _hi(HO, HW, s, c)
    bd = _hi(HO, HW, s, d)
    for i in range(a - 1, -1, -1):
        x = HB[np.uintp(bc + i)]
        y = HB[np.uintp(bd + i)]
        if x != y:
            return 1 if x > y else -1
    return 0


@inner
def _magnitude_left(HB, HO, HW, CL, s, c, mag, n_mag, out):
    """out = mag − H[s, c] (mag > H[s, c] ≥ 0, n_mag limbs); returns its limbs in use."""
    n = CL[s, c]
    b = _hi(HO, HW, s, c)
    borrow = 0
    for i in range(n_mag):
        v = mag[i] - borrow
        if i < n:
            v -= HB[np.uintp(b + i)]
        borrow = 0
        if v < 0:
            v += 1 << 30
            borrow = 1
        out[i] = v
    k = n_mag
    while k > 0 and out[k - 1] == 0:
        k -= 1
    return k


@inner
def _copy_out(HB, HO, HW, CL, s, c, out):
    n = CL[s, c]
    b = _hi(HO, HW, s, c)
    for i in range(n):
        out[i] = HB[np.uintp(b + i)]
    return n


@njit(cache=True)
def step_run(
    xs,
    lo,
    hi,
    counts,
    state,
    HB,
    HO,
    HW,
    CL,
    V,
    live,
    uptr,
    uw,
    ub,
    ucoef,
    mptr,
    mslot,
    lptr,
    limbs,
    lw,
    mags,
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
):
    """Layers 0.. of the run; ``state`` = (classes, previous boundary, class limit, last folded
    boundary), updated. Layer l: row units uptr[l]..uptr[l+1]−1 (σ(w·x + b), probe coefficient
    ucoef), mixed units mptr[l]..mptr[l+1]−1 (slot mslot += λ·step in place, λ's limbs
    limbs[lptr[m]:lptr[m+1]], normalized, lowest non-zero lw[m]; |λ| in mags[m] over as many
    limbs). Statistics per mixed unit: pre-activations 0 and negative, least non-zero |z|,
    least and greatest positive value. Returns the number of layers done."""
    L = uptr.shape[0] - 1
    umax = 0
    for l_ in range(L):
        umax = max(umax, uptr[l_ + 1] - uptr[l_])
    starts = np.zeros(umax + 1, np.int64)
    cuts = np.zeros(umax + 3, np.int64)
    # _widest, not HW.max(): numba's generic reduction is a part of the first run's compiling
    tmp = np.zeros(max(_widest(HW), limbs.shape[0]) + 2, np.int64)
    # Classes are runs of the sorted keys. Active: reaching above the previous boundary (after
    # the split, wholly above it: every step of the layer is 1 on them); frozen: below it —
    # the boundaries only rise, so a frozen class is never updated again in the run, and each
    # slot keeps a summary of its frozen classes (zeros, least and greatest positive value)
    # instead of scanning every class in every layer.
    act = np.empty(lo.shape[0], np.int64)
    frozen = np.empty(lo.shape[0], np.int64)
    na = 0
    nf = 0
    for c in range(state[0]):
        if hi[c] > state[1]:
            act[na] = c
            na += 1
        else:
            frozen[nf] = c
            nf += 1
    slots = HO.shape[0]
    fz_upto = np.zeros(slots, np.int64)  # frozen[:fz_upto[s]] are in slot s's summary
    fz_zero = np.zeros(slots, np.int64)
    fz_best = np.full(slots, -1, np.int64)
    fz_top = np.full(slots, -1, np.int64)
    for l_ in range(L):
        nclass = state[0]
        p_prev = state[1]
        p = _boundary(xs, uw, ub, ucoef, uptr[l_], uptr[l_ + 1], starts, cuts)
        if p < 0 or p < state[3]:
            return l_
        split = -1
        for j in range(na):  # (a frozen class lies below p_prev)
            c = act[j]
            if lo[c] < p_prev < hi[c]:
                split = c
        if split >= 0 and nclass + 1 > state[2]:
            return l_
        if split >= 0:  # the class straddling the previous boundary: its upper part is new
            c = split
            t = nclass
            lo[t] = p_prev
            hi[t] = hi[c]
            hi[c] = p_prev
            counts[t] = hi[t] - lo[t]
            counts[c] -= counts[t]
            for j in range(live.shape[0]):
                s = live[j]
                bc = _hi(HO, HW, s, c)
                bt = _hi(HO, HW, s, t)
                for i in range(CL[s, c]):
                    HB[np.uintp(bt + i)] = HB[np.uintp(bc + i)]
                CL[s, t] = CL[s, c]
                V[s, t] = V[s, c]
            nclass += 1
            state[0] = nclass
            act[na] = t
            na += 1
        j = 0
        while j < na:  # classes now below the previous boundary freeze
            c = act[j]
            if hi[c] <= p_prev:
                frozen[nf] = c
                nf += 1
                na -= 1
                act[j] = act[na]
            else:
                j += 1
        for m in range(mptr[l_], mptr[l_ + 1]):
            s = mslot[m]
            lam = limbs[lptr[m] : lptr[m + 1]]  # λ normalized: limbs in [0, 2^30), top signed
            mag = mags[lptr[m] : lptr[m + 1]]
            n_l = lam.shape[0]
            n_mag = n_l
            for j in range(fz_upto[s], nf):  # the step is 0 there: z = y, unchanged
                c = frozen[j]
                if CL[s, c] == 0:
                    fz_zero[s] += counts[c]
                    continue
                if fz_best[s] < 0 or _compare(HB, HO, HW, CL, s, c, fz_best[s]) < 0:
                    fz_best[s] = c
                if fz_top[s] < 0 or _compare(HB, HO, HW, CL, s, c, fz_top[s]) > 0:
                    fz_top[s] = c
            fz_upto[s] = nf
            mzeros[m] += fz_zero[s]
            best = fz_best[s]
            top = fz_top[s]
            for j in range(na):  # the step is 1 here: y + λ, in place
                c = act[j]
                n_new = _add_in_place(HB, HO, HW, CL, s, c, lam, lw[m], n_l, tmp)
                if n_new > HW[s]:
                    raise AssertionError("a packed integer outgrew its proved bound")
                if n_new < 0:  # y + λ < 0: σ gives 0; |y + λ| = |λ| − y
                    n = _magnitude_left(HB, HO, HW, CL, s, c, mag, n_mag, tmp)
                    mneg[m] += counts[c]
                    if mlo_n[m] < 0 or _less(tmp, n, mlo[m], mlo_n[m]):
                        for i in range(n):
                            mlo[m, i] = tmp[i]
                        for i in range(n, max(mlo_n[m], 0)):
                            mlo[m, i] = 0
                        mlo_n[m] = n
                    CL[s, c] = 0
                    continue
                CL[s, c] = n_new
                if n_new == 0:
                    mzeros[m] += counts[c]
                    continue
                if best < 0 or _compare(HB, HO, HW, CL, s, c, best) < 0:
                    best = c
                if top < 0 or _compare(HB, HO, HW, CL, s, c, top) > 0:
                    top = c
            if best >= 0:
                mpos_n[m] = _copy_out(HB, HO, HW, CL, s, best, mpos[m])
                mhi_n[m] = _copy_out(HB, HO, HW, CL, s, top, mhi[m])
                if mlo_n[m] < 0 or _less(mpos[m], mpos_n[m], mlo[m], mlo_n[m]):
                    for i in range(mpos_n[m]):
                        mlo[m, i] = mpos[m, i]
                    for i in range(mpos_n[m], max(mlo_n[m], 0)):
                        mlo[m, i] = 0
                    mlo_n[m] = mpos_n[m]
        for u in range(uptr[l_], uptr[l_ + 1]):
            _unit_stats(xs, uw[u], ub[u], ustats[u])
        P[l_] = p
        state[1] = p
        if state[3] >= 0:
            state[3] = p
    return L


def warm() -> None:
    """Load (or compile) the kernel on a two-layer run over four keys."""
    i64 = np.int64
    xs = np.array([1, 2, 3, 4], i64)
    H = (np.zeros(24, i64), np.array([0], i64), np.array([6], i64))
    units = (
        np.array([0, 2, 4], i64),
        np.ones(4, i64),
        np.array([-2, -3, -3, -4], i64),
        np.array([1, -1, 1, -1], i64),
    )
    mixed = (np.array([0, 1, 2], i64), np.zeros(2, i64), np.array([0, 1, 2], i64))
    lam = (np.array([1, 1], i64), np.zeros(2, i64), np.array([1, 1], i64))
    ext = [np.zeros(2, i64), np.zeros(2, i64)]
    for _ in range(3):
        ext += [np.zeros((2, 6), i64), np.full(2, -1, i64)]
    step_run(
        xs,
        np.array([0, 0, 0, 0], i64),
        np.array([4, 0, 0, 0], i64),
        np.array([4, 0, 0, 0], i64),
        np.array([1, 4, 4, 0], i64),
        *H,
        np.zeros((1, 4), i64),
        np.zeros((1, 4), np.int8),
        np.zeros(1, i64),
        *units,
        *mixed,
        *lam,
        np.zeros((4, 5), i64),
        np.zeros(2, i64),
        *ext,
    )
