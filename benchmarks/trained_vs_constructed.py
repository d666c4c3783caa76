"""The experiments of docs/constructed-and-trained.md: train, certify, tabulate, draw.

    python benchmarks/trained_vs_constructed.py [--quick] [--seed 0]
        [--out docs/examples/trained] [--image docs/images/constructed-and-trained.png]
        [--experiments dana,mahdavi,ks25,madden]

Runs ``exactmem train --experiment E`` for each experiment into ``OUT/E`` (datasets,
safetensors checkpoints, results.csv, constructed.csv), then prints the page's tables
(:mod:`exactmem.train.report`) and draws its picture. Needs the ``[train]`` extra (PyTorch)
and matplotlib. The committed CSV files under docs/examples/trained are what the page shows;
the checkpoints are not committed (rerun to get them: seeded, deterministic on one thread).
Wall-clock seconds per experiment are printed (a shared machine: compare within one run).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from exactmem.train.experiments import EXPERIMENTS, run_experiment
from exactmem.train.report import plot_results, side_by_side_table, trained_table

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "docs" / "examples" / "trained"))
    p.add_argument("--image", default=str(ROOT / "docs" / "images" / "constructed-and-trained.png"))
    p.add_argument("--experiments", default=",".join(EXPERIMENTS))
    p.add_argument("--keep-checkpoints", action="store_true")
    args = p.parse_args()
    out = Path(args.out)
    for name in args.experiments.split(","):
        started = time.perf_counter()
        trained, _ = run_experiment(name, out / name, quick=args.quick, seed=args.seed, say=print)
        print(f"{name}: {len(trained)} models in {time.perf_counter() - started:.0f} s")
        if not args.keep_checkpoints:  # the CSVs say what they were; a rerun rebuilds them
            shutil.rmtree(out / name / "checkpoints")
            shutil.rmtree(out / name / "datasets")
    print(side_by_side_table(out))
    for name in args.experiments.split(","):
        print(f"\n{name}\n")
        print(trained_table(out, name))
    print(plot_results(out, args.image))


if __name__ == "__main__":
    main()
