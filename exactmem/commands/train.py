"""``exactmem train``: the papers' experiments, trained with PyTorch (the optional ``[train]``
extra) and each trained model certified exactly (:mod:`exactmem.train.experiments`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from exactmem.core.errors import EXIT_VERIFIED, InputError


def run(args: argparse.Namespace) -> int:
    from exactmem.train.experiments import run_experiment

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {args.out}: exists and is not a directory")
    say = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    trained, side = run_experiment(args.experiment, out, quick=args.quick, seed=args.seed, say=say)
    if args.json:
        from dataclasses import asdict

        from exactmem.commands import emit_json

        emit_json({"trained": [asdict(r) for r in trained], "constructed": side})
        return EXIT_VERIFIED
    certified = sum(r.certified for r in trained)
    print(
        f"{args.experiment}: {len(trained)} models trained, {certified} certified to memorize "
        f"their dataset; wrote {out / 'results.csv'} and {out / 'constructed.csv'}"
    )
    for row in side:
        best = row["smallest_certified_trained"]
        built = row["constructed_parameters"]
        print(
            f"  {row['dataset']}: {row['construction']} builds "
            + (
                f"{built} dense / {row['constructed_nonzero']} non-zero parameters"
                if built is not None
                else f"nothing ({row['construction_note']})"
            )
            + "; smallest certified trained model: "
            + (f"{best} weights ({row['smallest_certified_config']})" if best else "none")
            + f"; float 100 %: {row['float_100_percent']}, of which certified "
            f"{row['float_100_percent_certified']}"
        )
    return EXIT_VERIFIED
