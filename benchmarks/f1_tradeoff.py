"""Theorem F.1 (Kajitsuka & Sato 2025): parameters and bits against the bit budget B.

    python benchmarks/f1_tradeoff.py [--N 10000] [--budgets 16,32,64]

Next-token data (n = 16, d = 8, vocabulary 500, C = 10). Each row is built and certified
exactly; the last row is the unconstrained Theorem 4.1 construction.
"""

from __future__ import annotations

import argparse
import os
import time

from exactmem.certify import certify
from exactmem.constructions import ks25
from exactmem.sequences import random_sequences


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
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for B in [int(b) for b in args.budgets.split(",")] + [None]:
        t0 = time.perf_counter()
        if B:
            model, _ = ks25.build(ds, {"bit_budget": B}, "ks25-bit-budget")
        else:
            model, _ = ks25.build(ds, {}, "ks25-next-token")
        build = time.perf_counter() - t0
        subs = [
            len(s.meta.get("subnetworks", [s.meta]))
            for s in model.sublayers
            if hasattr(s, "meta") and s.meta
        ]
        t0 = time.perf_counter()
        cert = certify(model, ds, per_layer=False)
        verify = time.perf_counter() - t0
        r = cert.resources
        print(
            f"| {B or 'unconstrained'} | {subs[0]}, {subs[-1]} | {r.width} | {r.depth} | "
            f"{r.dense_parameters} | {r.nonzero_parameters} | {r.max_bits} | {build:.1f} | "
            f"{verify:.1f} | {cert.verdict} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
