"""``exactmem recheck`` and :func:`exactmem.recheck`: a certificate re-derived from its files
(issue 27 point 6). A forged certificate — a failing check dropped and the file hashed again
the way :mod:`exactmem.files.model_files` writes it — is still displayed by ``show`` (a record,
said to be one),
and ``recheck`` names the dropped check."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import exactmem
from exactmem.commands.main import main
from exactmem.files.model_files import load_model, save_certificate, save_model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A vys model with its layout stripped: it reproduces its labels, but ``--construction
    vys`` refutes it (``memorizer.layout`` fails); its certificate, and an honest model's."""
    tmp = tmp_path_factory.mktemp("recheck")
    data, honest = str(tmp / "points.json"), str(tmp / "model.json")
    assert main(["generate", "points", "--N", "8", "--d", "2", "--C", "3", "--seed", "5",
                 "--out", data]) == 0  # fmt: skip
    assert main(["build", "--construction", "vys", "--data", data, "--out", honest,
                 "--quiet"]) == 0  # fmt: skip
    m, _ = load_model(honest)
    stripped = replace(m, sublayers=tuple(replace(s, meta={}) for s in m.sublayers), meta={})
    broken = str(tmp / "stripped.json")
    save_model(stripped, broken)
    cert = str(tmp / "refuted.json")
    code = main(["verify", broken, "--data", data, "--construction", "vys", "--quiet",
                 "--certificate", cert, "--json"])  # fmt: skip
    assert code == 1
    good = str(tmp / "verified.json")
    assert main(["verify", honest, "--data", data, "--construction", "vys", "--quiet",
                 "--certificate", good, "--json"]) == 0  # fmt: skip
    return {"tmp": tmp, "data": data, "honest": honest, "broken": broken, "refuted": cert,
            "verified": good}  # fmt: skip


def _content(path: str) -> dict:
    return json.loads(open(path).read())["certificate"]


def _forge(files, dropped: str) -> str:
    """The refuted certificate with its failing checks (``dropped`` among them) dropped, its
    verdict turned to verified and the file hashed again as exactmem.files.model_files writes it."""
    cert = _content(files["refuted"])
    failed = [c["name"] for c in cert["checks"] if not c["passed"]]
    assert dropped in failed
    cert["checks"] = [c for c in cert["checks"] if c["passed"]]
    for name in failed:
        cert["subject"]["criteria"]["checks_run"].remove(name)
    cert["verdict"] = "verified"
    forged = str(files["tmp"] / "forged.json")
    save_certificate(cert, forged)
    return forged


def test_recheck_same(files, capsys):
    capsys.readouterr()
    args = [files["verified"], "--model", files["honest"], "--data", files["data"], "--quiet"]
    assert main(["recheck", *args]) == 0
    out = capsys.readouterr().out
    assert "re-derived: VERIFIED" in out and "SAME:" in out
    # a refuted certificate re-derived as refuted is the same record too: exit 0
    args = [files["refuted"], "--model", files["broken"], "--data", files["data"], "--quiet"]
    assert main(["recheck", *args]) == 0
    assert "re-derived: REFUTED" in capsys.readouterr().out


