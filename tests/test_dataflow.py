"""The checked lanes produce the output (issue 26, point 2 and file C): the dataflow cut over
the weights (:mod:`exactmem.checks.dataflow`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from exactmem.api import build, save_model
from exactmem.checks.certify import certify
from exactmem.checks.dataflow import cut_check, graph, memorizer_cut
from exactmem.checks.mechanisms.vys import parallel_lookup, zero_bypass
from exactmem.core.model import resources
from exactmem.datasets.dataset import random_points
from exactmem.files.dataset_files import save_dataset


@pytest.fixture(scope="module")
def honest():
    ds = random_points(12, 2, 3, seed=1)
    return ds, build(ds, "vys")


def test_file_c_is_refuted_on_the_command_line(honest, tmp_path):
    """Issue 26, file C: 3N lookup units beside the memorizer, the output rewired to their
    sum. The labels come out and every Lemma C.1 stage still checks; the dataflow fails (and the
    declared width, 10 → 125),
    and `verify --construction vys` exits 1. The honest model exits 0."""
    ds, model = honest
    broken = parallel_lookup(model, ds)
    assert resources(broken).width > resources(model).width
    cert = certify(broken, ds, construction="vys")
    # the widened model also exceeds the declared width (issue 26.2: judged, not only reported)
    assert [c.name for c in cert.failed] == ["vys.dataflow", "vys.bounds.width"]
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
    from exactmem.checks.dataflow import probe_unit

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


def test_ks25_lanes_located_by_name_are_tied_to_the_weights():
    """Issue 26, point 5: the ks25 checks read φ̃, the token id and the sequence id by the
    names the file gives the stream's lanes. Swapping two names (φ̃ ↔ token id) makes the
    checks read the wrong columns: the dataflow ties the named lanes to the weights, so the
    renamed model is refuted, never verified."""
    from dataclasses import replace

    from exactmem.checks.mechanisms.ks25 import EXAMPLES

    ds = EXAMPLES["ks25-next-token"]()
    model = build(ds, "ks25-next-token")
    f1 = model.sublayers[0]
    last = f1.layers[-1]
    renamed = replace(last, names=("tid", "phi", "seq"))
    swapped = replace(
        model, sublayers=(replace(f1, layers=(*f1.layers[:-1], renamed)), *model.sublayers[1:])
    )
    cert = certify(swapped, ds, construction="ks25-next-token")
    assert cert.verdict == "refuted"
    assert {"ks25.dataflow.f1"} <= {c.name for c in cert.failed}


def test_memorizer_probes_renamed_are_refuted(honest):
    """Two read-out probes' names swapped (label[0] ↔ match[0]): the stage checks read each
    other's lanes and refute."""
    from dataclasses import replace

    ds, model = honest
    mlp = model.sublayers[0]
    names = {"label[0]": "match[0]", "match[0]": "label[0]"}
    probes = tuple(replace(p, name=names.get(p.name, p.name)) for p in mlp.probes)
    broken = replace(model, sublayers=(replace(mlp, probes=probes),))
    assert certify(broken, ds, construction="vys").verdict == "refuted"
