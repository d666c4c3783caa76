"""The generators draw as arrays what ``random.Random`` draws one by one: the same numbers, the
same state afterwards, the same dataset file."""

from __future__ import annotations

import random

import pytest

from exactmem.datasets.mt_draws import randbelow
from exactmem.datasets.sequences import random_sequences, random_token_arrays


@pytest.mark.parametrize(
    ("seed", "n", "count"),
    [(0, 1000, 20000), (1, 16, 777), (2, 1, 50), (3, 7, 3), (4, 2**31 + 5, 500), (5, 10, 0)],
)
def test_randbelow_replays_random_randrange(seed, n, count):
    a, b = random.Random(seed), random.Random(seed)
    a.random(), b.random()  # a state in the middle of a block of words
    got = randbelow(a, n, count)
    assert got.tolist() == [b.randrange(n) for _ in range(count)]
    assert a.getstate() == b.getstate()
    assert a.random() == b.random()


def test_randbelow_beyond_32_bits_uses_random_itself():
    a, b = random.Random(9), random.Random(9)
    assert randbelow(a, 2**40, 5).tolist() == [b.randrange(2**40) for _ in range(5)]
    assert a.getstate() == b.getstate()


def _python_random_sequences(N, n, d, vocab_size, C, seed, task, labels_by):
    """The generator written out as the loop it replaces: a draw per item, and an item keeps
    the draw of the first item with its key."""
    from exactmem.datasets.sequences import _vocab

    rng = random.Random(seed)
    vocab = _vocab(rng, vocab_size, d, 1000)
    seqs = [tuple(rng.randrange(vocab_size) for _ in range(n)) for _ in range(N)]
    if task == "seq2seq":
        keys = [(t, tuple(sorted(s))) for s in seqs for t in s]
    elif labels_by == "multiset":
        keys = [tuple(sorted(s)) for s in seqs]
    else:
        keys = [(s[-1], tuple(sorted(s))) for s in seqs]
    first: dict = {}
    labels = [first.setdefault(k, rng.randint(1, C)) for k in keys]
    if task == "seq2seq":
        labels = [tuple(labels[i * n : (i + 1) * n]) for i in range(N)]
    return vocab, seqs, labels


@pytest.mark.parametrize(
    ("task", "labels_by"), [("next-token", "key"), ("next-token", "multiset"), ("seq2seq", "key")]
)
def test_token_arrays_are_the_dataset_of_random_sequences(task, labels_by):
    arrays = random_token_arrays(400, 5, 3, 30, 4, 7, task=task, labels_by=labels_by)
    ds = random_sequences(400, 5, 3, 30, 4, 7, task=task, labels_by=labels_by)
    assert arrays.dataset() == ds and arrays.meta == ds.meta
    vocab, seqs, labels = _python_random_sequences(400, 5, 3, 30, 4, 7, task, labels_by)
    assert ds.vocab == tuple(vocab) and ds.sequences == tuple(seqs)
    assert ds.labels == tuple(labels)


def test_generate_writes_the_same_container_from_arrays(tmp_path):
    from exactmem.files.container import write_dataset
    from exactmem.files.dataset_files import load_dataset

    arrays = random_token_arrays(300, 6, 2, 20, 3, 1)
    write_dataset(arrays, tmp_path / "a.exm")
    write_dataset(arrays.dataset(), tmp_path / "b.exm")
    assert (tmp_path / "a.exm").read_bytes() == (tmp_path / "b.exm").read_bytes()
    assert load_dataset(tmp_path / "a.exm") == arrays.dataset()
