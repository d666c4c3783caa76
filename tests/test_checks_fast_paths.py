"""The quicker paths of the checks compute what the plain definitions do, and still fail on
bad input: the model hash kept per model object, the dataset hash written from token arrays,
the tokens' r² and δ² from one conversion, the resources pass, the witness set grouped by an
order-free hash, and Theorem 4.2's outputs compared on arrays."""

from __future__ import annotations

import gc
import hashlib
import json
import random
from dataclasses import replace

import numpy as np
import pytest
from gmpy2 import mpq
from hypothesis import given, settings
from hypothesis import strategies as st

from exactmem.checks.certify import certify
from exactmem.checks.lower_bounds import _differing, _mixing_prefix, constant_sequence_check
from exactmem.checks.measures import ks25 as verify_ks25
from exactmem.constructions import ks25
from exactmem.core import exact_arrays
from exactmem.core.exact import parameter_bits
from exactmem.core.exact_arrays import first_seen_ids, multiset_ids
from exactmem.core.model import MLP, Affine, PositionalEncoding, Transformer, resources
from exactmem.datasets import vocab_arrays as dataset_arrays
from exactmem.datasets.canonical import TABLE_LIMIT, int_rows_json, int_strings_json
from exactmem.datasets.dataset import (
    Dataset,
    dataset_hash,
    dataset_to_json,
    radius_and_separation,
    squared_radius,
    squared_separation,
)
from exactmem.datasets.sequences import random_sequences, token_array, token_geometry, view
from exactmem.evaluate.reference import run as reference_run
from exactmem.files import container, model_json
from exactmem.files.dataset_files import load_dataset, save_dataset
from exactmem.files.model_files import load_model, save_model
from exactmem.files.model_json import model_hash, model_to_json


def plain_sha256(obj: dict) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def plain_dataset_hash(ds: Dataset) -> str:
    obj = dataset_to_json(ds)
    obj.pop("meta", None)
    return plain_sha256(obj)


@pytest.fixture(scope="module")
def built():
    ds = random_sequences(150, 5, 3, 20, 4, seed=4)
    model, _ = ks25.build(ds, {"seed": 4})
    return model, ds


# --------------------------------------------------------------------------- model hash


def test_model_hash_is_kept_per_object_and_follows_its_meta(built, tmp_path):
    model, _ = built
    save_model(model, tmp_path / "m.exm")
    loaded, stated = load_model(tmp_path / "m.exm")
    assert id(loaded) in model_json._HASHED  # hashed while loading, kept for the certificate
    assert model_hash(loaded) == stated == plain_sha256(model_to_json(loaded))
    loaded.meta["note"] = "changed after loading"  # meta dicts are the mutable part
    changed = model_hash(loaded)
    assert changed != stated and changed == plain_sha256(model_to_json(loaded))
    loaded.sublayers[0].meta["more"] = [1, 2]
    assert model_hash(loaded) == plain_sha256(model_to_json(loaded)) != changed


def test_model_hash_of_an_equal_new_object_is_computed_again(built):
    model, _ = built
    first = model_hash(model)
    other = replace(model, meta=dict(model.meta))
    assert other is not model and id(other) not in model_json._HASHED
    assert model_hash(other) == first
    key = id(other)
    del other
    gc.collect()
    assert key not in model_json._HASHED or model_json._HASHED[key][0]() is not None


# --------------------------------------------------------------------------- dataset hash


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=60),
    st.integers(1, 6),
)
def test_int_rows_json_is_json_dumps(values, n):
    rows = np.array(values * n, np.int64)[: len(values) * n // n * n].reshape(-1, n)
    text = b"".join(int_rows_json(rows))
    assert text == json.dumps(rows.tolist(), separators=(",", ":")).encode()


@pytest.mark.parametrize("task", ["next-token", "seq2seq"])
def test_dataset_hash_from_tuples_and_from_the_view(task):
    ds = random_sequences(300, 6, 3, 40, 5, seed=2, task=task)
    sv = view(ds)
    assert sv.canonical == tuple(range(len(ds.vocab)))
    want = plain_dataset_hash(ds)
    assert dataset_hash(ds) == want
    assert dataset_hash(ds, tokens=sv.canonical_sequences) == want


def test_dataset_hash_falls_back_on_rows_it_does_not_write():
    vocab = [(mpq(i),) for i in range(3)]
    ds = Dataset.from_tokens([[0, 1], [2, 2]], [1, 2], vocab=vocab)
    assert dataset_hash(ds) == plain_dataset_hash(ds)
    # rows of unequal length or huge indices go through json.dumps, the same bytes
    odd = replace(ds, sequences=((0, 1), (2,)), labels=(1, 2))
    assert dataset_hash(odd) == plain_dataset_hash(odd)
    wide = replace(ds, sequences=((0, TABLE_LIMIT + 5), (2, 2)))
    assert dataset_hash(wide) == plain_dataset_hash(wide)


def test_the_certificate_hashes_a_dataset_with_equal_tokens(built):
    model, ds = built
    vocab = list(ds.vocab)
    vocab.append(vocab[0])  # an equal vector at a new index: the view is no longer the indices
    unused = replace(ds, vocab=tuple(vocab))
    assert view(unused).canonical != tuple(range(len(vocab)))
    cert = certify(model, unused, construction="ks25-next-token")
    assert cert.subject["dataset_sha256"] == plain_dataset_hash(unused)
    cert = certify(model, ds, construction="ks25-next-token")
    assert cert.verdict == "verified"
    assert cert.subject["dataset_sha256"] == plain_dataset_hash(ds)
    assert cert.subject["model_sha256"] == plain_sha256(model_to_json(model))


# --------------------------------------------------------------------------- geometry


def brute_geometry(vectors):
    r2 = max(sum(x * x for x in v) for v in vectors)
    distinct = list(dict.fromkeys(map(tuple, vectors)))
    pairs = [
        sum((a - b) ** 2 for a, b in zip(x, y, strict=True))
        for i, x in enumerate(distinct)
        for y in distinct[i + 1 :]
    ]
    return r2, min(pairs) if pairs else None


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 4),
    st.sampled_from([3, 1000, 2**20, 2**40]),
    st.sampled_from([1, 2, 7]),
    st.integers(0, 2**32),
)
def test_radius_and_separation_are_exact(M, d, bound, den, seed):
    rng = random.Random(seed)
    vectors = [
        tuple(mpq(rng.randint(-bound, bound), rng.choice([1, den])) for _ in range(d))
        for _ in range(M)
    ]
    vectors += vectors[:1]  # a repeated vector does not make δ zero
    want = brute_geometry(vectors)
    assert radius_and_separation(vectors) == want
    assert (squared_radius(vectors), squared_separation(vectors)) == want


