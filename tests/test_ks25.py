"""Kajitsuka & Sato 2025, Theorem 4.1: construction, margins, errata, bad input, mutations."""

import json
from dataclasses import replace

import pytest
from gmpy2 import mpq
from hypothesis import given, settings
from hypothesis import strategies as st
from support import certify_built

from exactmem.claims.proofs import GENERATORS
from exactmem.commands.main import main
from exactmem.constructions import ks25
from exactmem.core.errors import InputError
from exactmem.core.model import Affine, Attention, AttentionHead
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import random_sequences, restrict, with_positions, zen_of_python
from exactmem.files.dataset_files import save_dataset
from exactmem.files.model_files import save_model

multisets = st.lists(
    st.dictionaries(st.integers(0, 6), st.integers(1, 3), min_size=1, max_size=4).map(
        lambda d: tuple(sorted(d.items()))
    ),
    min_size=1,
    max_size=30,
    unique=True,
)


@settings(max_examples=200, deadline=None)
@given(multisets)
def test_witness_set_keeps_restrictions_distinct(ms):
    """Lemma B.1: |A| ≤ #multisets − 1 and the restrictions to A stay pairwise distinct."""
    A = ks25.witness_set(ms)
    assert len(A) <= len(ms) - 1
    assert len({restrict(m, set(A)) for m in ms}) == len(ms)


@settings(max_examples=100, deadline=None)
@given(multisets, st.integers(0, 100))
def test_random_weights_separate_sums(ms, seed):
    import random

    A = ks25.witness_set(ms)
    restricted = [restrict(m, set(A)) for m in ms]
    f = ks25.random_weights(restricted, A, random.Random(seed))
    assert all(1 <= v <= max(len(ms) ** 2, 2) for v in f.values())
    assert len(set(ks25.sequence_sums(restricted, f))) == len(ms)


def test_lemma_b2_counterexample_of_the_digest():
    """N = 2, m1 = {a}, m2 = {b, b}, v = (0.8, −0.6): h = (12, −8), K = 28, f = (40, 20)."""
    restricted = [((0, 1),), ((1, 2),)]
    f = ks25.paper_weights(restricted, [0, 1], 2, (mpq(4, 5), mpq(-3, 5)))
    assert f == {0: 40, 1: 20}
    assert ks25.sequence_sums(restricted, f) == [40, 40]
    assert ks25._park_holds([(1, 0), (0, 2)], (mpq(4, 5), mpq(-3, 5)), 2)


