"""numba kernel of a shared run (:mod:`exactmem.evaluate.fast.shared_runs`): every class through all
the layers of the run in one pass, its values in a few registers of limbs.

A value is a little-endian vector of 30-bit limbs in int64 (:mod:`exactmem.evaluate.fast.digits`);
registers hold non-negative values (ReLU outputs) with their exact number of limbs in use. A
unit's pre-activation is formed in an accumulator whose limbs below the top are in [0, 2^30)
after a carry pass and whose top limb keeps the sign. A product of a digit (|d| < 2^29) and a
limb (< 2^30) is below 2^59, so six of them may pile up on one limb before a carry pass: no
int64 operation can wrap. Imported lazily, like :mod:`exactmem.evaluate.fast.kernels`.
"""

from __future__ import annotations

import numpy as np

from exactmem.evaluate.fast.limb_kernel import _hi, _settle, _view_value
from exactmem.evaluate.fast.limits import _chunks
from exactmem.runtime.jit import inner, njit, prange

__all__ = ["shared_run", "warm"]

LIMB = 30
MASK = (1 << LIMB) - 1


@inner
def _carry(a, lo, hi):
    """Limbs lo..hi−2 into [0, 2^30); limb hi − 1 takes the carries and keeps the sign."""
    for i in range(lo, hi - 1):
        c = a[i] >> LIMB
        a[i] -= c << LIMB
        a[i + 1] += c


@inner
def _beats(best, bn, u, x, n, smaller):
    """Whether x (n ≥ 1 limbs in use, non-negative) is smaller (or larger) than unit u's kept
    extreme best[u] (bn[u] limbs; −1: none kept yet)."""
    m = bn[u]
    if m < 0:
        return True
    if n != m:
        return (n < m) == smaller
    for i in range(n - 1, -1, -1):
        if x[i] != best[u, i]:
            return (x[i] < best[u, i]) == smaller
    return False


@inner
def _keep(best, bn, u, x, n):
    for i in range(n):
        best[u, i] = x[i]
    bn[u] = n


@inner
def _difference(X, W, r, nr, r2, nr2, out):
    """|X[r] − X[r2]| into out; returns (limbs in use, sign) — the sign −1 when X[r2] is larger."""
    sg = 1
    if nr < nr2:
        sg = -1
    elif nr == nr2:
        for i in range(nr - 1, -1, -1):
            a = X[np.uintp(r * W + i)]
            b = X[np.uintp(r2 * W + i)]
            if a != b:
                if a < b:
                    sg = -1
                break
    if sg < 0:
        r, nr, r2, nr2 = r2, nr2, r, nr
    borrow = 0
    for i in range(nr):
        v = X[np.uintp(r * W + i)] - borrow
        if i < nr2:
            v -= X[np.uintp(r2 * W + i)]
        borrow = 0
        if v < 0:
            v += 1 << LIMB
            borrow = 1
        out[i] = v
    n = nr
    while n > 0 and out[n - 1] == 0:
        n -= 1
    return n, sg


@inner
def _tap(HB, HO, HW, CL, s, c, X, base, n):
    """Store a value (n limbs at X[base:]) as class c's in slot s; False if it does not fit."""
    if n > HW[s]:
        return False
    b = _hi(HO, HW, s, c)
    for i in range(n):
        HB[np.uintp(b + i)] = X[np.uintp(base + i)]
    CL[s, c] = n
    return True


