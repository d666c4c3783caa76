"""``exactmem recheck CERT --model M --data D``: re-derive a certificate from the files it names
and report every difference from the record (:func:`exactmem.checks.recheck.recheck`).

Exit 0 when the verdict, the checks, the resources and the hashes are re-derived as recorded;
1 when anything differs (each difference printed); 2 on bad input."""

from __future__ import annotations

import argparse

from exactmem.core.errors import EXIT_REFUTED, EXIT_VERIFIED
from exactmem.runtime.progress import Progress


def run(args: argparse.Namespace) -> int:
    from exactmem.checks.recheck import printable, recheck, recheck_json

    progress = Progress(not args.quiet)
    try:
        with progress.phase(f"re-deriving {args.certificate}", outer=True):
            result = recheck(
                args.certificate,
                args.model,
                args.data,
                evaluator=args.evaluator,
                jobs=args.jobs,
                allow_floats=args.allow_floats,
                progress=progress,
                max_precision=args.max_precision,
            )
    finally:
        progress.close()
    args.pending_exit = EXIT_VERIFIED if result.same else EXIT_REFUTED
    if args.json:
        from exactmem.commands import emit_json

        emit_json(recheck_json(result))
        return args.pending_exit
    new = result.rederived
    print(f"recheck of {printable(args.certificate)} against {args.model} and {args.data}")
    print(
        f"re-derived: {new['verdict'].upper()} on {len(new['checks'])} checks; model sha256 "
        f"{new['subject']['model_sha256'][:16]}…, dataset sha256 "
        f"{new['subject']['dataset_sha256'][:16]}…"
    )
    if result.same:
        print(
            "SAME: the verdict, every check, the resources and the hashes the certificate "
            "records are re-derived from these files"
        )
    else:
        print(f"DIFFERS from the record in {len(result.differences)} places:")
        for line in result.differences:
            print(f"  {printable(line)}")
    argv = result.recorded["subject"].get("argv")
    if argv is not None:
        print(f"command line (as recorded, not re-derived): {printable(' '.join(map(str, argv)))}")
    return args.pending_exit