def test_forged_certificate_show_displays_a_record_recheck_names_the_dropped_check(files, capsys):
    forged = _forge(files, "memorizer.layout")
    capsys.readouterr()
    # show: the forged file is intact and self-consistent; it is displayed as a record,
    # and show says that it is one and how to re-derive it
    assert main(["show", forged]) == 0
    out = capsys.readouterr().out
    assert "a RECORD" in out and "nothing is re-derived" in out
    assert "proves neither who wrote it nor that it is true" in out
    assert f"exactmem recheck {forged}" in out
    assert "format and sha256 checked" not in out
    # recheck: exit 1, naming the dropped check and the verdict
    args = [forged, "--model", files["broken"], "--data", files["data"], "--quiet"]
    assert main(["recheck", *args]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS" in out
    assert "verdict: recorded verified, re-derived refuted" in out
    assert "check memorizer.layout: missing from the record (re-derived: FAIL" in out
    assert "re-derived checks missing from the record: memorizer.layout" in out


def test_recheck_names_every_kind_of_difference(files):
    cert = _content(files["verified"])
    width = cert["resources"]["width"]
    cert["resources"]["width"] += 1
    cert["checks"][0]["detail"] = "all 9 labels reproduced exactly"
    cert["data"]["C"] = 4
    result = exactmem.recheck(cert, files["honest"], files["data"])
    assert not result.same
    assert set(result.differences) == {
        f"resources.width: recorded {width + 1}, re-derived {width}",
        'check labels.detail: recorded "all 9 labels reproduced exactly", re-derived '
        '"all 8 labels reproduced exactly"',
        "data.C: recorded 4, re-derived 3",
    }
    # a passed check recorded as failed (and the verdict with it)
    cert = _content(files["verified"])
    cert["checks"][0]["passed"] = False
    cert["verdict"] = "refuted"
    result = exactmem.recheck(cert, files["honest"], files["data"])
    assert result.differences[0] == "verdict: recorded refuted, re-derived verified"
    assert any(d.startswith("check labels: recorded failed, re-derived passed") for d in
               result.differences)  # fmt: skip


def test_recheck_against_other_files_names_the_hashes(files, capsys):
    """The certificate of the stripped model, rechecked against the honest one: its hash is
    not the one the certificate names (and its verdict differs)."""
    args = [files["refuted"], "--model", files["honest"], "--data", files["data"], "--quiet"]
    assert main(["recheck", *args]) == 1
    out = capsys.readouterr().out
    assert "model sha256: the certificate names" in out
    assert "not the model the certificate is about" in out
    other = str(files["tmp"] / "other.json")
    assert main(["generate", "points", "--N", "8", "--d", "2", "--C", "3", "--seed", "6",
                 "--out", other]) == 0  # fmt: skip
    capsys.readouterr()
    result = exactmem.recheck(files["verified"], files["honest"], other)
    assert any(d.startswith("dataset sha256: the certificate names") for d in result.differences)


def test_recheck_python_api_takes_objects_and_whole_files(files):
    model = exactmem.load_model(files["honest"])
    dataset = exactmem.load_dataset(files["data"])
    whole = json.loads(open(files["verified"]).read())
    result = exactmem.recheck(whole, model, dataset)
    assert result.same and result.rederived["verdict"] == "verified"
    assert "SAME" in repr(result)


def test_recheck_bad_input_exits_2(files, capsys, tmp_path):
    model, data = files["honest"], files["data"]
    tampered = _content(files["verified"])
    tampered["verdict"] = "refuted"  # not re-hashed
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps({"format": "exactmem.certificate/2",
                               "sha256": json.loads(open(files["verified"]).read())["sha256"],
                               "certificate": tampered}))  # fmt: skip
    assert main(["recheck", str(bad), "--model", model, "--data", data, "--quiet"]) == 2
    assert "sha256: does not match" in capsys.readouterr().err
    assert main(["recheck", files["verified"], "--model", data, "--data", data, "--quiet"]) == 2
    unknown = _content(files["verified"])
    unknown["subject"]["criteria"]["construction"] = "not-installed"
    save_certificate(unknown, tmp_path / "unknown.json")
    args = [str(tmp_path / "unknown.json"), "--model", model, "--data", data, "--quiet"]
    assert main(["recheck", *args]) == 2
    assert "'not-installed' is not an installed construction" in capsys.readouterr().err
    with pytest.raises(exactmem.InputError):
        exactmem.recheck(42, model, data)


def test_recheck_json(files, capsys):
    forged = _forge(files, "memorizer.layout")
    capsys.readouterr()
    args = [forged, "--model", files["broken"], "--data", files["data"], "--quiet", "--json"]
    assert main(["recheck", *args]) == 1
    said = json.loads(capsys.readouterr().out)
    assert said["same"] is False and said["rederived"]["verdict"] == "refuted"
    assert said["recorded"]["verdict"] == "verified"


def test_recheck_reapplies_the_recorded_criteria(files, tmp_path):
    """A tolerance and the user's own bounds, recorded under subject.criteria, are applied
    again: the re-derived checks include the tolerance's label check and the bound checks."""
    from exactmem.checks.certify import certificate_json

    model = exactmem.load_model(files["honest"])
    dataset = exactmem.load_dataset(files["data"])
    cert = exactmem.certify(
        model, dataset, construction="vys", tolerance="1/2", bounds={"width": "N + 100"}
    )
    content = certificate_json(cert)
    assert content["subject"]["criteria"]["tolerance"] == "1/2"
    path = tmp_path / "criteria.json"
    save_certificate(content, path)
    result = exactmem.recheck(path, model, dataset)
    assert result.same, result.differences
    assert (
        "within 1/2"
        in next(c for c in result.rederived["checks"] if c["name"] == "labels")["detail"]
    )
    assert "bound.width" in [c["name"] for c in result.rederived["checks"]]
    # a record that says the bound was something else is re-derived with the recorded one, and
    # the check's detail differs
    content["subject"]["criteria"]["bounds"] = {"width": "N + 1"}
    result = exactmem.recheck(content, model, dataset)
    assert any(d.startswith("check bound.width.detail") for d in result.differences)