@njit(cache=True)
def _run_classes(
    HB,
    HO,
    HW,
    CL,
    V,
    VB,
    vptr,
    voff,
    vval,
    in_slot,
    in_reg,
    nreg,
    W,
    A,
    out_reg,
    same,
    tptr,
    treg,
    treg2,
    dptr,
    doff,
    dval,
    bptr,
    boff,
    bval,
    ta,
    tb,
    cptr,
    cval,
    fin_reg,
    fin_slot,
    tap_slot,
    counts,
    c0,
    c1,
    zpre,
    zneg,
    lo,
    lo_n,
    pos,
    pos_n,
    hi,
    hi_n,
):
    """Classes c0..c1−1 through the run. Unit u (in layer order): σ(bias_u + Σ_t digits_t ·
    term_t), a term register treg[t] or the difference treg[t] − treg2[t] (treg2 ≥ 0), written
    to register out_reg[u]; ``same[u]``: its terms are unit u − 1's (the linear part is reused;
    the plan lists none for it).
    A difference of the values of units ta[t], tb[t] (≥ 0: one layer's, with equal linear parts)
    is the constant cval[cptr[t]:cptr[t + 1]] (limbs, then the sign) when neither was clipped.
    Registers in_reg are loaded from the store's slots in_slot (views formed), fin_reg written to
    fin_slot at the end, unit u's value to slot tap_slot[u] (≥ 0) as it is computed. Per unit:
    rows whose pre-activation is 0 (zpre) or negative (zneg), the least non-zero
    |pre-activation| (lo), the least and largest positive value (pos, hi), each with its limbs
    in use (−1: none). Returns False when a value outgrows W limbs."""
    X = np.zeros(nreg * W, np.int64)  # register r's limbs at r·W (flat: no views per term)
    XL = np.zeros(nreg, np.int64)
    yes = np.bool_(True)  # a value, not a literal: _beats compiles once (layer_kernel)
    no = np.bool_(False)
    lin = np.zeros(A, np.int64)
    acc = np.zeros(A, np.int64)
    d = np.zeros(A, np.int64)
    posv = np.zeros(out_reg.shape[0], np.bool_)  # unit u's value this class is z_u + b_u
    for c in range(c0, c1):
        k = counts[c]
        for j in range(in_slot.shape[0]):
            s = in_slot[j]
            r = in_reg[j]
            if VB[s] >= 0 and V[s, c]:
                n = _view_value(HB, HO, HW, CL, VB[s], c, voff, vval, vptr[s], vptr[s + 1], acc)
                if n > W:
                    return False
                for i in range(n):
                    X[np.uintp(r * W + i)] = acc[i]
            else:
                n = CL[s, c]
                if n > W:
                    return False
                b = _hi(HO, HW, s, c)
                for i in range(n):
                    X[np.uintp(r * W + i)] = HB[np.uintp(b + i)]
            XL[r] = n
        lh = 1
        for u in range(out_reg.shape[0]):
            if not same[u]:  # the linear part, carried: lin[:lh], its top limb signed
                lh = 1
                lin[0] = 0
                pending = 0
                for t in range(tptr[u], tptr[u + 1]):
                    r = treg[t]
                    r2 = treg2[t]
                    sg = 1
                    if r2 >= 0:
                        ua = ta[t]
                        if ua >= 0 and posv[ua] and posv[tb[t]]:  # bias − bias: no limbs read
                            p0 = cptr[t]
                            n = cptr[t + 1] - 1 - p0
                            sg = cval[p0 + n]
                            for i in range(n):
                                d[i] = cval[p0 + i]
                        else:
                            n, sg = _difference(X, W, r, XL[r], r2, XL[r2], d)
                    else:
                        n = XL[r]
                    if n == 0:
                        continue
                    for j in range(dptr[t], dptr[t + 1]):
                        off = doff[j]
                        w = dval[j] * sg
                        top = off + n + 2
                        for i in range(lh, top):
                            lin[i] = 0
                        if top > lh:
                            lh = top
                        if r2 >= 0:
                            for i in range(n):
                                lin[off + i] += w * d[i]
                        else:
                            base = r * W
                            for i in range(n):
                                lin[off + i] += w * X[np.uintp(base + i)]
                        pending += 1
                        if pending == 6:
                            _carry(lin, 0, lh)
                            pending = 0
                _carry(lin, 0, lh)
            h = lh
            for i in range(lh):
                acc[i] = lin[i]
            for j in range(bptr[u], bptr[u + 1]):
                top = boff[j] + 2
                for i in range(h, top):
                    acc[i] = 0
                if top > h:  # the old top limb's sign is carried up by the pass below
                    h = top
                acc[boff[j]] += bval[j]
            if bptr[u + 1] > bptr[u]:  # lin is carried: only from the lowest digit up, while
                # a carry is left (past the highest digit), as _settle does — and from lin's
                # signed top limb when a digit lies above it (its sign must reach the new top)
                low = min(lh - 1, boff[bptr[u]])
                _settle(acc, low, boff[bptr[u + 1] - 1] + 1, h - 1)
            o = out_reg[u]
            if acc[h - 1] < 0:  # negative: |z| = −z, carried; σ gives 0
                for i in range(h):
                    acc[i] = -acc[i]
                _carry(acc, 0, h)
                n = h
                while n > 0 and acc[n - 1] == 0:
                    n -= 1
                zneg[u] += k
                if _beats(lo, lo_n, u, acc, n, yes):
                    _keep(lo, lo_n, u, acc, n)
                XL[o] = 0
                posv[u] = False
                if tap_slot[u] >= 0:
                    CL[tap_slot[u], c] = 0
                continue
            n = h
            while n > 0 and acc[n - 1] == 0:
                n -= 1
            if n > W:
                return False
            posv[u] = True  # z_u + b_u ≥ 0: the value is z_u + b_u, also when it is 0
            if n == 0:
                zpre[u] += k
            else:
                if _beats(lo, lo_n, u, acc, n, yes):
                    _keep(lo, lo_n, u, acc, n)
                if _beats(pos, pos_n, u, acc, n, yes):
                    _keep(pos, pos_n, u, acc, n)
                if _beats(hi, hi_n, u, acc, n, no):
                    _keep(hi, hi_n, u, acc, n)
            base = o * W
            for i in range(n):
                X[np.uintp(base + i)] = acc[i]
            XL[o] = n
            if tap_slot[u] >= 0 and not _tap(HB, HO, HW, CL, tap_slot[u], c, X, base, n):
                return False
        for j in range(fin_reg.shape[0]):
            r = fin_reg[j]
            s = fin_slot[j]
            n = XL[r]
            if n > HW[s]:
                return False
            b = _hi(HO, HW, s, c)
            for i in range(n):
                HB[np.uintp(b + i)] = X[np.uintp(r * W + i)]
            CL[s, c] = n
    return True


