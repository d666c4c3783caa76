"""Progress with percentage and ETA for every long phase: the generators, the constructions'
builds and the compression of a dataset file report how far they are; on a terminal the bars
show it, piped or with --quiet nothing but the usual lines, and --json output is the same."""

import gzip
import io
import json
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from exactmem.runtime.progress import Progress, Steps, counter, tell

ROOT = Path(__file__).resolve().parent.parent


class Recorder:
    """A reporter that takes fractions and remembers them (and the plain messages)."""

    def __init__(self):
        self.fractions: list[tuple[str, int, int, str]] = []
        self.messages: list[str] = []

    def __call__(self, message, *, force=False):
        self.messages.append(message)

    def fraction(self, phase, done, total, message="", *, outer=False):
        self.fractions.append((phase, done, total, message))

    def phases(self) -> set[str]:
        return {p for p, *_ in self.fractions}

    def completed(self, phase: str) -> bool:
        """Told, never past its total, never backwards, and ended at done = total."""
        seen = [(d, t) for p, d, t, _ in self.fractions if p == phase]
        return (
            bool(seen)
            and all(0 <= d <= t for d, t in seen)
            and all(a[0] <= b[0] for a, b in zip(seen, seen[1:], strict=False))
            and seen[-1][0] == seen[-1][1]
        )


# --------------------------------------------------------------------------- the helpers


def test_counter_reports_a_bounded_number_of_times_and_closes_at_the_total():
    rec = Recorder()
    step = counter(rec, "drawing", 10_000, reports=50)
    for k in range(1, 10_001):
        step(k)
    assert 40 <= len(rec.fractions) <= 60
    assert rec.completed("drawing")


def test_counter_is_silent_for_plain_callables_and_none():
    said: list[str] = []
    for reporter in (said.append, None):
        step = counter(reporter, "drawing", 100)
        for k in range(101):
            step(k)
    assert said == []


def test_steps_name_each_step_and_grow_when_more_are_found():
    rec = Recorder()
    steps = Steps(rec, "building x", 2)
    steps.step("one")
    steps.add(1)
    steps.step("two")
    steps.step("three")
    steps.step("four")  # one more than planned: the total grows, the bar never passes 100 %
    steps.done()
    assert [m for *_, m in rec.fractions[:4]] == ["one", "two", "three", "four"]
    assert [(d, t) for _, d, t, _ in rec.fractions] == [(0, 2), (1, 3), (2, 3), (3, 4), (4, 4)]
    said: list[str] = []
    plain = Steps(said.append, "building x", 2)
    plain.step("one")
    plain.step("two")
    plain.done()
    assert said == ["one", "two"]  # progress=print lists the steps


def test_a_bar_that_grows_stays_one_bar():
    stream = io.StringIO()
    p = Progress(True, stream=stream, bars=True)
    tell(p, "a", phase="building x", done=0, total=2)
    first = p._bar
    tell(p, "b", phase="building x", done=1, total=3)
    assert p._bar is first and (first.n, first.total) == (1, 3)
    tell(p, "", phase="building x", done=3, total=3)
    assert p._bar is None


def test_the_bars_are_drawn_on_a_terminal_that_reports_no_size(monkeypatch):
    """A pseudo-terminal whose size was never set reports 0 × 0; tqdm would hide every bar."""
    import shutil

    monkeypatch.setattr(
        shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((0, 0))
    )
    stream = io.StringIO()
    p = Progress(True, stream=stream, bars=True)
    tell(p, "", phase="generating points", done=1, total=4)
    assert p._bar.nrows == 24 and p._bar.ncols == 80  # tqdm's own guess: nrows −1, nothing drawn
    p.close()
    assert "generating points:   0%" in stream.getvalue()


