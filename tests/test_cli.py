"""The CLI contract: commands, JSON on stdout, exit codes."""

import json
import subprocess
import sys

from exactmem.commands.main import main


def test_build_verify_json(tmp_path, capsys):
    data, model = tmp_path / "d.json", tmp_path / "m.json"
    assert (
        main(["generate", "points", "--N", "50", "--d", "8", "--C", "100", "--out", str(data)]) == 0
    )
    assert (
        main(
            [
                "build",
                "--construction",
                "vys",
                "--data",
                str(data),
                "--out",
                str(model),
                "--quiet",
                "--set",
                "gadget=tent",
            ]
        )
        == 0
    )
    capsys.readouterr()
    argv = ["verify", str(model), "--data", str(data), "--json", "--quiet"]
    assert main([*argv, "--construction", "vys"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "verified"
    res = report["resources"]
    assert {"width", "depth", "dense_parameters", "nonzero_parameters", "max_bits"} <= set(res)
    assert report["activation"]["min_nonzero_preactivation"] is not None
    assert report["subject"]["model_says"]["layout"][0]["gadget"] == "tent"
    assert "memorizer.stage3.match" in report["subject"]["criteria"]["checks_run"]


def test_usage_errors_exit_2(tmp_path, capsys):
    data = tmp_path / "d.json"
    main(["generate", "points", "--N", "5", "--out", str(data)])
    assert (
        main(
            [
                "build",
                "--construction",
                "transformer-xl",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "m.json"),
            ]
        )
        == 2
    )
    assert "available: vys, ks25-next-token" in capsys.readouterr().err
    assert (
        main(
            [
                "build",
                "--construction",
                "vys",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "m.json"),
                "--set",
                "colour=red",
            ]
        )
        == 2
    )
    assert "unknown option for" in capsys.readouterr().err
    assert main(["generate", "points", "--N", "0", "--out", str(data)]) == 2


def test_check_selection_and_nothing_selected(capsys):
    assert main(["check", "-k", "no-such-claim", "--quiet"]) == 5
    assert main(["check", "-k", "erratum", "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["mismatches"] == 0
    assert all(r["verdict"] == "refuted" for r in report["instances"])


def test_check_fails_when_a_claim_is_wrong(tmp_path, capsys):
    """A claim that expects the printed erratum to verify must make check exit 1."""
    text = (
        'paper = "test"\nstatement = "wrong expectation"\nconstruction = "vys"\n'
        'expect = "verified"\n[options]\nbit_widths = "paper"\n'
        '[[instance]]\ngenerator = "random_points"\nN = 100\nd = 8\nC = 10\nseed = 21\n'
    )
    (tmp_path / "wrong.toml").write_text(text)
    assert main(["check", "--proofs", str(tmp_path), "--quiet"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_bound_violation_fails_check(tmp_path, capsys):
    text = (
        'paper = "test"\nstatement = "too small"\nconstruction = "vys"\nexpect = "verified"\n'
        '[bounds]\ndepth = "3"\n'
        '[[instance]]\ngenerator = "random_points"\nN = 20\nd = 2\nC = 3\n'
    )
    (tmp_path / "small.toml").write_text(text)
    assert main(["check", "--proofs", str(tmp_path), "--quiet"]) == 1
    assert "bound.depth" in capsys.readouterr().out


def test_malformed_claim_exits_2(tmp_path, capsys):
    (tmp_path / "bad.toml").write_text('paper = "x"\nconstruction = "nope"\n')
    assert main(["check", "--proofs", str(tmp_path)]) == 2
    assert "bad.toml" in capsys.readouterr().err


def test_help_does_not_import_numerics():
    code = (
        "import sys; from exactmem.commands.parser import parser\n"
        "try:\n    parser().parse_args(['--help'])\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('numpy', 'sympy', 'gmpy2', 'numba', 'flint') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
