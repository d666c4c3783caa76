"""Output paths are refused before any work; writes are atomic (exactmem.core.outputs)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import exactmem.checks.certify
import exactmem.constructions.vys
from exactmem.commands.main import main
from exactmem.core.outputs import TEMP_SUFFIX, OutputError, check_output, write_atomic
from exactmem.datasets.dataset import random_points
from exactmem.files.dataset_files import load_dataset, save_dataset
from exactmem.files.model_files import save_certificate


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(TEMP_SUFFIX)]


def test_a_plain_path_is_accepted_and_resolved(tmp_path):
    assert check_output(tmp_path / "out.json", "--out") == (tmp_path / "out.json").resolve()
    assert _leftovers(tmp_path) == []  # the writability probe is removed


@pytest.mark.parametrize(
    "name, message",
    [
        ("missing/out.json", "does not exist"),
        ("folder", "is a folder"),
        ("folder/", "names a folder"),
        ("", "empty path"),
    ],
)
def test_unusable_paths_are_refused(tmp_path, name, message):
    (tmp_path / "folder").mkdir()
    path = f"{tmp_path}/{name}" if name else ""
    with pytest.raises(OutputError, match=message):
        check_output(path, "--out")


def test_a_path_under_a_file_is_refused(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(OutputError, match="is not a folder"):
        check_output(tmp_path / "plain" / "out.json", "--out")


def test_an_input_is_never_an_output(tmp_path, monkeypatch):
    data = tmp_path / "data.json"
    data.write_text("{}")
    (tmp_path / "link.json").symlink_to(data)
    monkeypatch.chdir(tmp_path)
    for spelling in (
        str(data),
        "./data.json",
        "link.json",
        f"{tmp_path}/../{tmp_path.name}/data.json",
    ):
        with pytest.raises(OutputError, match="is the input file"):
            check_output(spelling, "--certificate", [str(data)])
        with pytest.raises(OutputError, match="is the input file"):
            check_output(str(data), "--certificate", [spelling])


def test_a_read_only_file_is_refused(tmp_path, monkeypatch):
    target = tmp_path / "old.json"
    target.write_text("old")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == target else real(p, mode))
    with pytest.raises(OutputError, match="existing file is not writable"):
        check_output(target, "--out")


def test_a_folder_that_refuses_files_is_refused(tmp_path, monkeypatch):
    """The probe catches what permission bits do not show (root, read-only mounts)."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(OutputError, match="cannot create a file in .*Permission denied"):
        check_output(tmp_path / "out.json", "--out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_permission_bits_are_honoured(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (tmp_path / "ro.json").write_text("old")
    (tmp_path / "ro.json").chmod(0o444)
    locked.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="not writable"):
            check_output(locked / "out.json", "--out")
        with pytest.raises(OutputError, match="not writable"):
            check_output(tmp_path / "ro.json", "--out")
    finally:
        locked.chmod(0o755)


def test_write_atomic_replaces_and_keeps_the_mode(tmp_path):
    target = tmp_path / "c.json"
    target.write_bytes(b"old")
    target.chmod(0o640)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o640
    write_atomic(tmp_path / "fresh.json", b"x")
    assert (tmp_path / "fresh.json").read_bytes() == b"x"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "failure, raised",
    [
        (OSError(errno.EFBIG, "File too large"), OutputError),
        (OSError(errno.ENOSPC, "No space left on device"), OutputError),
        (KeyboardInterrupt(), KeyboardInterrupt),
    ],
)
@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path, monkeypatch, failure, raised, step
):
    target = tmp_path / "c.json"
    target.write_bytes(b"the old certificate")

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(os, step, fail)
    with pytest.raises(raised) as caught:
        write_atomic(target, b"x" * 10_000, "--certificate")
    monkeypatch.undo()
    if raised is OutputError:
        assert "is unchanged" in str(caught.value)
    assert target.read_bytes() == b"the old certificate"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("gz", ["", ".gz"])
def test_save_functions_go_through_the_atomic_writer(tmp_path, monkeypatch, gz):
    ds = random_points(5, 2, 3, seed=1)
    path = tmp_path / f"d.json{gz}"
    save_dataset(ds, path)
    before = path.read_bytes()
    assert load_dataset(path) == ds

    def fail(*args, **kwargs):
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OutputError):
        save_dataset(random_points(6, 2, 3, seed=2), path)
    with pytest.raises(OutputError):
        save_certificate({"verdict": "verified"}, path)
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == []


@pytest.fixture
def built(tmp_path):
    data, model = tmp_path / "d.json", tmp_path / "m.json"
    assert (
        main(["generate", "points", "--N", "12", "--d", "2", "--C", "3", "--out", str(data)]) == 0
    )
    build = ["build", "--construction", "vys", "--data", str(data), "--out", str(model)]
    assert main([*build, "--quiet"]) == 0
    return data, model


def _no_work(*args, **kwargs):
    raise AssertionError("the work started before the output path was checked")


@pytest.mark.parametrize(
    "certificate, message",
    [
        ("missing/c.json", "does not exist"),
        (".", "is a folder"),
        ("m.json", "is the input file"),
        ("d.json", "is the input file"),
    ],
)
def test_verify_refuses_the_certificate_path_before_any_work(
    built, tmp_path, monkeypatch, capsys, certificate, message
):
    data, model = built
    before = model.read_bytes(), data.read_bytes()
    monkeypatch.setattr(exactmem.certify, "certify", _no_work)
    args = ["verify", str(model), "--data", str(data), "--quiet"]
    assert main([*args, "--certificate", str(tmp_path / certificate)]) == 2
    assert message in capsys.readouterr().err
    assert (model.read_bytes(), data.read_bytes()) == before


@pytest.mark.parametrize("out, message", [("d.json", "is the input file"), ("no/m.json", "exist")])
def test_build_refuses_its_output_before_any_work(
    built, tmp_path, monkeypatch, capsys, out, message
):
    data, _ = built
    monkeypatch.setattr(exactmem.constructions.vys, "build", _no_work)
    args = ["build", "--construction", "vys", "--data", str(data), "--quiet"]
    assert main([*args, "--out", str(tmp_path / out)]) == 2
    assert message in capsys.readouterr().err


def test_generate_refuses_a_folder(tmp_path, capsys):
    assert main(["generate", "points", "--N", "3", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_a_certificate_that_cannot_be_written_keeps_the_verdict(
    built, tmp_path, monkeypatch, capsys
):
    """The verification is not lost: the verdict is printed, then exit 2 says what failed."""
    data, model = built
    cert = tmp_path / "c.json"
    cert.write_text("old")

    def fail(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    args = ["verify", str(model), "--data", str(data), "--quiet", "--evaluator", "reference"]
    assert main([*args, "--certificate", str(cert)]) == 2
    out, err = capsys.readouterr()
    assert "verdict: VERIFIED" in out
    assert "no space left" in err and "not saved" in err
    assert cert.read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_a_long_file_name_is_accepted(tmp_path):
    target = tmp_path / ("x" * 240 + ".json")
    check_output(target, "--out")
    write_atomic(target, b"data")
    assert target.read_bytes() == b"data"
    assert _leftovers(tmp_path) == []


def test_a_path_that_cannot_be_examined_is_refused(tmp_path, monkeypatch):
    """Path.is_dir raises on EACCES (a folder on the way that cannot be searched)."""

    def denied(self):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(Path, "is_dir", denied)
    with pytest.raises(OutputError, match="cannot be examined .*Permission denied"):
        check_output(tmp_path / "out.json", "--out")
