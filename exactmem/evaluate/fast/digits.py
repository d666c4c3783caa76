"""Exact integers as signed 30-bit digits: the limb arithmetic's view of a Python int.

The fast evaluator (:mod:`exactmem.evaluate.fast`) and the shared-run kernel
(:mod:`exactmem.evaluate.fast.shared_runs`) keep big integers as little-endian limbs of
``LIMB`` = 30 bits in int64 (a product of a limb and a digit, 2^59, leaves room for a few sums
before a carry); weights enter as their non-zero balanced digits (:func:`_sparse`).
"""

from __future__ import annotations

import numpy as np

LIMB = 30
MASK = (1 << LIMB) - 1


def _limbs(bound: int) -> int:
    """Limbs that hold any integer of magnitude ≤ bound (and its sign), at least 3."""
    return max(3, -(-(bound.bit_length() + 1) // LIMB) + 1)


_SPARSE: dict[int, tuple[list[int], list[int]]] = {}


def _sparse(w: int) -> tuple[list[int], list[int]]:
    """w as signed 30-bit digits in [−2^29, 2^29), the non-zero ones: (offsets, digits).

    Balanced digits keep runs of ones short: 2^p − 1 is two digits, not p/30."""
    if -HALF <= w < HALF:  # one digit (the common weights, and every bias near 0)
        return ([0], [w]) if w else ([], [])
    m = abs(w)
    if m & (m - 1) == 0:  # ±2^b (Stage III's shifts): no loop over the limbs below
        i, r = divmod(m.bit_length() - 1, LIMB)
        if r < LIMB - 1 or w < 0:
            return [i], [-(1 << r) if w < 0 else 1 << r]
        return [i, i + 1], [-HALF, 1]  # 2^29 is not a digit: 2^30 − 2^29
    got = _SPARSE.get(w)
    if got is None and w.bit_length() > 64 * LIMB:  # numpy's fixed cost pays from here
        return _sparse_long(w)
    if got is None:
        offs, vals, i, m = [], [], 0, w
        while m:
            d = m & MASK
            if d >= 1 << (LIMB - 1):
                d -= 1 << LIMB
            if d:
                offs.append(i)
                vals.append(d)
            m = (m - d) >> LIMB
            i += 1
        got = (offs, vals)
        if len(offs) <= 4 and len(_SPARSE) < 1 << 16:  # powers of two, small weights
            _SPARSE[w] = got
    return got


HALF = 1 << (LIMB - 1)


def _sparse_long(w: int) -> tuple[list[int], list[int]]:
    """:func:`_sparse` of a long integer in linear time (the digit loop is quadratic: each step
    shifts the whole integer; a packed integer has thousands of limbs). Limbs of |w| from its
    bytes, 15 bytes (four limbs) at a time; then a limb ≥ 2^29 becomes limb − 2^30 and carries
    1 up, a limb of 2^29 − 1 passes an incoming carry on (a carry-lookahead scan)."""
    mag = abs(w)
    size = -(-(mag.bit_length() + LIMB) // 120) * 15  # one spare limb on top, whole groups
    x = _four_limbs(np.frombuffer(mag.to_bytes(size, "little"), np.uint8)).reshape(-1)
    generate = x >= HALF
    last = np.maximum.accumulate(np.where(x != HALF - 1, np.arange(len(x)), -1))
    carry_out = np.where(last >= 0, generate[np.maximum(last, 0)], False)
    carry_in = np.concatenate([[False], carry_out[:-1]])
    d = x + carry_in - (carry_out.astype(np.int64) << LIMB)
    if w < 0:  # −d is balanced but for digits 2^29: those lose 2^30 and carry 1 up (which
        d = -d  # may lift the next digit to 2^29 or above in turn; the top digit is negative)
        for i in np.flatnonzero(d == HALF):
            while d[i] >= HALF:
                d[i] -= 1 << LIMB
                i += 1
                d[i] += 1
    offs = np.flatnonzero(d)
    return offs.tolist(), d[offs].tolist()


def _limb_rows(values: list[int], k: int) -> np.ndarray:
    """The 30-bit limbs of non-negative integers below 2^(30k), one row of k limbs each: from
    their bytes, 15 bytes (four limbs) at a time, all rows in one pass (:func:`_four_limbs`)."""
    groups = -(-k // 4)
    raw = b"".join(v.to_bytes(15 * groups, "little") for v in values)
    return _four_limbs(np.frombuffer(raw, np.uint8)).reshape(len(values), 4 * groups)[:, :k]


def _four_limbs(raw: np.ndarray) -> np.ndarray:
    """Little-endian bytes, 15 at a time, as four 30-bit limbs each: a (groups × 4) array."""
    groups = raw.reshape(-1, 15)
    lo = np.ascontiguousarray(groups[:, :8]).view("<u8")[:, 0]  # bits 0..63 of each group
    hi = np.zeros((len(groups), 8), np.uint8)
    hi[:, :7] = groups[:, 8:]
    hi = hi.view("<u8")[:, 0]  # bits 64..119
    m30, m26 = np.uint64(MASK), np.uint64((1 << 26) - 1)
    x = np.empty((len(groups), 4), np.int64)
    x[:, 0] = lo & m30
    x[:, 1] = (lo >> np.uint64(30)) & m30
    x[:, 2] = (lo >> np.uint64(60)) | ((hi & m26) << np.uint64(4))
    x[:, 3] = hi >> np.uint64(26)
    return x


def _int_of(limbs: np.ndarray) -> int:
    v = 0
    for x in reversed(limbs.tolist()):  # (Python ints: numpy scalars cost more than the sum)
        v = (v << LIMB) + x
    return v


def _paired(terms: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Terms as (lane, partner, coefficient): w·x − w·y (w > 0, in either order) becomes
    w·(x − y) with partner y (the difference of a step's two units is 0 or 1, so the product
    stays short); partner −1 for a single term. Each term pairs with the first later one of
    the opposite coefficient not taken yet."""
    n = len(terms)
    if n == 1:
        return [(terms[0][0], -1, terms[0][1])]
    out: list[tuple[int, int, int]] = []
    taken = [False] * n
    for i, (c, w) in enumerate(terms):
        if taken[i]:
            continue
        partner = -1
        for j in range(i + 1, n):
            if not taken[j] and terms[j][1] == -w:
                taken[j] = True
                partner = terms[j][0]
                break
        if partner >= 0 and w < 0:  # the positive coefficient leads
            c, partner, w = partner, c, -w
        out.append((c, partner, w))
    return out
