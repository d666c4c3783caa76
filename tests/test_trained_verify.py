"""verify on imported (float-trained) models: argmax labels certified per example on Arb balls
with margins, precision raised up to --max-precision, the float evaluation beside."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem import Dataset, save_dataset
from exactmem.checkpoints.architectures import import_checkpoint
from exactmem.checks.certify import certify
from exactmem.checks.margins import argmax_margins
from exactmem.commands.main import main
from exactmem.core.errors import InputError
from exactmem.evaluate.floats import float_logits
from exactmem.evaluate.softmax import run_balls

save_file = pytest.importorskip("safetensors.numpy").save_file

from tests.test_import import dana_checkpoint, mahdavi_checkpoint  # noqa: E402


def _tiny_lead(path, eps: float) -> None:
    """One head on tokens (1, x1): softmax scores x1·x1' (unequal: judged on balls), the value
    map reads the first coordinate twice, logit 1 = v0 + eps·v1 and logit 2 = v0. With
    v0 = v1 = 1 the exact lead of class 1 is eps, which float64 rounds away when eps < 2^-53."""
    save_file(
        {
            "attn.0.query.weight": np.array([[0.0, 1.0], [0.0, 0.0]]),
            "attn.0.key.weight": np.array([[0.0, 0.5], [0.0, 0.0]]),
            "attn.0.value.weight": np.array([[1.0, 0.0], [1.0, 0.0]]),
            "attn.0.output.weight": np.array([[1.0, eps], [1.0, 0.0]]),
        },
        str(path),
    )


def _context_data(labels, n=3):
    vocab = [[1, k] for k in range(len(labels) * (n + 1))]
    seqs = [list(range(i * (n + 1), (i + 1) * (n + 1))) for i in range(len(labels))]
    return Dataset.from_tokens(seqs, labels, vocab=vocab, num_classes=2)


def _labelled_by_floats(model, vocab, seqs, C):
    logits = float_logits(model, vocab, seqs)
    return [int(np.argmax(r)) + 1 for r in logits]


def test_float_logits_agree_with_the_balls(tmp_path):
    mahdavi_checkpoint(tmp_path / "m.safetensors", d=5, d_h=3, C=3, H=2, seed=3)
    model = import_checkpoint(tmp_path / "m.safetensors", "mahdavi24")
    rng = np.random.default_rng(0)
    vocab = [[mpq(int(x)) for x in rng.integers(-3, 4, 5)] for _ in range(12)]
    seqs = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    floats = float_logits(model, vocab, seqs)
    balls = run_balls(model, vocab, seqs, precision=128, positions="last").outputs
    for f_row, b_seq in zip(floats, balls, strict=True):
        for f, b in zip(f_row, b_seq[-1], strict=True):
            assert abs(f - float(b.mid())) < 1e-9


def test_a_memorizing_mahdavi_model_is_certified_with_margins(tmp_path, capsys):
    mahdavi_checkpoint(tmp_path / "m.safetensors", d=5, d_h=3, C=3, H=2, seed=4)
    model = import_checkpoint(tmp_path / "m.safetensors", "mahdavi24")
    rng = np.random.default_rng(1)
    vocab = [[int(x) for x in rng.integers(-3, 4, 5)] for _ in range(40)]
    seqs = [list(range(4 * i, 4 * i + 4)) for i in range(10)]
    labels = _labelled_by_floats(model, vocab, seqs, 3)
    data = Dataset.from_tokens(seqs, labels, vocab=vocab, num_classes=3)
    cert = certify(model, data)
    labels_check = cert.checks[0]
    assert cert.verdict == "verified" and labels_check.passed
    fig = labels_check.figures
    assert fig["certified"] == 10 and fig["refuted"] == 0
    assert mpq(fig["min_margin_lower_bound"]) > 0
    assert fig["margins"]["smallest_at"].startswith("sequences[")
    assert fig["float"]["accuracy"] == "10/10" and fig["float"]["disagreements"] == 0
    # the CLI prints the margins' distribution and the float line
    save_dataset(data, tmp_path / "d.json")
    assert (
        main(
            [
                "import",
                str(tmp_path / "m.safetensors"),
                "--arch",
                "mahdavi24",
                "--out",
                str(tmp_path / "m.json"),
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        main(["verify", str(tmp_path / "m.json"), "--data", str(tmp_path / "d.json"), "--quiet"])
        == 0
    )
    out = capsys.readouterr().out
    assert "margins (certified lower bounds): smallest" in out
    assert "float64 (not a verdict): 10/10 correct" in out


def test_a_wrong_label_is_refuted_naming_the_example(tmp_path):
    mahdavi_checkpoint(tmp_path / "m.safetensors", d=5, d_h=3, C=3, H=2, seed=4)
    model = import_checkpoint(tmp_path / "m.safetensors", "mahdavi24")
    rng = np.random.default_rng(1)
    vocab = [[int(x) for x in rng.integers(-3, 4, 5)] for _ in range(40)]
    seqs = [list(range(4 * i, 4 * i + 4)) for i in range(10)]
    labels = _labelled_by_floats(model, vocab, seqs, 3)
    labels[7] = labels[7] % 3 + 1
    cert = certify(model, Dataset.from_tokens(seqs, labels, vocab=vocab, num_classes=3))
    assert cert.verdict == "refuted"
    assert "sequences[7]: another logit is ≥ the target's" in cert.checks[0].detail
    per_example = cert.checks[0].figures["per_example"]
    assert per_example[7].startswith("-") and all(
        not m.startswith("-") for i, m in enumerate(per_example) if i != 7
    )
    assert cert.checks[0].figures["float"]["accuracy"] == "9/10"


def test_float_and_certified_verdicts_disagree_on_a_lead_below_float_resolution(tmp_path):
    _tiny_lead(tmp_path / "t.safetensors", 2.0**-60)
    model = import_checkpoint(tmp_path / "t.safetensors", "mahdavi24")
    cert = certify(model, _context_data([1, 1]))
    check = cert.checks[0]
    assert check.passed  # exactly, logit 1 leads by 2^-60 (in every ball at enough bits)
    assert mpq(check.figures["min_margin_lower_bound"]) > 0
    assert mpq(check.figures["min_margin_lower_bound"]) <= mpq(1, 2**60)
    floats = check.figures["float"]
    assert floats["accuracy"] == "0/2" and floats["disagreements"] == 2
    assert floats["disagreements_listed"][0].startswith(
        "sequences[0]: float says wrong (float margin 0), certified certified"
    )


def test_an_exact_tie_is_inconclusive_after_raising_the_precision(tmp_path, capsys):
    _tiny_lead(tmp_path / "t.safetensors", 0.0)  # logits 1 and 2 are equal: no ball decides
    model = import_checkpoint(tmp_path / "t.safetensors", "mahdavi24")
    results = argmax_margins(model, *_seqs_and_labels(_context_data([1, 1])), limit=256)
    assert [r.status for r in results] == ["undecided", "undecided"]
    assert [r.precision for r in results] == [256, 256]
    cert = certify(model, _context_data([1, 1]), max_precision=128)
    assert cert.verdict == "inconclusive" and [c.name for c in cert.undecided] == ["labels"]
    assert "sequences[0], sequences[1] stay too wide" in cert.undecided[0].detail
    save_dataset(_context_data([1, 1]), tmp_path / "d.json")
    assert (
        main(
            [
                "import",
                str(tmp_path / "t.safetensors"),
                "--arch",
                "mahdavi24",
                "--out",
                str(tmp_path / "t.json"),
                "--quiet",
            ]
        )
        == 0
    )
    argv = ["verify", str(tmp_path / "t.json"), "--data", str(tmp_path / "d.json"), "--quiet"]
    assert main([*argv, "--max-precision", "128"]) == 4
    out = capsys.readouterr().out  # the undecided check, in the verdict table
    assert "undecided labels" in out
    assert "sequences[0]" in out and "at 128 bits" in out and "--max-precision" in out


def _seqs_and_labels(ds):
    return ds.vocab, ds.sequences, ds.labels


@pytest.mark.parametrize("bits", ["8", "-1", "63"])
def test_a_max_precision_below_64_bits_exits_2(tmp_path, capsys, bits):
    _tiny_lead(tmp_path / "t.safetensors", 0.5)
    save_dataset(_context_data([1]), tmp_path / "d.json")
    assert (
        main(
            [
                "import",
                str(tmp_path / "t.safetensors"),
                "--arch",
                "mahdavi24",
                "--out",
                str(tmp_path / "t.json"),
                "--quiet",
            ]
        )
        == 0
    )
    argv = ["verify", str(tmp_path / "t.json"), "--data", str(tmp_path / "d.json"), "--quiet"]
    assert main([*argv, "--max-precision", bits]) == 2
    assert "--max-precision" in capsys.readouterr().err
    with pytest.raises(InputError, match="max-precision"):
        certify(
            import_checkpoint(tmp_path / "t.safetensors", "mahdavi24"),
            _context_data([1]),
            max_precision=int(bits),
        )


def test_a_dana_model_on_token_ids_is_certified_and_the_certificate_records_it(tmp_path):
    dana_checkpoint(tmp_path / "d.safetensors", N=6, S=3, d=4, d_h=2, C=5, H=2, seed=2)
    model = import_checkpoint(tmp_path / "d.safetensors", "dana25")
    seqs = [[0, 1, 2], [3, 4, 5], [5, 1, 0], [2, 2, 3]]
    vocab = [[mpq(0)]] * 6
    labels = _labelled_by_floats(model, vocab, seqs, 5)
    data = Dataset.from_tokens(seqs, labels, vocab=[[t] for t in range(6)], num_classes=5)
    save_dataset(data, tmp_path / "data.json")
    assert (
        main(
            [
                "import",
                str(tmp_path / "d.safetensors"),
                "--arch",
                "dana25",
                "--out",
                str(tmp_path / "d.json"),
                "--quiet",
            ]
        )
        == 0
    )
    cert_path = tmp_path / "c.json"
    assert (
        main(
            [
                "verify",
                str(tmp_path / "d.json"),
                "--data",
                str(tmp_path / "data.json"),
                "--quiet",
                "--max-precision",
                "512",
                "--certificate",
                str(cert_path),
            ]
        )
        == 0
    )
    content = json.loads(cert_path.read_text())["certificate"]
    assert content["subject"]["criteria"]["max_precision"] == 512
    labels_check = content["checks"][0]
    assert labels_check["certified"] == 4 and labels_check["float"]["disagreements"] == 0


def test_the_matrix_product_and_the_entry_sums_enclose_the_same_values(tmp_path, monkeypatch):
    from exactmem.evaluate import softmax

    dana_checkpoint(tmp_path / "d.safetensors", N=6, S=3, d=4, d_h=2, C=5, H=2, seed=5)
    model = import_checkpoint(tmp_path / "d.safetensors", "dana25")
    seqs = [[0, 1, 2], [3, 4, 5]]
    runs = []
    for threshold in (1, 10**9):  # every map through arb_mat, then none
        monkeypatch.setattr(softmax, "DENSE_FROM", threshold)
        runs.append(run_balls(model, None, seqs, precision=96, positions="last").outputs)
    for dense, summed in zip(*runs, strict=True):
        assert len(dense) == len(summed) == 1  # the last column only
        for a, b in zip(dense[0], summed[0], strict=True):
            assert a.overlaps(b) and a.rad() < 2**-80 and b.rad() < 2**-80


def test_imported_models_and_their_certificates_validate_against_the_schemas(tmp_path):
    from tests.test_schemas import assert_valid

    dana_checkpoint(tmp_path / "d.safetensors", N=6, S=3, d=4, d_h=2, C=5, H=2, seed=2)
    seqs = [[0, 1, 2], [3, 4, 5]]
    model = import_checkpoint(tmp_path / "d.safetensors", "dana25")
    labels = _labelled_by_floats(model, [[mpq(0)]] * 6, seqs, 5)
    data = Dataset.from_tokens(seqs, labels, vocab=[[t] for t in range(6)], num_classes=5)
    save_dataset(data, tmp_path / "data.json")
    argv = ["import", str(tmp_path / "d.safetensors"), "--arch", "dana25"]
    assert main([*argv, "--out", str(tmp_path / "d.json"), "--quiet"]) == 0
    assert_valid(json.loads((tmp_path / "d.json").read_text()), "model")
    cert = tmp_path / "c.json"
    argv = ["verify", str(tmp_path / "d.json"), "--data", str(tmp_path / "data.json")]
    assert main([*argv, "--quiet", "--certificate", str(cert)]) == 0
    assert_valid(json.loads(cert.read_text()), "certificate")
    assert main(["show", str(cert)]) == 0
