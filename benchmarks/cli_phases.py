"""The CLI as a user runs it: ``generate``, ``build`` and ``verify`` as separate processes with
their files on disk, measured per phase.

For each N and each file format (``json``: ``.json``; ``exm``: the binary container) the script
runs, each as its own ``python -m exactmem`` process:

* generate — random next-token data (n = 16, d = 8, vocabulary 1000, C = 16, seed 0);
* build — ``ks25-next-token`` (Theorem 4.1, default options);
* load — a process that only reads the two files (``load_dataset``, ``load_model``) and prints
  the in-process seconds of each;
* verify — ``verify --construction ks25-next-token --certificate …`` (every check), with the
  numba kernel cache cold (an empty ``NUMBA_CACHE_DIR``) and/or warm (the same command run once
  before, untimed, with the run's shared cache).

Per phase: wall seconds of the whole process, its peak RSS (``os.wait4``'s rusage of that one
child), the files' sizes and, for load, the in-process load times. Prints a Markdown table and,
with ``--json FILE``, writes every figure.

    python benchmarks/cli_phases.py --sizes 1000,10000,100000,1000000 --formats json,exm
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPE = ["--n", "16", "--d", "8", "--vocab", "1000", "--C", "16", "--seed", "0"]
CONSTRUCTION = "ks25-next-token"
EXTENSIONS = {"json": ".json", "exm": ".exm"}
LOAD = """
import json, sys, time
from exactmem.files.dataset_files import load_dataset
from exactmem.files.model_files import load_model
t0 = time.perf_counter(); ds = load_dataset(sys.argv[1]); t1 = time.perf_counter()
model, _ = load_model(sys.argv[2]); t2 = time.perf_counter()
print(json.dumps({"data": t1 - t0, "model": t2 - t1, "N": ds.size}))
"""


def measure(argv: list[str], env: dict, *, stdout_json: bool = False) -> dict:
    """Run one process; its wall seconds, peak RSS in GB (of that child alone), exit code and,
    with ``stdout_json``, what it printed."""
    out_file = tempfile.TemporaryFile(mode="w+")
    err_file = tempfile.TemporaryFile(mode="w+")
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=out_file, stderr=err_file, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out_file.seek(0)
    err_file.seek(0)
    result = {
        "wall_s": round(wall, 3),
        "peak_rss_gb": round(usage.ru_maxrss / 2**20, 3),  # Linux: kilobytes
        "exit": proc.returncode,
    }
    if proc.returncode not in (0, 1):
        err = err_file.read()
        print(f"  {' '.join(argv[2:5])}… exited {proc.returncode}: {err[-400:]}", file=sys.stderr)
    if stdout_json and proc.returncode == 0:
        result["printed"] = json.loads(out_file.read())
    return result


def one(N: int, fmt: str, caches: list[str], work: Path, jobs: int | None) -> dict:
    """Every phase at one N and one format, in ``work``. The kernel cache ``work/numba-cache``
    is shared by the rows of a run (a warm run fills only what is missing); a cold run gets an
    empty cache of its own."""
    ext = EXTENSIONS[fmt]
    data, model, cert = work / f"data{ext}", work / f"model{ext}", work / "cert.json"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(work / "numba-cache")}
    cli = [sys.executable, "-m", "exactmem"]
    row: dict = {"N": N, "format": fmt}
    gen = [*cli, "generate", "next-token", "--N", str(N), *SHAPE, "--out", str(data), "--quiet"]
    row["generate"] = measure(gen, env)
    row["data_mb"] = round(data.stat().st_size / 1e6, 2)
    build = [*cli, "build", "--construction", CONSTRUCTION, "--data", str(data)]
    row["build"] = measure([*build, "--out", str(model), "--quiet"], env)
    row["model_mb"] = round(model.stat().st_size / 1e6, 2)
    load = measure([sys.executable, "-c", LOAD, str(data), str(model)], env, stdout_json=True)
    printed = load.pop("printed", {})
    row["load"] = {**load, "data_s": printed.get("data"), "model_s": printed.get("model")}
    verify = [*cli, "verify", str(model), "--data", str(data), "--construction", CONSTRUCTION]
    verify += ["--certificate", str(cert), "--quiet"]
    if jobs is not None:
        verify += ["--jobs", str(jobs)]
    if "cold" in caches:
        cold = work / "numba-cache-cold"
        shutil.rmtree(cold, ignore_errors=True)
        row["verify_cold"] = measure(verify, {**env, "NUMBA_CACHE_DIR": str(cold)})
        shutil.rmtree(cold, ignore_errors=True)
    if "warm" in caches:
        measure(verify, env)  # fills what the shared cache lacks; not timed
        row["verify_warm"] = measure(verify, env)
    for f in (data, model, cert):
        f.unlink(missing_ok=True)
    return row


def cell(phase: dict | None, key: str = "wall_s") -> str:
    if not phase:
        return "—"
    return f"{phase[key]:.2f}" if phase.get(key) is not None else "—"


def table(rows: list[dict]) -> None:
    head = [
        "N",
        "format",
        "data MB",
        "model MB",
        "generate s (GB)",
        "build s (GB)",
        "load data s",
        "load model s",
        "load process s (GB)",
        "verify cold s",
        "verify warm s (GB)",
        "verdict",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        verify = r.get("verify_warm") or r.get("verify_cold") or {}
        verdict = {0: "verified", 1: "refuted", None: "not run"}.get(
            verify.get("exit"), f"exit {verify.get('exit')}"
        )

        def with_rss(p):
            return f"{cell(p)} ({p['peak_rss_gb']:.2f})" if p else "—"

        print(
            "| "
            + " | ".join(
                [
                    str(r["N"]),
                    r["format"],
                    f"{r['data_mb']:.1f}",
                    f"{r['model_mb']:.1f}",
                    with_rss(r["generate"]),
                    with_rss(r["build"]),
                    cell(r["load"], "data_s"),
                    cell(r["load"], "model_s"),
                    with_rss(r["load"]),
                    cell(r.get("verify_cold")),
                    with_rss(r.get("verify_warm")),
                    verdict,
                ]
            )
            + " |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="comma-separated N")
    p.add_argument("--formats", default="json,exm", help="json, exm or both")
    p.add_argument(
        "--cache",
        choices=("cold", "warm", "both"),
        default="both",
        help="the numba kernel cache of verify: cold (an empty cache), warm (the same command "
        "run once before, untimed) or both",
    )
    p.add_argument(
        "--cold-sizes",
        help="comma-separated N at which cold runs are timed (default: every N); a cold run "
        "compiles every kernel again, about a minute",
    )
    p.add_argument("--jobs", type=int, help="verify --jobs (default: the CLI's)")
    p.add_argument("--verify-max", type=int, help="verify only at N up to this (default: every N)")
    p.add_argument("--workdir", help="folder for the files (default: a temporary folder)")
    p.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    formats = args.formats.split(",")
    for fmt in formats:
        if fmt not in EXTENSIONS:
            p.error(f"--formats: {fmt!r} is not one of {', '.join(EXTENSIONS)}")
    caches = ["cold", "warm"] if args.cache == "both" else [args.cache]
    cold_sizes = [int(s) for s in args.cold_sizes.split(",")] if args.cold_sizes else sizes
    with tempfile.TemporaryDirectory(prefix="cli-phases-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = []
        for N in sizes:
            for fmt in formats:
                here = [c for c in caches if c != "cold" or N in cold_sizes]
                if args.verify_max is not None and N > args.verify_max:
                    here = []
                rows.append(one(N, fmt, here, work, args.jobs))
                print(f"N = {N} {fmt}: {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
                if args.json:  # written as it goes: a long run keeps what it measured
                    Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        shutil.rmtree(work / "numba-cache", ignore_errors=True)
    machine = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    print(f"\n{machine}; files: n = 16, d = 8, vocabulary 1000, C = 16; {CONSTRUCTION}\n")
    table(rows)


if __name__ == "__main__":
    main()
