"""Review r2's findings, each seen to fail on the code before the fix: plugins never run for a
built-in verdict nor take a built-in's name; a model file's layout numbers cannot exhaust memory;
recheck caps the certificate's max_precision and compares model_says and the evaluator; a
certificate's "1/0" is refused; a GELU model is refuted by vys.structure."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from exactmem.checks import registry
from exactmem.commands.main import main
from exactmem.files.model_files import load_model, save_certificate, save_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def vys(tmp_path_factory):
    """A small points dataset, its honest vys model and a certificate of it."""
    tmp = tmp_path_factory.mktemp("r2")
    data, model, cert = tmp / "p.json", tmp / "m.json", tmp / "c.json"
    gen = ["generate", "points", "--N", "12", "--d", "3", "--C", "5", "--seed", "7"]
    assert main([*gen, "--out", str(data)]) == 0
    build = ["build", "--construction", "vys", "--data", str(data), "--quiet"]
    assert main([*build, "--out", str(model)]) == 0
    verify = ["verify", str(model), "--data", str(data), "--quiet"]
    assert main([*verify, "--construction", "vys", "--certificate", str(cert)]) == 0
    return tmp, data, model, cert


def _with(model: Path, out: Path, **meta) -> Path:
    """``model`` with its MLP's memorizer layout fields replaced by ``meta``."""
    m, _ = load_model(str(model))
    sub = m.sublayers[0]
    save_model(
        dataclasses.replace(m, sublayers=(dataclasses.replace(sub, meta={**sub.meta, **meta}),)),
        out,
    )
    return out


def _stripped(model: Path, out: Path) -> Path:
    m, _ = load_model(str(model))
    subs = tuple(dataclasses.replace(x, meta={}) for x in m.sublayers)
    save_model(dataclasses.replace(m, sublayers=subs, meta={}), out)
    return out


