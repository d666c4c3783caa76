"""The planted-bug tables (benchmarks/planted/*.toml) stay appliable, and the runner replaces
exactly one line at its indentation (issue 26, point 9)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("planted_bugs", ROOT / "benchmarks/planted_bugs.py")
planted = importlib.util.module_from_spec(spec)
spec.loader.exec_module(planted)


def test_every_bug_finds_its_line_once():
    bugs = planted.load(None)
    assert bugs
    for bug in bugs:
        text = (ROOT / bug["file"]).read_text().splitlines()
        hits = [line for line in text if line.strip() == bug["find"].strip()]
        assert len(hits) == 1, bug["source"]
        assert bug["expect"] in ("refuted", "verified"), bug["source"]
        assert bug["expect"] == "refuted" or bug.get("explain"), bug["source"]


def test_at_least_eight_bugs_per_construction():
    counts: dict[str, int] = {}
    for bug in planted.load(None):
        counts[bug["construction"]] = counts.get(bug["construction"], 0) + 1
    for name in (
        "vys",
        "ks25-next-token",
        "ks25-seq2seq",
        "ks25-token-ids",
        "ks25-deep-sets",
        "ks25-bit-budget",
    ):
        assert counts.get(name, 0) >= 8, name


def test_apply_keeps_the_indentation_and_refuses_ambiguity(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    x = 1\n    return x\n")
    planted.apply({"file": "m.py", "find": "x = 1", "replace": "x = 2", "source": "t"}, tmp_path)
    assert (tmp_path / "m.py").read_text() == "def f():\n    x = 2\n    return x\n"
    (tmp_path / "m.py").write_text("x = 1\nx = 1\n")
    with pytest.raises(ValueError, match="2 lines match"):
        planted.apply({"file": "m.py", "find": "x = 1", "replace": "x", "source": "t"}, tmp_path)
