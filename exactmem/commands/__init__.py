"""The commands of the ``exactmem`` CLI, one module each; :mod:`exactmem.commands.parser` builds
the parser and :mod:`exactmem.commands.main` holds ``main``. Every command returns its exit code,
prints its result on stdout (JSON with ``--json``) and its progress and logs on stderr. Heavy
modules are imported inside the commands so that ``exactmem --help`` stays fast."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def emit_json(obj: object) -> None:
    """``obj`` as JSON on stdout (one document, indented, then a newline)."""
    json.dump(obj, sys.stdout, indent=1)
    print()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of the bytes of a file as written (what ``sha256sum`` prints)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def print_columns(head: tuple, table: list[tuple]) -> None:
    """A plain-text table: columns padded to their widest cell."""
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    for t in (head, *table):
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip())