def _site(tmp: Path, dist: str, module: str, code: str, entry: str) -> Path:
    """A plugin installed as pip would: its module and a dist-info with its entry point."""
    site = tmp / f"site-{dist}-{module}"
    site.mkdir(exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{dist}-99.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 99.0\n")
    (info / "entry_points.txt").write_text(f"[exactmem.constructions]\n{entry}\n")
    return site


def _verify_with(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]))
    return subprocess.run(
        [sys.executable, "-m", "exactmem", "verify", *args, "--quiet"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


# ---------------------------------------------------------------- 1. plugins and built-ins

PATCHER = """
    import dataclasses, pathlib
    import exactmem.plugins.vys as vys
    from exactmem.checks.checklist import Construction
    pathlib.Path(__file__).with_name("imported").write_text("yes")
    _orig = vys.construction.checklist.run
    def _run(evidence):
        return [dataclasses.replace(c, passed=True, detail="ok") for c in _orig(evidence)]
    object.__setattr__(vys.construction.checklist, "run", _run)
    construction = Construction(name="evil", paper="-", summary="an innocent plugin")
"""

IMPOSTOR = """
    from exactmem.checks.checklist import Checklist, Construction
    from exactmem.checks.certificate import Check
    def run(evidence):
        return [Check("vys.dataflow", True, "trust me")]
    construction = Construction(
        name="vys", paper="Vardi, Yehudai & Shamir 2022, Theorem 3.1", summary="vys",
        checklist=Checklist(name="vys", tasks=("points",), summary="vys", run=run))
"""


def test_a_built_in_verdict_never_imports_a_plugin(vys, tmp_path):
    _, data, model, _ = vys
    site = _site(tmp_path, "evil-plugin", "evil_plugin", PATCHER, "evil = evil_plugin:construction")
    stripped = _stripped(model, tmp_path / "stripped.json")
    r = _verify_with(site, str(stripped), "--data", str(data), "--construction", "vys")
    assert r.returncode == 1, r.stdout + r.stderr  # was 0: the plugin passed every vys check
    assert not (site / "imported").exists()


def test_a_distribution_named_exactmem_cannot_replace_a_built_in(vys, tmp_path):
    _, data, model, _ = vys
    site = _site(tmp_path, "exactmem", "evil_vys", IMPOSTOR, "vys = evil_vys:construction")
    stripped = _stripped(model, tmp_path / "stripped.json")
    r = _verify_with(site, str(stripped), "--data", str(data), "--construction", "vys")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL memorizer.layout" in r.stdout  # the real vys checklist ran


def test_a_plugin_is_imported_only_when_its_name_is_demanded(tmp_path, monkeypatch):
    site = _site(tmp_path, "evil-plugin", "evil_plugin", PATCHER, "evil = evil_plugin:construction")
    site2 = _site(tmp_path, "exactmem", "evil_vys", IMPOSTOR, "vys = evil_vys:construction")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(site2))
    registry.cache_clear()
    try:
        real = registry.get("vys")
        assert "evil_plugin" not in sys.modules and "evil_vys" not in sys.modules
        assert real.package == "exactmem" and real.checklist.summary.startswith("Lemma C.1")
        with pytest.warns(registry.PluginWarning, match="'vys' is a built-in"):
            assert "evil" in registry.names()
        assert "evil_plugin" not in sys.modules  # names() imports nothing
        assert registry.get("evil").package == "evil-plugin"  # demanded: imported
        assert "evil_plugin" in sys.modules and "evil_vys" not in sys.modules
    finally:
        sys.modules.pop("evil_plugin", None)
        registry.cache_clear()
        import importlib

        import exactmem.plugins.vys

        importlib.reload(exactmem.plugins.vys)  # the patcher rewrote its checklist's run
        registry._builtin.cache_clear()


def test_the_certificate_names_the_checklist_provider(vys):
    _, _, _, cert = vys
    crit = json.loads(cert.read_text())["certificate"]["subject"]["criteria"]
    from exactmem import __version__

    assert crit["checklist_provider"] == f"exactmem {__version__}"


# ---------------------------------------------------------------- 2. layout numbers from meta


@pytest.mark.parametrize(
    "meta", [{"group_size": 10**15}, {"key_bits": 2**40}, {"label_bits": 2**40}]
)
def test_layout_numbers_from_the_file_refute_without_exhausting_memory(vys, tmp_path, meta):
    _, data, model, _ = vys
    bad = _with(model, tmp_path / "bad.json", **meta)
    args = ["verify", str(bad), "--data", str(data), "--quiet", "--construction", "vys"]
    assert main(args) == 1


def test_memory_error_is_bad_input_naming_a_limit(vys, monkeypatch, capsys):
    _, data, model, _ = vys
    import exactmem.commands.verify as verify

    def exhausted(args):
        raise MemoryError

    monkeypatch.setattr(verify, "run", exhausted)
    assert main(["verify", str(model), "--data", str(data), "--quiet"]) == 2
    assert "--max-value-bits" in capsys.readouterr().err


# ---------------------------------------------------------------- 3.-4. recheck


def _forged(cert: Path, out: Path, change) -> Path:
    content = json.loads(cert.read_text())["certificate"]
    change(content)
    save_certificate(content, out)
    return out


def test_recheck_caps_the_recorded_max_precision(vys, tmp_path):
    _, data, model, cert = vys

    def huge(c):
        c["subject"]["criteria"]["max_precision"] = 1 << 40

    forged = _forged(cert, tmp_path / "f.json", huge)
    args = ["recheck", str(forged), "--model", str(model), "--data", str(data), "--quiet"]
    assert main(args) == 2
    assert main([*args, "--max-precision", str(1 << 40)]) in (0, 1)  # allowed: it runs


def test_recheck_compares_model_says(vys, tmp_path, capsys):
    _, data, model, cert = vys

    def forge(c):
        c["subject"]["model_says"] = {"construction": "ks25-next-token"}

    forged = _forged(cert, tmp_path / "f.json", forge)
    args = ["recheck", str(forged), "--model", str(model), "--data", str(data), "--quiet"]
    assert main(args) == 1
    assert "subject.model_says" in capsys.readouterr().out


def test_recheck_runs_and_compares_the_recorded_evaluator(vys, tmp_path, monkeypatch, capsys):
    """recheck runs the evaluator the certificate names (so "reference" is re-derived by the
    reference evaluator) and reports one that differs from the one that ran."""
    _, data, model, cert = vys
    import exactmem.checks.certify as certify

    ran = []
    real = certify._evaluator_for

    def evaluator_for(name, model):
        ran.append(name)
        return real(name, model)

    monkeypatch.setattr(certify, "_evaluator_for", evaluator_for)

    def forge(c):
        c["subject"]["evaluator"] = "reference"

    forged = _forged(cert, tmp_path / "f.json", forge)
    args = ["recheck", str(forged), "--model", str(model), "--data", str(data), "--quiet"]
    assert main(args) == 0 and ran == ["reference"]
    monkeypatch.setattr(certify, "_evaluator_for", lambda name, model: "fast")  # another ran
    assert main(args) == 1
    assert "subject.evaluator" in capsys.readouterr().out

    def bogus(c):
        c["subject"]["evaluator"] = "bogus"

    forged = _forged(cert, tmp_path / "g.json", bogus)
    args[1] = str(forged)
    assert main(args) == 2


def test_show_and_recheck_mark_argv_as_recorded(vys, capsys):
    _, data, model, cert = vys
    assert main(["show", str(cert)]) == 0
    assert "command line (as recorded, not re-derived)" in capsys.readouterr().out
    assert main(["recheck", str(cert), "--model", str(model), "--data", str(data), "--quiet"]) == 0
    assert "as recorded, not re-derived" in capsys.readouterr().out


# ---------------------------------------------------------------- 5. smaller


def test_a_zero_denominator_is_no_rational(vys, tmp_path, capsys):
    _, _, _, cert = vys

    def zero(c):
        c["subject"]["criteria"]["tolerance"] = "1/0"

    assert main(["show", str(_forged(cert, tmp_path / "f.json", zero))]) == 2
    assert "tolerance" in capsys.readouterr().err


def test_a_gelu_model_is_refuted_by_vys_structure(vys, tmp_path, capsys):
    _, data, model, _ = vys
    m, _ = load_model(str(model))
    gelu = tmp_path / "gelu.json"
    subs = tuple(dataclasses.replace(s, activation="gelu") for s in m.sublayers)
    save_model(dataclasses.replace(m, sublayers=subs), gelu)
    args = ["verify", str(gelu), "--data", str(data), "--quiet", "--construction", "vys"]
    assert main(args) == 1  # was 4
    assert "FAIL vys.structure" in capsys.readouterr().out
