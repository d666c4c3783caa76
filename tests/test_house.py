"""The house (docs/architecture.md, issue 28 point 6): packages named for what they hold and for
their side of the trust boundary, no import circle among the modules, no module past ~800
lines, the package list shipped complete, and the old module paths of the release before still
importing for one release with a DeprecationWarning that names the new path."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import grimp
import pytest

import exactmem
from exactmem import _moved

ROOT = Path(exactmem.__file__).resolve().parent
PYPROJECT = tomllib.loads((ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))

SIDES = {
    "core": "(trusted)",
    "runtime": "(trusted)",
    "datasets": "(trusted)",
    "files": "(trusted)",
    "checkpoints": "(trusted)",
    "evaluate": "(trusted)",
    "checks": "(trusted)",
    "constructions": "(untrusted)",
}


def _strongly_connected(adjacency: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (iterative: the graph has ~200 nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(adjacency):
        if root in index:
            continue
        work = [(root, iter(sorted(adjacency[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adjacency[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(
        "exactmem",
        include_external_packages=False,
        cache_dir=None,
        exclude_type_checking_imports=True,
    )


def test_no_module_imports_itself_back(graph):
    """Every import counts, a function's lazy import too: a circle means two modules hold one
    idea, or a lower one reaches up."""
    adjacency = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _strongly_connected(adjacency) == []


def test_the_circle_finder_finds_a_circle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_lower_package_imports_the_command_line(graph):
    below = [m for m in graph.modules if not m.startswith(("exactmem.commands", "exactmem.__"))]
    for module in below:
        for imported in graph.find_modules_directly_imported_by(module):
            assert not imported.startswith("exactmem.commands"), f"{module} imports {imported}"


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_holds_one_idea(path):
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= 800, f"{path.relative_to(ROOT)}: {lines} lines (split it)"


def test_the_package_list_ships_every_package():
    found = {
        ".".join(("exactmem", *p.parent.relative_to(ROOT).parts)) for p in ROOT.rglob("__init__.py")
    }
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == found | {"exactmem.claims.shipped"}


@pytest.mark.parametrize("package", sorted(SIDES))
def test_each_package_says_its_side_of_the_trust_boundary(package):
    doc = importlib.import_module(f"exactmem.{package}").__doc__ or ""
    assert SIDES[package] in doc.split("\n\n")[0], doc[:200]


def test_the_layers_name_every_package():
    """The import-linter layers (CI runs them) list every package of the house."""
    contract = next(
        c
        for c in PYPROJECT["tool"]["importlinter"]["contracts"]
        if c["name"] == "the packages form layers"
    )
    named = {n.strip() for layer in contract["layers"] for n in layer.split("|")}
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in ROOT.glob("*.py")} - {"__init__", "_moved"}
    assert packages | modules == named


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_an_old_path_imports_with_a_warning_naming_the_new_one(old):
    """Run in a fresh interpreter: importing the old path warns once (an old submodule's
    package warns too), names every new home, and reads each public name of the new
    modules."""
    targets = [f"exactmem.{t}" for t in _moved.MOVED[old].split()]
    code = f"""
import importlib, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    old = importlib.import_module("exactmem.{old}")
messages = [
    str(w.message) for w in caught
    if w.category is DeprecationWarning and str(w.message).startswith("exactmem.{old} has moved")
]
assert len(messages) == 1, [str(w.message) for w in caught]
for target in {targets!r}:
    assert target in messages[0], messages
    new = importlib.import_module(target)
    for name in getattr(new, "__all__", []):
        assert getattr(old, name) is getattr(new, name), name
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_an_unknown_old_path_is_not_invented():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("exactmem.nonesuch")


def test_the_docs_show_no_old_path():
    """The docs import from the new homes only (the old paths go in the next release)."""
    old = "|".join(re.escape(k) for k in _moved.MOVED)
    pattern = re.compile(rf"(?:from|import) exactmem\.(?:{old})\b(?!\.)")
    docs = ROOT.parent / "docs"
    for page in sorted(docs.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        text = text.split("## The old module paths")[0]  # the section that shows one warn
        hits = [m.group(0) for m in pattern.finditer(text)]
        assert not hits, f"{page.relative_to(docs)}: {hits}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module("exactmem.checks.certify")
