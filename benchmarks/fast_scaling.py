"""Fast exact verification of Theorem 4.1 (Kajitsuka & Sato 2025) as N grows.

    python benchmarks/fast_scaling.py [--sizes 10000,100000,1000000] [--verify-max 100000]
                                      [--ratio-at 10000] [--float64-max 4096] [--jobs CORES]

Random next-token data: n = 16, d = 8, vocabulary 1000, C = 16, default options (keyed gadget).
Every N runs in a process of its own, so "peak RSS" is that N's. Columns:

* gen, build — generating the dataset, building the model (seconds);
* verify — ``certify`` with the fast evaluator on ``--jobs`` threads (default: all cores, as the
  CLI): every check of the certificate (up to
  --verify-max; beyond it "—");
* eval — the fast evaluation alone (``exactmem.evaluate.fast.run``), kernels warm;
* ns/(seq·layer) — eval / (N × depth);
* peak RSS — of the process when generating, building and certifying (the certificate runs
  before the timed evaluation, so the evaluation's memory is not stacked on top of it);
* dense, non-zero — parameter counts, non-zero / N beside them.

The reference/fast ratio is measured at --ratio-at in one process (same data, warm kernels, one
job on each side).
The float64 line evaluates the same networks in NumPy float64 for N = 8, 16, 32, … and reports
the smallest N with a wrong label: a labelled float comparison, never a verdict. Timings are
wall-clock on a shared machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import table_header, timed  # noqa: E402

from exactmem.checks.certificate import step_folds  # noqa: E402
from exactmem.checks.certify import certify  # noqa: E402
from exactmem.constructions import ks25  # noqa: E402
from exactmem.core.model import MLP, Attention, resources  # noqa: E402
from exactmem.datasets.sequences import random_sequences  # noqa: E402
from exactmem.evaluate import fast, reference  # noqa: E402

SHAPE = {"n": 16, "d": 8, "vocab_size": 1000, "C": 16}


def dataset(N: int, seed: int = 0):
    return random_sequences(N, SHAPE["n"], SHAPE["d"], SHAPE["vocab_size"], SHAPE["C"], seed=seed)


def warm() -> float:
    """Load (or, on a new machine, compile) every kernel; seconds taken."""
    from exactmem.constructions import witness_kernel
    from exactmem.evaluate.fast import kernels

    _, seconds = timed(lambda: (kernels.warm(), witness_kernel.warm()))
    return seconds


def evaluate(model, ds, module=fast, jobs: int = 1):
    """One exact evaluation as ``certify`` runs it: step lanes folded as they come."""
    return module.run(
        model, ds.vocab, ds.sequences, positions="last", folds=step_folds(model), jobs=jobs
    )


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def one(N: int, verify: bool, jobs: int) -> dict:
    warm()  # compilation is a one-off per machine (cached on disk), not part of any column
    ds, t_gen = timed(lambda: dataset(N))
    (model, _), t_build = timed(lambda: ks25.build(ds, {}))
    r = resources(model)
    t_verify, verdict = None, None
    if verify:  # first, so the peak is generating + building + certifying
        cert, t_verify = timed(
            lambda: certify(model, ds, construction="ks25-next-token", per_layer=False, jobs=jobs)
        )
        verdict = cert.verdict
        del cert
    rss = peak_rss_gb()
    _, t_eval = timed(lambda: evaluate(model, ds, jobs=jobs))
    return {
        "N": N,
        "gen": t_gen,
        "build": t_build,
        "eval": t_eval,
        "verify": t_verify,
        "verdict": verdict,
        "rss": rss if verify else peak_rss_gb(),
        "dense": r.dense_parameters,
        "nonzero": r.nonzero_parameters,
        "depth": r.depth,
        "width": r.width,
    }


def ratio(N: int) -> tuple[float, float]:
    ds = dataset(N)
    model, _ = ks25.build(ds, {})
    warm()
    # the fast side is short and noisy: best of three (the first also pays one-off costs)
    t_fast = min(timed(lambda: evaluate(model, ds))[1] for _ in range(3))
    _, t_ref = timed(lambda: evaluate(model, ds, reference))
    return t_ref, t_fast


# --------------------------------------------------------------------------- float64


def _dense(a) -> tuple[np.ndarray, np.ndarray]:
    W = np.zeros((len(a.rows), a.in_dim))
    for i, row in enumerate(a.rows):
        for j, c in row:
            W[i, j] = float(c) / a.denominator
    return W, np.array([float(b) / a.denominator for b in a.bias])


def float64_labels(model, ds) -> np.ndarray:
    """The model in NumPy float64 (labelled float evaluation, for the table only)."""
    X = np.array([[[float(v) for v in ds.vocab[t]] for t in s] for s in ds.sequences])
    N, n, _ = X.shape
    for sub in model.sublayers:
        if isinstance(sub, MLP):
            flat = X.reshape(N * X.shape[1], -1)
            H = flat
            for i, layer in enumerate(sub.layers):
                W, b = _dense(layer)
                H = H @ W.T + b
                if i < len(sub.layers) - 1:
                    H = np.maximum(H, 0.0)
            out = flat + H if sub.residual else H
            X = out.reshape(N, X.shape[1], -1)
        elif isinstance(sub, Attention):  # ks25: W_K = W_Q = 0, every weight is 1/n
            delta = 0.0
            for h in sub.heads:
                Wv, bv = _dense(h.value)
                Wo, bo = _dense(h.output)
                mean = (X @ Wv.T + bv).mean(axis=1)
                delta = delta + mean @ Wo.T + bo
            X = X[:, -1:, :] + delta[:, None, :]  # next-token: the last column
    return X[:, -1, 0]


def float64_failure(limit: int) -> tuple[int | None, int]:
    """Smallest N (8, 16, 32, …) where float64 gets a label wrong; also N tried last."""
    N = 8
    while N <= limit:
        ds = dataset(N, seed=2)
        model, _ = ks25.build(ds, {})
        got = float64_labels(model, ds)
        if any(g != y for g, y in zip(got.tolist(), ds.labels, strict=True)):
            return N, N
        N *= 2
    return None, N // 2


# --------------------------------------------------------------------------- driver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--verify-max", type=int, default=100000)
    ap.add_argument("--ratio-at", type=int, default=10000)
    ap.add_argument("--float64-max", type=int, default=4096)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--verify", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.verify, args.jobs)))
        return
    print(
        f"machine: {os.cpu_count()} cores; n = 16, d = 8, vocabulary 1000, C = 16; "
        f"table: --jobs {args.jobs} (the CLI's default: all cores)\n"
    )
    print(f"kernels: first load in this run {warm():.1f} s\n")
    head = [
        "N", "gen s", "build s", "verify s", "eval s", "ns/(seq·layer)", "peak RSS GB",
        "dense", "non-zero", "non-zero/N", "depth", "width",
    ]  # fmt: skip
    table_header(head)
    for N in [int(x) for x in args.sizes.split(",")]:
        cmd = [sys.executable, __file__, "--one", str(N), "--jobs", str(args.jobs)]
        if N <= args.verify_max:
            cmd.append("--verify")
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            print(
                f"| {N} | failed after {time.perf_counter() - t0:.0f} s: "
                f"{done.stderr.strip().splitlines()[-1:]} |"
            )
            continue
        f = json.loads(done.stdout.strip().splitlines()[-1])
        verify = "—" if f["verify"] is None else f"{f['verify']:.1f} ({f['verdict']})"
        ns = f["eval"] / (f["N"] * f["depth"]) * 1e9
        print(
            f"| {N} | {f['gen']:.1f} | {f['build']:.1f} | {verify} | {f['eval']:.1f} | {ns:.2f} "
            f"| {f['rss']:.2f} | {f['dense']} | {f['nonzero']} | {f['nonzero'] / N:.3f} "
            f"| {f['depth']} | {f['width']} |"
        )
    if args.ratio_at > 0:  # 0 skips it
        t_ref, t_fast = ratio(args.ratio_at)
        print(
            f"\nreference/fast at N = {args.ratio_at}: {t_ref:.2f} s / {t_fast:.2f} s = "
            f"{t_ref / t_fast:.1f}× (evaluation, same process, warm kernels, one job each, "
            "fast: best of 3)"
        )
    if args.float64_max <= 0:
        return
    failed, last = float64_failure(args.float64_max)
    if failed:
        print(
            f"float64 (NumPy) evaluation of the same construction: first wrong label at N = "
            f"{failed}"
        )
    else:
        print(f"float64 (NumPy): all labels right up to N = {last}")


if __name__ == "__main__":
    main()