@pytest.mark.parametrize("family", ["random", "permuted", "same_multiset", "near_delta"])
@pytest.mark.parametrize("gadget", ["peel", "tent"])
def test_families_are_certified(family, gadget):
    ds = random_sequences(120, 5, 3, 25, 6, seed=len(family), family=family)
    model, w = ks25.build(ds, {"gadget": gadget, "seed": 3})
    cert = certify_built(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    assert cert.resources.width <= 14
    assert not w.collisions


@pytest.mark.parametrize("score", ["softmax", "hardmax", "uniform"])
def test_attention_modes_agree(score):
    ds = random_sequences(60, 4, 2, 15, 4, seed=9)
    model, _ = ks25.build(ds, {"attention": score})
    assert certify_built(model, ds).verdict == "verified"


def test_paper_scheme_counterexample_is_refuted_naming_the_multisets(tmp_path, capsys):
    ds = GENERATORS["lemma_b2_counterexample"]({})
    model, w = ks25.build(ds, {"sequence_weights": "paper", "paper_direction": "380/461,-261/461"})
    assert w.weights == (90, 45) and w.collisions == ((0, 1),)
    data, path = tmp_path / "d.json", tmp_path / "m.json"
    save_dataset(ds, data)
    save_model(model, path)
    argv = ["verify", str(path), "--data", str(data), "--quiet", "--construction"]
    assert main([*argv, "ks25-next-token"]) == 1
    out = capsys.readouterr().out
    assert (
        "sequences[0] {vocab[0], vocab[2], vocab[3]} and sequences[1] {vocab[1]×2, vocab[3]}"
        " have equal φ̃ sums 90"
    ) in out


def test_paper_scheme_rejects_a_direction_that_violates_park():
    ds = GENERATORS["lemma_b2_counterexample"]({})
    with pytest.raises(InputError, match="Park"):
        ks25.build(ds, {"sequence_weights": "paper", "paper_direction": "1,0"})
    with pytest.raises(InputError, match="unit vector"):
        ks25.build(ds, {"sequence_weights": "paper", "paper_direction": "1,1"})


PAPER_CASES = [
    (lambda s=s: random_sequences(40, 3, 2, 8, 3, seed=s), {"seed": s}) for s in range(4)
]
PAPER_CASES.append(
    (lambda: GENERATORS["lemma_b2_counterexample"]({}), {"paper_direction": "380/461,-261/461"})
)


@pytest.mark.parametrize("make, options", PAPER_CASES)
def test_paper_scheme_is_refuted_exactly_when_its_sums_collide(make, options):
    """The verifier's sum check must agree with an independent recomputation of the sums
    from the construction's weights (random directions rarely collide; the crafted one does)."""
    from exactmem.datasets.sequences import view

    ds = make()
    model, w = ks25.build(ds, {"sequence_weights": "paper", **options})
    f = dict(zip(w.witness_tokens, w.weights, strict=True))
    distinct = set(view(ds).multisets)
    sums = {sum(c * f.get(t, 0) for t, c in ms) for ms in distinct}
    collide = len(sums) < len(distinct)
    check = next(c for c in certify_built(model, ds).checks if c.name == "ks25.sequence_sums")
    assert check.passed is not collide


def test_inconsistent_data_exit_2_naming_both_sequences(tmp_path, capsys):
    vocab = ((mpq(0),), (mpq(1),), (mpq(2),))
    ds = Dataset("next-token", (1, 2), 2, vocab=vocab, sequences=((0, 1, 2), (1, 0, 2)))
    data = tmp_path / "d.json"
    save_dataset(ds, data)
    assert (
        main(
            [
                "build",
                "--construction",
                "ks25-next-token",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "m.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "sequences[0] and sequences[1] (labels 1 and 2)" in err


def test_zen_needs_positions():
    ds = zen_of_python(32)
    with pytest.raises(InputError, match="16 label conflicts"):
        ks25.build(ds, {})
    model, _ = ks25.build(ds, {"position_aware": True})
    assert model.input_dim == 2
    assert certify_built(model, ds).verdict == "verified"  # certify appends the positions itself
    assert with_positions(ds).dim == 2


@pytest.fixture(scope="module")
def built():
    ds = random_sequences(150, 5, 3, 30, 6, seed=11)
    model, w = ks25.build(ds, {"seed": 2, "attention": "hardmax"})
    return ds, model


def failed(model, ds):
    return {c.name for c in certify_built(model, ds).failed}


def replace_layer(model, sub, layer, fn):
    mlp = model.sublayers[sub]
    layers = list(mlp.layers)
    layers[layer] = fn(layers[layer])
    subs = list(model.sublayers)
    subs[sub] = replace(mlp, layers=tuple(layers))
    return replace(model, sublayers=tuple(subs))


def test_nudged_output_weight_is_refuted(built):
    ds, model = built
    last = len(model.sublayers[2].layers) - 1
    broken = replace_layer(
        model,
        2,
        last,
        lambda a: Affine(a.in_dim, a.rows, (a.bias[0] + 1,) + a.bias[1:], a.denominator, a.names),
    )
    assert "labels" in failed(broken, ds)


def test_flipped_packed_bit_in_phi_is_refuted(built):
    """Flip a bit of φ̃'s packed label constant: some token gets a wrong weight f(x)."""
    ds, model = built
    mlp = model.sublayers[0]
    li = next(i for i, a in enumerate(mlp.layers) if "s2.1.hi" in a.names)
    row = mlp.layers[li].names.index("W")
    broken = replace_layer(
        model,
        0,
        li,
        lambda a: Affine(
            a.in_dim,
            a.rows,
            tuple(b ^ 1 if i == row else b for i, b in enumerate(a.bias)),
            a.denominator,
            a.names,
        ),
    )
    assert failed(broken, ds)


def test_attention_with_scores_is_caught(built):
    """W_K = W_Q = e_tid: scores differ, hardmax no longer averages uniformly."""
    ds, model = built
    att = model.sublayers[1]
    h = att.heads[0]
    tid = Affine(3, (((1, 1),),), (0,))
    broken_att = Attention((AttentionHead(tid, tid, h.value, h.output),), att.score, att.label)
    broken = replace(model, sublayers=(model.sublayers[0], broken_att, model.sublayers[2]))
    assert {"ks25.attention"} <= failed(broken, ds)


def test_certificate_has_the_margins(built, tmp_path):
    ds, model = built
    data, path, cert = tmp_path / "d.json", tmp_path / "m.json", tmp_path / "c.json"
    save_dataset(ds, data)
    save_model(model, path)
    assert (
        main(
            [
                "verify",
                str(path),
                "--data",
                str(data),
                "--quiet",
                "--construction",
                "ks25-next-token",
                "--certificate",
                str(cert),
            ]
        )
        == 0
    )
    body = json.loads(cert.read_text())["certificate"]
    checks = {c["name"]: c for c in body["checks"]}
    assert checks["ks25.context_ids"]["required"] == "1/25"
    assert checks["ks25.sequence_sums"]["min_sum_gap"] is not None
    assert body["subject"]["model_says"]["options"]["seed"] == 2
    assert body["subject"]["criteria"]["construction"] == "ks25-next-token"
    assert body["resources"]["width"] <= 14


def test_multiplicity_only_differences_are_separated():
    """T12: {a, a, b} and {a, b, b} with the same last token b need different context ids."""
    a, b = (mpq(1), mpq(0)), (mpq(0), mpq(1))
    ds = Dataset(
        "next-token", (1, 2, 3), 3, vocab=(a, b), sequences=((0, 0, 1), (0, 1, 1), (1, 1, 1))
    )
    model, _ = ks25.build(ds, {})
    cert = certify_built(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]


@pytest.mark.parametrize("n", [1, 2, 5])
def test_all_identical_tokens(n):
    """T13: constant sequences (n = 1, n = 2 with equal tokens, longer); every token its own
    label."""
    vocab = tuple((mpq(i), mpq(i * i)) for i in range(6))
    ds = Dataset(
        "next-token",
        tuple(range(1, 7)),
        6,
        vocab=vocab,
        sequences=tuple((i,) * n for i in range(6)),
    )
    model, _ = ks25.build(ds, {})
    cert = certify_built(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]


def _distinct_rows(seqs):
    import numpy as np

    rows = np.sort(np.array(seqs, np.int64), axis=1)
    _, first = np.unique(rows, axis=0, return_index=True)
    return rows[np.sort(first)]


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.lists(st.lists(st.integers(0, 9), min_size=n, max_size=n), min_size=1)
    )
)
def test_compiled_witness_set_takes_the_same_steps(seqs):
    """Lemma B.1 compiled (hashes in an open-addressing table) = the dictionary version."""
    from exactmem.constructions.witness_kernel import witness_rows
    from exactmem.datasets.sequences import multiset_of

    rows = _distinct_rows(seqs)
    assert witness_rows(rows) == ks25.witness_set([multiset_of(r) for r in rows.tolist()])


@pytest.mark.parametrize("seed", range(3))
def test_compiled_witness_set_on_many_multisets(seed):
    """Thousands of multisets over 30 tokens: many additions to A, the table rebuilt often."""
    import random

    from exactmem.constructions.witness_kernel import witness_rows
    from exactmem.datasets.sequences import multiset_of

    rng = random.Random(seed)
    rows = _distinct_rows([[rng.randrange(30) for _ in range(6)] for _ in range(3000)])
    A = witness_rows(rows)
    assert A == ks25.witness_set([multiset_of(r) for r in rows.tolist()])
    assert len(A) > 10


def test_witness_set_of_rows_falls_back_after_a_hash_collision(monkeypatch):
    from exactmem.constructions import witness_kernel
    from exactmem.datasets.sequences import multiset_of

    rows = _distinct_rows([[0, 1], [1, 1], [0, 0], [2, 1], [0, 2]])
    monkeypatch.setattr(ks25, "KERNEL_FROM", 0)
    monkeypatch.setattr(witness_kernel, "witness_rows", lambda rows: None)
    want = ks25.witness_set([multiset_of(r) for r in rows.tolist()])
    assert ks25.witness_set_of_rows(rows) == want and want
