"""Exit codes of hostile runs: signals, file-size limits, option values, labels and
coordinates of any size, and the consistency messages."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import exactmem.checks.certify
from exactmem.commands.main import main
from exactmem.core.errors import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated
from exactmem.core.outputs import TEMP_SUFFIX

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "exactmem", *args]


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(TEMP_SUFFIX)]


def _write(path: Path, obj: dict) -> Path:
    path.write_text(json.dumps(obj))
    return path


def _points(path: Path, points, labels) -> Path:
    return _write(
        path,
        {"format": "exactmem.dataset/1", "task": "points", "points": points, "labels": labels},
    )


def _sequences(path: Path, sequences, labels, vocab=(["0"], ["1"], ["2"])) -> Path:
    return _write(
        path,
        {
            "format": "exactmem.dataset/1",
            "task": "next-token",
            "vocab": list(vocab),
            "sequences": sequences,
            "labels": labels,
        },
    )


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize(
    "raised, code, word",
    [
        (KeyboardInterrupt, EXIT_INTERRUPTED, "interrupted"),
        (Terminated, EXIT_TERMINATED, "terminated"),
    ],
)
def test_interruptions_have_their_own_exit_codes(tmp_path, monkeypatch, capsys, raised, code, word):
    data, model = tmp_path / "d.json", tmp_path / "m.json"
    assert main(["generate", "points", "--N", "4", "--d", "2", "--out", str(data)]) == 0
    assert main(["build", "--construction", "vys", "--data", str(data), "--out", str(model)]) == 0

    def interrupted(*args, **kwargs):
        raise raised

    monkeypatch.setattr(exactmem.certify, "certify", interrupted)
    assert main(["verify", str(model), "--data", str(data), "--quiet"]) == code
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"{word}: no output file was begun"


@pytest.fixture(scope="module")
def long_job(tmp_path_factory):
    """A verification that runs for tens of seconds (the reference evaluator on 20000 points)."""
    folder = tmp_path_factory.mktemp("long")
    data, model = folder / "d.json", folder / "m.json"
    assert main(["generate", "points", "--N", "20000", "--d", "4", "--out", str(data)]) == 0
    build = ["build", "--construction", "vys", "--data", str(data), "--out", str(model)]
    assert main([*build, "--quiet"]) == 0
    return data, model


def _default_sigint() -> None:
    # a shell's background job ignores SIGINT, and Python then keeps it ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    "signum, code, word",
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
@pytest.mark.parametrize("jobs, group", [("1", False), ("2", False), ("2", True)])
def test_a_signal_during_verify_exits_with_its_code_and_leaves_nothing(
    long_job, tmp_path, signum, code, word, jobs, group
):
    """To the process alone (``kill``) or to its group (Ctrl-C in a terminal), with and
    without the reference evaluator's worker processes."""
    data, model = long_job
    cert = tmp_path / "c.json"
    cert.write_text("the old certificate")
    args = ["verify", str(model), "--data", str(data), "--evaluator", "reference", "--jobs", jobs]
    proc = subprocess.Popen(
        _cli(*args, "--certificate", str(cert)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        preexec_fn=_default_sigint,
        start_new_session=True,
    )
    try:
        first = proc.stderr.readline()  # the progress line: the verification has begun
        assert "verifying on 20000 inputs" in first
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    said = err.strip().splitlines()[-1]
    assert said == f"{word}: {cert} untouched (the previous file kept); no partial file left"
    assert "Traceback" not in err
    assert "verdict" not in out
    assert cert.read_text() == "the old certificate"
    assert _leftovers(tmp_path) == []


def test_a_file_size_limit_keeps_the_old_certificate(tmp_path):
    """``ulimit -f``: the write fails with EFBIG (Python ignores SIGXFSZ); exit 2 after the
    verdict, the old certificate intact, no temporary file."""
    data, model, cert = tmp_path / "d.json", tmp_path / "m.json", tmp_path / "c.json"
    assert main(["generate", "points", "--N", "12", "--d", "2", "--out", str(data)]) == 0
    assert main(["build", "--construction", "vys", "--data", str(data), "--out", str(model)]) == 0
    verify = ["verify", str(model), "--data", str(data), "--quiet", "--evaluator", "reference"]
    assert main([*verify, "--certificate", str(cert)]) == 0
    old = cert.read_bytes()
    cert.write_bytes(old[: len(old) // 3])  # a different old file: unchanged means unchanged
    old = cert.read_bytes()
    limit = len(old) + 100  # below the certificate's size, above the old file's

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = subprocess.run(
        _cli(*verify, "--certificate", str(cert)),
        capture_output=True,
        text=True,
        env=_env(),
        preexec_fn=small_files,
        timeout=300,
    )
    assert run.returncode == 2, run.stderr
    assert "verdict: VERIFIED" in run.stdout
    assert "EFBIG" in run.stderr and "Traceback" not in run.stderr
    assert cert.read_bytes() == old
    assert _leftovers(tmp_path) == []


# --------------------------------------------------------------------------- options


@pytest.fixture(scope="module")
def twenty(tmp_path_factory):
    folder = tmp_path_factory.mktemp("twenty")
    points = folder / "p.json"
    attention = folder / "a.json"
    assert main(["generate", "points", "--N", "20", "--d", "2", "--out", str(points)]) == 0
    gen = ["generate", "attention", "--N", "10", "--n", "4", "--d", "6", "--C", "3"]
    assert main([*gen, "--out", str(attention)]) == 0
    return {"points": points, "attention": attention, "next-token": points}


@pytest.mark.parametrize(
    "construction, data, options, message",
    [
        ("vys", "points", ["group_size=1000000"], "group_size=1000000: too large .* 20 items"),
        ("vys", "points", ["group_size=21"], "at most|more slots than the 20"),
        ("vys", "points", ["group_size=²"], "ASCII digits"),
        ("vys", "points", ["group_size=١٢"], "ASCII digits"),
        ("vys", "points", ["group_size=0"], "positive integer"),
        ("vys", "points", ["group_size=" + "9" * 65], "at most 64 characters"),
        ("vys", "points", ["group_size=" + "9" * 10**5], "more than 10000 characters"),
        ("vys", "points", ["group_size=2", "group_size=3"], "given twice"),
        ("vys", "points", ["group_size"], "expected KEY=VALUE"),
        ("vys", "points", ["no_such=1"], "unknown option"),
        ("vys", "points", ["gadget=tent²"], "expected one of"),
        ("mahdavi24", "attention", ["heads=1000000"], "heads=1000000: too large .* 10 examples"),
        ("mahdavi24", "attention", ["score=softmax", "temperature=1/0"], "temperature"),
        ("mahdavi24", "attention", ["score=softmax", "temperature=" + "9" * 30], "2⁶⁴"),
        ("mahdavi24", "attention", ["score=softmax", "tolerance=-1"], "positive rational"),
    ],
)
def test_option_values_are_refused_with_the_limit(
    twenty, tmp_path, capsys, construction, data, options, message
):
    out = tmp_path / "m.json"
    sets = [x for o in options for x in ("--set", o)]
    args = ["build", "--construction", construction, "--data", str(twenty[data]), "--quiet"]
    assert main([*args, "--out", str(out), *sets]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "internal" not in err
    import re

    assert re.search(message, err), err
    assert not out.exists()


def test_group_size_at_the_limit_still_builds(twenty, tmp_path):
    args = ["build", "--construction", "vys", "--data", str(twenty["points"]), "--quiet"]
    assert main([*args, "--out", str(tmp_path / "m.json"), "--set", "group_size=20"]) == 0


def test_bit_budget_and_dana_options_have_limits(tmp_path, capsys):
    data = _sequences(tmp_path / "s.json", [[0, 1, 2], [1, 1, 2], [2, 2, 1]], [1, 2, 3])
    common = ["build", "--data", str(data), "--out", str(tmp_path / "m.json"), "--quiet"]
    cases = [
        ("ks25-bit-budget", "bit_budget=1000000000000000000000000000000", "one sub-network"),
        ("dana25", "heads=1000000", "heads=1000000: too large"),
        ("dana25", "d=1000", "d=1000: too large"),
        ("dana25", "precision=1000000", "65536"),
        ("dana25", "scale=" + str(2**64 + 1), "2⁶⁴"),
    ]
    for construction, option, message in cases:
        assert main([*common, "--construction", construction, "--set", option]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["points", "--N", "5", "--coord-bound", "-5"], "--coord-bound must be ≥ 0"),
        (["points", "--N", "1000000000000"], "--N 1000000000000: at most 100000000"),
        (["next-token", "--N", "5", "--n", "100000"], "--n 100000: at most 10000"),
        (["points", "--N", "5", "--d", "100000"], "--d 100000: at most 10000"),
        (["next-token", "--N", "5", "--vocab", "1000000000"], "--vocab 1000000000: at most"),
    ],
)
def test_generate_refuses_sizes_beyond_its_limits(tmp_path, capsys, args, message):
    out = tmp_path / "d.json"
    assert main(["generate", *args, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


# --------------------------------------------------------------------------- exact sizes


@pytest.mark.parametrize("evaluator", ["reference", "fast"])
@pytest.mark.parametrize(
    "points", [[["1e20"]], [["100000000000000000000"]], [["1e20"], ["-1e20"]], [["1e40", "1/3"]]]
)
def test_huge_coordinates_build_and_verify(tmp_path, points, evaluator):
    """One point at 1e20 made vys._projected cast it to int64 (the direction was 0)."""
    data = _points(tmp_path / "d.json", points, list(range(1, len(points) + 1)))
    model = tmp_path / "m.json"
    assert main(["build", "--construction", "vys", "--data", str(data), "--out", str(model)]) == 0
    args = ["verify", str(model), "--data", str(data), "--quiet", "--evaluator", evaluator]
    assert main(args) == 0


def test_labels_beyond_int64_verify(tmp_path):
    """Labels are exact integers of any size in 1..C (the dataset contract has no int64)."""
    data = _points(tmp_path / "d.json", [["0", "0"], ["1", "2"], ["3", "1"]], [1, 2**64, 3])
    model = tmp_path / "m.json"
    assert main(["build", "--construction", "vys", "--data", str(data), "--out", str(model)]) == 0
    wrong = _points(tmp_path / "w.json", [["0", "0"], ["1", "2"], ["3", "1"]], [1, 2**64 + 1, 3])
    for evaluator in ("reference", "fast"):
        args = ["verify", str(model), "--quiet", "--evaluator", evaluator, "--construction"]
        assert main([*args, "vys", "--data", str(data)]) == 0  # Lemma C.1's stages too
        assert main([*args, "vys", "--data", str(wrong)]) == 1  # refuted, exactly


# --------------------------------------------------------------------------- messages


def _build_error(capsys, tmp_path, data, construction="ks25-next-token", options=()) -> str:
    sets = [x for o in options for x in ("--set", o)]
    args = ["build", "--construction", construction, "--data", str(data), "--quiet"]
    assert main([*args, "--out", str(tmp_path / "m.json"), *sets]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("options", [[], ["position_aware=true"]])
def test_identical_sequences_are_named_identical_without_advice(tmp_path, capsys, options):
    data = _sequences(tmp_path / "d.json", [[0, 1, 2], [0, 1, 2]], [1, 2])
    err = _build_error(capsys, tmp_path, data, options=options)
    assert "sequences[0] and sequences[1] are identical" in err
    assert "cannot be memorized by any model" in err
    assert "position_aware" not in err


def test_permuted_sequences_get_the_position_advice(tmp_path, capsys):
    data = _sequences(tmp_path / "d.json", [[0, 1, 2], [1, 0, 2]], [1, 2])
    err = _build_error(capsys, tmp_path, data)
    assert "sequences[0] and sequences[1] differ but have the same last token" in err
    assert "--set position_aware=true" in err
    assert "identical" not in err


def test_both_kinds_are_told_apart(tmp_path, capsys):
    data = _sequences(tmp_path / "d.json", [[0, 1, 2], [0, 1, 2], [1, 0, 2]], [1, 2, 3])
    err = _build_error(capsys, tmp_path, data)
    assert err.startswith("error: 2 label conflicts")
    assert "sequences[0] and sequences[1] are identical" in err
    assert "sequences[0] and sequences[2] differ" in err


def test_token_ids_are_not_advised_positions(tmp_path, capsys):
    """ks25-token-ids takes no position_aware: its conflicts get no such advice."""
    data = _sequences(tmp_path / "d.json", [[0, 1, 2], [1, 0, 2]], [1, 2])
    err = _build_error(capsys, tmp_path, data, construction="ks25-token-ids")
    assert "differ but have" in err and "position_aware" not in err


def test_every_integer_option_has_a_limit_and_the_help_names_it():
    from exactmem.checks.build_options import LIMITS_HELP, OPTION_LIMITS
    from exactmem.plugins.options import OPTIONS, _positive

    integer = {
        k for opts in OPTIONS.values() for k, (_, parse) in opts.items() if parse is _positive
    }
    assert integer <= set(OPTION_LIMITS)
    assert all(key in LIMITS_HELP for key in OPTION_LIMITS)


def test_the_least_bit_budget_is_allowed_on_one_sequence(tmp_path):
    data = _sequences(tmp_path / "s.json", [[0, 1]], [1])
    args = ["build", "--construction", "ks25-bit-budget", "--data", str(data), "--quiet"]
    assert main([*args, "--out", str(tmp_path / "m.json"), "--set", "bit_budget=2"]) == 0


def test_a_bit_budget_below_two_is_refused_alike_by_build_and_verify():
    """B = 1 has log₂ B = 0 (no K_B): ``build`` refused it, ``verify --set`` judged it."""
    from exactmem.checks.build_options import parse_options
    from exactmem.core.errors import InputError

    for construction in ("ks25-bit-budget", "ks25-next-token"):
        with pytest.raises(InputError, match="bit_budget=1: a bit budget B must be ≥ 2"):
            parse_options(construction, ["bit_budget=1"])
        assert parse_options(construction, ["bit_budget=2"]) == {"bit_budget": 2}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG)")
def test_a_worker_dies_with_the_process_that_forked_it(tmp_path):
    """The reference evaluator's workers ask the kernel to kill them when their parent ends: a
    SIGTERM that caught one mid-fork left it alive, holding the command's pipes open (a test
    waiting for them timed out once at 600 s)."""
    code = textwrap.dedent(
        """
        import os, sys, time
        from exactmem.evaluate.reference import _die_with
        parent = os.getpid()
        child = os.fork()
        if child == 0:
            _die_with(parent)
            time.sleep(60)
            os._exit(0)
        print(child, flush=True)
        time.sleep(0.5)  # the child has called prctl; then the parent ends
        os._exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60
    )
    pid = int(done.stdout.split()[0])

    def alive() -> bool:
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return False
        return "State:\tZ" not in state

    deadline = time.monotonic() + 10
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive()
