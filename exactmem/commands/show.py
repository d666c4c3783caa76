"""``exactmem show CERT``: read a certificate file back and print the verdict table it records,
as ``verify`` printed it.

``show`` displays a record; it re-judges nothing. It checks the file's format, its fields
(the ``exactmem.certificate/2`` schema, docs/examples/certificate.schema.json) and its SHA-256
— which proves only that the content is what was hashed, not who wrote it nor that the verdict
is true: the hash has no key, and anyone can edit a field and hash the file again
(docs/trust.md, "What a certificate proves"). ``exactmem recheck CERT --model M --data D``
re-derives the verdict from the model and dataset files (:mod:`exactmem.checks.recheck`)."""

from __future__ import annotations

import argparse
from typing import cast

from exactmem.checks.recheck import printable, read

__all__ = ["read", "run"]


def record_notice(path: str) -> str:
    """What ``show`` says first: that it prints a record, what its intact hash does and does
    not prove, and how to re-derive it."""
    return (
        f"certificate {path}: a RECORD, displayed as written; nothing is re-derived\n"
        "  its format, fields and sha256 are intact: the content is unchanged since it was "
        "hashed, which proves neither who wrote it nor that it is true (the hash has no key)\n"
        f"  to re-derive its verdict from the files: exactmem recheck {path} --model MODEL "
        "--data DATA"
    )


def run(args: argparse.Namespace) -> int:
    from exactmem.commands.verify import EXIT_CODES

    cert = read(args.certificate)
    # the recorded verdict's code, kept if stdout closes early (`show CERT | head -1`)
    args.pending_exit = EXIT_CODES[cert["verdict"]]
    if args.json:
        from exactmem.commands import emit_json

        emit_json(cert)
    else:
        from exactmem.commands.verify import print_certificate

        print(record_notice(args.certificate))
        print_certificate(cast(dict, printable(cert)))
        subject = cert["subject"]
        provider = subject["criteria"].get("checklist_provider")
        if provider is not None:
            print(f"checklist provided by: {printable(provider)}")
        argv = subject.get("argv")
        if isinstance(argv, list):
            line = printable(" ".join(map(str, argv)))
            print(f"command line (as recorded, not re-derived): {line}")
    return args.pending_exit
