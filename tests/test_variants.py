"""Kajitsuka & Sato 2025 beyond Theorem 4.1: Corollary 4.1, Theorems E.1, D.1 and F.1."""

from dataclasses import replace

import pytest
from gmpy2 import mpq
from support import certify_built

from exactmem.commands.main import main
from exactmem.constructions import ks25
from exactmem.core.errors import InputError
from exactmem.core.model import Affine
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import random_sequences
from exactmem.files.dataset_files import save_dataset


def verdict(model, ds):
    cert = certify_built(model, ds)
    return cert.verdict, {c.name for c in cert.failed}, cert


def test_seq2seq_every_position():
    ds = random_sequences(80, 5, 3, 20, 4, seed=1, task="seq2seq")
    model, _ = ks25.build(ds, {}, "ks25-seq2seq")
    v, failed, cert = verdict(model, ds)
    assert v == "verified", failed
    labels = next(c for c in cert.checks if c.name == "labels")
    assert labels.figures["count"] == 80 * 5


def test_seq2seq_wrong_label_at_one_position_is_refuted():
    ds = random_sequences(40, 4, 2, 12, 3, seed=2, task="seq2seq")
    model, _ = ks25.build(ds, {}, "ks25-seq2seq")
    labels = [list(y) for y in ds.labels]
    labels[3][1] = labels[3][1] % 3 + 1
    bad = replace(ds, labels=tuple(tuple(y) for y in labels))
    try:
        v, failed, cert = verdict(model, bad)
    except InputError:  # the new label may conflict with an equal (token, multiset)
        return
    assert "labels" in failed
    assert "sequences[3][1]" in next(c.detail for c in cert.checks if c.name == "labels")


def test_seq2seq_conflicts_name_positions(tmp_path, capsys):
    vocab = ((mpq(0),), (mpq(1),))
    ds = Dataset("seq2seq", ((1, 2), (2, 2)), 2, vocab=vocab, sequences=((0, 1), (1, 0)))
    path = tmp_path / "d.json"
    save_dataset(ds, path)
    assert (
        main(
            [
                "build",
                "--construction",
                "ks25-seq2seq",
                "--data",
                str(path),
                "--out",
                str(tmp_path / "m.json"),
                "--quiet",
            ]
        )
        == 2
    )
    assert "sequences[0][0] and sequences[1][1] (labels 1 and 2)" in capsys.readouterr().err


def test_token_ids_embedding_table():
    ds = random_sequences(100, 5, 1, 60, 5, seed=3)
    model, _ = ks25.build(ds, {}, "ks25-token-ids")
    assert model.token_inputs and model.input_dim == 60
    assert model.embed.out_dim == 3
    v, failed, cert = verdict(model, ds)
    assert v == "verified", failed
    # the table: column x is (f(x), x + 1, 0)
    tid_row = model.embed.rows[1]
    assert tid_row == tuple((x, x + 1) for x in range(60))


def test_token_ids_reject_a_vocabulary_larger_than_the_table():
    ds = random_sequences(30, 3, 1, 10, 3, seed=4)
    model, _ = ks25.build(ds, {}, "ks25-token-ids")
    bigger = replace(ds, vocab=ds.vocab + ((mpq(99),),))
    with pytest.raises(InputError, match="embedding table has 10 tokens"):
        certify_built(model, bigger)


def test_deep_sets_labels_by_multiset():
    ds = random_sequences(120, 4, 2, 15, 5, seed=5, labels_by="multiset")
    model, _ = ks25.build(ds, {}, "ks25-deep-sets")
    v, failed, cert = verdict(model, ds)
    assert v == "verified", failed
    assert "deepsets.set_ids" in {c.name for c in cert.checks}
    # ρ̃ reads only the sum lane: its Stage I direction is (0, 0, 1)
    first = model.sublayers[-1].layers[0]
    t_row = first.rows[first.names.index("t")]
    assert [c for c, _ in t_row] == [2]


def test_deep_sets_reject_multiset_conflicts():
    vocab = ((mpq(0),), (mpq(1),))
    ds = Dataset("next-token", (1, 2), 2, vocab=vocab, sequences=((0, 1), (1, 0)))
    with pytest.raises(InputError, match="same multiset of tokens"):
        ks25.build(ds, {}, "ks25-deep-sets")
    ks25.build(ds, {}, "ks25-next-token")  # fine when the last token differs


@pytest.mark.parametrize("B", [2, 4, 8, 16])
def test_bit_budget_caps_bits_and_is_certified(B):
    ds = random_sequences(200, 5, 3, 30, 5, seed=6)
    model, _ = ks25.build(ds, {"bit_budget": B}, "ks25-bit-budget")
    v, failed, cert = verdict(model, ds)
    assert v == "verified", failed
    assert cert.resources.width <= 15


def test_bit_budget_trades_bits_for_depth():
    ds = random_sequences(400, 5, 3, 40, 5, seed=7)
    rows = []
    for B in (2, 4, 8, 16):
        model, _ = ks25.build(ds, {"bit_budget": B}, "ks25-bit-budget")
        cert = certify_built(model, ds)
        rows.append((cert.resources.max_bits, cert.resources.depth))
    bits = [b for b, _ in rows]
    depths = [d for _, d in rows]
    assert bits == sorted(bits) and depths == sorted(depths, reverse=True)
    assert bits[0] < bits[-1] and depths[0] > depths[-1]


def test_bit_budget_needs_its_option():
    ds = random_sequences(10, 3, 2, 5, 2, seed=8)
    with pytest.raises(InputError, match="bit_budget"):
        ks25.build(ds, {}, "ks25-bit-budget")


def test_split_ownership_fails_when_a_subnetwork_claims_a_foreign_point():
    """Shift one sub-network's match so it fires on points it does not own."""
    ds = random_sequences(200, 4, 2, 30, 4, seed=9)
    model, _ = ks25.build(ds, {"bit_budget": 4}, "ks25-bit-budget")
    f2 = model.sublayers[-1]
    li = next(i for i, a in enumerate(f2.layers) if "s3.0.g1" in a.names)
    layer = f2.layers[li]
    rows = list(layer.rows)
    g1, g2 = layer.names.index("s3.0.g1"), layer.names.index("s3.0.g2")
    rows[g1], rows[g2] = (), ()  # the first slot of this sub-network now matches everything
    bias = list(layer.bias)
    bias[g1] = bias[g2] = 0
    layers = list(f2.layers)
    layers[li] = Affine(layer.in_dim, tuple(rows), tuple(bias), layer.denominator, layer.names)
    broken = replace(model, sublayers=model.sublayers[:-1] + (replace(f2, layers=tuple(layers)),))
    v, failed, _ = verdict(broken, ds)
    assert v == "refuted"
    assert "f2.split.ownership" in failed
