"""``exactmem check``: run the claim files (the proof regression, :mod:`exactmem.claims.proofs`)."""

from __future__ import annotations

import argparse

from exactmem.runtime.progress import Progress


def run(args: argparse.Namespace) -> int:
    from exactmem.claims.proofs import run_check

    progress = Progress(not args.quiet)
    try:
        return run_check(
            args=args,
            pattern=args.k,
            tier=args.tier,
            as_json=args.json,
            proofs_dir=args.proofs,
            progress=progress,
            jobs=args.jobs,
            evaluator=args.evaluator,
        )
    finally:
        progress.close()
