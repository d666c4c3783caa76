"""Resources and timings of the memorizing MLP (VYS / Lemma C.1) as N grows.

    python benchmarks/vys_scaling.py [--sizes 100,1000,10000,100000] [--verify-max 10000]

Prints a Markdown table (random points, d = 8, C = 100) and the least-squares slope of
log(parameters) against log(N). Timings are wall-clock on this machine (shared and noisy):
compare columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import math
import os
import time

from exactmem.certify import certify
from exactmem.constructions import vys
from exactmem.data import random_points
from exactmem.model import resources


def slope(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    num = sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True))
    return num / sum((a - mx) ** 2 for a in lx)


def print_slopes(rows: list) -> None:
    """Least-squares log-log slopes of the resources against N, for (N, Resources) rows."""
    if len(rows) < 2:
        return
    ns = [n for n, _ in rows]
    parts = [
        f"{name} {slope(ns, [getattr(r, key) for _, r in rows]):.3f}"
        for name, key in (
            ("dense parameters", "dense_parameters"),
            ("non-zero", "nonzero_parameters"),
            ("depth", "depth"),
            ("max bits", "max_bits"),
        )
    ]
    print("\nlog-log slope against N: " + ", ".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000,100000")
    ap.add_argument(
        "--verify-max",
        type=int,
        default=10000,
        help="verify exactly up to this N (the reference evaluator is quadratic-ish)",
    )
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--C", type=int, default=100)
    ap.add_argument("--gadget", default="peel", choices=vys.GADGETS)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {os.cpu_count()} cores; d = {args.d}, C = {args.C}, gadget {args.gadget}\n")
    head = (
        "N",
        "K (paper)",
        "groups",
        "ρ",
        "width",
        "depth",
        "dense params",
        "non-zero",
        "non-zero/N",
        "max bits",
        "build s",
        "verify s",
        "verdict",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    rows = []
    for N in sizes:
        ds = random_points(N, args.d, args.C, seed=N)
        t0 = time.perf_counter()
        model, w = vys.build(ds, {"gadget": args.gadget, "seed": 0})
        build = time.perf_counter() - t0
        res = resources(model)
        verify, verdict = "—", "not run"
        if N <= args.verify_max:
            t0 = time.perf_counter()
            verdict = certify(model, ds, per_layer=False).verdict
            verify = f"{time.perf_counter() - t0:.1f}"
        rows.append((N, res))
        print(
            f"| {N} | {w.group_size} ({w.paper_group_size}) | {w.groups} | {w.key_bits} | "
            f"{res.width} | {res.depth} | {res.dense_parameters} | {res.nonzero_parameters} | "
            f"{res.nonzero_parameters / N:.3f} | {res.max_bits} | {build:.1f} | {verify} | "
            f"{verdict} |",
            flush=True,
        )
    print_slopes(rows)


if __name__ == "__main__":
    main()
