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


SHORT_JOIN = 16  # limbs: below this the shift-and-add loop beats numpy's fixed cost


def _int_of(limbs: np.ndarray) -> int:
    """Σ limbs[i]·2^(30i) for any int64 limbs (the engine's are 30-bit, the top one signed).

    In linear time: a loop of shift-and-add copies the growing integer at every limb, which is
    quadratic in its length (a 490 000-bit value made 3 s of it per layer, 66 s for a 1 KB
    model). The limbs become bytes in one numpy pass and one ``int.from_bytes``
    (:func:`_join`); limbs outside [0, 2^30) are split into such limbs first."""
    if len(limbs) < SHORT_JOIN:
        v = 0
        for x in reversed(limbs.tolist()):  # (Python ints: numpy scalars cost more than the sum)
            v = (v << LIMB) + x
        return v
    x = np.asarray(limbs, np.int64)
    body = x[:-1]
    if int(body.min()) >= 0 and int(body.max()) <= MASK:  # normalized: the top limb signed
        return _join(body) + (int(x[-1]) << (LIMB * (len(x) - 1)))
    # x = lo + mid·2^30 + hi·2^60 with lo, mid in [0, 2^30) and hi in [−8, 8) (arithmetic
    # shifts), so each part joins in linear time
    lo, mid, hi = x & MASK, (x >> LIMB) & MASK, x >> (2 * LIMB)
    top = _join(np.maximum(hi, 0)) - _join(np.maximum(-hi, 0))
    return _join(lo) + (_join(mid) << LIMB) + (top << (2 * LIMB))


def _join(limbs: np.ndarray) -> int:
    """Σ limbs[i]·2^(30i) for limbs in [0, 2^30): four limbs (120 bits) to 15 bytes each, the
    inverse of :func:`_four_limbs`, then one ``int.from_bytes``."""
    k = len(limbs)
    x = np.zeros(-(-k // 4) * 4, np.uint64)
    x[:k] = limbs
    x = x.reshape(-1, 4)
    lo = x[:, 0] | (x[:, 1] << np.uint64(30)) | (x[:, 2] << np.uint64(60))  # bits 0..63
    hi = (x[:, 2] >> np.uint64(4)) | (x[:, 3] << np.uint64(26))  # bits 64..119
    out = np.empty((len(x), 15), np.uint8)
    out[:, :8] = lo.astype("<u8").view(np.uint8).reshape(-1, 8)
    out[:, 8:] = hi.astype("<u8").view(np.uint8).reshape(-1, 8)[:, :7]
    return int.from_bytes(out.tobytes(), "little")


def _signed_limbs(v: int, k: int) -> list[int]:
    """v as k limbs, the lower k − 1 in [0, 2^30) and the top one signed (the engine's
    normalized form: v = Σ limbs[i]·2^(30i)); v must fit. In linear time (one ``to_bytes``),
    where peeling a limb at a time copies the integer at every limb."""
    if k < 2:
        return [v]
    low_bits = LIMB * (k - 1)
    low = v & ((1 << low_bits) - 1)  # v mod 2^(30(k−1)), non-negative
    if k - 1 < SHORT_JOIN:
        out = []
        for _ in range(k - 1):
            out.append(low & MASK)
            low >>= LIMB
    else:
        out = _limb_rows([low], k - 1)[0].tolist()
    out.append(v >> low_bits)
    return out


def _magnitude_limbs(m: int) -> list[int]:
    """The 30-bit limbs of m ≥ 0, little-endian, none above the top non-zero one (none for 0);
    in linear time."""
    k = -(-m.bit_length() // LIMB)
    if k < SHORT_JOIN:
        out = []
        while m:
            out.append(m & MASK)
            m >>= LIMB
        return out
    return _limb_rows([m], k)[0].tolist()


def _reach(bias: int, terms: list[tuple[int, int]]) -> int:
    """An upper bound on |bias + Σ w·x| over |x| ≤ bound, for terms (w, bound): the exact
    |bias| + Σ |w|·bound while it is short, else the power of two above it from the bit
    lengths alone. A bound sizes limbs and decides int64 safety (exact below 2^120, so every
    decision against 2^62 is the same); multiplying out the bounds of long values cost as
    much as the layer itself (a 490 000-bit lane times a 560-bit weight at every layer)."""
    bits = max((abs(w).bit_length() + x.bit_length() for w, x in terms), default=0)
    if max(bits, abs(bias).bit_length()) < 120:
        return abs(bias) + sum(abs(w) * x for w, x in terms)
    # each term < 2^bits, |bias| < 2^bias_bits: the sum of len + 1 of them < 2^(top + extra)
    top = max(bits, abs(bias).bit_length())
    return 1 << (top + (len(terms) + 1).bit_length())


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
