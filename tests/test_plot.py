"""`exactmem plot`: pictures of the bounds and of a certificate, their formats, and the
refusals (unknown format, malformed certificate, matplotlib missing) with exit code 2.

The pictures of docs/plots.md are regenerated here by :func:`make_doc_images`; to refresh the
committed ones, run ``python tests/test_plot.py`` from the repository root.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from exactmem.commands.main import main
from exactmem.files.model_json import canonical_hash

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, read from its IHDR chunk (after checking the signature)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    assert data.rstrip(b"\0")[-8:-4] == b"IEND", "truncated PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def check_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    width, height = png_size(data)
    assert 600 <= width <= 4000 and 300 <= height <= 4000, (width, height)
    assert 10_000 <= len(data) <= 5_000_000, len(data)
    return width, height


def check_svg(path: Path) -> None:
    root = ET.fromstring(path.read_bytes())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    width = float(root.get("width", "0").removesuffix("pt"))
    height = float(root.get("height", "0").removesuffix("pt"))
    assert 400 <= width <= 3000 and 200 <= height <= 3000, (width, height)
    assert len(list(root.iter())) > 100  # drawn paths, not an empty canvas


def make_certificate(folder: Path, N: int = 100) -> Path:
    """The certificate of docs/plots.md: ks25-next-token on 100 random sequences."""
    data, model, cert = (folder / f for f in ("seqs.json", "model.json", "cert.json"))
    assert main(["generate", "next-token", "--N", str(N), "--n", "8", "--d", "4",
                 "--out", str(data)]) == 0  # fmt: skip
    assert main(["build", "--construction", "ks25-next-token", "--data", str(data),
                 "--out", str(model), "--quiet"]) == 0  # fmt: skip
    assert main(["verify", str(model), "--data", str(data), "--construction", "ks25-next-token",
                 "--certificate", str(cert), "--evaluator", "reference", "--jobs", "1",
                 "--quiet"]) == 0  # fmt: skip
    return cert


def make_doc_images(folder: Path) -> dict[str, Path]:
    """Every picture of docs/plots.md, made by the commands the page shows."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {name: folder / name for name in ("plot-bounds.png", "plot-certificate.png")}
    assert main(["plot", "bounds", "--out", str(out["plot-bounds.png"])]) == 0
    work = folder / "certificate-inputs"
    work.mkdir(exist_ok=True)
    cert = make_certificate(work)
    assert main(["plot", "certificate", str(cert), "--out", str(out["plot-certificate.png"])]) == 0
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    return out


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Path:
    return make_certificate(tmp_path_factory.mktemp("cert"), N=40)


# --------------------------------------------------------------------------- pictures


def test_the_doc_images_regenerate(tmp_path):
    made = make_doc_images(tmp_path)
    for name, path in made.items():
        committed = IMAGES / name
        assert committed.exists(), f"docs/images/{name} is not committed"
        # pixel sizes agree; bytes may differ across matplotlib and FreeType versions
        assert check_png(path) == check_png(committed), name


def test_plot_bounds_in_every_format(tmp_path, capsys):
    for ext in ("png", "svg", "pdf"):
        out = tmp_path / f"bounds.{ext}"
        argv = ["plot", "bounds", "--out", str(out), "--N-max", "1000", "--measure-N", "20,50"]
        assert main(argv) == 0
        said = capsys.readouterr().out
        assert f"({ext}, " in said and "4 builds at N = 20, 50" in said
        assert "left out: mahdavi24-upper (n/a: needs n < d)" in said  # n = 16 ≥ d = 8
        assert "ks25-rem4.4 (total bits, not parameters)" in said
    check_png(tmp_path / "bounds.png")
    check_svg(tmp_path / "bounds.svg")
    assert (tmp_path / "bounds.pdf").read_bytes()[:5] == b"%PDF-"


