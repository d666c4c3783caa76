"""Resources and timings of the memorizing MLP (VYS / Lemma C.1) as N grows.

    python benchmarks/vys_scaling.py [--sizes 100,1000,10000,100000] [--verify-max 10000]

Prints a Markdown table (random points, d = 8, C = 100) and the least-squares slope of
log(parameters) against log(N). Timings are wall-clock on this machine (shared and noisy):
compare columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import print_slopes, table_header, timed, timed_verdict  # noqa: E402

from exactmem.constructions import vys  # noqa: E402
from exactmem.core.model import resources  # noqa: E402
from exactmem.datasets.dataset import random_points  # noqa: E402


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
    table_header(head)
    rows = []
    for N in sizes:
        ds = random_points(N, args.d, args.C, seed=N)
        (model, w), build = timed(lambda ds=ds: vys.build(ds, {"gadget": args.gadget, "seed": 0}))
        res = resources(model)
        verify, verdict = timed_verdict(model, ds, N <= args.verify_max, "vys")
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
