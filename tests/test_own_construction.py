"""The plugin construction of docs/own-construction.md (docs/examples/plugin: one hidden layer of
N ReLU units interpolating N points on the line), registered in-process as its entry point
registers it when installed: its honest example verifies, each breaker refutes the check it
names, a construction with the knots elsewhere (Zhang et al.'s midpoints) is refuted by the
pieces check alone, its claim files run as `check --proofs` runs them. The install into a fresh
virtual environment, with the page's console blocks, is the slow test at the end."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from doctest import ELLIPSIS, NORMALIZE_WHITESPACE, OutputChecker
from pathlib import Path

import pytest
from gmpy2 import mpq

import exactmem
from exactmem.checks import registry
from exactmem.claims.selftest import run_breaker, selftest
from exactmem.claims.testing import check_claims

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "docs" / "examples" / "plugin"


@pytest.fixture
def plugin(monkeypatch):
    """The plugin's Construction, registered as the installed entry point would register it."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    from relu_interpolant.plugin import construction

    found = replace(construction, package="exactmem-relu-interpolant", version="0.1.0")
    monkeypatch.setitem(registry.constructions(), construction.name, found)
    return found


def test_honest_example_verifies_and_every_breaker_is_seen(plugin):
    rows = selftest(plugin)
    assert {r.check for r in rows} >= {"interpolant.knots", "interpolant.pieces"}
    assert all(r.ok for r in rows), [r for r in rows if not r.ok]
    result, cert = run_breaker(plugin, plugin.checklist.checks[0].breakers[0])
    assert result.seen_to_fail and "interpolant.knots" in result.failed
    assert "interpolant.pieces" not in result.failed  # the knot sits on a point: pieces hold


def test_knots_at_the_midpoints_fail_only_the_pieces(plugin):
    """Zhang et al.'s own choice of knots (between the points) keeps the triangular pattern —
    and so interpolates, with the output weights solved for it — but is not the
    piecewise-linear interpolant: only interpolant.pieces fails."""
    from relu_interpolant.builder import _affine

    ds = plugin.example()
    pairs = sorted((mpq(p[0]), y) for p, y in zip(ds.points, ds.labels, strict=True))
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    knots = [xs[0] - 1] + [(a + b) / 2 for a, b in zip(xs, xs[1:], strict=False)]
    # the triangular system A c = y, A[i][k] = max(x_i − b_k, 0), solved by substitution
    c: list = []
    for i, x in enumerate(xs):
        c.append((ys[i] - sum(c[k] * (x - knots[k]) for k in range(i))) / (x - knots[i]))
    hidden = _affine([mpq(1)] * len(knots), [-b for b in knots], in_dim=1)
    output = _affine(c, [mpq(0)], in_dim=len(knots))
    model = exactmem.Transformer(1, (exactmem.core.model.MLP((hidden, output), residual=False),))
    cert = exactmem.certify(model, ds, construction="relu-interpolant")
    assert [ch.name for ch in cert.failed] == ["interpolant.pieces"]
    assert "strictly between" in cert.failed[0].detail


def test_structure_and_builder_input(plugin, tmp_path):
    ds = plugin.example()
    model = exactmem.build(ds, "relu-interpolant")
    two = replace(model, sublayers=model.sublayers * 2)
    cert = exactmem.certify(two, ds, construction="relu-interpolant")
    assert "relu-interpolant.structure" in [c.name for c in cert.failed]
    with pytest.raises(exactmem.InputError, match="points on the line"):
        exactmem.build(exactmem.Dataset.from_points([[1, 2], [3, 4]], [1, 2]), "relu-interpolant")
    with pytest.raises(exactmem.InputError, match="distinct points"):
        exactmem.build(exactmem.Dataset.from_points([[1], [1]], [2, 2]), "relu-interpolant")


def test_claim_files(plugin):
    results = check_claims(PLUGIN / "proofs")
    assert [(r.claim, r.verdict, r.ok) for r in results] == [
        ("relu_interpolant", "verified", True),
        ("relu_interpolant", "verified", True),
        ("relu_interpolant", "verified", True),
        ("relu_interpolant_width", "refuted", True),
    ]


# --------------------------------------------------------------------------- installed


def console_commands(page: Path) -> list[tuple[str, str]]:
    """(command, expected output) of every ``$ `` line of the page's ```console blocks."""
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", page.read_text(), re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
    return [(cmd, "\n".join(out).strip()) for cmd, out in steps]


@pytest.mark.slow
def test_install_in_a_fresh_venv_runs_the_page(tmp_path):
    """docs/own-construction.md's console blocks, in order, in a fresh virtual environment with
    exactmem and the plugin installed from their folders (their dependencies from this
    environment: the venv sees its site-packages, so nothing is downloaded but the build
    backend); each output is compared as a doctest compares (``...`` matches anything)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps"]
    subprocess.run([*pip, str(ROOT)], check=True)
    plugin = shutil.copytree(PLUGIN, tmp_path / "plugin")  # its build files stay out of docs/
    subprocess.run([*pip, str(plugin)], check=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / "docs").symlink_to(ROOT / "docs")  # the page's paths are the repository's
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    checker = OutputChecker()
    steps = console_commands(ROOT / "docs" / "own-construction.md")
    ran = 0
    for command, expected in steps:
        if command.startswith(("python -m venv", "source ", ". ", "pip install")):
            continue  # done above, without downloading the dependencies again
        done = subprocess.run(
            shlex.split(command), cwd=work, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, f"$ {command}: exit {done.returncode}\n{done.stderr[-2000:]}"
        got = done.stdout.strip()
        flags = ELLIPSIS | NORMALIZE_WHITESPACE
        assert checker.check_output(expected + "\n", got + "\n", flags), (
            f"$ {command}\nexpected:\n{expected}\ngot:\n{got}\nstderr:\n{done.stderr[-2000:]}"
        )
        ran += 1
    assert ran >= 5
