"""Kernel helpers written out in place of numba's library code (exactmem.evaluate.fast):
the same answers as numpy's."""

from __future__ import annotations

import numpy as np
import pytest

step_kernel = pytest.importorskip("exactmem.evaluate.fast.step_kernel")


def _ranks():
    from exactmem.runtime.jit import njit

    @njit(cache=False)
    def ranks(xs, vs, left, right):  # the helpers have no Python entry point of their own
        for i in range(vs.shape[0]):
            left[i] = step_kernel._first_at_least(xs, vs[i])
            right[i] = step_kernel._first_above(xs, vs[i])

    return ranks


@pytest.mark.parametrize("seed", range(4))
def test_binary_searches_are_searchsorted(seed):
    """Sorted keys with repeats, values below, between, on and above them, and no keys."""
    rng = np.random.default_rng(seed)
    ranks = _ranks()
    for n in (0, 1, 2, 7, 64):
        xs = np.sort(rng.integers(-5, 6, n)).astype(np.int64)
        vs = np.arange(-7, 8, dtype=np.int64)
        left = np.full(vs.shape[0], -9, np.int64)
        right = left.copy()
        ranks(xs, vs, left, right)
        assert left.tolist() == np.searchsorted(xs, vs, side="left").tolist()
        assert right.tolist() == np.searchsorted(xs, vs, side="right").tolist()
