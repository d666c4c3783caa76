"""The array form of sequence views and consistency checks against plain dictionaries."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from gmpy2 import mpq
from hypothesis import given
from hypothesis import strategies as st

from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import (
    canonical_tokens,
    check_consistency,
    multiset_of,
    random_sequences,
    view,
)

VOCAB = tuple((mpq(v),) for v in (0, 1, 2, 1, 3))  # vocab[3] equals vocab[1]


@st.composite
def datasets(draw, task="next-token"):
    n = draw(st.integers(1, 4))
    seqs = draw(st.lists(st.tuples(*[st.integers(0, 4)] * n), min_size=1, max_size=25))
    if task == "seq2seq":
        labels = draw(st.lists(st.tuples(*[st.integers(1, 2)] * n), min_size=len(seqs)))
    else:
        labels = draw(st.lists(st.integers(1, 2), min_size=len(seqs)))
    return Dataset(task, tuple(labels[: len(seqs)]), 2, vocab=VOCAB, sequences=tuple(seqs))


def canonical(t: int) -> int:
    return 1 if t == 3 else t


@given(datasets())
def test_view_against_counter(ds):
    sv = view(ds)
    want = [tuple(sorted(Counter(map(canonical, s)).items())) for s in ds.sequences]
    assert list(sv.multisets) == want
    assert [sv.multiset(i) for i in range(ds.size)] == want
    assert sv.last.tolist() == [canonical(s[-1]) for s in ds.sequences]
    assert sv.tokens == tuple(sorted({canonical(t) for s in ds.sequences for t in s}))
    first = list(dict.fromkeys(want))
    assert sv.first_of_multiset.tolist() == [want.index(ms) for ms in first]
    assert sv.multiset_ids.tolist() == [first.index(ms) for ms in want]


def reference_conflicts(ds, mode) -> int:
    owner: dict = {}
    count = 0
    for i, seq in enumerate(ds.sequences):
        ms = tuple(sorted(Counter(map(canonical, seq)).items()))
        if mode == "seq2seq":
            items = [((canonical(t), ms), ds.labels[i][k]) for k, t in enumerate(seq)]
        elif mode == "sequence":
            items = [(tuple(map(canonical, seq)), ds.labels[i])]
        elif mode == "next-token":
            items = [((canonical(seq[-1]), ms), ds.labels[i])]
        else:
            items = [(ms, ds.labels[i])]
        for key, y in items:
            count += owner.setdefault(key, y) != y
    return count


@pytest.mark.parametrize("mode", ["next-token", "sequence", "multiset", "seq2seq"])
@given(data=st.data())
def test_consistency_against_dictionaries(mode, data):
    ds = data.draw(datasets("seq2seq" if mode == "seq2seq" else "next-token"))
    conflicts = reference_conflicts(ds, mode)
    if conflicts:
        with pytest.raises(InputError, match=f"^{conflicts} label conflicts?: "):
            check_consistency(ds, mode)
    else:
        assert check_consistency(ds, mode).multiset_ids.shape == (ds.size,)


@given(datasets("seq2seq"))
def test_seq2seq_with_positions_is_consistent_per_sequence_and_position(ds):
    """Mode ``sequence`` on seq-to-seq data (positions encoded): labels a function of
    (sequence, position); conflicts are named by item."""
    owner: dict = {}
    conflicts = 0
    for i, seq in enumerate(ds.sequences):
        for k, y in enumerate(ds.labels[i]):
            conflicts += owner.setdefault((tuple(map(canonical, seq)), k), y) != y
    if conflicts:
        with pytest.raises(InputError, match=rf"^{conflicts} label conflicts?: sequences\[\d+\]\["):
            check_consistency(ds, "sequence")
    else:
        assert check_consistency(ds, "sequence").multiset_ids.shape == (ds.size,)


@pytest.mark.parametrize("vocab_size", [3, 300, 40000])
def test_sorted_tokens_are_kept_in_the_narrowest_type(vocab_size):
    """A vocabulary of V tokens keeps the sorted rows in the narrowest signed type holding
    V − 1 (int8, int16, int32): the same rows, multisets and ids as int64."""
    ds = random_sequences(200, 5, 2, vocab_size, 3, seed=1, coord_bound=10**5)
    sv = view(ds)
    wide = np.sort(canonical_tokens(ds, sv.canonical), axis=1)
    assert sv.sorted_tokens.dtype == np.min_scalar_type(-vocab_size)
    assert sv.sorted_tokens.tolist() == wide.tolist()
    assert sv.multisets == tuple(multiset_of(row) for row in wide.tolist())


def test_release_free_memory_runs_where_glibc_does():
    import platform

    from exactmem.runtime.memory import release_free_memory

    assert release_free_memory() is (platform.libc_ver()[0] == "glibc")
