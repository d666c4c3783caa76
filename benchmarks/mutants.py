"""Mutation campaign: single-weight mutants of VYS, Theorem 4.1, Mahdavi and Dana models.

    python benchmarks/mutants.py [--mutants 1000] [--seed 0] [--cli 0] [--families a,b]

Splits ``--mutants`` evenly over the families (small instances, see tests/mutation.py). Every
mutant is certified by both evaluators (certificates compared whole, but for the evaluator's
name and argv) and its labels judged by the oracle of tests/oracle.py (plain fractions; mpmath
intervals past softmax). ``--cli K`` also runs ``python -m exactmem verify`` with both
evaluators on the first K mutants of each family and compares the exit codes with the verdict.
Prints a Markdown table; the exit status is 1 if any disagreement was found.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from common import table_header  # noqa: E402
from mutation import campaign, families  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=1000, help="total over all families")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cli", type=int, default=0, help="mutants per family run via verify")
    parser.add_argument("--families", default="", help="comma-separated names (default: all)")
    parser.add_argument("--failures", type=int, default=20, help="failures printed per family")
    args = parser.parse_args(argv)
    chosen = [f for f in families() if not args.families or f.name in args.families.split(",")]
    per = -(-args.mutants // len(chosen))
    head = [
        "family",
        "mutants",
        "verified",
        "refuted",
        "inconclusive",
        "errors",
        "evaluator disagreements",
        "oracle disagreements",
        "oracle undecided",
        "time (s)",
    ]
    tallies = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in chosen:
            tally = campaign(
                family,
                per,
                args.seed,
                lambda m: print(m, file=sys.stderr, flush=True),
                cli=args.cli,
                folder=Path(tmp),
            )
            tallies.append(tally)
    table_header(head)
    fields = [
        "mutants",
        "verified",
        "refuted",
        "inconclusive",
        "errors",
        "evaluator_disagreements",
        "oracle_disagreements",
        "oracle_undecided",
    ]
    for t in tallies:
        print(
            f"| {t.family} | "
            + " | ".join(str(getattr(t, f)) for f in fields)
            + f" | {t.seconds:.1f} |"
        )
    total = {f: sum(getattr(t, f) for t in tallies) for f in fields}
    seconds = sum(t.seconds for t in tallies)
    print("| **total** | " + " | ".join(str(total[f]) for f in fields) + f" | {seconds:.1f} |")
    print()
    table_header(["family", "mutated parameters (kind: mutants)", "verify exit codes (code: runs)"])
    for t in tallies:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(t.kinds.items()))
        exits = ", ".join(f"{k}: {v}" for k, v in sorted(t.exits.items())) or "—"
        print(f"| {t.family} | {kinds} | {exits} |")
    kinds = Counter()
    for t in tallies:
        kinds.update(t.kinds)
    attention = sum(kinds[k] for k in ("query", "key", "value", "output"))
    print(f"\nattention maps mutated: {attention} of {total['mutants']}; seed {args.seed}")
    for t in tallies:
        for line in t.failures[: args.failures]:
            print(f"- {line}")
    bad = total["evaluator_disagreements"] + total["oracle_disagreements"] + total["errors"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
