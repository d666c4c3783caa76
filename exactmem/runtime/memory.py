"""Giving freed heap memory back to the operating system before a large evaluation.

Building a Theorem 4.1 model for N = 10⁷ sequences frees about 2 GB of Python objects and
mid-sized arrays that glibc keeps mapped (freed chunks below the top of its heap are not
returned), so the evaluation would start 2 GB higher than it needs to (peak memory:
measured 4.38 GB resident after building, 2.52 GB after ``malloc_trim``).
"""

from __future__ import annotations

import ctypes
import functools

__all__ = ["release_free_memory"]


@functools.cache
def _malloc_trim():
    try:
        libc = ctypes.CDLL(None)  # the C library the interpreter runs on
    except OSError:  # pragma: no cover - no dynamic loader
        return None
    return getattr(libc, "malloc_trim", None)  # glibc only


def release_free_memory() -> bool:
    """Return the heap's free pages to the operating system (glibc's ``malloc_trim``); False
    where the C library has no such call (nothing is released, nothing breaks)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
