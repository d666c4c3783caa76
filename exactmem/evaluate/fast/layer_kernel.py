"""numba kernel of one layer's shared and mixed units over every class (multi-limb), the values
never below what the engine proved for them: a result that outgrows its bound is refused.
Imported lazily."""

from __future__ import annotations

import numpy as np

from exactmem.evaluate.fast.limb_kernel import (
    LIMB,
    MASK,
    _add_in_place,
    _extend,
    _grow,
    _hi,
    _length,
    _less,
    _may_record,
    _normalize,
    _normalize_from,
    _pair_diff,
    _record,
    _record_h,
    _settle,
    _view_signed,
    _view_value,
    _widest,
    _z_may_record,
    _zlimb,
)
from exactmem.runtime.jit import njit, prange


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
    # flags and small numbers passed to helpers as values, not constants: numba compiles a
    # helper once more for every distinct literal argument (LLVM still inlines the constant)
    yes = np.bool_(True)
    no = np.bool_(False)
    zero = np.int64(0)
    one = np.int64(1)
    minus_one = np.int64(-1)
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
                            yes,
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
                    lw, hw = _extend(acc, lw, hw, zero, max(nb, 1))
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
                                    vk, lv, top, yes, lo_abs, hi_abs, lo_pos, lens, flags
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
                                    minus_one,
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
                                    _record(vk, acc2, lr, yes, lo_abs, hi_abs, lo_pos, lens, flags)
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
                                vk, lm, top, no, lo_abs, hi_abs, lo_pos, lens, flags
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
                                    one,
                                    acc,
                                    zero,
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
                                _record(vk, mag, lr, no, lo_abs, hi_abs, lo_pos, lens, flags)
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
                                vk, lr, mag[lr - 1], no, lo_abs, hi_abs, lo_pos, lens, flags
                            ):
                                _record(vk, mag, lr, no, lo_abs, hi_abs, lo_pos, lens, flags)
                        elif _may_record(
                            vk, n2, acc2[n2 - 1], yes, lo_abs, hi_abs, lo_pos, lens, flags
                        ):
                            _record(vk, acc2, n2, yes, lo_abs, hi_abs, lo_pos, lens, flags)
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
                    if _may_record(u, lm, mag[lm - 1], no, lo_abs, hi_abs, lo_pos, lens, flags):
                        _record(u, mag, lm, no, lo_abs, hi_abs, lo_pos, lens, flags)
                else:
                    if _may_record(
                        u, n_acc, acc[n_acc - 1], yes, lo_abs, hi_abs, lo_pos, lens, flags
                    ):
                        _record(u, acc, n_acc, yes, lo_abs, hi_abs, lo_pos, lens, flags)
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


def warm() -> None:
    """Load (or compile) both forms of the layer kernel on a one-unit layer of two classes."""
    i64 = np.int64
    one = np.array([0, 1], i64)
    H = (np.zeros(12, i64), np.array([0, 6], i64), np.array([3, 3], i64))  # 2 slots × 2 × 3
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
