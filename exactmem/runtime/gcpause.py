"""Pause Python's cyclic garbage collector while a phase builds many acyclic objects.

Parsing a large file or writing the canonical JSON of a model creates millions of lists,
tuples and integers; none of them form reference cycles, so reference counting frees them all,
yet every allocation threshold crossed starts a collection that walks every live container
(the dataset's million tuples among them). Pausing it roughly halves such phases at N = 10⁶;
the values computed are the same.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; re-enable it after only if it was on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
