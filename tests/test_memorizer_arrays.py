"""Lemma C.1's memorizer on integer arrays builds the network the list-based builder builds:
the same projection draws, keys, groups, packed integers and weights — and refuses the same
bad input with the same messages."""

from __future__ import annotations

import random

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.constructions import vys
from exactmem.constructions.memorizer_arrays import (
    IntegerPoints,
    _pack_groups,
    build_memorizer_on_rows,
    pack_rows,
    projection_of_rows,
)
from exactmem.core.errors import InputError
from exactmem.core.model import Transformer
from exactmem.files.model_json import model_to_json


def _points(V: int, seed: int, big: int = 50, den: int = 6) -> IntegerPoints:
    rng = np.random.default_rng(seed)
    rows = rng.choice(big, size=(V * 2, 3), replace=True) - big // 2
    rows = np.unique(rows, axis=0)[:V]
    rng.shuffle(rows)
    return IntegerPoints.over(rows.astype(np.int64), den)


def test_integer_points_take_the_least_common_denominator():
    pts = IntegerPoints.over(np.array([[2, 4], [6, -8]], np.int64), 8)  # 1/4, 1/2, 3/4, −1
    assert pts.scale == 4 and pts.rows.tolist() == [[1, 2], [3, -4]]
    assert vys._integral(pts.vectors()) == (4, [[1, 2], [3, -4]])
    assert pts.vectors()[0] == (mpq(1, 4), mpq(1, 2))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_projection_draws_as_integer_projection(seed):
    pts = _points(300, seed)
    want = vys.integer_projection(pts.vectors(), random.Random(seed))
    assert projection_of_rows(pts, random.Random(seed)) == want


def test_projection_beyond_int64_uses_python_integers():
    rows = np.array([[2**61, 1], [2**61 - 1, 2], [5, 3]], np.int64)
    pts = IntegerPoints(1, rows)
    want = vys.integer_projection(pts.vectors(), random.Random(3), bound=2**40)
    assert projection_of_rows(pts, random.Random(3), bound=2**40) == want


@pytest.mark.parametrize(
    ("gadget", "group_size", "bit_widths"),
    [
        ("keyed", None, "corrected"),
        ("peel", 3, "corrected"),
        ("tent", 2, "corrected"),
        ("keyed", 4, "paper"),
    ],
)
def test_the_same_network_as_build_memorizer(gadget, group_size, bit_widths):
    pts = _points(60, 5)
    labels = np.random.default_rng(5).integers(1, 9, len(pts))
    kw = dict(num_classes=8, gadget=gadget, group_size=group_size, seed=4, bit_widths=bit_widths)
    mlp, w = build_memorizer_on_rows(pts, labels, **kw)
    mlp0, w0 = vys.build_memorizer(pts.vectors(), labels.tolist(), **kw)
    assert model_to_json(Transformer(3, (mlp,))) == model_to_json(Transformer(3, (mlp0,)))
    assert (w.packed_keys, w.packed_labels, w.thresholds) == (
        w0.packed_keys,
        w0.packed_labels,
        w0.thresholds,
    )
    assert w.keys.tolist() == list(w0.keys) and w.group_of.tolist() == list(w0.group_of)
    assert w.slot_of.tolist() == list(w0.slot_of) and w.projection == w0.projection


@pytest.mark.parametrize("bits", [1, 5, 17, 62])
def test_packed_groups_are_the_packed_integers(bits):
    rng = np.random.default_rng(bits)
    values = rng.integers(0, 2**bits, 23, dtype=np.int64)
    for K in (1, 4, 7, 23):
        m = -(-23 // K)
        want = [
            vys._pack([*values[j * K : (j + 1) * K].tolist(), *[0] * K][:K], bits) for j in range(m)
        ]
        assert _pack_groups(values, K, bits, m) == want


def test_packed_groups_of_values_wider_than_their_field_as_vys_packs_them():
    values = np.array([9, 3, 250], np.int64)  # wider than 2 bits (bit_widths=paper)
    assert _pack_groups(values, 2, 2, 2) == [vys._pack([9, 3], 2), vys._pack([250, 0], 2)]
    big = np.array([2**70, 5], dtype=object)
    assert _pack_groups(big, 2, 71, 1) == [vys._pack([2**70, 5], 71)]


def test_pack_rows_is_pack():
    keys = np.array([40, 2, 18, 6, 30, 10, 50], np.int64)
    labels = np.array([1, 2, 3, 1, 2, 3, 1], np.int64)
    p = pack_rows(keys, labels, num_classes=3, group_size=3)
    q = vys.pack(keys.tolist(), labels.tolist(), num_classes=3, group_size=3)
    assert (p.packed_keys, p.packed_labels, p.thresholds, p.groups) == (
        q.packed_keys,
        q.packed_labels,
        q.thresholds,
        q.groups,
    )
    assert p.group_of.tolist() == list(q.group_of) and p.slot_of.tolist() == list(q.slot_of)


def test_bad_input_is_named_as_build_memorizer_names_it():
    pts = _points(10, 7)
    labels = np.ones(10, np.int64)
    rows = pts.rows.copy()
    rows[8] = rows[3]
    with pytest.raises(InputError, match="points 3 and 8 are equal"):
        build_memorizer_on_rows(IntegerPoints(pts.scale, rows), labels, num_classes=2)
    bad = labels.copy()
    bad[4] = 3
    with pytest.raises(InputError, match=r"labels\[4\]: 3 is outside 1..C with C = 2"):
        build_memorizer_on_rows(pts, bad, num_classes=2)
    with pytest.raises(InputError, match="9 labels for 10 points"):
        build_memorizer_on_rows(pts, labels[:9], num_classes=2)
    with pytest.raises(InputError, match="gadget 'nope'"):
        build_memorizer_on_rows(pts, labels, num_classes=2, gadget="nope")
    with pytest.raises(InputError, match="at least one labelled point"):
        build_memorizer_on_rows(IntegerPoints(1, rows[:0]), labels[:0], num_classes=2)


@pytest.mark.parametrize("variant", ["ks25-next-token", "ks25-seq2seq", "ks25-deep-sets"])
def test_ks25_builds_the_same_model_from_arrays_and_from_tuples(variant, monkeypatch):
    from exactmem.constructions import ks25
    from exactmem.datasets.sequences import random_sequences

    task = "seq2seq" if variant == "ks25-seq2seq" else "next-token"
    by = "multiset" if variant == "ks25-deep-sets" else "key"
    ds = random_sequences(300, 4, 2, 12, 3, 2, task=task, labels_by=by)
    arrays, _ = ks25.build(ds, {}, variant)
    monkeypatch.setattr(ks25, "LIMIT", 0)  # no numerator "fits": the tuples of rationals
    tuples, _ = ks25.build(ds, {}, variant)
    assert model_to_json(arrays) == model_to_json(tuples)


def test_ks25_labels_beyond_int64_take_the_tuples():
    from exactmem.constructions import ks25
    from exactmem.datasets.dataset import Dataset

    C = 2**70
    ds = Dataset.from_tokens(
        [[0, 1], [1, 1], [1, 0]], [C, 5, 2**65], vocab=[[1, 2], [3, -1]], num_classes=C
    )
    model, witness = ks25.build(ds, {})
    assert list(witness.f2.labels) == [C, 5, 2**65]
