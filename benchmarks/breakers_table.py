"""The breakers' table of docs/trust.md ("How we know the checks can fail"), generated from the
registry: for every registered construction, each declared check (CheckSpec) with the paper
result it tests and its breakers. Run after the mechanisms change and paste the output:

    python benchmarks/breakers_table.py [--construction NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# the checkout this script belongs to, not whichever exactmem is installed
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def table(name: str | None = None) -> str:
    from exactmem.checks.registry import constructions

    out = []
    for cname, c in sorted(constructions().items()):
        if name is not None and cname != name:
            continue
        specs = c.checklist.checks if c.checklist is not None else ()
        out.append(f"#### {cname}\n")
        if not specs:
            out.append("No checks declared yet.\n")
            continue
        out.append("| check | result | breaker | must fail |")
        out.append("|---|---|---|---|")
        for spec in specs:
            for b in spec.breakers or (None,):
                breaker = "**none**" if b is None else b.name
                fails = "" if b is None else f"`{b.fails}`"
                out.append(f"| `{spec.name}` | {spec.result} | {breaker} | {fails} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--construction", help="only this construction")
    args = parser.parse_args(argv)
    print(table(args.construction))
    return 0


if __name__ == "__main__":
    sys.exit(main())
