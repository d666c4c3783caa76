"""Whole-process ``verify`` in one process against ``--processes`` on a local Dask cluster:
wall time and the peak RSS of every process of the tree (the parent and each worker), sampled.

    python benchmarks/dask_scale.py MODEL DATA --construction vys --jobs 2

Prints one line per run (docs/scale.md records them)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import psutil


def measure(argv: list[str]) -> tuple[float, int, dict[int, tuple[str, int]]]:
    """(wall seconds, exit code, pid → (name, peak RSS bytes)) of ``argv``'s process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    peaks: dict[int, tuple[str, int]] = {}
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for p in tree:
            try:
                rss = p.memory_info().rss
                kind = "worker" if "spawn" in " ".join(p.cmdline()) else "parent"
            except psutil.Error:
                continue
            if p.pid == proc.pid:
                kind = "parent"
            old = peaks.get(p.pid, (kind, 0))
            peaks[p.pid] = (kind, max(old[1], rss))
        time.sleep(0.2)
    return time.perf_counter() - start, proc.wait(), peaks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--construction", default="vys")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skip-one", action="store_true", help="only the Dask run")
    args = ap.parse_args()
    base = [sys.executable, "-m", "exactmem", "verify", args.model, "--data", args.data]
    base += ["--construction", args.construction, "--quiet"]
    runs = [("one process", ["--jobs", "1"])] * (not args.skip_one)
    runs.append((f"{args.jobs} Dask workers", ["--jobs", str(args.jobs), "--processes"]))
    for label, extra in runs:
        wall, code, peaks = measure(base + extra)
        big = sorted(((k, r) for k, r in peaks.values() if r > 50 << 20), key=lambda t: t[0])
        rss = ", ".join(f"{k} {r / 2**30:.2f} GiB" for k, r in big)
        print(f"{label}: exit {code}, wall {wall:.1f} s, peak RSS {rss}", flush=True)


if __name__ == "__main__":
    main()