def test_token_geometry_is_measured_once_per_view_and_vocabulary(built):
    _, ds = built
    sv = view(ds)
    tokens = [ds.vocab[t] for t in sv.tokens]
    assert token_geometry(ds, sv) == brute_geometry(tokens)
    assert sv.__dict__["_geometry"][0] is ds.vocab
    moved = replace(ds, vocab=tuple(tuple(x + 1 for x in v) for v in ds.vocab))
    assert token_geometry(moved, sv) == brute_geometry([moved.vocab[t] for t in sv.tokens])


# --------------------------------------------------------------------------- resources


def test_resources_count_every_weight_as_the_plain_definition(built):
    model, _ = built
    third = Affine(2, (((0, 3),), ((1, -4), (0, 6))), (5, 0), denominator=3)
    table = PositionalEncoding(((mpq(1, 2), mpq(0)), (mpq(-3), mpq(7, 4))))
    mixed = Transformer(
        2,
        (
            table,
            MLP((third, Affine.from_dense([[2**70, 1]], [-7])), residual=False),
        ),
    )
    for m in (model, mixed):
        values = []
        for s in m.sublayers:
            if isinstance(s, PositionalEncoding):
                values += [v for row in s.table for v in row if v]
        for a, with_bias in m.affines():
            values += [mpq(v, a.denominator) for row in a.rows for _, v in row]
            values += [mpq(b, a.denominator) for b in a.bias if b] if with_bias else []
        res = resources(m)
        bits = [parameter_bits(v) for v in values]
        assert res.nonzero_parameters == len(values)
        assert res.total_bits == sum(bits) and res.max_bits == max(max(bits), 1)


# --------------------------------------------------------------------------- witness set


def test_witness_set_survives_an_order_free_hash_collision(monkeypatch):
    """Every multiset hashed alike: grouping then compares the rows themselves."""
    monkeypatch.setattr(exact_arrays, "value_words", lambda size: np.zeros(size, np.uint64))
    distinct = np.array([[0, 1, 2], [2, 1, 0], [3, 1, 1], [1, 3, 4]], np.int16)
    in_A = np.array([False, True, True, True, False])
    ids, owners = multiset_ids(distinct, keep=in_A)
    # restricted to A = {1, 2, 3}: {1,2}, {1,2}, {1,1,3}, {1,3}
    assert ids.tolist() == [0, 0, 1, 2] and owners.tolist() == [0, 2, 3]
    check = verify_ks25._witness_set(distinct, {1, 2, 3}, np.arange(4))
    assert not check.passed and "sequences[0] and sequences[1]" in check.detail
    ids, owners = multiset_ids(distinct)  # whole rows: {0,1,2} twice, then two others
    assert ids.tolist() == [0, 0, 1, 2] and owners.tolist() == [0, 2, 3]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3), min_size=1, max_size=30))
def test_multiset_ids_are_first_seen_ids_of_sorted_rows(rows):
    M = np.array(rows, np.int16)
    keep = np.array([True, False, True, True, False, True, True])
    want = first_seen_ids(np.sort(M, axis=1))
    got = multiset_ids(M)
    assert [x.tolist() for x in got] == [x.tolist() for x in want]
    got = multiset_ids(M, sorted_rows=np.sort(M, axis=1))
    assert [x.tolist() for x in got] == [x.tolist() for x in want]
    want = first_seen_ids(np.sort(np.where(keep[M], M, -1), axis=1))
    got = multiset_ids(M, keep=keep)
    assert [x.tolist() for x in got] == [x.tolist() for x in want]


