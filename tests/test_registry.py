"""Plugins (issue 28.2): constructions registered in the ``exactmem.constructions``
entry-point group are seen by build, verify, claim files, constructions and selftest; a plugin
that fails to import or to register is named in a warning and breaks nothing; a name clash is
refused, so a plugin can never replace a built-in's checklist."""

from __future__ import annotations

import json
import sys
import types
from importlib.metadata import EntryPoint

import pytest
from gmpy2 import mpq

import exactmem
from exactmem.checks import registry
from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Checklist, Construction
from exactmem.commands.main import main
from exactmem.core.model import MLP
from exactmem.datasets.dataset import Dataset, random_points
from exactmem.files.dataset_files import save_dataset


def _builder(dataset, options, progress):
    """The plugin's builder: the vys memorizer, as a third party might reuse it."""
    return exactmem.build(dataset, "vys", **options)


def _run(evidence):
    model = evidence.model
    one = len(model.sublayers) == 1 and isinstance(model.sublayers[0], MLP)
    return [Check("mine.one_mlp", one, "one MLP" if one else "not one MLP")]


MINE = Construction(
    "mine",
    "Someone 2026, Lemma 1",
    "one MLP that memorizes points",
    checklist=Checklist(
        "mine",
        ("points",),
        "one MLP",
        run=_run,
        bounds={"depth": "10*N", "dense_parameters": "1000*N*d"},
    ),
    builder="exactmem_fake_plugin:build",
    options={},
    example=lambda: random_points(6, 2, 3, 0),
)


@pytest.fixture
def plugins(monkeypatch):
    """Install fake entry points beside the real ones: ``mine`` (good), ``broken`` (fails to
    import), ``notone`` (not a Construction) and a second ``vys`` (a clash)."""
    module = types.ModuleType("exactmem_fake_plugin")
    module.build = _builder  # type: ignore[attr-defined]
    module.construction = MINE  # type: ignore[attr-defined]
    module.wrong = 42  # type: ignore[attr-defined]
    module.impostor = Construction("vys", "nobody", "looser", checklist=None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    real = registry.entry_points

    def entry_points(group):
        return [
            *real(group=group),
            EntryPoint("mine", "exactmem_fake_plugin:construction", group),
            EntryPoint("broken", "exactmem_no_such_module:construction", group),
            EntryPoint("notone", "exactmem_fake_plugin:wrong", group),
            EntryPoint("vys", "exactmem_fake_plugin:impostor", group),
        ]

    monkeypatch.setattr(registry, "entry_points", entry_points)
    registry.constructions.cache_clear()
    yield
    registry.constructions.cache_clear()


def test_broken_plugins_are_named_and_skipped_and_a_clash_is_refused(plugins):
    with pytest.warns(registry.PluginWarning) as caught:
        names = tuple(registry.constructions())  # lists them all: imports every plugin
    messages = " | ".join(str(w.message) for w in caught)
    assert "'broken'" in messages and "ModuleNotFoundError" in messages
    assert "'notone'" in messages and "not an exactmem Construction" in messages
    assert "'vys'" in messages and "is a built-in construction" in messages
    assert names[: len(registry.BUILTIN)] == registry.BUILTIN
    assert "mine" in names and "broken" not in names and "notone" not in names
    assert registry.get("vys").paper.startswith("Vardi")  # the built-in kept its place


def test_a_plugin_is_listed_built_verified_and_claimed(plugins, tmp_path, capsys):
    with pytest.warns(registry.PluginWarning):
        registry.constructions()
    assert main(["constructions"]) == 0
    listed = capsys.readouterr().out
    assert "mine" in listed and "Someone 2026, Lemma 1" in listed
    assert main(["constructions", "mine", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)["constructions"][0]
    assert described["checklist"]["bounds"] == {"depth": "10*N", "dense_parameters": "1000*N*d"}
    assert main(["bounds", "--N", "10", "--n", "4", "--d", "3", "--json"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)["bounds"]}
    row = rows["mine-declared-dense_parameters"]
    assert row["work"] == "Someone 2026, Lemma 1" and row["value"].startswith("30000")

    ds = Dataset("points", (1, 2, 1), 2, points=((mpq(0),), (mpq(3),), (mpq(7),)))
    save_dataset(ds, tmp_path / "d.json")
    model = tmp_path / "m.json"
    assert (
        main(
            ["build", "--construction", "mine", "--data", str(tmp_path / "d.json")]
            + ["--out", str(model), "--quiet"]
        )
        == 0
    )
    out = tmp_path / "c.json"
    code = main(
        ["verify", str(model), "--data", str(tmp_path / "d.json"), "--quiet"]
        + ["--construction", "mine", "--certificate", str(out)]
    )
    cert = json.loads(out.read_text())["certificate"]
    assert code == 0 and cert["verdict"] == "verified"
    judged = {c["name"] for c in cert["checks"]}
    assert {"mine.one_mlp", "mine.bounds.depth", "mine.bounds.dense_parameters"} <= judged

    capsys.readouterr()
    claims = tmp_path / "proofs"
    claims.mkdir()
    (claims / "mine.toml").write_text(
        'paper = "Someone 2026"\nstatement = "one MLP memorizes N points"\n'
        'construction = "mine"\nexpect = "verified"\n'
        '[bounds]\nwidth = "12"\ndepth = "10*N"\n'
        '[[instance]]\ngenerator = "random_points"\nN = 8\nd = 2\nC = 3\n'
    )
    assert main(["check", "--proofs", str(claims), "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    names = {c["name"] for c in report["instances"][0]["checks"]}
    assert {"mine.one_mlp", "mine.bounds.depth", "bound.width", "bound.depth"} <= names


def test_selftest_runs_a_plugin_and_names_what_was_not_seen(plugins, capsys):
    """``mine`` declares one bound (with the generic breaker) and no CheckSpec for its own
    ``mine.one_mlp``: selftest sees the bound fail; the honest example verifies."""
    with pytest.warns(registry.PluginWarning):
        registry.constructions()
    from exactmem.checks.checklist import CheckSpec
    from exactmem.checks.mechanisms.resources import bound_specs

    specs = bound_specs("mine", MINE.paper, {"depth": "10*N"}, "its own claim")
    no_breaker = CheckSpec("mine.one_mlp", MINE.paper, "Lemma 1", "one MLP")
    assert MINE.checklist is not None
    from dataclasses import replace

    checklist = replace(MINE.checklist, checks=(*specs, no_breaker))
    registry.constructions()["mine"] = replace(registry.get("mine"), checklist=checklist)
    assert main(["selftest", "mine", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "identity sub-layers deepen" in out and "yes" in out
    assert "NOT SEEN: mine mine.one_mlp × (none): no breaker" in out
    assert main(["selftest", "mine", "--quiet", "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["breaker"] == "(honest example)" and rows[0]["verified"]
    assert [r["seen_to_fail"] for r in rows[1:]] == [True, False]


def test_unknown_names_exit_2(capsys):
    assert main(["constructions", "nope"]) == 2
    assert main(["selftest", "nope"]) == 2
    assert "unknown construction 'nope'" in capsys.readouterr().err