def test_plot_bounds_draws_rows_that_apply(tmp_path, capsys):
    out = tmp_path / "b.svg"
    # n < d: Mahdavi et al.'s row applies and is drawn; no builds at all
    assert main(["plot", "bounds", "--out", str(out), "--n", "4", "--N-max", "100",
                 "--measure-N", ""]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "13 table rows on 10..100, no builds" in said and "mahdavi24" not in said
    assert "Mahdavi, Liao" in out.read_text()  # the legend is drawn as text: svg.fonttype path


def test_theory_curves_and_builds_are_the_table_and_the_models():
    from exactmem.reports.field import evaluate_rows
    from exactmem.reports.plot import measured_builds, theory_curves

    sizes = {"n": 16, "d": 8, "omega": 1000, "C": 10}
    params, depth, left_out = theory_curves(sizes, [100, 1000])
    table = {r["key"]: r for r in evaluate_rows({**sizes, "N": 1000})}
    for curve in params:
        assert curve.xs == (100, 1000)
        assert curve.ys[1] == float(table[curve.key]["value"])
    assert {c.key for c in depth} == {"vys22-upper", "ks25-thm4.1"}
    for curve in depth:  # the row less d: Lemma C.1's depth
        assert curve.ys[1] == float(table[curve.key]["value"]) - 8
    assert len(params) + len(left_out) == len(table)
    builds = measured_builds(sizes, [30])
    assert [b["construction"] for b in builds] == ["vys", "ks25-next-token"]
    assert all(b["N"] == 30 and b["depth"] > 0 and b["dense_parameters"] > 0 for b in builds)


def test_plot_certificate_in_every_format(tmp_path, certificate, capsys):
    for ext in ("png", "svg", "pdf"):
        out = tmp_path / f"c.{ext}"
        assert main(["plot", "certificate", str(certificate), "--out", str(out)]) == 0
        said = capsys.readouterr().out
        assert f"({ext}, " in said and "ReLU layers of a verified certificate" in said
        assert "smallest sign margin 1" in said
    check_png(tmp_path / "c.png")
    check_svg(tmp_path / "c.svg")
    assert (tmp_path / "c.pdf").read_bytes()[:5] == b"%PDF-"


def test_a_refuted_certificate_is_drawn_too(tmp_path, certificate, capsys):
    folder = certificate.parent
    obj = json.loads((folder / "seqs.json").read_text())
    obj["labels"][0] = obj["labels"][0] % 10 + 1
    (tmp_path / "relabelled.json").write_text(json.dumps(obj))
    cert = tmp_path / "refuted.json"
    assert main(["verify", str(folder / "model.json"), "--data", str(tmp_path / "relabelled.json"),
                 "--construction", "ks25-next-token", "--certificate", str(cert),
                 "--evaluator", "reference", "--jobs", "1", "--quiet"]) == 1  # fmt: skip
    capsys.readouterr()
    assert main(["plot", "certificate", str(cert), "--out", str(tmp_path / "r.png")]) == 0
    assert "ReLU layers of a refuted certificate" in capsys.readouterr().out
    check_png(tmp_path / "r.png")


def test_the_same_certificate_gives_the_same_picture(tmp_path, certificate):
    for ext in ("png", "svg", "pdf"):
        a, b = tmp_path / f"a.{ext}", tmp_path / f"b.{ext}"
        for out in (a, b):
            assert main(["plot", "certificate", str(certificate), "--out", str(out)]) == 0
        one, two = a.read_bytes(), b.read_bytes()
        if ext == "svg":  # clip-path ids may hash a transform's text: compare without them
            one, two = (re.sub(rb'(id="|#)[a-z]?[0-9a-f]{6,}', b"", x) for x in (one, two))
        assert one == two, ext  # no creation date in the file


def test_read_certificate_reads_the_layers(certificate):
    from exactmem.reports.plot import read_certificate

    view = read_certificate(certificate)
    raw = json.loads(certificate.read_text())["certificate"]
    assert view.verdict == "verified" and view.items == 40
    assert view.checks == view.checks_passed == len(raw["checks"])
    assert len(view.layers) == raw["activation"]["relu_layers"] > 0
    first = raw["activation"]["layers"][0]
    assert (view.layers[0].sublayer, view.layers[0].units, view.layers[0].zeros) == (
        first[0],
        first[2],
        first[4],
    )


def test_log10_of_exact_margins():
    from exactmem.reports.plot import _log10_rational

    assert _log10_rational("100", "m") == 2.0
    assert _log10_rational("1/1000", "m") == pytest.approx(-3.0)
    assert _log10_rational("0x10/0x1", "m") == pytest.approx(1.2041199826559248)
    huge = "0x" + "f" * 3000  # far beyond a float: still a finite logarithm
    assert _log10_rational(f"1/{huge}", "m") == pytest.approx(-3612.36, abs=0.01)
    for bad in ("0", "-1", "1/0", "a", "1/2/3", "", 3, None):
        with pytest.raises(Exception, match="m: "):
            _log10_rational(bad, "m")


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("name", ["out.jpg", "out", "out.png.txt", "out.eps"])
def test_an_unknown_format_is_refused_before_any_work(tmp_path, certificate, capsys, name):
    out = tmp_path / name
    assert main(["plot", "certificate", str(certificate), "--out", str(out)]) == 2
    assert main(["plot", "bounds", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown picture format" in err and ".png, .svg, .pdf" in err
    assert not out.exists()


def test_bad_bounds_options_are_refused(tmp_path, capsys):
    out = str(tmp_path / "b.png")
    for argv, said in (
        (["--N-max", "1"], "--N-max 1: must be ≥ 2"),
        (["--N-min", "0"], "--N-min must be ≥ 1"),
        (["--N-min", "500", "--N-max", "100"], "≥ --N-min 500"),
        (["--n", "1"], "--n must be ≥ 2"),
        (["--d", "0"], "--d must be ≥ 1"),
        (["--measure-N", "1"], "--measure-N 1: each N must lie in 2..100000"),
        (["--measure-N", "1000000"], "--measure-N 1000000"),
        (["--N-max", str(10**16)], "at most 10¹⁵"),
    ):
        assert main(["plot", "bounds", "--out", out, *argv]) == 2, argv
        assert said in capsys.readouterr().err, argv
    with pytest.raises(SystemExit) as exc:  # argparse: not a list of integers
        main(["plot", "bounds", "--out", out, "--measure-N", "10,x"])
    assert exc.value.code == 2
    assert not Path(out).exists()


def test_the_certificate_cannot_be_the_output(certificate, capsys):
    before = certificate.read_bytes()
    copy = certificate.with_name("cert-copy.png")
    copy.write_bytes(before)
    assert main(["plot", "certificate", str(copy), "--out", str(copy)]) == 2
    assert "replace the input" in capsys.readouterr().err
    assert copy.read_bytes() == before
    copy.unlink()


def _write(path: Path, obj: dict, *, rehash: bool = True) -> Path:
    if rehash:
        obj["sha256"] = canonical_hash(obj["certificate"])
    path.write_text(json.dumps(obj))
    return path


def _broken(original: dict):
    """(what is changed, the field the error must name) for malformed certificates."""

    def edit(fn):
        obj = json.loads(json.dumps(original))
        fn(obj["certificate"])
        return obj

    act = "certificate.activation"
    yield edit(lambda c: c["activation"].pop("layers")), f"{act}.layers: missing"
    yield edit(lambda c: c["activation"].update(layers=[])), f"{act}.layers: empty"
    yield edit(lambda c: c["activation"].update(layers={})), f"{act}.layers: wrong type"
    yield edit(lambda c: c["activation"].update(relu_layers=1)), f"{act}.relu_layers: 1"
    yield edit(lambda c: c["activation"]["layers"].__setitem__(0, [0, 1, 2])), f"{act}.layers[0]:"
    yield edit(lambda c: c["activation"]["layers"][1].__setitem__(2, -5)), f"{act}.layers[1][2]"
    yield edit(lambda c: c["activation"]["layers"][1].__setitem__(2, True)), f"{act}.layers[1][2]"
    yield edit(lambda c: c["activation"]["layers"][2].__setitem__(5, "x")), f"{act}.layers[2][5]"
    yield edit(lambda c: c["activation"]["layers"][2].__setitem__(5, "0")), f"{act}.layers[2][5]"
    yield edit(lambda c: c["activation"]["layers"][2].__setitem__(5, 1)), f"{act}.layers[2][5]"
    yield (
        edit(lambda c: c["activation"]["layers"][0].__setitem__(4, 10**9)),
        f"{act}.layers[0][4]",
    )
    yield edit(lambda c: c.pop("activation")), "certificate.activation: missing"
    yield edit(lambda c: c.update(verdict=1)), "certificate.verdict: wrong type"
    yield edit(lambda c: c["checks"][0].update(passed="yes")), "certificate.checks[0].passed"
    yield edit(lambda c: c.update(checks=None)), "certificate.checks: wrong type"
    yield edit(lambda c: c["subject"].pop("criteria")), "certificate.subject.criteria: missing"
    yield edit(lambda c: c["data"].update(N=-1)), "certificate.data.N"


def test_malformed_certificates_are_refused_naming_the_field(tmp_path, certificate, capsys):
    original = json.loads(certificate.read_text())
    out = tmp_path / "c.png"
    bad = tmp_path / "bad.json"
    cases = list(_broken(original))
    assert len(cases) == 17
    for obj, field in cases:
        assert main(["plot", "certificate", str(_write(bad, obj)), "--out", str(out)]) == 2, field
        err = capsys.readouterr().err
        assert field in err, (field, err)
        assert "Traceback" not in err
    assert not out.exists()


def test_certificate_files_that_are_not_certificates(tmp_path, certificate, capsys):
    original = json.loads(certificate.read_text())
    out = str(tmp_path / "c.png")
    bad = tmp_path / "bad.json"
    tampered = json.loads(json.dumps(original))
    tampered["certificate"]["verdict"] = "verified!"
    unhashed = {k: v for k, v in original.items() if k != "sha256"}
    cases = [
        (_write(tmp_path / "a.json", tampered, rehash=False), "sha256: does not match"),
        (
            _write(tmp_path / "b.json", {**original, "format": "exactmem.certificate/1"}),
            "format: 'exactmem",
        ),  # fmt: skip
        (_write(tmp_path / "c.json", unhashed, rehash=False), "sha256: missing"),
        (tmp_path / "missing.json", "cannot read"),
    ]
    for path, said in cases:
        assert main(["plot", "certificate", str(path), "--out", out]) == 2, said
        assert said in capsys.readouterr().err, said
    for raw, said in ((b"{not json", "not valid JSON"), (b"[1, 2]", "expected an object"),
                      (gzip.compress(b"\xff\xfe"), "not UTF-8")):  # fmt: skip
        bad.write_bytes(raw)
        assert main(["plot", "certificate", str(bad), "--out", out]) == 2, said
        assert said in capsys.readouterr().err, said


def test_an_oversized_certificate_is_refused_unread(tmp_path, monkeypatch, certificate, capsys):
    import exactmem.reports.plot

    monkeypatch.setattr(exactmem.reports.plot, "CERTIFICATE_BYTES", 100)
    assert main(["plot", "certificate", str(certificate), "--out", str(tmp_path / "c.png")]) == 2
    assert "more than the 100 allowed" in capsys.readouterr().err


def test_without_matplotlib_the_error_names_the_extra(tmp_path):
    # matplotlib hidden from the import system, as on an install without the plot extra
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from exactmem.commands.main import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in (["bounds"], ["certificate", str(tmp_path / "any.json")]):
        out = tmp_path / "x.png"
        run = subprocess.run(
            [sys.executable, "-c", code, "plot", *argv, "--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert run.returncode == 2, run.stderr
        assert "pip install 'exactmem[plot]'" in run.stderr
        assert "Traceback" not in run.stderr
        assert not out.exists()


if __name__ == "__main__":  # refresh the committed pictures of docs/plots.md
    for path in make_doc_images(IMAGES).values():
        print(f"{path}: {check_png(path)}")


def test_rows_that_coincide_are_grouped_and_drawn_visibly(tmp_path, capsys):
    """Vardi et al.'s Ω(√N) lay under Theorem 4.2's, one line for two rows (issue 30): rows
    that coincide are found and drawn striped, each with its own marker, and tagged."""
    from exactmem.reports.plot import grid, overlapping, theory_curves

    params, _, _ = theory_curves({"n": 16, "d": 8, "omega": 1000, "C": 10}, grid(10, 10**6))
    groups = {tuple(c.key for c in g) for g in overlapping(params) if len(g) > 1}
    assert ("vys22-lower", "ks25-thm4.2") in groups
    assert ("madden24-upper", "madden24-lower", "madden24-count") in groups
    assert sum(len(g) for g in overlapping(params)) == len(params)
    out = tmp_path / "b.svg"
    argv = ["plot", "bounds", "--out", str(out), "--N-max", "1000", "--measure-N", "20,50"]
    assert main(argv) == 0
    svg = out.read_text()
    assert svg.count("striped: one of 2 rows that coincide") == 2
    assert svg.count("striped: one of 3 rows that coincide") == 3
    assert "2 rows ≡" in svg and "3 rows ≡" in svg


def test_the_caption_says_hidden_constants_are_1_and_draws_the_fitted_ones(tmp_path):
    from exactmem.reports.field import evaluate_rows
    from exactmem.reports.plot import fitted_constants, measured_builds

    sizes = {"n": 16, "d": 8, "omega": 1000, "C": 10}
    builds = measured_builds(sizes, [20, 50])
    fits = fitted_constants(sizes, builds)
    assert set(fits) == {"vys", "ks25-next-token"}
    for b in builds:  # c is the smallest constant with built ≤ c·row at every build
        fit = fits[b["construction"]]
        row = next(r for r in evaluate_rows({**sizes, "N": b["N"]}) if r["key"] == fit["row"])
        assert b["dense_parameters"] <= fit["parameters"] * float(row["value"]) * (1 + 1e-12)
        assert b["depth"] <= fit["depth"] * (float(row["value"]) - 8) * (1 + 1e-12)
    for name, fit in fits.items():
        ratios = []
        for b in builds:
            if b["construction"] == name:
                rows = evaluate_rows({**sizes, "N": b["N"]})
                value = next(float(r["value"]) for r in rows if r["key"] == fit["row"])
                ratios.append(b["dense_parameters"] / value)
        assert fit["parameters"] == max(ratios) > 1  # the builds need more than 1
    out = tmp_path / "b.svg"
    argv = ["plot", "bounds", "--out", str(out), "--N-max", "1000", "--measure-N", "20,50"]
    assert main(argv) == 0
    svg = out.read_text()
    assert "every hidden constant set to 1" in svg
    assert "the constant the vys builds need" in svg
    assert "the constant the ks25-next-token builds need" in svg
