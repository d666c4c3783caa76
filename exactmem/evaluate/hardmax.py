"""Hardmax attention with unequal scores on whole arrays of sequences (the fast evaluator's
token-mixing step for the score pattern the exact reference evaluates sequence by sequence).

Kajitsuka & Sato 2025, eq. (1): the weight of key k in query column q is 1/|I_q| on the
maximisers I_q of the scores ⟨W_K x_k, W_Q x_q⟩ and 0 elsewhere; ties are averaged. Every
score is an exact integer numerator over one positive denominator per head, so the maximisers
are found by integer comparison; the averaged value has the denominator |I_q|, and the output
is brought over the common denominator lcm(1..n) before the rows are deduplicated in the
reference's first-seen order. Values are Python integers (object arrays): exact at any size.
"""

from __future__ import annotations

import math

import numpy as np

from exactmem.core.model import Attention

__all__ = ["hardmax_mix"]


def _lanes(a, X, den: int, size: int) -> tuple[np.ndarray, int]:
    """(W·x)/D of every distinct row as a (size, out) object matrix of numerators, and their
    denominator den·D (attention maps have no bias)."""
    from exactmem.evaluate.arithmetic import _affine

    cols, d = _affine(a, [np.asarray(c, dtype=object) for c in X], den, size)
    return np.stack(cols, axis=1) if cols else np.zeros((size, 0), object), d


def hardmax_mix(
    sub: Attention,
    X,
    den: int,
    index: np.ndarray,
    keep: range,
    record: list | None = None,
    sublayer: int = -1,
):
    """(numerators per distinct row in first-seen order, denominator, index, columns whose
    scores were unequal) of a hardmax attention sub-layer, as the reference computes them.
    With ``record`` (a list) each head's queries, keys, values, scores and weights are
    appended to it as a :class:`~exactmem.evaluate.records.HeadRecord`."""
    from exactmem.evaluate.arithmetic import _reduce
    from exactmem.evaluate.records import HeadRecord

    N, n = index.shape
    size = len(X[0]) if X else 0
    keys = n - 1 if sub.mask == "context" and n > 1 else n
    width = len(X)
    L = math.lcm(*range(1, keys + 1))
    deltas = []
    unequal = 0
    for hi, h in enumerate(sub.heads):
        Q, qd = _lanes(h.query, X, den, size)
        K, kd = _lanes(h.key, X, den, size)
        V, vden = _lanes(h.value, X, den, size)
        scores = np.einsum("iqj,ikj->iqk", Q[index], K[index[:, :keys]])  # one denominator
        top = scores.max(axis=2)
        at_top = scores == top[:, :, None]
        count = at_top.sum(axis=2)  # (N, n)
        unequal += int(np.count_nonzero(count < keys))
        if record is not None:  # the pattern over all n keys (a masked key: 0)
            visible = np.zeros((n, n), bool)
            visible[:, :keys] = True
            padded = np.zeros((N, n, n), dtype=object)
            padded[:, :, :keys] = scores
            weights = np.zeros((N, n, n), dtype=object)
            weights[:, :, :keys] = at_top.astype(object) * (L // count)[:, :, None]
            record.append(
                HeadRecord(
                    sublayer,
                    hi,
                    sub.score,
                    sub.mask,
                    visible,
                    Q[index],
                    K[index],
                    V[index],
                    padded,
                    weights,
                    np.ones((N, n), bool),
                    qd,
                    kd,
                    vden,
                    qd * kd,
                    L,
                )  # fmt: skip
            )
        summed = np.einsum("iqk,ikj->iqj", at_top.astype(object), V[index[:, :keys]])
        mixed = summed * (L // count)[:, :, None].astype(object)  # over vden·L
        flat = mixed.reshape(N * n, -1)
        O, oden = _lanes(h.output, [flat[:, j] for j in range(flat.shape[1])], vden * L, N * n)
        deltas.append((O.reshape(N, n, width), oden))
    D = math.lcm(den, *[d for _, d in deltas])
    Y = np.asarray(np.stack([np.asarray(c, dtype=object) for c in X], axis=1))[index] * (D // den)
    for O, d in deltas:
        Y = Y + O * (D // d)
    cols = list(keep)
    Y = Y[:, cols, :].reshape(N * len(cols), width)
    where: dict[tuple, int] = {}
    ids = np.array([where.setdefault(tuple(r), len(where)) for r in Y.tolist()], np.int64)
    rows = np.array(list(where), dtype=object).reshape(len(where), width)
    batch, bden = _reduce([rows[:, j] for j in range(width)], D)
    return batch, bden, ids.reshape(N, len(cols)), unequal
