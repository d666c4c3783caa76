"""Whole-process ``verify`` in one process against ``--processes`` on a local Dask cluster:
wall time, CPU time and the peak RSS of every process of the tree (the parent and each
worker), sampled every 0.2 s.

    python benchmarks/dask_scale.py MODEL DATA --construction vys --jobs 2

Prints one line per run with the load average beside it (docs/scale.md records them); on a
shared machine compare CPU seconds, and wall times only within one invocation."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import psutil


def measure(argv: list[str], timeline: float = 0.0, limit: float = 0.0) -> tuple[float, int, dict]:
    """(wall seconds, exit code, pid → [name, peak RSS bytes, CPU seconds]) of ``argv``'s
    process tree; with ``timeline`` > 0, the parent's RSS every ``timeline`` seconds on
    stderr; with ``limit`` > 0, the tree is stopped when a process passes ``limit`` GiB."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    seen: dict[int, list] = {}
    told = 0.0
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for p in tree:
            try:
                with p.oneshot():
                    rss = p.memory_info().rss
                    cpu = sum(p.cpu_times()[:2])
                    kind = "worker" if "spawn" in " ".join(p.cmdline()) else "parent"
            except psutil.Error:
                continue
            if p.pid == proc.pid:
                kind = "parent"
            entry = seen.setdefault(p.pid, [kind, 0, 0.0])
            entry[1], entry[2] = max(entry[1], rss), max(entry[2], cpu)
            if limit and rss > limit * 2**30:
                print(f"  {kind} passed {limit} GiB: stopped", file=sys.stderr, flush=True)
                for q in reversed(tree):
                    q.kill()
            if timeline and p.pid == proc.pid and time.perf_counter() - start >= told:
                told += timeline
                print(
                    f"  {time.perf_counter() - start:6.1f} s parent {rss / 2**30:.2f} GiB",
                    file=sys.stderr,
                    flush=True,
                )
        time.sleep(0.2)
    return time.perf_counter() - start, proc.wait(), seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a model file (.exm or .json)")
    ap.add_argument("data", help="its dataset file")
    ap.add_argument("--construction", default="vys", help="the checklist (default vys)")
    ap.add_argument("--jobs", type=int, default=2, help="local Dask workers (default 2)")
    ap.add_argument("--skip-one", action="store_true", help="only the Dask run")
    ap.add_argument("--skip-dask", action="store_true", help="only the one-process run")
    ap.add_argument(
        "--timeline", type=float, default=0.0, help="print the parent's RSS every SECONDS"
    )
    ap.add_argument(
        "--max-rss", type=float, default=0.0, help="stop a run whose process passes GiB"
    )
    args = ap.parse_args()
    base = [sys.executable, "-m", "exactmem", "verify", args.model, "--data", args.data]
    base += ["--construction", args.construction, "--quiet"]
    runs = [("one process", ["--jobs", "1"])] * (not args.skip_one)
    if not args.skip_dask:
        runs.append((f"{args.jobs} Dask workers", ["--jobs", str(args.jobs), "--processes"]))
    for label, extra in runs:
        load = os.getloadavg()[0]
        wall, code, seen = measure(base + extra, args.timeline, args.max_rss)
        big = sorted((e for e in seen.values() if e[1] > 50 << 20), key=lambda e: e[0])
        rss = ", ".join(f"{k} {r / 2**30:.2f} GiB" for k, r, _ in big)
        cpu = ", ".join(f"{k} {c:.0f} s" for k, _, c in big)
        print(
            f"{label}: exit {code}, wall {wall:.1f} s, peak RSS {rss}; CPU {cpu}; "
            f"load {load:.1f} → {os.getloadavg()[0]:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
