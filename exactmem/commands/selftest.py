"""``exactmem selftest [NAME ...]``: see every check fail. For each construction (default: every
registered one) build its honest example, which must verify, then apply every breaker of every
declared check (:class:`exactmem.checks.checklist.CheckSpec`) and certify: the check the breaker
names
must fail (:mod:`exactmem.claims.selftest`). Exit 1 when a breaker is not seen to fail, a declared
check
has no breaker, or a construction has no example or no declared checks."""

from __future__ import annotations

import argparse
import sys

from exactmem.core.errors import EXIT_REFUTED, EXIT_VERIFIED, InputError


def run(args: argparse.Namespace) -> int:
    from exactmem.checks import registry
    from exactmem.claims.selftest import selftest

    # a name imports that plugin alone (a built-in none); no name lists, and so loads, them all
    unknown = [name for name in args.names if registry.find(name) is None]
    if unknown:
        known = ", ".join(registry.names())
        raise InputError(f"unknown construction {unknown[0]!r}; known: {known}")
    chosen = (
        [registry.get(name) for name in args.names]
        if args.names
        else list(registry.constructions().values())
    )

    def tell(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    rows = [row for c in chosen for row in selftest(c, tell)]
    ok = all(r.ok for r in rows)
    code = EXIT_VERIFIED if ok else EXIT_REFUTED
    args.pending_exit = code
    if args.json:
        from exactmem.commands import emit_json

        emit_json(
            {
                "ok": ok,
                "rows": [r.as_dict() for r in rows],
                "summary": {
                    "rows": len(rows),
                    "failing": sum(1 for r in rows if not r.ok),
                },
            }
        )
        return code
    from exactmem.commands import print_columns

    def seen(r) -> str:
        if r.breaker == "(honest example)":
            return "verified" if r.ok else "NOT VERIFIED"
        return "yes" if r.ok else "NO"

    print_columns(
        ("construction", "check", "paper/result", "breaker", "verdict", "seen to fail", "s"),
        [
            (
                r.construction,
                r.check,
                r.paper,
                r.breaker,
                r.verdict,
                seen(r),
                f"{r.seconds:.1f}",
            )
            for r in rows
        ],
    )
    bad = [r for r in rows if not r.ok]
    for r in bad:
        why = r.note or (
            f"verdict {r.verdict}, failed: {', '.join(r.failed) or 'none'}"
            if r.breaker != "(honest example)"
            else f"the honest example is {r.verdict}: {', '.join(r.failed) or 'undecided'}"
        )
        print(f"NOT SEEN: {r.construction} {r.check} × {r.breaker}: {why}")
    print(f"\n{len(rows) - len(bad)} of {len(rows)} rows as expected")
    return code
