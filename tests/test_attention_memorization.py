"""Mahdavi et al. 2024 and Dana et al. 2025: certified softmax memorization."""

from dataclasses import replace

import pytest
from gmpy2 import mpq
from support import certify_built

from exactmem.commands.main import main
from exactmem.constructions import dana25, mahdavi24
from exactmem.core.errors import InputError
from exactmem.core.model import Affine, Attention, AttentionHead
from exactmem.datasets.dataset import Dataset
from exactmem.files.dataset_files import save_dataset


def failed(cert):
    return {c.name for c in cert.failed}


@pytest.fixture(scope="module")
def instance():
    return mahdavi24.random_instance(9, 3, 6, 4, seed=5)  # H = 4: capacity 4·2 + 1 = 9


def test_capacity_formula():
    assert mahdavi24.capacity(4, 6, 16) == 21
    assert mahdavi24.capacity(4, 6, 3) == 9  # min(n, d_h) − 1


def test_hardmax_limit_is_exact(instance):
    model, w = mahdavi24.build(instance, {"heads": 4})
    assert w.feature_rank == 9 == w.capacity
    cert = certify_built(model, instance)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    labels = next(c for c in cert.checks if c.name == "labels")
    assert "exactly" in labels.detail


@pytest.mark.parametrize("readout", ["regression", "classification"])
def test_softmax_is_certified_on_balls(instance, readout):
    model, w = mahdavi24.build(instance, {"heads": 4, "score": "softmax", "readout": readout})
    cert = certify_built(model, instance)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    labels = next(c for c in cert.checks if c.name == "labels")
    assert labels.figures["precision"] >= 64
    if readout == "classification":
        assert mpq(labels.figures["min_margin_lower_bound"]) > 0
    else:
        assert mpq(labels.figures["max_error_upper_bound"]) < mpq(1, 1000)


def test_too_low_a_temperature_fails(instance):
    """The exact limit readout at temperature 1: attention is not saturated, labels miss."""
    model, _ = mahdavi24.build(instance, {"heads": 4, "score": "softmax", "temperature": "1"})
    cert = certify_built(model, instance)
    assert "labels" in failed(cert)


def test_resolved_readout_works_at_low_temperature(instance):
    model, _ = mahdavi24.build(
        instance, {"heads": 4, "score": "softmax", "temperature": "1", "readout_solve": "resolve"}
    )
    assert certify_built(model, instance).verdict == "verified"


def test_shared_context_tightness():
    ok = mahdavi24.random_instance(9, 3, 6, 4, seed=6, shared_context=True)
    model, _ = mahdavi24.build(ok, {"heads": 4})
    checks = {c.name: c for c in certify_built(model, ok).checks}
    assert checks["mahdavi.rank_ceiling"].passed
    assert checks["mahdavi.rank_ceiling"].figures == {
        "ceiling": 9,
        "rank": 9,  # measured on the model's own attention: the ceiling is attained
        "attained": True,
        "T": 9,
    }
    over = mahdavi24.random_instance(10, 3, 6, 4, seed=6, shared_context=True)
    with pytest.raises(InputError, match="exceed the capacity"):
        mahdavi24.build(over, {"heads": 4})
    model, _ = mahdavi24.build(over, {"heads": 4, "over_capacity": True})
    cert = certify_built(model, over)
    assert {"mahdavi.rank_ceiling", "mahdavi.capacity"} <= failed(cert)


def _sequences_dataset(vocab, seqs, labels):
    return Dataset(
        "next-token", tuple(labels), max(labels), vocab=tuple(vocab), sequences=tuple(seqs)
    )


