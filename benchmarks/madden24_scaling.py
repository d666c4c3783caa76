"""Madden, Fox & Thrampoulidis 2024 (``--construction madden24``) as the contexts grow.

    python benchmarks/madden24_scaling.py [--sizes 100,200,400,700,1000,1400,2000]
                                          [--length 4] [--vocab 10] [--budget 300]

n distinct random contexts of ``--length`` tokens over ``--vocab`` tokens (C = ω classes) with
full-support next-token distributions; default options (d = 8, width m = n). ``build`` and
``verify --construction madden24 --tolerance 1/1000000`` run as whole processes (the CLI), one
after the other; the sizes stop after the first n whose build + verify CPU time exceeds
``--budget`` seconds. Columns: wall and CPU seconds of each process (CPU: user + system, what
the process used whatever the machine's load), the verdict, dense parameters k, k / (nω) (the
Θ(nω) of the lower bound) and k / n(ω − 1) (the dimension count of the upper bound).
Timings are wall-clock and CPU on a shared machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exactmem.constructions.madden24 import random_contexts  # noqa: E402
from exactmem.files.dataset_files import save_dataset  # noqa: E402


def _process(argv: list[str]) -> tuple[float, float, int, str]:
    """(wall, CPU seconds, exit code, stdout) of ``python -m exactmem argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "exactmem", *argv], capture_output=True, text=True, cwd=ROOT
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode, done.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100,200,400,700,1000,1400,2000")
    p.add_argument("--length", type=int, default=4)
    p.add_argument("--vocab", type=int, default=10)
    p.add_argument("--budget", type=float, default=300.0)
    args = p.parse_args()
    omega = args.vocab
    print("n     build wall/cpu   verify wall/cpu  verdict   k       k/(nω)  k/n(ω−1)")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            data, model = Path(tmp, f"d{n}.json"), Path(tmp, f"m{n}.json")
            save_dataset(random_contexts(n, args.length, omega, seed=1), data)
            bw, bc, _, _ = _process(
                ["build", "--construction", "madden24", "--data", str(data), "--out", str(model),
                 "--quiet"]
            )  # fmt: skip
            vw, vc, code, out = _process(
                ["verify", str(model), "--data", str(data), "--construction", "madden24",
                 "--tolerance", "1/1000000", "--quiet", "--json", "--jobs", "1"]
            )  # fmt: skip
            cert = json.loads(out) if out.strip().startswith("{") else {}
            k = cert.get("resources", {}).get("dense_parameters", 0)
            verdict = cert.get("verdict", f"exit {code}")
            print(
                f"{n:<5} {bw:7.1f} /{bc:7.1f}  {vw:7.1f} /{vc:7.1f}  {verdict:<9} {k:<7} "
                f"{k / (n * omega):6.2f}  {k / (n * (omega - 1)):6.2f}",
                flush=True,
            )
            if bc + vc > args.budget:
                break


if __name__ == "__main__":
    main()
