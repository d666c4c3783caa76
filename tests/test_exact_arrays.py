"""Exact integer arrays (int64 only where proved to fit) and the array forms of the Kajitsuka &
Sato checks, against plain Python integers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from exactmem.checks.measures.ks25 import _gap_within
from exactmem.core import exact_arrays
from exactmem.core.exact_arrays import (
    LIMIT,
    exact,
    first_occurrences,
    first_seen_ids,
    int_array,
    plus,
    ratio_equal,
    times,
)

BIG = st.integers(-(2**70), 2**70)
NEAR = st.sampled_from([0, 1, -1, LIMIT - 1, -(LIMIT - 1), LIMIT, 2**63, -(2**63)])


def reference_ids(rows: list) -> tuple[list[int], list[int]]:
    where: dict = {}
    ids = [where.setdefault(r, len(where)) for r in rows]
    first = [ids.index(k) for k in range(len(where))]
    return ids, first


@given(st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3), max_size=40))
def test_first_seen_ids_of_rows(rows):
    M = np.array(rows, np.int64).reshape(len(rows), 3)
    ids, first = first_seen_ids(M)
    want_ids, want_first = reference_ids([tuple(r) for r in rows])
    assert ids.tolist() == want_ids and first.tolist() == want_first


@given(st.lists(st.one_of(BIG, NEAR), max_size=30))
def test_first_seen_ids_of_entries_and_object_rows(values):
    ids, first = first_seen_ids(np.array(values, object))
    assert (ids.tolist(), first.tolist()) == reference_ids(values)
    rows = np.array([[v, v % 3] for v in values], object).reshape(len(values), 2)
    ids, first = first_seen_ids(rows)
    assert (ids.tolist(), first.tolist()) == reference_ids([(v, v % 3) for v in values])


def test_first_seen_ids_survives_a_hash_collision(monkeypatch):
    """Rows too wide to pack are grouped by a hash and then compared: force every hash equal."""
    monkeypatch.setattr(exact_arrays, "_packed_rows", lambda M: None)
    monkeypatch.setattr(exact_arrays, "_row_hash", lambda M: np.zeros(len(M), np.uint64))
    M = np.array([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4]], np.int64)
    ids, first = first_seen_ids(M)
    assert ids.tolist() == [0, 1, 0, 2, 1] and first.tolist() == [0, 1, 3]


WIDE = st.integers(-(2**62), 2**62)


@given(st.lists(st.lists(st.one_of(WIDE, st.integers(-2, 2)), min_size=4, max_size=4), max_size=40))
def test_first_seen_ids_of_rows_packed_or_hashed(rows):
    """Rows whose column ranges multiply below 2⁶³ are packed into one key, others hashed."""
    M = np.array(rows, np.int64).reshape(len(rows), 4)
    ids, first = first_seen_ids(M)
    assert (ids.tolist(), first.tolist()) == reference_ids([tuple(r) for r in rows])
    for dtype in (np.int16, np.uint8):
        narrow = (M % 200).astype(dtype)
        ids, first = first_seen_ids(narrow)
        assert (ids.tolist(), first.tolist()) == reference_ids(list(map(tuple, narrow.tolist())))


@given(st.lists(st.integers(0, 60), max_size=50), st.booleans())
def test_first_occurrences_is_numpy_unique(values, shift):
    a = np.array(values, np.int64) - (5 if shift else 0)  # negative values: np.unique itself
    for inverse in (False, True):
        got = first_occurrences(a.reshape(-1, 1), inverse=inverse)
        want = np.unique(a, return_index=True, return_inverse=inverse)
        assert [x.tolist() for x in got] == [x.reshape(-1).tolist() for x in want]
        assert got[0].dtype == want[0].dtype


@given(st.lists(st.one_of(BIG, NEAR), max_size=30))
def test_int_array_is_exact_of_an_object_array(values):
    want = exact(np.array(values, object))
    got = int_array(values)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


@given(st.lists(st.one_of(BIG, NEAR), min_size=1, max_size=20), st.one_of(BIG, NEAR))
def test_arithmetic_is_exact_across_2_62(values, k):
    a = exact(np.array(values, object))
    assert a.dtype == (np.int64 if max(map(abs, values)) < LIMIT else object)
    assert [int(v) for v in times(a, k)] == [v * k for v in values]
    assert [int(v) for v in plus(a, a)] == [2 * v for v in values]
    den = abs(k) + 1
    same = ratio_equal(times(a, den), den, a, 1)
    assert same.all()
    moved = ratio_equal(plus(times(a, den), exact(np.ones(len(values), np.int64))), den, a, 1)
    assert not moved.any()


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.one_of(st.integers(-50, 50), BIG)),
        max_size=30,
    )
)
def test_gap_within_groups(rows):
    """The least positive seq difference within equal (phi, tid), int64 and object paths."""
    groups: dict = {}
    for p, t, v in rows:
        groups.setdefault((p, t), set()).add(v)
    gaps = [
        b - a
        for vals in groups.values()
        for a, b in zip(sorted(vals), sorted(vals)[1:], strict=False)
    ]
    want = min(gaps) if gaps else None
    phi, tid, seq = (np.array([r[j] for r in rows], object) for j in range(3))
    assert _gap_within(exact(phi), exact(tid), exact(seq)) == want
    assert _gap_within(phi, tid, seq) == want


def test_gathered_is_the_array_it_stands_for():
    """table[index], built on access: indexing gathers what it selects, operators, NumPy
    functions, astype and iteration see the whole array — never the table alone."""
    from exactmem.core.exact_arrays import Gathered

    table = np.array([5, -7, 2**40], np.int64)
    index = np.array([2, 0, 0, 1, 2], np.int32)
    g, whole = Gathered(table, index), table[index]
    assert len(g) == 5 and g.shape == (5,) and g.dtype == np.int64
    assert g[3] == -7 and g[np.array([4, 1])].tolist() == [2**40, 5]
    assert (g == whole).all() and ((g == 5) == (whole == 5)).all()
    assert (g + 1).tolist() == (whole + 1).tolist() and (g < 0).tolist() == (whole < 0).tolist()
    assert np.array_equal(np.asarray(g), whole) and np.unique(g).tolist() == [-7, 5, 2**40]
    assert g.astype(object).tolist() == whole.tolist() and list(g) == whole.tolist()
    assert all(type(v) is int for v in g.astype(object))


@given(st.lists(st.integers(-1, 40), max_size=60), st.integers(1, 8))
@settings(max_examples=200, deadline=None)
def test_unique_first_is_numpys_unique_with_first_indices(values, block):
    """The scan that stops once every value present has been seen: the same values, in the
    same order and type, and the same first indices as np.unique, whatever the block."""
    from exactmem.core import exact_arrays

    x = np.array(values, np.int64)
    old, exact_arrays.UNIQUE_BLOCK = exact_arrays.UNIQUE_BLOCK, block
    try:
        got = exact_arrays.unique_first(x)
    finally:
        exact_arrays.UNIQUE_BLOCK = old
    want = np.unique(x, return_index=True)
    assert got[0].dtype == want[0].dtype
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