@njit(parallel=True, cache=True)
def shared_run(
    HB,
    HO,
    HW,
    CL,
    V,
    VB,
    vptr,
    voff,
    vval,
    in_slot,
    in_reg,
    nreg,
    W,
    A,
    out_reg,
    same,
    tptr,
    treg,
    treg2,
    dptr,
    doff,
    dval,
    bptr,
    boff,
    bval,
    ta,
    tb,
    cptr,
    cval,
    fin_reg,
    fin_slot,
    tap_slot,
    counts,
    nclass,
    chunks,
    zpre,
    zneg,
    lo,
    lo_n,
    pos,
    pos_n,
    hi,
    hi_n,
):
    """:func:`_run_classes` over all classes in ``chunks`` parallel parts, their statistics
    merged (sums and extremes: the result does not depend on the split)."""
    K = out_reg.shape[0]
    S = lo.shape[1]
    cz = np.zeros((chunks, K), np.int64)
    cn = np.zeros((chunks, K), np.int64)
    clo = np.zeros((chunks, K, S), np.int64)
    cpos = np.zeros((chunks, K, S), np.int64)
    chi = np.zeros((chunks, K, S), np.int64)
    cln = np.full((chunks, K), -1, np.int64)
    cpn = np.full((chunks, K), -1, np.int64)
    chn = np.full((chunks, K), -1, np.int64)
    ok = np.ones(chunks, np.bool_)
    step = (nclass + chunks - 1) // chunks
    yes = np.bool_(True)
    no = np.bool_(False)
    for q in prange(chunks):
        a = q * step
        b = min(nclass, a + step)
        if a < b:
            ok[q] = _run_classes(
                HB,
                HO,
                HW,
                CL,
                V,
                VB,
                vptr,
                voff,
                vval,
                in_slot,
                in_reg,
                nreg,
                W,
                A,
                out_reg,
                same,
                tptr,
                treg,
                treg2,
                dptr,
                doff,
                dval,
                bptr,
                boff,
                bval,
                ta,
                tb,
                cptr,
                cval,
                fin_reg,
                fin_slot,
                tap_slot,
                counts,
                a,
                b,
                cz[q],
                cn[q],
                clo[q],
                cln[q],
                cpos[q],
                cpn[q],
                chi[q],
                chn[q],
            )
    for q in range(chunks):
        if not ok[q]:
            return False
        for u in range(K):
            zpre[u] += cz[q, u]
            zneg[u] += cn[q, u]
            if cln[q, u] >= 0 and _beats(lo, lo_n, u, clo[q, u], cln[q, u], yes):
                _keep(lo, lo_n, u, clo[q, u], cln[q, u])
            if cpn[q, u] >= 0 and _beats(pos, pos_n, u, cpos[q, u], cpn[q, u], yes):
                _keep(pos, pos_n, u, cpos[q, u], cpn[q, u])
            if chn[q, u] >= 0 and _beats(hi, hi_n, u, chi[q, u], chn[q, u], no):
                _keep(hi, hi_n, u, chi[q, u], chn[q, u])
    return True


def run(args: tuple, nclass: int, grain: int) -> bool:
    """The run over every class: one part when there are few (a thread pool costs more than it
    saves), else as many parts as threads."""
    chunks = _chunks(nclass, grain)
    if chunks == 1:
        return bool(_run_classes(*args[:33], 0, nclass, *args[33:]))
    return bool(shared_run(*args[:33], nclass, chunks, *args[33:]))


def warm() -> None:
    """Load (or compile) both kernels on a one-register, one-unit run."""
    i64 = np.int64
    H = (np.zeros(6, i64), np.array([0], i64), np.array([3], i64))
    CL = np.ones((1, 2), i64)
    V = np.zeros((1, 2), np.int8)
    views = (np.array([-1], i64), np.zeros(2, i64), np.zeros(0, i64), np.zeros(0, i64))
    one = np.array([0], i64)
    prog = (
        one,
        one,
        2,
        4,
        8,
        np.array([1], i64),
        np.zeros(1, np.bool_),
        np.array([0, 1], i64),
        one,
        np.array([-1], i64),
        np.array([0, 1], i64),
        one,
        np.array([1], i64),
        np.array([0, 1], i64),
        one,
        np.array([-1], i64),
        np.array([-1], i64),
        np.array([-1], i64),
        np.zeros(2, i64),
        np.zeros(0, i64),
        np.array([1], i64),
        one,
        np.array([-1], i64),
        np.ones(2, i64),
    )
    for chunks in (1, 2):
        stats = (
            np.zeros(1, i64),
            np.zeros(1, i64),
            *(x for _ in range(3) for x in (np.zeros((1, 8), i64), np.full(1, -1, i64))),
        )
        run((*H, CL, V, *views, *prog, *stats), 2, 1 if chunks == 2 else 4)
