"""The tables and the picture of docs/constructed-and-trained.md, from the committed CSV files
(no PyTorch needed). ``python tests/test_train_report.py`` redraws the committed picture."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactmem.core.errors import InputError
from exactmem.train.report import plot_results, read_rows, side_by_side_table, trained_table

ROOT = Path(__file__).resolve().parent.parent
TRAINED = ROOT / "docs" / "examples" / "trained"
IMAGE = ROOT / "docs" / "images" / "constructed-and-trained.png"

pytest.importorskip("matplotlib")
from tests.test_plot import check_png  # noqa: E402


def test_the_doc_picture_regenerates_from_the_committed_tables(tmp_path):
    said = plot_results(TRAINED, tmp_path / "p.png")
    assert "experiments" in said and "datasets paired" in said
    assert IMAGE.exists(), "docs/images/constructed-and-trained.png is not committed"
    assert check_png(tmp_path / "p.png") == check_png(IMAGE)


def test_every_committed_experiment_has_both_tables():
    names = sorted(p.name for p in TRAINED.iterdir() if p.is_dir())
    assert {"dana", "ks25", "mahdavi"} <= set(names)
    table = side_by_side_table(TRAINED)
    for name in names:
        rows = read_rows(TRAINED / name / "results.csv")
        assert rows and all(r["experiment"] == name for r in rows)
        # a model is certified only when every one of its examples is
        for r in rows:
            if r["certified"] == "True":
                assert r["certified_examples"] == r["examples"] and r["smallest_margin"]
        assert trained_table(TRAINED, name).count("\n") == len(rows) + 1
        assert f"| {name} |" in table


def test_the_page_shows_the_tables_the_committed_files_give():
    page = (ROOT / "docs" / "constructed-and-trained.md").read_text()
    assert side_by_side_table(TRAINED) in page
    for folder in TRAINED.iterdir():
        if folder.is_dir():
            assert trained_table(TRAINED, folder.name) in page, folder.name


def test_a_missing_table_is_refused_naming_it(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        read_rows(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="cannot read"):
        trained_table(tmp_path, "dana")


def test_an_unknown_picture_format_is_refused(tmp_path):
    with pytest.raises(InputError, match="unknown picture format"):
        plot_results(TRAINED, tmp_path / "p.jpg")


if __name__ == "__main__":  # redraw the committed picture
    print(plot_results(TRAINED, IMAGE))