def test_witness_set_names_equal_restrictions():
    distinct = np.array([[0, 1, 2], [0, 1, 3], [4, 4, 2]], np.int16)
    check = verify_ks25._witness_set(distinct, {0, 1}, np.array([5, 7, 9]))
    assert not check.passed and "sequences[5] and sequences[7]" in check.detail
    assert verify_ks25._witness_set(distinct, {1, 2, 3}, np.arange(3)).passed


# --------------------------------------------------------------------------- Theorem 4.2


def test_outputs_compared_on_arrays_as_column_by_column(built):
    model, ds = built
    prefix = _mixing_prefix(model)  # F1 and the attention: the whole stream is the output
    vocab = ds.vocab[:4]
    trace = reference_run(prefix, vocab, [[0, 0, 0], [1, 1, 1], [2, 0, 2], [3, 3, 3]])
    ref = reference_run(prefix, vocab, [[0], [1], [2], [3]])
    plain = [
        i
        for i, (out, r) in enumerate(zip(trace.outputs, ref.outputs, strict=True))
        if any(col != r[0] for col in out)
    ]
    assert _differing(trace.outputs, ref.outputs) == plain
    assert _differing(list(trace.outputs), list(ref.outputs)) == plain
    assert 2 in plain and 0 not in plain


def test_theorem_4_2_fails_when_the_equivalent_mlp_differs(built, monkeypatch):
    model, ds = built
    from exactmem.checks import lower_bounds

    real = lower_bounds.equivalent_mlp

    def shifted(part):
        mlp = real(part)
        layer = mlp.sublayers[-1].layers[-1]
        moved = replace(layer, bias=(layer.bias[0] + 1,) + layer.bias[1:])
        last = replace(mlp.sublayers[-1], layers=mlp.sublayers[-1].layers[:-1] + (moved,))
        return replace(mlp, sublayers=mlp.sublayers[:-1] + (last,))

    monkeypatch.setattr(lower_bounds, "equivalent_mlp", shifted)
    sv = view(ds)
    check = constant_sequence_check(model, ds.vocab, list(sv.tokens)[:5], 4)
    assert not check.passed and "output differs from the equivalent MLP" in check.detail


# --------------------------------------------------------------------------- kept arrays


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(-(10**7), 10**7), min_size=2, max_size=2), min_size=1),
    st.booleans(),
)
def test_int_strings_json_is_json_dumps(rows, small):
    values = np.array(rows, np.int64) // (10**5 if small else 1)
    want = json.dumps([[str(x) for x in r] for r in values.tolist()], separators=(",", ":"))
    text = int_strings_json(values)
    assert text is None or text == want.encode()
    span = min(TABLE_LIMIT, max(4 * values.size, 1 << 16))  # the table's widest range
    assert text is not None or int(values.max()) - int(values.min()) >= span


def test_a_container_dataset_keeps_its_arrays_read_only(tmp_path):
    ds = random_sequences(60, 4, 3, 12, 3, seed=9)
    save_dataset(ds, tmp_path / "d.exm")
    loaded = load_dataset(tmp_path / "d.exm")
    narrow = loaded.sequences.array.dtype  # the container's token rows, kept as they were read
    tokens = token_array(loaded, narrow)
    num, den = dataset_arrays.vocab_arrays(loaded)
    assert not tokens.flags.writeable and not num.flags.writeable
    assert tokens.tolist() == [list(s) for s in ds.sequences]
    rationals = [
        [mpq(int(p), int(q)) for p, q in zip(ps, qs, strict=True)]
        for ps, qs in zip(num, den, strict=True)
    ]
    assert rationals == [list(v) for v in ds.vocab]
    assert dataset_hash(loaded) == plain_dataset_hash(ds)
    sv = view(loaded)
    assert token_geometry(loaded, sv) == brute_geometry([ds.vocab[t] for t in sv.tokens])


def test_parts_not_in_lowest_terms_are_not_kept():
    """A file may state 2/4: the rationals are reduced, the raw parts would not match them."""
    vocab = [(mpq(1, 2), mpq(3)), (mpq(1, 2), mpq(3)), (mpq(-5, 3), mpq(0))]
    ds = Dataset.from_tokens([[0, 1], [2, 2]], [1, 2], vocab=vocab)
    raw_num = np.array([[2, 3], [1, 3], [-5, 0]])
    raw_den = np.array([[4, 1], [2, 1], [3, 1]])
    container._remember_arrays(ds, raw_num, raw_den)
    assert dataset_arrays._kept(ds, "vocab") is None
    num, den = dataset_arrays.vocab_arrays(ds)  # from the rationals themselves
    assert num.tolist() == [[1, 3], [1, 3], [-5, 0]] and den.tolist() == [[2, 1], [2, 1], [3, 1]]
    sv = view(ds)
    assert sv.canonical == (0, 0, 2)
    assert dataset_hash(ds) == plain_dataset_hash(ds)
    assert token_geometry(ds, sv) == brute_geometry([ds.vocab[t] for t in sv.tokens])
