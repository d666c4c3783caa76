"""Lemma B.1's witness set on arrays: the incremental algorithm of
:func:`exactmem.constructions.ks25.witness_set`, step for step, compiled with numba.

Kajitsuka & Sato 2025, Lemma B.1: processing the distinct multisets in order, a multiset whose
restriction to A equals an earlier one's adds the smallest token whose counts differ; only the
multisets containing that token change their restriction. Restrictions are kept as additive
64-bit hashes (Σ over the tokens of A of a mix of (token, count); the wrap-around is the hash,
not arithmetic anyone relies on), in an open-addressing table. Every hash hit is confirmed by
comparing the two restrictions token by token; a hash collision (two different restrictions,
one hash) is reported and the caller falls back to the dictionary version, so the result is
always the exact one.

Imported lazily (numba); compiled functions are cached on disk.
"""

from __future__ import annotations

import numpy as np

from exactmem.runtime.jit import njit

__all__ = ["warm", "witness_rows"]

EMPTY, GONE = -1, -2  # table slots: never used, deleted


@njit(cache=True)
def _mix(t, c):
    """splitmix64 of (token, count)."""
    z = np.uint64(t) * np.uint64(0x100000001B3) + np.uint64(c) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _find(keys, vals, h):
    """Slot holding hash h, or -1."""
    mask = len(keys) - 1
    s = np.int64(h & np.uint64(mask))
    while vals[s] != EMPTY:
        if vals[s] >= 0 and keys[s] == h:
            return s
        s = (s + 1) & mask
    return -1


@njit(cache=True)
def _insert(keys, vals, h, j):
    """Store h → j; returns 1 when a never-used slot was taken (0 for a deleted one)."""
    mask = len(keys) - 1
    s = np.int64(h & np.uint64(mask))
    while vals[s] >= 0:
        s = (s + 1) & mask
    fresh = 1 if vals[s] == EMPTY else 0
    keys[s] = h
    vals[s] = j
    return fresh


@njit(cache=True)
def _rebuild(keys, vals, h, k):
    """Drop the deleted slots: the table again holds exactly h[j] → j for j < k."""
    vals[:] = EMPTY
    for j in range(k):
        _insert(keys, vals, h[j], j)
    return k


@njit(cache=True)
def _room(keys, vals, h, k, used):
    """Slots in use after making room (deleted slots pile up; a probe needs an empty one)."""
    if used * 4 >= len(keys) * 3:
        return _rebuild(keys, vals, h, k)
    return used


@njit(cache=True)
def _same_restriction(a, b, in_A):
    """Do the sorted token rows a and b have equal counts on every token of A?"""
    i = 0
    j = 0
    n, m = len(a), len(b)
    while True:
        while i < n and not in_A[a[i]]:
            i += 1
        while j < m and not in_A[b[j]]:
            j += 1
        if i == n or j == m:
            return i == n and j == m
        if a[i] != b[j]:
            return False
        i += 1
        j += 1


@njit(cache=True)
def _first_difference(a, b):
    """The smallest token whose counts differ between the sorted rows a and b, or -1."""
    i = 0
    j = 0
    n, m = len(a), len(b)
    while i < n or j < m:
        if i == n:
            return b[j]
        if j == m:
            return a[i]
        if a[i] != b[j]:
            return min(a[i], b[j])
        i += 1
        j += 1
    return -1


@njit(cache=True)
def _witness(rows, tokens):
    """(A in the order added, status): status 0 done, 1 a hash collision (use the dictionaries)."""
    D, n = rows.shape
    # token → the multisets containing it (ascending) and its count there
    runs = np.zeros(tokens + 1, np.int64)
    for k in range(D):
        for p in range(n):
            if p == 0 or rows[k, p] != rows[k, p - 1]:
                runs[rows[k, p] + 1] += 1
    for t in range(tokens):
        runs[t + 1] += runs[t]
    fill = runs[:-1].copy()
    member = np.empty(runs[-1], np.int64)
    count = np.empty(runs[-1], np.int64)
    for k in range(D):
        p = 0
        while p < n:
            q = p
            while q < n and rows[k, q] == rows[k, p]:
                q += 1
            t = rows[k, p]
            member[fill[t]] = k
            count[fill[t]] = q - p
            fill[t] += 1
            p = q
    size = 1
    while size < 2 * D + 2:
        size *= 2
    keys = np.zeros(size, np.uint64)
    vals = np.full(size, EMPTY, np.int64)
    h = np.zeros(D, np.uint64)  # hash of each processed multiset's restriction to A
    in_A = np.zeros(tokens, np.bool_)
    A = np.empty(D, np.int64)
    na = 0
    used = 0
    for k in range(D):
        for p in range(n):  # k's restriction to the current A
            t = rows[k, p]
            if in_A[t] and (p == n - 1 or rows[k, p + 1] != t):
                c = 1
                while p - c >= 0 and rows[k, p - c] == t:
                    c += 1
                h[k] += _mix(t, c)
        s = _find(keys, vals, h[k])
        if s < 0:
            used = _room(keys, vals, h, k, used)
            used += _insert(keys, vals, h[k], k)
            continue
        i = vals[s]
        if not _same_restriction(rows[i], rows[k], in_A):
            return A[:na], 1
        x = _first_difference(rows[i], rows[k])
        A[na] = x
        na += 1
        in_A[x] = True
        for p in range(runs[x], runs[x + 1]):
            j = member[p]
            if j > k:
                break
            used = _room(keys, vals, h, k, used)
            s = _find(keys, vals, h[j])
            if s >= 0 and vals[s] == j:
                vals[s] = GONE
            h[j] += _mix(x, count[p])
            if _find(keys, vals, h[j]) >= 0:
                return A[:na], 1  # Lemma B.1 keeps restrictions distinct: a hash collision
            used += _insert(keys, vals, h[j], j)
        if _find(keys, vals, h[k]) < 0:  # k without x keeps i's old restriction
            used = _room(keys, vals, h, k, used)
            used += _insert(keys, vals, h[k], k)
    return A[:na], 0


def witness_rows(rows: np.ndarray) -> list[int] | None:
    """Lemma B.1's A for the distinct multisets given as sorted token rows (first-seen order),
    identical to the dictionary version; None after a hash collision (call that one)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if rows.size == 0:
        return []
    A, status = _witness(rows, int(rows.max()) + 1)
    return None if status else A.tolist()


def warm() -> None:
    """Load (or compile and cache) the kernel on a tiny input."""
    witness_rows(np.array([[0, 1], [1, 1], [0, 0]], np.int64))
