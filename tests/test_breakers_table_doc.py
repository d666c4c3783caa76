"""docs/trust.md's breakers' table is the one benchmarks/breakers_table.py generates from the
registry: every declared check with its result and breakers (it had lost a row)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_breakers_table_of_the_docs_is_the_generated_one():
    spec = importlib.util.spec_from_file_location(
        "breakers_table", ROOT / "benchmarks" / "breakers_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "docs" / "trust.md").read_text(encoding="utf-8")
    start = text.index("#### dana25")
    end = text.index("### Planted bugs")
    assert text[start:end].strip() == module.table().strip()
