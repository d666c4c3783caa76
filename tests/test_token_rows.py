"""A dataset's sequences as one array read as tuples (exactmem.datasets.token_rows), and the dataset
hash streamed from that array: the same values, equality and SHA-256 as the tuples'."""

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactmem.datasets.canonical import int_rows_json
from exactmem.datasets.dataset import Dataset, dataset_hash
from exactmem.datasets.sequences import random_sequences, token_array, view
from exactmem.datasets.token_rows import TokenRows, token_matrix


def test_rows_read_as_the_tuples_they_stand_for():
    array = np.array([[3, 1, 2], [0, 0, 7]], np.int16)
    rows = TokenRows(array)
    assert len(rows) == 2 and rows[1] == (0, 0, 7) and rows[-1] == (0, 0, 7)
    assert all(type(t) is int for t in rows[0])  # Python ints, never NumPy scalars
    assert list(rows) == [(3, 1, 2), (0, 0, 7)]
    assert rows == ((3, 1, 2), (0, 0, 7)) and ((3, 1, 2), (0, 0, 7)) == rows
    assert rows != ((3, 1, 2),) and rows != ((3, 1, 2), (0, 0, 8))
    assert hash(rows) == hash(((3, 1, 2), (0, 0, 7)))
    assert rows[:1] == ((3, 1, 2),) and isinstance(rows[:1], TokenRows)
    with pytest.raises(ValueError):  # nobody may change a token under the others
        rows.array[0, 0] = 9
    with pytest.raises(ValueError):
        TokenRows(np.zeros(3, np.int64))
    assert token_matrix(rows).dtype == np.int64 and token_matrix(rows, np.int16) is rows.array
    assert (token_matrix(((1, 2), (3, 4)), np.int8) == [[1, 2], [3, 4]]).all()


@given(st.lists(st.lists(st.integers(0, 70000), min_size=1, max_size=5), min_size=1, max_size=8))
@settings(max_examples=200, deadline=None)
def test_json_rows_are_the_canonical_json(lists):
    n = len(lists[0])
    rows = np.array([(r * n)[:n] for r in lists], np.int64)
    text = b"".join(int_rows_json(rows))
    assert text == json.dumps(rows.tolist(), separators=(",", ":")).encode()


def test_a_dataset_with_array_sequences_is_the_same_dataset():
    """Same hash, equality, view and token array as the tuple form; a wrong token changes the
    hash (the streamed text is the dataset's, not a constant)."""
    ds = random_sequences(300, 6, 3, 40, 5, seed=2)
    arrayed = replace(ds, sequences=TokenRows(token_array(ds, np.int16)))
    assert isinstance(ds.sequences, tuple)
    assert dataset_hash(arrayed) == dataset_hash(ds)
    assert arrayed == ds
    a, b = view(arrayed), view(ds)
    assert (a.sorted_tokens == b.sorted_tokens).all() and (a.multiset_ids == b.multiset_ids).all()
    changed = token_array(ds, np.int16).copy()
    changed[17, 3] = (changed[17, 3] + 1) % 40
    other = replace(ds, sequences=TokenRows(changed))
    assert dataset_hash(other) != dataset_hash(ds)
    assert dataset_hash(other) == dataset_hash(replace(ds, sequences=tuple(other.sequences)))
    assert isinstance(Dataset, type)
