"""The checked lanes produce the output (issue 26, point 2 and file C): the dataflow cut over
the weights (:mod:`exactmem.dataflow`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from exactmem.api import build, save_model
from exactmem.certify import certify
from exactmem.data import random_points, save_dataset
from exactmem.dataflow import cut_check, graph, memorizer_cut
from exactmem.mechanisms.vys import parallel_lookup, zero_bypass
from exactmem.model import resources


@pytest.fixture(scope="module")
def honest():
    ds = random_points(12, 2, 3, seed=1)
    return ds, build(ds, "vys")


def test_file_c_is_refuted_on_the_command_line(honest, tmp_path):
    """Issue 26, file C: 3N lookup units beside the memorizer, the output rewired to their
    sum. The labels come out and every Lemma C.1 stage still checks; only the dataflow fails,
    and `verify --construction vys` exits 1. The honest model exits 0."""
    ds, model = honest
    broken = parallel_lookup(model, ds)
    assert resources(broken).width > resources(model).width
    cert = certify(broken, ds, construction="vys")
    assert [c.name for c in cert.failed] == ["vys.dataflow"]
    assert "bypass" in cert.failed[0].detail
    save_dataset(ds, tmp_path / "ds.json")
    for m, code in ((model, 0), (broken, 1)):
        path = tmp_path / f"model{code}.json"
        save_model(m, path)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "exactmem",
                "verify",
                str(path),
                "--data",
                str(tmp_path / "ds.json"),
                "--construction",
                "vys",
                "--quiet",
            ],
            capture_output=True,
            text=True,
        )
        assert run.returncode == code, run.stdout + run.stderr


@pytest.mark.parametrize("gadget", ["keyed", "peel", "tent"])
def test_every_gadget_reads_its_label_through_the_checked_lanes(gadget):
    ds = random_points(40, 3, 200, seed=1)
    model = build(ds, "vys", gadget=gadget)
    g = graph(model)
    cut, missing = memorizer_cut(g, 0, model.sublayers[0])
    check = cut_check("vys.dataflow", model, cut, what="the read-out", missing=missing, g=g)
    assert check.passed, check
    assert check.figures["cut_units_used"] == len(cut) > 0
    # without the match units the labels alone do not cut the input off (the matches read t)
    labels_only = {u for u in cut if u not in _matches(g, model.sublayers[0])}
    assert not cut_check("x", model, labels_only, what="labels", g=g).passed


def _matches(g, mlp):
    from exactmem.dataflow import probe_unit

    return {probe_unit(g, 0, mlp, p.name) for p in mlp.probes if p.name.startswith("match[")}


def test_a_zero_valued_bypass_is_refuted_and_a_dead_memorizer_too(honest):
    """A path that is 0 on every data point still makes the output depend on the input other
    than through the read-out: the cut is a property of the weights, not of the data."""
    ds, model = honest
    bypass = zero_bypass(model, 0, [0, 1], 1001, [0])
    assert certify(bypass, ds).verdict == "verified"  # the values did not change
    g = graph(bypass)
    cut, _ = memorizer_cut(g, 0, bypass.sublayers[0])
    assert not cut_check("c", bypass, cut, what="the read-out", g=g).passed
    g = graph(model)
    assert not cut_check("c", model, set(), what="nothing", g=g).passed  # leaks