def test_a2_violation_names_the_example(tmp_path, capsys):
    ds = mahdavi24.random_instance(5, 3, 6, 3, seed=1)
    vocab = list(ds.vocab)
    seqs = [list(s) for s in ds.sequences]
    seqs[3][1] = seqs[3][0]  # a repeated context token: rank 2 < n = 3
    bad = _sequences_dataset(vocab, seqs, ds.labels)
    path = tmp_path / "a2.json"
    save_dataset(bad, path)
    assert (
        main(
            [
                "build",
                "--construction",
                "mahdavi24",
                "--data",
                str(path),
                "--out",
                str(tmp_path / "m.json"),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "A2 fails" in err and "sequences[3] (rank 2)" in err


def test_a1_violation_names_the_examples():
    ds = mahdavi24.random_instance(5, 3, 6, 3, seed=2)
    vocab = list(ds.vocab)
    q0, q1 = vocab[ds.sequences[0][-1]], vocab[ds.sequences[1][-1]]
    vocab[ds.sequences[2][-1]] = tuple(a + b for a, b in zip(q0, q1, strict=True))
    bad = _sequences_dataset(vocab, ds.sequences, ds.labels)
    with pytest.raises(InputError, match=r"A1 fails: the queries of sequences \[0, 1, 2\]"):
        mahdavi24.build(bad, {"heads": 2})


def test_nudged_readout_is_refuted(instance):
    model, _ = mahdavi24.build(instance, {"heads": 4})
    att = model.sublayers[0]
    h = att.heads[0]
    v = h.value
    rows = (tuple((c, w * 2) for c, w in v.rows[0]),) + v.rows[1:]
    bent = AttentionHead(h.query, h.key, Affine(v.in_dim, rows, v.bias, v.denominator), h.output)
    broken = replace(
        model, sublayers=(Attention((bent,) + att.heads[1:], att.score, att.label, att.mask),)
    )
    assert "labels" in failed(certify_built(broken, instance))


@pytest.mark.parametrize(
    "N, S, T, d, dh, H", [(10, 2, 12, 2, 2, 5), (10, 2, 42, 2, 2, 20), (8, 4, 20, 4, 2, 8)]
)
def test_dana_associations(N, S, T, d, dh, H):
    ds = dana25.random_associations(N, S, T, seed=T)
    model, w = dana25.build(ds, {"d": d, "head_dim": dh, "heads": H})
    cert = certify_built(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    checks = {c.name: c for c in cert.checks}
    assert checks["dana.feature_rank"].passed
    assert mpq(checks["labels"].figures["min_margin_lower_bound"]) > 0
    assert len(model.sublayers[1].heads) == H  # exactly H heads: the + d is the skip term
    assert checks["dana.capacity"].figures["capacity"] == H * dh + d >= T


def test_dana_margin_is_the_circle_margin():
    ds = dana25.random_associations(10, 2, 12, seed=3)
    model, _ = dana25.build(ds, {"d": 2, "heads": 5})
    margin = mpq(
        next(c for c in certify_built(model, ds).checks if c.name == "labels").figures[
            "min_margin_lower_bound"
        ]
    )
    exact = mpq(model.meta["target_margin"])
    assert exact - mpq(1, 10**6) < margin <= exact  # λ_U(1 − cos 2π/N), up to the enclosure
    for x, y in dana25.circle_points(10):
        assert x * x + y * y == 1


def test_dana_rejects_beyond_capacity_and_conflicts():
    ds = dana25.random_associations(10, 2, 13, seed=4)
    with pytest.raises(InputError, match="exceed"):
        dana25.build(ds, {"d": 2, "heads": 5})
    clash = Dataset(
        "next-token", (1, 2), 2, vocab=((mpq(0),), (mpq(1),)), sequences=((0, 1), (0, 1))
    )
    with pytest.raises(InputError, match=r"sequences\[0\] and sequences\[1\] are equal"):
        dana25.build(clash, {})


def test_dana_nudged_output_is_refuted():
    ds = dana25.random_associations(10, 2, 12, seed=5)
    model, _ = dana25.build(ds, {"d": 2, "heads": 5})
    att = model.sublayers[1]
    h = att.heads[-1]
    o = h.output
    bent = AttentionHead(
        h.query,
        h.key,
        h.value,
        Affine(
            o.in_dim, tuple(tuple((c, -w) for c, w in r) for r in o.rows), o.bias, o.denominator
        ),
    )
    broken = replace(
        model,
        sublayers=(model.sublayers[0], Attention(att.heads[:-1] + (bent,), att.score, att.label)),
    )
    assert "labels" in failed(certify_built(broken, ds))
