"""Numbers that compound across layers (issue 27, point 1): a few kilobytes of model whose
values grow layer by layer are refused before the work, in bounded time and memory.

The crafted files are width-one MLPs whose every layer multiplies by one long weight, as the
issue found them: a 1 143-byte ``.json.gz`` (880 layers of 140-hex-digit weights) took 66 s
on the fast evaluator, and an 8.6 KB one (25 000 layers of 30 digits) 5.6 GB on the reference
before exit 3. Each runs here as a command in a child process, its peak memory measured from
outside; times are only bounded loosely (a hang), speed is measured in
benchmarks/hostile_values.py."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gmpy2 import mpq

from exactmem.commands.main import main
from exactmem.core import limits
from exactmem.core.errors import InputError
from exactmem.evaluate import fast, reference
from exactmem.files.model_json import canonical_hash

ROOT = Path(__file__).resolve().parents[1]
PEAK_MB = 500  # every crafted case, measured from outside
HANG_S = 60  # a generous ceiling: speed itself goes to benchmarks/


def compounding_model(layers: int, digits: int, seed: int = 0) -> bytes:
    """A width-one MLP of ``layers`` layers, each multiplying by one ``digits``-hex-digit
    weight (no bias): its output has about layers × 4·digits bits. Gzip stores the repeated
    layer once, so the file stays a few kilobytes."""
    rng = random.Random(seed)
    weight = "0x1" + "".join(rng.choice("0123456789abcdef") for _ in range(digits - 1))
    layer = {"in": 1, "den": "0x1", "names": [], "rows": [[[0, weight]]], "bias": ["0x0"]}
    model = {
        "input_dim": 1,
        "embed": None,
        "unembed": None,
        "sublayers": [
            {
                "kind": "mlp",
                "label": "",
                "residual": False,
                "meta": {},
                "layers": [layer] * layers,
                "probes": [],
            }
        ],
        "meta": {},
        "token_inputs": False,
    }
    obj = {"format": "exactmem.model/1", "sha256": canonical_hash(model), "model": model}
    return gzip.compress(json.dumps(obj, separators=(",", ":")).encode(), 9, mtime=0)


def one_point(folder: Path) -> Path:
    path = folder / "point.json"
    path.write_text(
        json.dumps(
            {"format": "exactmem.dataset/1", "task": "points", "points": [["1"]], "labels": [1]}
        )
    )
    return path


def run_measured(*args: str) -> tuple[int, str, float, float]:
    """(exit code, stderr, peak resident MB, seconds) of ``python -m exactmem ARGS``, measured
    by a fresh parent whose only child it is (RUSAGE_CHILDREN of this process would include
    every child the test session ran before)."""
    probe = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(r.returncode)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", probe, sys.executable, "-m", "exactmem", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=5 * HANG_S,
    )
    seconds = time.monotonic() - start
    *lines, peak_kb = out.stderr.strip().splitlines()
    return out.returncode, "\n".join(lines), int(peak_kb) / 1024, seconds


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compounding")
    small = folder / "880-layers.json.gz"
    small.write_bytes(compounding_model(880, 140))
    large = folder / "25000-layers.json.gz"
    large.write_bytes(compounding_model(25_000, 30))
    return {"small": small, "large": large, "data": one_point(folder)}


@pytest.mark.parametrize("evaluator", ["fast", "reference"])
@pytest.mark.parametrize(
    ("case", "size"),
    [("small", 1143), ("large", 8800)],  # the 1 143 bytes and 8.6 KB
)
def test_compounding_files_exit_2_in_bounded_time_and_memory(crafted, evaluator, case, size):
    """880 layers × 560 bits stay under the default --max-value-bits (2^20), but the ReLU
    statistics the certificate keeps (one value per layer, L²·D in all) pass their budget
    part-way; 25 000 layers × 120 bits are refused before any layer runs."""
    model = crafted[case]
    assert model.stat().st_size <= size
    code, err, peak_mb, seconds = run_measured(
        "verify", str(model), "--data", str(crafted["data"]), "--evaluator", evaluator
    )
    assert code == 2, err
    assert "--max-value-bits" in err and "Traceback" not in err
    if case == "large":  # the bound itself, at the layer where it passes 2^20 bits
        assert "could reach" in err and "more than the limit of 1048576 bits" in err
    assert peak_mb < PEAK_MB, f"{peak_mb:.0f} MB"
    assert seconds < HANG_S


def test_the_limit_is_a_flag_of_every_evaluating_command(tmp_path, capsys):
    """50 layers of 1 000 hex digits (200 000 bits) run under the default and are refused
    below their bound, naming it and the flag; ``check`` has the flag too."""
    model = tmp_path / "m.json.gz"
    model.write_bytes(compounding_model(50, 1000))
    data = str(one_point(tmp_path))
    assert main(["verify", str(model), "--data", data, "--quiet"]) == 1  # evaluated: refuted
    capsys.readouterr()
    assert main(["verify", str(model), "--data", data, "--max-value-bits", "100000"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"could reach 10\d{4} bits at sublayers\[0\]\.layers\[\d+\]", err)
    assert "more than the limit of 100000 bits (--max-value-bits N raises it)" in err
    assert main(["predict", str(model), "--data", data, "--max-value-bits", "100000"]) == 2
    for command in ("verify", "predict", "check", "convert", "build"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--max-value-bits" in capsys.readouterr().out, command


@pytest.mark.parametrize("run", [reference.run_points, fast.run_points])
def test_the_python_api_honours_the_limits_in_force(tmp_path, run):
    """``exactmem.core.limits.use`` sets the bound for evaluations called from Python."""
    from exactmem.files.model_files import load_model

    path = tmp_path / "m.json.gz"
    path.write_bytes(compounding_model(20, 100))  # ≈ 20 × 400 bits
    model, _ = load_model(path)
    with limits.use(limits.Limits(max_value_bits=4000)):
        with pytest.raises(InputError, match="--max-value-bits"):
            run(model, [[mpq(1)]])
    with limits.use(limits.Limits(max_value_bits=9000)):
        trace = run(model, [[mpq(1)]])
    assert int(trace.outputs[0][0][0]).bit_length() > 7900


@pytest.mark.parametrize("evaluator", ["fast", "reference"])
def test_statistics_that_grow_with_depth_are_bounded(tmp_path, capsys, evaluator):
    """Within the value bound, the per-layer statistics still add up to L²·D: 300 layers of
    weight 3 make values of at most 476 bits, and statistics of 71 000 bits in all, more than
    64 × a limit of 1 000. Refused part-way, naming the budget; a larger limit evaluates."""
    model = tmp_path / "m.json.gz"
    raw = json.loads(gzip.decompress(compounding_model(300, 1)))
    for layer in raw["model"]["sublayers"][0]["layers"]:
        layer["rows"] = [[[0, "0x3"]]]
    raw["sha256"] = canonical_hash(raw["model"])
    model.write_text(json.dumps(raw))
    data = str(one_point(tmp_path))
    base = ["verify", str(model), "--data", data, "--evaluator", evaluator, "--quiet"]
    assert main([*base, "--max-value-bits", "1000"]) == 2
    err = capsys.readouterr().err
    assert "more than 64000 bits in all" in err and "--max-value-bits" in err
    assert main([*base, "--max-value-bits", "2000"]) == 1  # 128 000 bits of budget: evaluated


def test_one_long_row_goes_to_the_reference_step(tmp_path, monkeypatch):
    """One distinct input with values past ONE_ROW_BITS: nothing to share, so the fast
    evaluator hands the sub-layer to the reference's step (never slower than the reference on
    the crafted models; benchmarks/hostile_values.py) — same values."""
    from exactmem.evaluate.fast import evaluator
    from exactmem.files.model_files import load_model

    path = tmp_path / "m.json.gz"
    path.write_bytes(compounding_model(20, 100))  # 8 000 bits
    model, _ = load_model(path)
    want = reference.run_points(model, [[mpq(1)]]).outputs[0]

    def no_engine(*args):
        raise AssertionError("the engine ran on one long row")

    monkeypatch.setattr(evaluator, "_Engine", no_engine)
    assert fast.run_points(model, [[mpq(1)]]).outputs[0] == want
    with pytest.raises(AssertionError, match="engine ran"):  # two rows: the engine's work
        fast.run_points(model, [[mpq(1)], [mpq(2)]])
