"""Where ``verify`` spends its time, in one process: the two file loads and certify's phases.

Loads the dataset and model files, then runs ``certify`` (as ``verify --construction … --jobs
1`` does) with its phase functions wrapped by a timer that charges each call its own time
(a call inside another phase is charged to the inner one): the evaluation (the evaluator's
``run`` called by certify; a check's own small evaluations are that check's time), the
sequence view and consistency check, the resources pass, the construction checklist, the
lower-bound checks and the two hashes. Prints a Markdown table per file pair with the checks'
share of the evaluation; ``--json FILE`` writes the figures; ``--clock cpu`` times the
process's CPU seconds instead of wall seconds.

    python benchmarks/certify_phases.py DATA.json MODEL.json [DATA2 MODEL2 …] \\
        --construction ks25-next-token --repeat 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

from exactmem.checks import certify as certify_module
from exactmem.checks import labels as labels_module
from exactmem.files.dataset_files import load_dataset
from exactmem.files.model_files import load_model

WRAPPED = {  # name in exactmem.checks.certify or exactmem.checks.labels → phase
    "dataset_hash": "hashes",
    "model_hash": "hashes",
    "check_consistency": "sequence view",
    "view": "sequence view",
    "resources": "resources",
    "run_checklist": "checklist",
    "lower_bound_checks": "lower bounds",
}
MODULES = (certify_module, labels_module)  # the verifier's modules that call them
EVALUATION = "evaluation"


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


class PhaseTimer:
    """Exclusive seconds per phase: a phase's calls minus the phases nested in them.

    ``outermost`` phases (the evaluation) count only when called by ``certify`` itself: a
    check that evaluates something of its own (Theorem 4.2's constant sequences) is charged
    that time, not the evaluation."""

    def __init__(self, clock=time.perf_counter) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[float] = []  # time spent in nested phases, per open call
        self.clock = clock

    def wrap(self, phase: str, fn, *, outermost: bool = False):
        def timed(*args, **kwargs):
            if outermost and self._stack:
                return fn(*args, **kwargs)  # inside another phase: that phase's time
            self._stack.append(0.0)
            t0 = self.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = self.clock() - t0
                nested = self._stack.pop()
                self.seconds[phase] += spent - nested
                if self._stack:
                    self._stack[-1] += spent

        return timed


def profile(data: str, model_path: str, construction: str | None, clock: str = "wall") -> dict:
    now = CLOCKS[clock]
    t0 = now()
    ds = load_dataset(data)
    t1 = now()
    model, _ = load_model(model_path)
    t2 = now()
    timer = PhaseTimer(now)
    saved = {
        (module, name): getattr(module, name)
        for name in WRAPPED
        for module in MODULES
        if hasattr(module, name)
    }
    missing = set(WRAPPED) - {name for _, name in saved}
    if missing:
        raise SystemExit(f"the verifier no longer calls {sorted(missing)}: update WRAPPED")
    saved_evaluator = certify_module._evaluator
    try:
        for (module, name), fn in saved.items():
            setattr(module, name, timer.wrap(WRAPPED[name], fn))
        certify_module._evaluator = lambda name: timer.wrap(
            EVALUATION, saved_evaluator(name), outermost=True
        )
        t3 = now()
        cert = certify_module.certify(model, ds, construction=construction, jobs=1)
        total = now() - t3
    finally:
        for (module, name), fn in saved.items():
            setattr(module, name, fn)
        certify_module._evaluator = saved_evaluator
    phases = dict(timer.seconds)
    phases["other"] = total - sum(phases.values())
    checks = total - phases.get(EVALUATION, 0.0)
    return {
        "N": ds.size,
        "verdict": cert.verdict if hasattr(cert, "verdict") else None,
        "load dataset": t1 - t0,
        "load model": t2 - t1,
        "certify": total,
        **phases,
        "checks": checks,
        "checks / evaluation": checks / phases[EVALUATION] if phases.get(EVALUATION) else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="DATA MODEL pairs")
    parser.add_argument("--construction", default="ks25-next-token")
    parser.add_argument("--repeat", type=int, default=1, help="runs per pair (the fastest kept)")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall seconds, or the process's CPU seconds (steadier on a loaded machine)",
    )
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args(argv)
    if len(args.files) % 2:
        parser.error("files come in DATA MODEL pairs")
    rows = []
    for data, model in zip(args.files[::2], args.files[1::2], strict=True):
        runs = [profile(data, model, args.construction, args.clock) for _ in range(args.repeat)]
        rows.append(min(runs, key=lambda r: r["certify"]))
    keys = [k for k in rows[0] if k != "verdict"]
    for row in rows[1:]:
        keys += [k for k in row if k not in keys and k != "verdict"]
    print("| phase | " + " | ".join(f"N = {r['N']}" for r in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for key in keys:
        if key == "N":
            continue
        cells = []
        for r in rows:
            v = r.get(key)
            cells.append(
                "—" if v is None else f"{v:.3f}" if key != "checks / evaluation" else f"{v:.0%}"
            )
        print(f"| {key} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1, default=str)


if __name__ == "__main__":
    sys.exit(main())
