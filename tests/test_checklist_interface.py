"""The checklist interface (issue 28.1–28.3): the trusted core dispatches through the registry
only, a checklist can be given directly, and declared and user bounds are judged as checks."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from gmpy2 import mpq

import exactmem
from exactmem.checks import registry
from exactmem.checks.certificate import Check
from exactmem.checks.certify import certify
from exactmem.checks.checklist import BOUND_METRICS, Checklist, CheckSpec, Construction
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Affine
from exactmem.datasets.dataset import Dataset

ROOT = Path(exactmem.__file__).resolve().parent
NAME_FREE = ("checks/certify.py", "commands/check.py", "claims/proofs.py")


@pytest.mark.parametrize("module", NAME_FREE)
def test_the_core_names_no_construction(module):
    """certify, check and the claims runner contain no registered construction's name: adding
    a construction touches none of them. A name counts as a whole word (``ks24`` in a string
    or an identifier of its own, not inside another identifier such as a module name)."""
    text = (ROOT / module).read_text(encoding="utf-8")
    found = [
        name
        for name in registry.names()
        if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
    ]
    assert not found, f"{module} names {found}"


def test_every_builtin_is_registered_with_a_wired_checklist():
    for name in registry.BUILTIN:
        c = registry.get(name)
        assert c.checklist is not None and c.checklist.run is not None, name
        assert c.checklist.summary and c.summary and c.paper, name
        assert c.builder and c.builder_function(), name
        assert c.options, name


def test_declared_bounds_parse_in_the_claim_grammar():
    from exactmem.checks.bound_checks import FIGURES
    from exactmem.checks.checklist import Unset
    from exactmem.core.formula import check_formula

    for c in registry.constructions().values():
        assert c.checklist is not None
        # the figures, the construction's options (as verify --set states them) and its defines
        names = [*FIGURES, *c.options]
        for key, define in c.checklist.bound_defines.items():
            if isinstance(define, Unset):
                define = (define.given, define.otherwise)
            for text in define if isinstance(define, tuple) else (define,):
                check_formula(text, names, f"{c.name}.bound_defines.{key}")
            names.append(key)
        for metric, text in c.checklist.bounds.items():
            assert metric in BOUND_METRICS
            check_formula(text, names, f"{c.name}.bounds.{metric}")


def _points() -> Dataset:
    return Dataset("points", (1, 2, 1, 3), 3, points=((mpq(0),), (mpq(2),), (mpq(5),), (mpq(9),)))


def _widened(model):
    """The honest memorizer with 40 dead hidden units appended to its first layer (outputs
    unchanged; width 40 more)."""
    mlp = model.sublayers[0]
    first, second = mlp.layers[0], mlp.layers[1]
    extra = 40
    first = replace(
        first,
        rows=first.rows + tuple(((0, 1),) for _ in range(extra)),
        bias=first.bias + (0,) * extra,
        names=first.names + tuple(f"dead{i}" for i in range(extra)) if first.names else (),
    )
    second = replace(second, in_dim=second.in_dim + extra)
    layers = (first, second, *mlp.layers[2:])
    return replace(model, sublayers=(replace(mlp, layers=layers),))


def test_a_model_wider_than_the_declared_bound_is_refuted_by_the_bounds_check():
    ds = _points()
    honest = exactmem.build(ds, "vys")
    cert = certify(honest, ds, construction="vys")
    assert cert.verdict == "verified", cert
    assert {c.name: c.passed for c in cert.checks}["vys.bounds.width"]
    wide = _widened(honest)
    assert exactmem.run(wide, ds) == exactmem.run(honest, ds)  # the labels still come out
    cert = certify(wide, ds, construction="vys")
    assert cert.verdict == "refuted"
    assert [c.name for c in cert.failed] == ["vys.bounds.width"]
    assert "width" in cert.failed[0].detail and "> 11" in cert.failed[0].detail
    assert certify(wide, ds).verdict == "verified"  # without --construction: only reported


def test_user_bounds_from_python_are_judged_and_recorded():
    ds = _points()
    model = exactmem.build(ds, "vys")
    width = model.sublayers[0].layers[0].out_dim
    cert = certify(model, ds, bounds={"width": f"N + {width}", "depth": "1", "margin": "1/2"})
    states = {c.name: c.status for c in cert.checks}
    assert states["bound.width"] == "ok" and states["bound.depth"] == "FAIL"
    assert states["bound.margin"] in ("ok", "FAIL")
    assert cert.subject["criteria"]["bounds"]["depth"] == "1"
    with pytest.raises(InputError, match="unknown metric"):
        certify(model, ds, bounds={"speed": "1"})
    with pytest.raises(InputError, match="unknown names"):
        certify(model, ds, bounds={"width": "N + x"})


def test_a_margin_bound_fails_when_the_margin_is_smaller():
    ds = _points()
    model = exactmem.build(ds, "vys")
    cert = certify(model, ds)
    margin = mpq(cert.activation["min_nonzero_preactivation"])
    ok = certify(model, ds, bounds={"margin": str(margin)})
    assert ok.verdict == "verified"
    tight = certify(model, ds, bounds={"margin": f"{margin} + 1/1000000"})
    assert [c.name for c in tight.failed] == ["bound.margin"]


def test_a_checklist_object_is_demanded_directly_and_its_checks_carry_the_paper():
    ds = _points()
    model = exactmem.build(ds, "vys")
    spec = CheckSpec("mine.depth", "Someone 2026", "Lemma 1", "two affine layers")

    def run(evidence) -> list[Check]:
        depth = evidence.resources.depth
        return [Check("mine.depth", depth == 2, f"depth {depth}")]

    mine = Checklist("mine", ("points",), "my lemma", checks=(spec,), run=run)
    cert = certify(model, ds, construction=mine)
    check = {c.name: c for c in cert.checks}["mine.depth"]
    assert cert.subject["criteria"]["checklist"] == "my lemma"
    assert cert.subject["construction"] == "mine"
    assert check.as_dict()["paper"] == "Someone 2026"
    assert check.as_dict()["result"] == "Lemma 1"
    assert check.as_dict()["mechanism"] == "two affine layers"
    construction = Construction("mine", "Someone 2026", "mine", checklist=mine)
    assert certify(model, ds, construction=construction).checks == cert.checks


def test_criteria_refuse_unknown_names_and_checklists_without_run():
    ds = _points()
    model = exactmem.build(ds, "vys")
    with pytest.raises(InputError, match="unknown construction 'nope'"):
        certify(model, ds, construction="nope")
    with pytest.raises(InputError, match="certifies task"):
        certify(model, ds, construction="ks24")
    with pytest.raises(InputError, match="no checklist"):
        certify(model, ds, construction=Construction("x", "p", "s"))


def test_a_registered_plugin_is_demanded_by_name_and_built(monkeypatch):
    """A plugin registered beside the built-ins: build and certify see it by name."""
    ds = _points()

    def builder(dataset, options, progress):
        return exactmem.build(dataset, "vys", **options)

    import sys
    import types

    module = types.ModuleType("exactmem_test_plugin_builder")
    module.build = builder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)

    def run(evidence):
        mlp = evidence.model.sublayers[0]
        return [Check("mine.one_mlp", isinstance(mlp, MLP), "one MLP")]

    mine = Construction(
        "mine",
        "Someone 2026",
        "a memorizer",
        checklist=Checklist("mine", ("points",), "one MLP", run=run, bounds={"depth": "100*N"}),
        builder=f"{module.__name__}:build",
    )
    monkeypatch.setitem(registry.constructions(), "mine", mine)
    model = exactmem.build(ds, "mine")
    cert = certify(model, ds, construction="mine")
    assert cert.verdict == "verified"
    assert [c.name for c in cert.checks if c.name.startswith("mine.")] == [
        "mine.one_mlp",
        "mine.bounds.depth",
    ]
    assert isinstance(model.sublayers[0].layers[0], Affine)
