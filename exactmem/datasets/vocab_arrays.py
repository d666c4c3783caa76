"""A sequence dataset's vocabulary as integer arrays, numerators and denominators, the form a
container file stores.

A :class:`~exactmem.datasets.dataset.Dataset` holds an exact rational per coordinate; the checks
read whole
arrays. Converting back costs more than the checks themselves at small N (a fresh rational is
slow to hash or print), so the container reader hands the arrays it read to :func:`remember`,
kept beside the dataset object while it lives; a dataset from anywhere else gets them computed
from its rationals. Kept arrays are read-only, and a dataset is immutable (a frozen dataclass),
so they stay its own. (The token rows need no such memory: a container dataset's sequences are
one array already, :class:`~exactmem.datasets.token_rows.TokenRows`.)
"""

from __future__ import annotations

import weakref
from itertools import chain
from operator import attrgetter

import numpy as np

__all__ = ["remember", "vocab_arrays"]

# id(dataset) → (weak reference to it, {"vocab": (numerators, denominators)})
_KEPT: dict[int, tuple[weakref.ref, dict]] = {}


def remember(ds, **arrays) -> None:
    """Keep ``vocab`` ((numerators, denominators), each (V, d) int64, every pair in lowest
    terms with a positive denominator, as ``ds.vocab``) for ``ds``. Shapes are checked; values
    are the caller's (the container reader, which built ``ds`` from these very arrays)."""
    kept = {}
    if arrays.get("vocab") is not None:
        num, den = (np.asarray(a, np.int64) for a in arrays["vocab"])
        d = len(ds.vocab[0]) if ds.vocab else 0
        if num.shape != (len(ds.vocab), d) or den.shape != num.shape:
            raise ValueError(f"vocabulary arrays of shape {num.shape} for {len(ds.vocab)} rows")
        kept["vocab"] = (_frozen(num), _frozen(den))
    key = id(ds)

    def forget(ref: weakref.ref) -> None:
        if _KEPT.get(key, (None,))[0] is ref:
            del _KEPT[key]

    _KEPT[key] = (weakref.ref(ds, forget), kept)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _kept(ds, name: str):
    known = _KEPT.get(id(ds))
    if known is not None and known[0]() is ds:
        return known[1].get(name)
    return None


def vocab_arrays(ds) -> tuple[np.ndarray, np.ndarray] | None:
    """The vocabulary as (numerators, denominators), (V, d) int64 arrays in lowest terms (the
    rationals' own parts), or None when a part does not fit int64."""
    kept = _kept(ds, "vocab")
    if kept is not None:
        return kept
    vocab = ds.vocab
    d = len(vocab[0]) if vocab else 0
    flat = list(chain.from_iterable(vocab))
    if d == 0 or len(flat) != d * len(vocab):
        return None
    try:
        num = np.array(list(map(int, map(attrgetter("numerator"), flat))), np.int64)
        den = np.array(list(map(int, map(attrgetter("denominator"), flat))), np.int64)
    except (AttributeError, OverflowError, TypeError, ValueError):
        return None
    return num.reshape(-1, d), den.reshape(-1, d)
