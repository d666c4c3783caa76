"""``exactmem schema [NAME]``: print a JSON schema (or the example dataset) shipped with the
package, or list them — an installed copy carries the files its documentation cites."""

from __future__ import annotations

import argparse
import difflib
import sys

from exactmem.commands import emit_json
from exactmem.core.errors import EXIT_VERIFIED, InputError


def run(args: argparse.Namespace) -> int:
    from exactmem.files import schemas

    if args.name is None and args.json:
        emit_json([{"name": n, "file": f, "describes": w} for n, (f, w) in schemas.FILES.items()])
        return EXIT_VERIFIED
    if args.name is None:
        for name, (file, what) in schemas.FILES.items():
            print(f"{name:<16} {file:<24} {what}")
        return EXIT_VERIFIED
    if args.name not in schemas.FILES:
        close = difflib.get_close_matches(args.name, schemas.names(), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise InputError(f"schema {args.name!r}: not one of {', '.join(schemas.names())}{hint}")
    sys.stdout.write(schemas.text(args.name))
    return EXIT_VERIFIED
