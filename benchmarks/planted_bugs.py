"""Planted one-line bugs in the constructions' own code, and what the checklists say of them
(issue 26, point 9; docs/trust.md, "How we know the checks can fail").

Reads ``benchmarks/planted/*.toml`` (one ``[[bug]]`` table per bug: construction, file, find,
replace, what, expect, explain). For each bug: copy the ``exactmem`` package to a temporary
directory, replace the one line whose stripped text is ``find`` (it must occur exactly once;
the indentation is kept), then in a subprocess with ``PYTHONPATH`` at the copy build the
construction's example dataset (:attr:`exactmem.checks.checklist.Construction.example`) with the
bugged builder and certify it under the construction's checklist. Prints a Markdown table and
exits 1 when a result differs from ``expect`` (a bug whose build refuses counts as caught and
is reported as ``build refused``).

    python benchmarks/planted_bugs.py [--construction NAME] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLANTED = ROOT / "benchmarks" / "planted"

CHILD = r"""
import json, sys
from exactmem.checks.registry import constructions
from exactmem.api import build
from exactmem.checks.certify import certify
from exactmem.core.errors import InputError
c = constructions()[sys.argv[1]]
dataset = c.example()
try:
    model = build(dataset, c.name, **c.example_options)
except InputError as exc:
    print(json.dumps({"got": "build refused", "failed": [], "note": str(exc)[:120]}))
    sys.exit(0)
# the user's criterion an example states beside the builder options (selftest does the same)
# and the build options it was built with, stated as `verify --set` states them
stated = {k: v for k, v in c.example_options.items() if k in c.options}
cert = certify(
    model,
    dataset,
    construction=c.name,
    tolerance=c.example_options.get("tolerance"),
    options=stated,
)
print(json.dumps({"got": cert.verdict, "failed": [x.name for x in cert.failed], "note": ""}))
"""


def load(construction: str | None) -> list[dict]:
    bugs = []
    for path in sorted(PLANTED.glob("*.toml")):
        with path.open("rb") as f:
            for i, bug in enumerate(tomllib.load(f).get("bug", [])):
                bug = {**bug, "source": f"{path.name}[{i}]"}
                if construction is None or bug["construction"] == construction:
                    bugs.append(bug)
    return bugs


def apply(bug: dict, root: Path) -> None:
    """Replace the one line of ``bug['file']`` (under ``root``) whose stripped text is
    ``bug['find']`` by ``bug['replace']`` at its indentation."""
    path = root / bug["file"]
    lines = path.read_text().splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip() == bug["find"].strip()]
    if len(hits) != 1:
        raise ValueError(
            f"{bug['source']}: {len(hits)} lines match {bug['find']!r} in {bug['file']}"
        )
    line = lines[hits[0]]
    indent = line[: len(line) - len(line.lstrip())]
    lines[hits[0]] = indent + bug["replace"].strip() + "\n"
    path.write_text("".join(lines))


SLOTS: queue.Queue[int] = queue.Queue()


def run(bug: dict) -> dict:
    """Run one bug in a free slot: a fixed directory per worker, refreshed from the checkout
    before each bug (file times kept), so that numba's cache of compiled kernels, filed under
    each source file's path, is reused from one bug to the next."""
    slot = SLOTS.get()
    try:
        return _run(
            bug, Path(tempfile.gettempdir()) / f"exactmem-planted-{os.getuid()}" / str(slot)
        )
    finally:
        SLOTS.put(slot)


def _run(bug: dict, root: Path) -> dict:
    # the pristine package (copy2 keeps modification times: the cache stays valid), then the bug
    shutil.copytree(
        ROOT / "exactmem",
        root / "exactmem",
        ignore=shutil.ignore_patterns("__pycache__"),
        dirs_exist_ok=True,
    )
    # the registry reads the built-ins' entry points from the installed distribution, which
    # names modules, not paths: the copy first on sys.path is the one imported
    try:
        apply(bug, root)
    except ValueError as exc:
        return {**bug, "got": "not applied", "failed": [], "note": str(exc)}
    env = {**os.environ, "PYTHONPATH": str(root)}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, bug["construction"]],
            capture_output=True,
            text=True,
            env=env,
            cwd=root,
            timeout=1200,
        )
    finally:
        shutil.copy2(ROOT / bug["file"], root / bug["file"])  # the slot clean for the next
    if proc.returncode != 0 or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {**bug, "got": "crashed", "failed": [], "note": last[:160]}
    return {**bug, **json.loads(proc.stdout.strip().splitlines()[-1])}


def caught(result: dict) -> bool:
    return result["got"] in ("refuted", "build refused")


def as_expected(result: dict) -> bool:
    if result["expect"] == "refuted":
        return caught(result)
    return result["got"] == result["expect"]


def table(results: list[dict]) -> str:
    rows = [
        "| construction | bug | expected | got | failed checks | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        failed = ", ".join(r["failed"][:4]) + (" …" if len(r["failed"]) > 4 else "")
        note = r.get("explain") or r.get("note") or ""
        flag = "" if as_expected(r) else " **(differs)**"
        rows.append(
            f"| {r['construction']} | {r['what']} | {r['expect']} | {r['got']}{flag} | "
            f"{failed} | {note.replace('|', '/')} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--construction", help="only this construction's bugs")
    parser.add_argument("--jobs", type=int, default=1, help="bugs run at once")
    args = parser.parse_args(argv)
    bugs = load(args.construction)
    for slot in range(max(1, args.jobs)):
        SLOTS.put(slot)
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(run, bugs))
    print(table(results))
    counted = {}
    for r in results:
        c = counted.setdefault(r["construction"], [0, 0, 0])
        c[0] += 1
        c[1] += r["got"] == "refuted"
        c[2] += r["got"] == "build refused"
    print()
    for name, (total, refuted, refused) in counted.items():
        print(f"- {name}: {total} bugs, {refuted} refuted, {refused} refused by the build")
    return 0 if all(as_expected(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
