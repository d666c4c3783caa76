"""Models whose values compound across layers (issue 27, point 1): each evaluator on the
crafted files of tests/test_hostile_values.py, as whole ``verify`` processes, with wall time,
peak RSS and exit code; then the same models under a raised ``--max-value-bits``, where they
are evaluated (the fast evaluator against the reference on values of ~10⁵ bits).

    python benchmarks/hostile_values.py [--repeat R]

Each run is a fresh process (``python -m exactmem verify``) measured by a parent of its own
(RUSAGE_CHILDREN); the table reports the median wall time of R runs and the largest peak.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout, and the crafted models

from test_hostile_values import compounding_model  # noqa: E402

CASES = [
    # (name, layers, hex digits per weight, extra flags)
    ("880 × 140 digits (1 KB .gz)", 880, 140, []),
    ("25 000 × 30 digits (8.5 KB .gz)", 25_000, 30, []),
    ("400 × 1 000 digits", 400, 1000, []),
    ("880 × 140 digits, --max-value-bits 10⁷", 880, 140, ["--max-value-bits", "10000000"]),
    ("200 × 1 000 digits, --max-value-bits 10⁷", 200, 1000, ["--max-value-bits", "10000000"]),
]

PROBE = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(r.returncode)\n"
)


def measured(args: list[str]) -> tuple[int, float, float]:
    """(exit code, seconds, peak MB) of ``python -m exactmem ARGS``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", PROBE, sys.executable, "-m", "exactmem", *args],
        capture_output=True,
        text=True,
        env=env,
    )
    return out.returncode, time.monotonic() - start, int(out.stdout.strip()) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="exactmem-hostile-"))
    data = folder / "point.json"
    data.write_text(
        json.dumps(
            {"format": "exactmem.dataset/1", "task": "points", "points": [["1"]], "labels": [1]}
        )
    )
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start\n")
    print("| model | file bytes | evaluator | exit | wall s (median) | peak MB |")
    print("|---|---|---|---|---|---|")
    for name, layers, digits, flags in CASES:
        model = folder / f"m{layers}x{digits}.json.gz"
        model.write_bytes(compounding_model(layers, digits))
        for evaluator in ("fast", "reference"):
            runs = [
                measured(
                    ["verify", str(model), "--data", str(data), "--evaluator", evaluator, *flags]
                )
                for _ in range(args.repeat)
            ]
            codes = {code for code, _, _ in runs}
            wall = statistics.median(s for _, s, _ in runs)
            peak = max(p for _, _, p in runs)
            print(
                f"| {name} | {model.stat().st_size} | {evaluator} | "
                f"{'/'.join(map(str, sorted(codes)))} | {wall:.2f} | {peak:.0f} |"
            )
    print("\nThe evaluation alone, in one warm process (a whole `verify` above also loads the")
    print("fast evaluator's kernels), limit raised to 10⁷ bits:\n")
    evaluation_only(folder)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


def evaluation_only(folder: Path) -> None:
    from gmpy2 import mpq

    from exactmem.core import limits
    from exactmem.evaluate import fast, reference
    from exactmem.files.model_files import load_model

    print("| model | fast s | reference s |")
    print("|---|---|---|")
    with limits.use(limits.Limits(max_value_bits=10**7)):
        fast.run_points(*_tiny())  # the kernels loaded first
        for layers, digits in ((880, 140), (200, 1000)):
            model, _ = load_model(folder / f"m{layers}x{digits}.json.gz")
            times = []
            for run in (fast.run_points, reference.run_points):
                start = time.perf_counter()
                run(model, [[mpq(1)]])
                times.append(time.perf_counter() - start)
            print(f"| {layers} × {digits} digits | {times[0]:.2f} | {times[1]:.2f} |")


def _tiny():
    from gmpy2 import mpq

    from exactmem.core.model import MLP, Affine, Transformer

    model = Transformer(1, (MLP((Affine.from_dense([[2]]), Affine.from_dense([[1]]))),))
    return model, [[mpq(1)], [mpq(2)]]


if __name__ == "__main__":
    main()
