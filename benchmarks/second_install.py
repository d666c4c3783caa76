"""Compile once per machine: the same wheel in two fresh virtual environments sharing one
per-user cache (issue 30 point 3).

Builds the wheel of this checkout, makes three virtual environments under a temporary folder
and points ``XDG_CACHE_HOME`` (the per-user cache: ``$XDG_CACHE_HOME/exactmem/numba``) at an
empty folder. Then, each from an unrelated folder:

1. ``exactmem warmup`` in the first venv — every kernel compiles into the empty cache;
2. ``exactmem warmup`` in the second — the kernels are keyed by content, so none compiles;
3. the example of docs/api.md (build and certify Theorem 4.1 on four sentences) in the third:
   its first run, timed in the process and as a whole;
4. a forced reinstall of the wheel in the first venv, then ``warmup`` again.

Prints one line per step. Needs network or a wheel cache for the dependencies; takes a few
minutes, most of it step 1.

    python benchmarks/second_install.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

EXAMPLE = """
import time
started = time.perf_counter()
import exactmem
from exactmem.runtime import jit
vocab = {"the": [1, 0], "a": [0, 1], "cat": [2, 1], "dog": [1, 2], "sat": [3, 3], "ran": [3, -1]}
sentences = ["the cat sat", "the dog ran", "a cat ran", "a dog sat"]
dataset = exactmem.Dataset.from_tokens([s.split() for s in sentences], [1, 2, 2, 1], vocab=vocab)
model = exactmem.build(dataset, "ks25-next-token", seed=0)
certificate = exactmem.certify(model, dataset, construction="ks25-next-token")
print(certificate.verdict, round(time.perf_counter() - started, 2), len(jit.compiled))
"""


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[str, float]:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout, time.perf_counter() - started


def _venv(folder: Path, wheel: Path, env: dict[str, str]) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], env=env, check=True)
    return python


def _warmup(python: Path, env: dict[str, str], cwd: Path) -> str:
    out, wall = _run([str(python), "-m", "exactmem", "warmup", "--json", "--quiet"], env, cwd)
    report = json.loads(out)
    return f"{len(report['compiled'])} compiled, {report['seconds']:.1f} s ({wall:.1f} s wall)"


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="exactmem-second-install-"))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env["XDG_CACHE_HOME"] = str(work / "cache")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work), str(ROOT)],
        env=env,
        check=True,
    )
    wheel = next(work.glob("exactmem-*.whl"))
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    first, second, third = (_venv(work / name, wheel, env) for name in ("v1", "v2", "v3"))
    print(f"1. first venv, empty cache: warmup {_warmup(first, env, elsewhere)}")
    print(f"2. second venv, same cache: warmup {_warmup(second, env, elsewhere)}")
    out, wall = _run([str(third), "-c", EXAMPLE], env, elsewhere)
    verdict, seconds, compiled = out.split()
    print(
        f"3. third venv, docs/api.md's example: {verdict}, {seconds} s in the process "
        f"({wall:.2f} s wall), {compiled} compiled"
    )
    reinstall = [str(first), "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps"]
    subprocess.run([*reinstall, str(wheel)], env=env, check=True)
    print(f"4. first venv reinstalled: warmup {_warmup(first, env, elsewhere)}")


if __name__ == "__main__":
    main()