def test_the_chunked_gzip_writes_the_bytes_of_gzip_compress():
    from exactmem.files.dataset_files import GZIP_BLOCK, _gzip

    for size in (0, 1, GZIP_BLOCK, 2 * GZIP_BLOCK + 3):
        data = (b"exactmem " * (size // 9 + 1))[:size]
        rec = Recorder()
        assert _gzip(data, rec, "compressing") == gzip.compress(data, compresslevel=6, mtime=0)
        assert size == 0 or rec.completed("compressing")


# --------------------------------------------------------------------------- the generators


def test_every_generator_reports_its_items():
    from support import text_windows as windows

    from exactmem.constructions.dana25 import random_associations
    from exactmem.constructions.mahdavi24 import random_instance
    from exactmem.datasets.dataset import random_points
    from exactmem.datasets.sequences import random_sequences

    runs = {
        "generating points": lambda r: random_points(300, 3, 4, progress=r),
        "generating sequences": lambda r: random_sequences(300, 5, 3, 40, 4, progress=r),
        "generating examples": lambda r: random_instance(50, 4, 6, 3, progress=r),
        "generating associations": lambda r: random_associations(20, 2, 100, progress=r),
        "generating text windows": lambda r: windows("abcab cabbc aabc " * 20, 6, progress=r),
    }
    for phase, run in runs.items():
        rec = Recorder()
        quiet = run(None)
        told = run(rec)
        assert rec.completed(phase), phase
        assert quiet == told, phase  # reporting changes nothing in the data

    rec = Recorder()
    random_sequences(100, 4, 3, 30, 4, task="seq2seq", progress=rec)
    assert rec.completed("generating sequences")


# --------------------------------------------------------------------------- the builds


@pytest.mark.parametrize(
    "construction, make, options",
    [
        ("vys", lambda: import_module("exactmem.datasets.dataset").random_points(40, 3, 4), {}),
        (
            "vys",
            lambda: import_module("exactmem.datasets.dataset").random_points(40, 3, 4),
            {"gadget": "peel"},
        ),
        (
            "ks25-next-token",
            lambda: import_module("exactmem.datasets.sequences").random_sequences(30, 4, 3, 20, 4),
            {},
        ),
        (
            "ks25-bit-budget",
            lambda: import_module("exactmem.datasets.sequences").random_sequences(30, 4, 3, 20, 4),
            {"bit_budget": 3},
        ),
        (
            "mahdavi24",
            lambda: import_module("exactmem.constructions.mahdavi24").random_instance(6, 4, 6, 3),
            {"score": "softmax", "readout": "classification"},
        ),
        (
            "dana25",
            lambda: import_module("exactmem.constructions.dana25").random_associations(8, 2, 6),
            {},
        ),
        (
            "kim23",
            lambda: import_module("exactmem.datasets.sequences").random_sequences(
                20, 4, 2, 12, 3, task="seq2seq"
            ),
            {},
        ),
        (
            "ks24",
            lambda: import_module("exactmem.constructions.ks24").random_instance(
                20, 4, 3, 16, 3, 1
            ),
            {},
        ),
        (
            "madden24",
            lambda: import_module("exactmem.constructions.madden24").random_contexts(8, 3, 5),
            {},
        ),
    ],
)
def test_every_construction_reports_its_steps(construction, make, options):
    from exactmem.api import build
    from exactmem.files.model_json import canonical_hash, model_to_json

    dataset = make()
    rec = Recorder()
    told = build(dataset, construction, progress=rec, **options)
    quiet = build(dataset, construction, **options)
    phase = f"building {construction}"
    assert rec.phases() == {phase}
    assert rec.completed(phase) and len(rec.fractions) >= 4
    assert all(m for _, d, t, m in rec.fractions if d < t)  # each step named
    assert canonical_hash(model_to_json(told)) == canonical_hash(model_to_json(quiet))


def test_check_hears_the_generator_and_the_build():
    from exactmem.claims.proofs import build_instance, load_claims, shipped_proofs_dir

    claim = next(c for c in load_claims(shipped_proofs_dir()) if c.construction == "vys")
    inst = next(i for i in claim.instances if i.tier == "quick")
    rec = Recorder()
    build_instance(claim, inst, rec)
    assert rec.completed("building vys")


# --------------------------------------------------------------------------- the command line


def on_a_terminal(argv: list[str], cwd: Path) -> tuple[str, str, int]:
    """Run ``exactmem ARGV`` with stderr on a pseudo-terminal: (stdout, what the terminal
    received, exit code)."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "exactmem", *argv],
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=cwd,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    out = proc.stdout.read().decode()
    proc.stdout.close()
    return out, b"".join(chunks).decode(errors="replace"), proc.wait(timeout=600)


def piped(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "exactmem", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


GENERATE = ["generate", "next-token", "--N", "30000", "--n", "8", "--vocab", "200"]
BUILD = ["build", "--construction", "vys", "--data", "p.json", "--out", "m.json"]


def test_generate_and_build_draw_percentages_on_a_terminal(tmp_path):
    out, terminal, code = on_a_terminal([*GENERATE, "--out", "s.json.gz"], tmp_path)
    assert code == 0 and out.startswith("wrote s.json.gz")
    assert "generating sequences:" in terminal and "%|" in terminal
    assert "compressing s.json.gz:" in terminal
    assert piped(["generate", "points", "--N", "3000", "--out", "p.json"], tmp_path).returncode == 0
    out, terminal, code = on_a_terminal(BUILD, tmp_path)
    assert code == 0 and out.startswith("wrote m.json")
    steps = [line for line in terminal.replace("\r", "\n").splitlines() if "building vys:" in line]
    percentages = {line.split("%")[0].split(":")[-1].strip() for line in steps if "%" in line}
    assert len(percentages) >= 2, terminal  # several steps drawn, not only 0 %
    assert "[" in steps[-1] and "<" in steps[-1]  # [elapsed<remaining]


def test_without_a_terminal_only_the_usual_lines(tmp_path):
    done = piped([*GENERATE, "--out", "s.json.gz"], tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    piped(["generate", "points", "--N", "3000", "--out", "p.json"], tmp_path)
    done = piped(BUILD, tmp_path)
    assert done.returncode == 0
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "building vys for 3000 points" in lines[0]
    assert "%" not in done.stderr and "\r" not in done.stderr
    quiet = piped([*BUILD, "--quiet"], tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""
    out, terminal, code = on_a_terminal([*BUILD, "--quiet"], tmp_path)
    assert code == 0 and terminal == ""


def test_json_on_stdout_is_the_same_on_a_terminal(tmp_path):
    argv = [*GENERATE, "--out", "s.json.gz", "--json"]
    out, terminal, _ = on_a_terminal(argv, tmp_path)
    assert "%|" in terminal
    assert json.loads(out) == json.loads(piped(argv, tmp_path).stdout)
    argv = [*BUILD, "--json"]
    piped(["generate", "points", "--N", "3000", "--out", "p.json"], tmp_path)
    out, terminal, _ = on_a_terminal(argv, tmp_path)
    assert "building vys:" in terminal
    assert json.loads(out) == json.loads(piped(argv, tmp_path).stdout)
