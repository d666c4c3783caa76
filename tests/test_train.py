"""``exactmem train``: without PyTorch a clear exit 2 naming the ``[train]`` extra; with it
(``-m train``), one ``--quick`` run writes datasets, checkpoints that ``exactmem import``
reads, and the results tables, deterministically."""

from __future__ import annotations

import csv
import sys

import pytest

from exactmem.commands.main import main
from exactmem.core.errors import InputError


def test_without_torch_train_exits_2_naming_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    code = main(["train", "--experiment", "dana", "--quick", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert "PyTorch" in err and "exactmem[train]" in err
    assert not (tmp_path / "o").exists()


def test_train_refuses_an_unknown_experiment_and_an_out_that_is_a_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--experiment", "nope", "--out", str(tmp_path)])
    assert e.value.code == 2
    (tmp_path / "f").write_text("x")
    assert main(["train", "--experiment", "dana", "--out", str(tmp_path / "f")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_the_experiments_module_refuses_an_unknown_name(tmp_path):
    from exactmem.train.experiments import run_experiment

    with pytest.raises(InputError, match="unknown"):
        run_experiment("nope", tmp_path)


@pytest.mark.train
def test_a_quick_run_writes_certified_checkpoints_and_is_deterministic(tmp_path, capsys):
    pytest.importorskip("torch")
    from exactmem.api import import_model
    from exactmem.files.dataset_files import load_dataset

    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert main(["train", "--experiment", "dana", "--quick", "--out", str(out)]) == 0
        with open(out / "results.csv") as f:
            runs.append(list(csv.DictReader(f)))
    printed = capsys.readouterr().out
    assert "certified to memorize" in printed
    rows = runs[0]
    assert len(rows) == 2 and {r["config"] for r in rows} == {
        "d=8 heads=1 head_dim=2",
        "d=8 heads=2 head_dim=2",
    }
    for a, b in zip(*runs, strict=True):  # same seed: same weights, same verdicts
        assert a["checkpoint"] == b["checkpoint"]
        assert (tmp_path / "a" / a["checkpoint"]).read_bytes() == (
            tmp_path / "b" / b["checkpoint"]
        ).read_bytes()
        assert (a["certified"], a["smallest_margin"]) == (b["certified"], b["smallest_margin"])
    (data,) = (tmp_path / "a" / "datasets").iterdir()
    ds = load_dataset(data)
    for r in rows:
        model = import_model(tmp_path / "a" / r["checkpoint"], "dana25")
        assert model.input_dim == len(ds.vocab)
        if r["certified"] == "True":  # certified: every example, with a positive margin
            assert int(r["certified_examples"]) == ds.size and float(r["smallest_margin"]) > 0
    with open(tmp_path / "a" / "constructed.csv") as f:
        (side,) = list(csv.DictReader(f))
    assert int(side["constructed_parameters"]) > 0 and side["construction"] == "dana25"


@pytest.mark.train
def test_a_quick_madden_run_records_the_entropy_gap_and_the_construction(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "m"
    assert main(["train", "--experiment", "madden", "--quick", "--quiet", "--out", str(out)]) == 0
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and all(float(r["entropy_gap"]) > -1e-6 for r in rows)
    with open(out / "constructed.csv") as f:
        side = list(csv.DictReader(f))
    assert [r["construction"] for r in side] == ["madden24", "madden24"]
    assert all(int(r["constructed_parameters"]) > 0 for r in side)
