"""``exactmem bounds``: upper and lower parameter bounds of the memorization results at given
sizes, as text, JSON or a LaTeX document; ``--measure`` adds exactmem's own constructions."""

from __future__ import annotations

import argparse
import json
import sys

from exactmem.commands import print_columns
from exactmem.core.errors import EXIT_VERIFIED, InputError
from exactmem.runtime.progress import Progress


def run(args: argparse.Namespace) -> int:
    from exactmem.reports.field import evaluate_rows, measure

    for name in ("N", "n", "d", "vocab", "C"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name} must be ≥ 1")
    if args.n < 2:
        raise InputError("--n must be ≥ 2 (several rows divide by n − 1)")
    sizes = {"N": args.N, "n": args.n, "d": args.d, "omega": args.vocab, "C": args.C}
    rows = evaluate_rows(sizes)
    measured = []
    if args.measure:
        progress = Progress(not args.quiet)
        progress("building and certifying exactmem's constructions", force=True)
        with progress.phase("measuring"):
            measured = measure(sizes, seed=args.seed)
    if args.json:
        json.dump({"sizes": sizes, "bounds": rows, "measured": measured}, sys.stdout, indent=1)
        print()
    elif args.latex:
        from exactmem.commands.latex import latex_document

        print(latex_document(rows, measured, sizes))
    else:
        at = "N = {N}, n = {n}, d = {d}, ω = {omega}, C = {C}".format(**sizes)
        print(f"{at}, r = δ = 1; logarithms to base 2\n")
        head = ("#", "work", "setting", "bound", "constant", "value")
        table = [
            (
                str(k),
                r["work"],
                r["setting"],
                f"{r['kind']}, {r['quantity']}",
                r["constant"],
                r["value"] or r["status"],
            )
            for k, r in enumerate(rows, 1)
        ]
        print_columns(head, table)
        print("\n#   source; order; formula")
        for k, r in enumerate(rows, 1):
            print(f"{k:<3} {r['source']}; {r['order']}\n    {r['formula']}")
        if measured:
            print("\nmeasured (exactmem, random data of these sizes):")
            keys = (
                "construction",
                "task",
                "width",
                "depth",
                "dense_parameters",
                "nonzero_parameters",
                "max_bits",
                "eq72_max_N",
                "verdict",
            )
            print_columns(keys, [tuple(str(m[k]) for k in keys) for m in measured])
            print(
                "eq72_max_N: the largest N the model's block architecture could shatter by "
                "the eq. (72) count (labels per sequence: n for seq2seq, 1 otherwise)"
            )
            print(
                "\nagainst the papers (dense parameters / the row's bound at the measured "
                "dataset's sizes) and the constants our runs need (the claims' [tight] tables, "
                "fitted on sweeps; no paper states them):"
            )
            against = ("construction", "row", "measured/paper", "fitted constants")
            fitted = [
                (
                    m["construction"],
                    m["paper_row"] or "—",
                    m["measured_over_paper"] or "—",
                    ", ".join(f"{k} {v}" for k, v in m["fitted_constants"].items()) or "—",
                )
                for m in measured
            ]
            print_columns(against, fitted)
    return EXIT_VERIFIED
