"""``exactmem constructions [NAME ...]``: every installed construction — the built-ins and the
plugins registered in the ``exactmem.constructions`` entry-point group
(:mod:`exactmem.checks.registry`)
— with its package, version and paper; given names, each one's checklist: the checks with the
paper, result and mechanism each tests and its breakers, the declared bounds and the options."""

from __future__ import annotations

import argparse

from exactmem.checks.checklist import Unset
from exactmem.core.errors import EXIT_VERIFIED, InputError


def _help(option: object) -> str:
    """An option's help text: the first item of its (help, parser) pair."""
    if isinstance(option, tuple) and option and isinstance(option[0], str):
        return option[0]
    return ""


def describe(construction) -> dict:
    """One construction as ``constructions --json`` prints it."""
    checklist = construction.checklist
    out: dict = {
        "name": construction.name,
        "package": construction.package,
        "version": construction.version,
        "paper": construction.paper,
        "summary": construction.summary,
        "builder": construction.builder,
        "options": {key: _help(value) for key, value in construction.options.items()},
        "example": construction.example is not None,
        "checklist": None,
    }
    if checklist is not None:
        out["checklist"] = {
            "summary": checklist.summary,
            "tasks": list(checklist.tasks),
            "evaluates": checklist.evaluates,
            "consistency": checklist.consistency,
            "bounds": dict(checklist.bounds),
            "bound_defines": {k: _define_json(v) for k, v in checklist.bound_defines.items()},
            "checks": [
                {
                    "name": spec.name,
                    "paper": spec.paper,
                    "result": spec.result,
                    "mechanism": spec.mechanism,
                    "breakers": [
                        {"name": b.name, "destroys": b.destroys, "fails": b.fails}
                        for b in spec.breakers
                    ],
                }
                for spec in checklist.checks
            ],
        }
    return out


def _define_json(define: object) -> object:
    """A define as JSON: a formula, [formula, fallback for every value of its options not
    given], or {"given", "otherwise"} (its options not given: not used by the build)."""
    if isinstance(define, Unset):
        return {"given": define.given, "otherwise": define.otherwise}
    return list(define) if isinstance(define, tuple) else define


def _print_one(c: dict) -> None:
    print(f"{c['name']}  ({c['package']} {c['version']})".rstrip())
    print(f"  paper: {c['paper']}")
    print(f"  builds: {c['summary']}")
    checklist = c["checklist"]
    if checklist is None:
        print("  checklist: none registered (verify --construction refuses it)")
        return
    print(f"  checklist: {checklist['summary']}")
    print(
        f"  tasks: {', '.join(checklist['tasks'])}; evaluates: {checklist['evaluates']}"
        + (f"; consistency: {checklist['consistency']}" if checklist["consistency"] else "")
    )
    if checklist["bounds"]:
        print("  declared bounds (judged as NAME.bounds.<metric> under --construction):")
        for metric, text in checklist["bounds"].items():
            sign = "≥" if metric == "margin" else "≤"
            print(f"    {metric} {sign} {text}")
        if checklist.get("bound_defines"):
            print("  where (options as stated by verify --set KEY=VALUE):")
            for key, text in checklist["bound_defines"].items():
                if isinstance(text, list):  # (formula, fallback when its options are not given)
                    text = f"{text[0]}, or when not given: {text[1]}"
                elif isinstance(text, dict):  # its options not given: a build without them
                    text = f"{text['given']}, or built without them: {text['otherwise']}"
                print(f"    {key} = {text}")
    if not checklist["checks"]:
        print("  checks: none declared")
    for spec in checklist["checks"]:
        print(f"  check {spec['name']}: {spec['paper']}, {spec['result']}")
        print(f"    mechanism: {spec['mechanism']}")
        for b in spec["breakers"]:
            print(f"    breaker {b['name']}: destroys {b['destroys']}; must fail {b['fails']}")
    if c["options"]:
        print("  options (--set KEY=VALUE):")
        for key, help_ in c["options"].items():
            print(f"    {key:<17} {help_}")


def run(args: argparse.Namespace) -> int:
    from exactmem.checks import registry

    known = registry.constructions()
    unknown = [name for name in args.names if name not in known]
    if unknown:
        raise InputError(f"unknown construction {unknown[0]!r}; known: {', '.join(known)}")
    chosen = [known[name] for name in args.names] if args.names else list(known.values())
    described = [describe(c) for c in chosen]
    if args.json:
        from exactmem.commands import emit_json

        emit_json({"constructions": described})
        return EXIT_VERIFIED
    if args.names:
        for i, c in enumerate(described):
            if i:
                print()
            _print_one(c)
        return EXIT_VERIFIED
    from exactmem.commands import print_columns

    print_columns(
        ("name", "package", "version", "paper"),
        [(c["name"], c["package"], c["version"], c["paper"]) for c in described],
    )
    return EXIT_VERIFIED
