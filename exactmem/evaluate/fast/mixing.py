"""Token mixing on whole arrays: positional encodings, and attention whose scores are all equal."""

from __future__ import annotations

import math

import numpy as np

from exactmem.core.exact_arrays import first_seen_ids, plus, times, top
from exactmem.core.model import Affine
from exactmem.evaluate import reference
from exactmem.evaluate.arithmetic import Batch
from exactmem.evaluate.fast.limits import LIMIT


def _zero_map(a: Affine) -> bool:
    return all(not row for row in a.rows) and not any(a.bias)


def _affine_exact(a: Affine, X: Batch, den: int, size: int) -> tuple[Batch, int]:
    """:func:`reference._affine` on columns that may be int64: as Python integers wherever a
    product or sum could pass int64 (numpy would wrap around or overflow)."""
    fixed = [x for x in X if np.asarray(x).dtype != object]
    if fixed:
        t = max(1, *(top(np.asarray(x)) for x in fixed))  # a weight ≥ 2⁶³ fails on zeros too
        rows = zip(a.rows, a.bias, strict=True)
        reach = max((sum(abs(w) for _, w in r) * t + abs(b) * den for r, b in rows), default=0)
        if reach >= LIMIT:
            X = [np.asarray(x).astype(object) for x in X]
    return reference._affine(a, X, den, size)


def _as_matrix(columns: list[np.ndarray], rows: int) -> np.ndarray:
    """Numerator columns → one (rows × dim) array: int64 when every value fits, else ints."""
    if not columns:
        return np.zeros((rows, 0), np.int64)
    big = max((top(np.asarray(col)) for col in columns), default=0)
    dtype = np.int64 if big < LIMIT else object
    return np.stack([np.asarray(col).astype(dtype) for col in columns], axis=1)


def mix(sub, X: Batch, den: int, index: np.ndarray, keep: range):
    """A positional encoding, or attention whose scores are all equal (uniform scores, or a
    zero key or query map: every score is 0), evaluated on whole arrays of sequences.

    Kajitsuka & Sato 2025, eq. (39): equal scores give weights exactly 1/n under softmax and
    hardmax alike, so the output at q is x_q + Σ_h W_O^h (1/n_k) Σ_k W_V^h x_k. Returns
    (numerators per distinct row in first-seen order, denominator, index), or None when scores
    may differ (the reference evaluator decides those)."""
    from exactmem.core.model import Attention, PositionalEncoding

    N, n = index.shape
    size = len(X[0]) if X else 0
    if isinstance(sub, PositionalEncoding):
        D = math.lcm(den, *[int(v.denominator) for row in sub.table[:n] for v in row])
        base = times(_as_matrix(X, size), D // den)
        shift = _as_matrix(
            [
                np.array([int(row[j] * D) for row in sub.table[:n]], dtype=object)
                for j in range(len(X))
            ],
            n,
        )
        cols = list(keep)
        Y = plus(base[index[:, cols]], shift[cols][None, :, :])
        return _distinct(Y.reshape(N * len(cols), -1), D, N, len(cols))
    if not isinstance(sub, Attention):
        return None
    if sub.score != "uniform" and not all(
        _zero_map(h.key) or _zero_map(h.query) for h in sub.heads
    ):
        return None
    keys = n - 1 if sub.mask == "context" and n > 1 else n
    deltas = []
    for h in sub.heads:
        V, vden = _affine_exact(h.value, X, den, size)
        Vm = _as_matrix(V, size)
        picked = Vm[index[:, :keys]]  # (N, keys, dv)
        if Vm.dtype != object and int(np.abs(Vm).max(initial=0)) * keys >= LIMIT:
            picked = picked.astype(object)
        S = picked.sum(axis=1)  # Σ_k W_V x_k, over vden
        O, oden = _affine_exact(h.output, [S[:, j] for j in range(S.shape[1])], vden, N)
        deltas.append((_as_matrix(O, N), oden * keys))
    D = math.lcm(den, *[d for _, d in deltas])
    total = np.zeros((N, len(X)), np.int64)
    for M, d in deltas:
        total = plus(total, times(M, D // d))
    base = times(_as_matrix(X, size), D // den)
    cols = list(keep)
    Y = plus(base[index[:, cols]], total[:, None, :])
    return _distinct(Y.reshape(N * len(cols), -1), D, N, len(cols))


def _distinct(Y: np.ndarray, D: int, N: int, width: int):
    """Rows of Y (numerators over D) deduplicated in first-seen order, as the reference."""
    if Y.dtype != object:  # hashed rows, each compared with its group's first
        ids, first = first_seen_ids(Y)
        rows_num = Y[first]
        new_index = ids.reshape(N, width)
        # reference._reduce's gcd of D and every numerator, at numpy's speed (int64 here;
        # all numerators 0: g = D, which may not be an int64 — the values are 0 over 1)
        top = int(np.gcd.reduce(rows_num, axis=None)) if D != 1 else 1
        if top == 0:
            D = 1
        elif (g := math.gcd(D, top)) > 1:
            rows_num, D = rows_num // g, D // g
        return [rows_num[:, j].astype(object) for j in range(rows_num.shape[1])], D, new_index
    else:
        where: dict[tuple, int] = {}
        ids = np.array([where.setdefault(tuple(r), len(where)) for r in Y], np.int64)
        rows_num = np.array(list(where), dtype=object).reshape(len(where), Y.shape[1])
        new_index = ids.reshape(N, width)
    batch = [rows_num[:, j].astype(object) for j in range(rows_num.shape[1])]
    batch, bden = reference._reduce(batch, D)
    return batch, bden, new_index
