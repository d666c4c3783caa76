"""Hostile inputs as a user meets them: each case of issues 16 and 27 (tests/hostile_cases.py)
run as its own ``python -m exactmem`` process, with its exit code, wall seconds and peak
resident memory (``os.wait4``'s rusage of that one process).

A process is killed past ``--timeout`` seconds or ``--cap-mb`` resident (so the cases that
hang or exhaust memory on an older checkout can be measured on a shared machine: the table says
"killed" and the figure reached). ``--pythonpath`` runs another checkout's exactmem on the same
files, e.g. the one before a fix:

    python benchmarks/hostile_inputs.py
    python benchmarks/hostile_inputs.py --pythonpath /path/to/old/checkout --cap-mb 1500
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hostile_cases import cases, run_cli  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pythonpath", type=Path, default=ROOT, help="the checkout to run")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--cap-mb", type=float, default=3000.0)
    ap.add_argument("-k", default="", help="only the cases whose name contains this")
    args = ap.parse_args()
    print("| issue | case | exit | seconds | peak MB | note |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="exactmem-hostile-") as folder:
        for case in cases(Path(folder)):
            if args.k not in case.name:
                continue
            run = run_cli(
                case.args, timeout=args.timeout, cap_mb=args.cap_mb, pythonpath=args.pythonpath
            )
            last = run.stderr.strip().splitlines()[-1:] or [""]
            note = run.capped or last[0][:90].replace("|", "/")
            print(
                f"| {case.issue} | {case.name} | {run.code} | {run.seconds:.2f} | "
                f"{run.peak_mb:.0f} | {note} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
