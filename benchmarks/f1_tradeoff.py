"""Theorem F.1 (Kajitsuka & Sato 2025): parameters and bits against the bit budget B.

    python benchmarks/f1_tradeoff.py [--N 10000] [--budgets 16,32,64]

Next-token data (n = 16, d = 8, vocabulary 500, C = 10). Each row is built and certified
exactly; the last row is the unconstrained Theorem 4.1 construction.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import table_header, timed  # noqa: E402

from exactmem.checks.certify import certify  # noqa: E402
from exactmem.constructions import ks25  # noqa: E402
from exactmem.datasets.sequences import random_sequences  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=10000)
    ap.add_argument("--budgets", default="16,32,64")
    args = ap.parse_args()
    ds = random_sequences(args.N, 16, 8, 500, 10, seed=args.N)
    print(f"machine: {os.cpu_count()} cores; N = {args.N}, n = 16, d = 8, vocabulary 500, C = 10\n")
    head = (
        "B",
        "sub-networks (φ̃, F2)",
        "width",
        "depth",
        "dense params",
        "non-zero",
        "max bits",
        "build s",
        "verify s",
        "verdict",
    )
    table_header(head)
    for B in [int(b) for b in args.budgets.split(",")] + [None]:
        options = {"bit_budget": B} if B else {}
        name = "ks25-bit-budget" if B else "ks25-next-token"
        (model, _), build = timed(lambda o=options, c=name: ks25.build(ds, o, c))
        subs = [
            len(s.meta.get("subnetworks", [s.meta]))
            for s in model.sublayers
            if hasattr(s, "meta") and s.meta
        ]
        cert, verify = timed(
            lambda m=model, c=name, o=options: certify(
                m, ds, construction=c, per_layer=False, options=o
            )
        )
        r = cert.resources
        print(
            f"| {B or 'unconstrained'} | {subs[0]}, {subs[-1]} | {r.width} | {r.depth} | "
            f"{r.dense_parameters} | {r.nonzero_parameters} | {r.max_bits} | {build:.1f} | "
            f"{verify:.1f} | {cert.verdict} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
