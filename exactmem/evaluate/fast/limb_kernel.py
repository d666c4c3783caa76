"""numba limb arithmetic shared by the multi-limb kernels: values as little-endian 30-bit limbs
in int64 (:mod:`exactmem.evaluate.fast.digits`), in the limb store's flat buffer
(:mod:`exactmem.evaluate.fast.limb_store`) — carries, lengths, comparisons, views, the kept
extremes. Imported lazily."""

from __future__ import annotations

import numpy as np

from exactmem.runtime.jit import inner, njit

LIMB = 30
MASK = (1 << LIMB) - 1


@inner
def _normalize(acc, top):
    """Propagate carries so limbs 0..top−1 are in [0, 2^30); limb ``top`` keeps the sign."""
    for i in range(top):
        c = acc[i] >> LIMB
        acc[i] -= c << LIMB
        acc[i + 1] += c


@inner
def _length(a, n):
    """Limbs in use of a non-negative normalized vector (index of the top non-zero + 1)."""
    while n > 0 and a[n - 1] == 0:
        n -= 1
    return n


# The small helpers here are plain calls, not numba's ``inline="always"``: LLVM inlines them all
# the same (the kernels run no slower), while numba's own inlining re-typed each body at every
# call site — several seconds of the first run's compilation.
@inner
def _hi(HO, HW, s, c):
    """Where class c of shared slot s starts in the limb store (HB, HO, HW): slot s is a
    (classes × HW[s]) block of the buffer HB at HO[s]. Limb i of it is read as
    ``HB[np.uintp(b + i)]``: an unsigned index spares numba's negative-index fix-up, which
    keeps a limb loop from vectorizing (2× on a micro-benchmark of one; no change measured on
    the whole Stage III kernel, 20–25 % slower than 2-D indexing into one 3-D array was)."""
    return HO[s] + c * HW[s]


@inner
def _widest(HW):
    """The most limbs per class of any slot (scratch sizes)."""
    w = 0
    for s in range(HW.shape[0]):
        w = max(w, HW[s])
    return w


@inner
def _less(a, la, b, lb):
    """a < b for non-negative normalized limb vectors with la, lb limbs in use."""
    if la != lb:
        return la < lb
    for i in range(la - 1, -1, -1):
        if a[i] != b[i]:
            return a[i] < b[i]
    return False


@inner
def _cmp(x, lx, R, u, lr):
    """Sign of x − R[u] for non-negative normalized limb vectors (lx, lr limbs in use). Indexes
    R in place: a row view per call costs reference counting in the hot loop."""
    if lx != lr:
        return 1 if lx > lr else -1
    for i in range(lx - 1, -1, -1):
        if x[i] != R[u, i]:
            return 1 if x[i] > R[u, i] else -1
    return 0


@inner
def _put(R, u, x, lx, lr):
    for i in range(lx):
        R[u, i] = x[i]
    for i in range(lx, lr):
        R[u, i] = 0


@inner
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


@inner
def _cmp_h(HB, HO, HW, s, c, lx, R, u, lr):
    """Sign of H[s, c] − R[u] (non-negative normalized, lx and lr limbs in use)."""
    if lx != lr:
        return 1 if lx > lr else -1
    b = _hi(HO, HW, s, c)
    for i in range(lx - 1, -1, -1):
        if HB[np.uintp(b + i)] != R[u, i]:
            return 1 if HB[np.uintp(b + i)] > R[u, i] else -1
    return 0


@inner
def _put_h(R, u, HB, HO, HW, s, c, lx, lr):
    b = _hi(HO, HW, s, c)
    for i in range(lx):
        R[u, i] = HB[np.uintp(b + i)]
    for i in range(lx, lr):
        R[u, i] = 0


@inner
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


@inner
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


@inner
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


@inner
def _normalize_from(acc, lo, top):
    """:func:`_normalize` over limbs lo..top−1 only (below lo nothing is live)."""
    for i in range(lo, top):
        c = acc[i] >> LIMB
        acc[i] -= c << LIMB
        acc[i + 1] += c


@inner
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


@inner
def _grow(acc, hw, new):
    """Zero limbs hw..new − 1 and settle the old top limb (now below the top)."""
    for i in range(hw, new):
        acc[i] = 0
    _settle(acc, hw - 1, hw, new - 1)
    return new


@inner
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


@inner
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


@inner
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


@inner
def _zlimb(HB, HO, HW, B, c, nb, pidx, pval, n, i):
    """Limb i of a patched value: the patched limb if any, else H's own (view creation in
    :func:`_shared_classes`)."""
    for k in range(n):
        if pidx[k] == i:
            return pval[k]
    if i < nb:
        return HB[np.uintp(_hi(HO, HW, B, c) + i)]
    return 0


@inner
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


@inner
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


@inner
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
def limbs_to_int64(HB, HO, HW, CL, slot, nclass, out):
    """Values of an explicit shared lane known to be below 2^62 in magnitude, as int64."""
    for c in range(nclass):
        v = np.int64(0)
        b = _hi(HO, HW, slot, c)
        for i in range(CL[slot, c] - 1, -1, -1):
            v = v * (1 << LIMB) + HB[np.uintp(b + i)]
        out[c] = v


def warm() -> None:
    """Load (or compile) :func:`limbs_to_int64`."""
    i64 = np.int64
    H = (np.zeros(12, i64), np.array([0, 6], i64), np.array([3, 3], i64))  # 2 slots × 2 × 3
    out = np.zeros(2, i64)
    limbs_to_int64(*H, np.zeros((2, 2), i64), 0, 2, out)
