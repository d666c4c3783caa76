"""``exactmem plot``: pictures of the bounds and of a certificate (:mod:`exactmem.reports.plot`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from exactmem.core.errors import EXIT_VERIFIED
from exactmem.runtime.progress import Progress


def run(args: argparse.Namespace) -> int:
    from exactmem.reports import plot

    progress = Progress(not args.quiet)
    with progress.phase(f"drawing {args.out}"):
        if args.figure == "bounds":
            summary = plot.plot_bounds(
                args.out,
                N_min=args.N_min,
                N_max=args.N_max,
                n=args.n,
                d=args.d,
                omega=args.vocab,
                C=args.C,
                measure_Ns=args.measure_N,
                seed=args.seed,
            )
        else:
            summary = plot.plot_certificate(args.certificate, args.out)
    if args.json:
        from exactmem.commands import emit_json, file_sha256

        emit_json(
            {
                "path": args.out,
                "file_sha256": file_sha256(args.out),
                "figure": args.figure,
                "format": Path(args.out).suffix.lstrip(".").lower(),
                "summary": summary,
            }
        )
    else:
        print(summary)
    return EXIT_VERIFIED


def sizes(text: str) -> tuple[int, ...]:
    """--measure-N: comma-separated positive integers, or an empty string for none."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) > 20 or not all(p.isascii() and p.isdigit() and len(p) < 10 for p in parts):
        raise argparse.ArgumentTypeError(
            f"--measure-N {text[:40]!r}: expected up to 20 comma-separated integers"
        )
    return tuple(int(p) for p in parts)
