"""Theorem 4.1 (Kajitsuka & Sato 2025) as N grows: measured resources against the theorem.

    python benchmarks/ks25_scaling.py [--sizes 100,1000,10000,100000] [--verify-max 10000]

Random next-token data (n = 16, d = 8, vocabulary 500, C = 10). The bound columns evaluate the
explicit depth and bit totals of the proof, read from proofs/ks25_theorem_4_1.toml (the claim
file is the one source of the formulas), as rigorous Arb balls. Timings are wall-clock on a
shared machine: compare within one run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import sympy

sys.path.insert(0, str(Path(__file__).parent))
from common import print_slopes, table_header, timed, timed_verdict  # noqa: E402

from exactmem.claims.proofs import load_claim  # noqa: E402
from exactmem.constructions import ks25  # noqa: E402
from exactmem.core.bounds import evaluate_ball, parse_formula  # noqa: E402
from exactmem.core.model import resources  # noqa: E402
from exactmem.datasets.dataset import squared_radius, squared_separation  # noqa: E402
from exactmem.datasets.sequences import random_sequences, view  # noqa: E402

CLAIM = Path(__file__).resolve().parent.parent / "proofs" / "ks25_theorem_4_1.toml"


def theorem_bounds(ds) -> tuple[float, float]:
    """The claim's depth and max_bits formulas at this dataset (midpoints, for the table)."""
    claim = load_claim(CLAIM)
    tokens = [ds.vocab[t] for t in view(ds).tokens]
    names = {
        "N": sympy.Integer(ds.size),
        "n": sympy.Integer(len(ds.sequences[0])),
        "d": sympy.Integer(ds.dim),
        "C": sympy.Integer(ds.num_classes),
        "r": sympy.sqrt(sympy.Rational(str(squared_radius(tokens)))),
        "delta": sympy.sqrt(sympy.Rational(str(squared_separation(tokens)))),
    }
    for key, text in claim.defines.items():
        names[key] = parse_formula(text, names, key)
    values = []
    for metric in ("depth", "max_bits"):
        ball = evaluate_ball(parse_formula(claim.bounds[metric], names, metric), 256)
        values.append(float(ball.mid()))  # labelled float: a table entry, not a verdict
    return values[0], values[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000,100000")
    ap.add_argument("--verify-max", type=int, default=10000)
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; n = 16, d = 8, vocabulary 500, C = 10\n")
    head = (
        "N",
        "|A|",
        "width",
        "depth",
        "depth bound",
        "dense params",
        "non-zero",
        "non-zero/N",
        "max bits",
        "bits bound",
        "build s",
        "verify s",
        "verdict",
    )
    table_header(head)
    rows = []
    for N in (int(s) for s in args.sizes.split(",")):
        ds = random_sequences(N, 16, 8, 500, 10, seed=N)
        (model, w), build = timed(lambda ds=ds: ks25.build(ds, {"seed": 0}))
        res = resources(model)
        depth_bound, bits_bound = theorem_bounds(ds)
        verify, verdict = timed_verdict(model, ds, N <= args.verify_max, "ks25-next-token")
        rows.append((N, res))
        print(
            f"| {N} | {len(w.witness_tokens)} | {res.width} | {res.depth} | {depth_bound:.0f} | "
            f"{res.dense_parameters} | {res.nonzero_parameters} | "
            f"{res.nonzero_parameters / N:.3f} | {res.max_bits} | {bits_bound:.0f} | "
            f"{build:.1f} | {verify} | {verdict} |",
            flush=True,
        )
    print_slopes(rows)


if __name__ == "__main__":
    main()
