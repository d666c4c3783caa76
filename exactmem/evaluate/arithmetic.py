"""Exact arithmetic on batches of numerators over one denominator, the steps every exact evaluator
shares: an affine map (W·x + b)/D and the reduction of a batch by its gcd."""

from __future__ import annotations

import math

import numpy as np
from gmpy2 import mpq

from exactmem.core.model import (
    Affine,
)

Batch = list[np.ndarray]  # one object array of int numerators per coordinate


def _affine(a: Affine, X: Batch, den: int, size: int) -> tuple[Batch, int]:
    """(W·x + b)/D on numerators over ``den``: returns numerators over den·D."""
    out = []
    for row, b in zip(a.rows, a.bias, strict=True):
        acc = None
        for col, coeff in row:
            term = X[col] if coeff == 1 else (-X[col] if coeff == -1 else X[col] * coeff)
            acc = term if acc is None else acc + term
        shift = b * den
        if acc is None:
            acc = np.full(size, shift, dtype=object)
        elif shift:
            acc = acc + shift
        out.append(acc)
    return out, den * a.denominator


def _reduce(X: Batch, den: int) -> tuple[Batch, int]:
    """Divide numerators and denominator by their gcd (keeps paper-style dyadics small)."""
    if den == 1:
        return X, den
    g = den
    for col in X:
        for v in col:
            g = math.gcd(g, int(v))
            if g == 1:
                return X, den
    return [col // g for col in X], den // g


def _columns(X: Batch, den: int) -> list[tuple[mpq, ...]]:
    return [tuple(mpq(int(v), den) for v in col) for col in zip(*X, strict=True)]
