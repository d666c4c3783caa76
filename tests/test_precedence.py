"""Precedence everywhere (issue 26.3): every check of a checklist runs and is ok, FAIL or
undecided; any FAIL makes the verdict refuted (exit 1) whatever else is undecided; inconclusive
(exit 4) only when nothing failed. ``verify``, ``check`` and :func:`exactmem.certify` agree."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from gmpy2 import mpq

import exactmem
from exactmem.checks.certificate import Certificate, Check, undecided_check, verdict_of
from exactmem.checks.certify import certify
from exactmem.checks.checklist import Checklist, guarded
from exactmem.claims.generators import GENERATORS
from exactmem.commands.main import main
from exactmem.core.errors import InconclusiveError
from exactmem.core.model import Affine, Attention
from exactmem.datasets.dataset import Dataset
from exactmem.files.dataset_files import save_dataset
from exactmem.files.model_files import save_model


def _zero(affine: Affine) -> Affine:
    return replace(affine, rows=tuple(() for _ in affine.rows), bias=(0,) * len(affine.rows))


def _zero_head(model, part: str):
    """The model with one map of its (first) attention head zeroed: W_Q or W_O."""
    subs = list(model.sublayers)
    i = next(i for i, s in enumerate(subs) if isinstance(s, Attention))
    head = subs[i].heads[0]
    head = replace(head, **{part: _zero(getattr(head, part))})
    subs[i] = replace(subs[i], heads=(head, *subs[i].heads[1:]))
    return replace(model, sublayers=tuple(subs))


def _verify(tmp_path, model, ds, *args) -> tuple[int, dict]:
    save_model(model, tmp_path / "m.json")
    save_dataset(ds, tmp_path / "d.json")
    out = tmp_path / "cert.json"
    code = main(
        ["verify", str(tmp_path / "m.json"), "--data", str(tmp_path / "d.json"), "--quiet"]
        + ["--certificate", str(out), *args]
    )
    return code, json.loads(out.read_text())["certificate"]


def test_verdict_of_is_refuted_over_undecided_over_verified():
    ok, bad = Check("a", True, ""), Check("b", False, "")
    open_ = undecided_check("c", "")
    assert verdict_of([ok]) == "verified"
    assert verdict_of([ok, open_]) == "inconclusive"
    assert verdict_of([open_, bad, ok]) == "refuted"
    assert not open_.failed and bad.failed and open_.status == "undecided"
    with pytest.raises(ValueError, match="passed and undecided"):
        Check("d", True, "", undecided=True)


def test_an_undecided_check_never_hides_a_failed_one_of_the_same_checklist():
    """A checklist whose first part fails and whose second raises InconclusiveError: the
    failure stands (refuted), the second part is undecided under the name it gives."""
    ds = Dataset("points", (1, 2), 2, points=((mpq(1),), (mpq(2),)))
    model = exactmem.build(ds, "vys")

    def run(evidence):
        def undecided():
            raise InconclusiveError("demo.second: still overlapping at 4096 bits")

        return [Check("demo.first", False, "broken")] + guarded("demo", undecided)

    cert = certify(model, ds, construction=Checklist("demo", ("points",), "demo", run=run))
    states = {c.name: c.status for c in cert.checks}
    assert states["demo.first"] == "FAIL" and states["demo.second"] == "undecided"
    assert cert.verdict == "refuted"
    listed = {c["name"]: c for c in cert.to_json()["checks"]}
    assert listed["demo.second"]["undecided"] is True and "undecided" not in listed["demo.first"]


def test_undecided_alone_is_inconclusive_and_exits_4(tmp_path, monkeypatch):
    """Nothing failed, one check undecided: inconclusive, exit 4, the table still printed."""
    ds = Dataset("points", (1, 2), 2, points=((mpq(1),), (mpq(2),)))
    model = exactmem.build(ds, "vys")

    def undecided(evidence):
        raise InconclusiveError("vys.stage1.keys: not decided")

    from exactmem.checks import registry

    vys = registry.get("vys")
    assert vys.checklist is not None
    broken = replace(vys, checklist=replace(vys.checklist, run=undecided))
    monkeypatch.setitem(registry.constructions(), "vys", broken)
    code, cert = _verify(tmp_path, model, ds, "--construction", "vys")
    assert code == 4 and cert["verdict"] == "inconclusive"
    assert [c["name"] for c in cert["checks"] if c.get("undecided")] == ["vys.stage1.keys"]
    assert main(["show", str(tmp_path / "cert.json")]) == 4


def test_ks24_with_a_zero_query_map_is_refuted(tmp_path):
    """W_Q = 0 (plain averaging: many labels wrong): exit 1 with and without --construction,
    even where the checklist itself cannot decide its gap."""
    ds = GENERATORS["ks24"]({"N": 24, "n": 4, "d": 3, "vocab": 12, "C": 5, "seed": 1})
    model = _zero_head(exactmem.build(ds, "ks24"), "query")
    for args in ((), ("--construction", "ks24")):
        code, cert = _verify(tmp_path, model, ds, *args)
        assert code == 1 and cert["verdict"] == "refuted", args
        assert "labels" in [c["name"] for c in cert["checks"] if not c["passed"]]


def test_madden24_with_a_zero_output_map_is_refuted(tmp_path):
    """W_O = 0: the attention adds nothing; exit 1 under --construction madden24."""
    ds = GENERATORS["contexts"]({"N": 12, "n": 3, "vocab": 4, "seed": 1})
    model = _zero_head(exactmem.build(ds, "madden24", d=8, width=12), "output")
    code, cert = _verify(tmp_path, model, ds, "--construction", "madden24", "--tolerance", "1/1000")
    assert code == 1 and cert["verdict"] == "refuted"


def test_certificate_repr_lists_undecided_checks():
    from exactmem.core.model import Resources

    cert = Certificate(
        [Check("labels", True, "ok"), undecided_check("x.gap", "open")],
        Resources(1, 1, 0, 1, 1, 1, 1),
        {},
    )
    assert cert.verdict == "inconclusive"
    assert "undecided x.gap: open" in repr(cert)
