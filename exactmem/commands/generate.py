"""``exactmem generate``: write a dataset file — random points, sequences, attention examples
or associations, windows of the Zen of Python, or windows of your own text."""

from __future__ import annotations

import argparse
import sys

from exactmem.core.errors import EXIT_VERIFIED, InputError
from exactmem.core.limits import generated_size_problem
from exactmem.core.wording import plural
from exactmem.runtime.progress import Progress

# the N = 10⁷ benchmark dataset fits; 10¹² points would run until memory is exhausted
GENERATE_LIMITS = {"N": 10**8, "n": 10**4, "d": 10**4, "vocab": 10**8}


def run(args: argparse.Namespace) -> int:
    from exactmem.core.outputs import check_output, note_json_at_scale
    from exactmem.files.dataset_files import save_dataset

    check_output(args.out, "--out")
    if (args.file is not None or args.window is not None) and args.family != "text":
        raise InputError("--file and --window belong to generate text")
    for name in ("N", "n", "d", "C", "vocab"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise InputError(f"--{name} must be ≥ 1")
    if args.coord_bound < 0:
        raise InputError(f"--coord-bound must be ≥ 0, got {args.coord_bound}")
    for name, limit in GENERATE_LIMITS.items():
        if (getattr(args, name) or 0) > limit:
            raise InputError(
                f"--{name} {getattr(args, name)}: at most {limit} (the random generators keep "
                "every item in memory; write larger datasets with your own tools)"
            )
    if problem := generated_size_problem(**_generated_size(args)):
        raise InputError(f"generate {args.family}: {problem}")
    progress = Progress(not args.quiet)
    try:
        with progress.phase(f"generating {args.family}"):
            what, ds = _generate(args, progress)
        with progress.phase(f"writing {args.out}"):
            save_dataset(ds, args.out, progress=progress)
    finally:
        progress.close()
    note_json_at_scale(ds.size, {"--out": args.out})
    if args.json:
        from exactmem.commands import emit_json, file_sha256
        from exactmem.datasets.dataset import dataset_hash

        emit_json(
            {
                "path": args.out,
                "sha256": dataset_hash(ds),
                "file_sha256": file_sha256(args.out),
                "family": args.family,
                "task": ds.task,
                "N": ds.size,
                "d": ds.dim,
                "C": ds.num_classes,
                "description": what,
            }
        )
    else:
        print(f"wrote {args.out}: {what}, C = {ds.num_classes}")
    return EXIT_VERIFIED


def _generated_size(args: argparse.Namespace) -> dict[str, int]:
    """The token indices and rational coordinates ``args`` ask for, bounded together before
    anything is generated (each flag alone is bounded by GENERATE_LIMITS)."""
    N, d = args.N or 0, args.d or 1
    if args.family == "points":
        return {"coordinates": N * d}
    if args.family == "attention":
        return {"coordinates": N * ((args.n or 6) + 1) * d}
    if args.family == "associations":
        return {"tokens": N * (args.n or 2), "coordinates": args.vocab or 50}
    if args.family == "contexts":
        return {"tokens": N * (args.n or 4), "coordinates": args.vocab or 10}
    if args.family in ("zen", "text"):
        return {}  # windows of a text of at most 1 MiB
    return {"tokens": 2 * N * (args.n or 16), "coordinates": (args.vocab or 500) * d}


def _generate(args: argparse.Namespace, progress: Progress | None = None):
    """The dataset of ``args.family`` and a phrase saying what it holds; ``progress`` hears how
    far the generator is."""
    from exactmem.datasets.dataset import random_points
    from exactmem.datasets.sequences import random_sequences, random_token_arrays, zen_of_python

    if args.family == "points":
        if args.N is None:
            raise InputError("generate points needs --N")
        ds = random_points(
            args.N, args.d, args.C, args.seed, coord_bound=args.coord_bound, progress=progress
        )
        what = f"{plural(ds.size, 'point')} in Q^{ds.dim}"
    elif args.family == "attention":
        from exactmem.constructions.mahdavi24 import random_instance

        if args.N is None:
            raise InputError("generate attention needs --N (examples)")
        ds = random_instance(
            args.N,
            args.n or 6,
            args.d,
            args.C,
            args.seed,
            shared_context=args.shared_context,
            progress=progress,
        )
        what = (
            f"{plural(ds.size, 'example')} (n = {args.n or 6} context tokens + a query in "
            f"Q^{ds.dim}"
            f"{', shared context' if args.shared_context else ''})"
        )
    elif args.family == "associations":
        from exactmem.constructions.dana25 import random_associations

        if args.N is None:
            raise InputError("generate associations needs --N (associations)")
        ds = random_associations(
            args.vocab or 50, args.n or 2, args.N, args.seed, progress=progress
        )
        what = (
            f"{plural(ds.size, 'association')} of {args.n or 2} tokens over {len(ds.vocab)} tokens"
        )
    elif args.family == "contexts":
        from exactmem.constructions.madden24 import random_contexts

        if args.N is None:
            raise InputError("generate contexts needs --N (distinct contexts)")
        omega = args.vocab or 10
        ds = random_contexts(args.N, args.n or 4, omega, args.seed)
        what = (
            f"{plural(ds.size, 'distinct context')} of {args.n or 4} tokens over {omega} "
            "tokens, with next-token distributions"
        )
    elif args.family == "zen":
        ds = zen_of_python(args.n or 32, unit=args.unit)
        what = f"{plural(ds.size, 'window')} of {args.n or 32} {args.unit}s of the Zen of Python"
    elif args.family == "text":
        what, ds = _generate_text(args, progress)
    else:
        if args.N is None:
            raise InputError(f"generate {args.family} needs --N")
        # random tokens written to a container need no tuple per sequence: arrays throughout
        # (--json reports the canonical hash, computed from the dataset's tuples)
        as_arrays = args.sequences == "random" and args.out.endswith(".exm") and not args.json
        ds = (random_token_arrays if as_arrays else random_sequences)(  # type: ignore[assignment]  # (TokenArrays: written as a Dataset is)
            args.N,
            args.n or 16,
            args.d,
            args.vocab or 500,
            args.C,
            args.seed,
            **({} if as_arrays else {"family": args.sequences}),
            coord_bound=args.coord_bound,
            task="seq2seq" if args.family == "seq2seq" else "next-token",
            labels_by="multiset" if args.family == "multisets" else "key",
            progress=progress,
        )
        what = f"{plural(ds.size, 'sequence')} of {args.n or 16} tokens in Q^{ds.dim}"
    return what, ds


def _generate_text(args: argparse.Namespace, progress: Progress | None = None):
    """``generate text``: the windows of a text file (:mod:`exactmem.datasets.text`); says on
    stderr when
    the tokens carry their positions, and why."""
    from exactmem.datasets.dataset import Dataset
    from exactmem.datasets.text import read_text

    if args.file is None or args.window is None:
        raise InputError("generate text needs --file FILE and --window W")
    ds = Dataset.from_text(
        read_text(args.file),
        window=args.window,
        unit=args.unit,
        source=args.file,
        progress=progress,
    )
    if ds.meta["position_aware"]:
        print(
            f"note: tokens carry their position (symbol id, k) in Q^2, because "
            f"{ds.meta['positions_because']}",
            file=sys.stderr,
        )
    what = (
        f"{plural(ds.size, 'window')} of {args.window} {args.unit}s of {args.file} "
        f"({plural(len(ds.meta['symbols']), 'symbol')}, tokens in Q^{ds.dim})"
    )
    return what, ds
