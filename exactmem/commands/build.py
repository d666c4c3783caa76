"""``exactmem build``: run a construction on a dataset and write the model file. The
construction is untrusted (docs/trust.md): what it builds is judged by ``verify``."""

from __future__ import annotations

import argparse

from exactmem.checks.build_options import check_option_limits, parse_options
from exactmem.commands.suggest import wrong_task
from exactmem.core.errors import EXIT_VERIFIED, InputError
from exactmem.core.wording import did_you_mean, plural
from exactmem.runtime.progress import Progress


def require_construction(name: str) -> None:
    """Exit 2 unless ``name`` is a registered construction (plugins included)."""
    from exactmem.checks import registry

    if name not in registry.names():
        raise InputError(
            f"--construction {name!r} is unknown; available: "
            f"{', '.join(registry.names())} (exactmem constructions lists them)"
            + did_you_mean(name, registry.names())
        )


def run(args: argparse.Namespace) -> int:
    from exactmem.api import _construct
    from exactmem.core.model import resources
    from exactmem.core.outputs import check_output, note_json_at_scale
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import save_model

    check_output(args.out, "--out", [args.data])
    require_construction(args.construction)
    progress = Progress(not args.quiet)
    options = parse_options(args.construction, args.set or [])
    options["seed"] = args.seed
    with progress.phase(f"reading {args.data}"):
        dataset = load_dataset(args.data, allow_floats=args.allow_floats)
    check_option_limits(options, dataset)
    mismatch = wrong_task(args.construction, dataset.task)
    if mismatch is not None:  # before the first progress line: no work has started
        raise InputError(mismatch)
    what = plural(dataset.size, "point")
    if dataset.task != "points":
        what = f"{plural(dataset.size, 'sequence')} ({dataset.task})"
    progress(f"building {args.construction} for {what}", force=True)
    try:
        with progress.phase(f"building {args.construction}"):
            model = _construct(dataset, args.construction, options, progress)
        with progress.phase(f"writing {args.out}"):
            digest = save_model(model, args.out)
    finally:
        progress.close()
    note_json_at_scale(dataset.size, {"--data": args.data, "--out": args.out})
    res = resources(model)
    parts = None
    if args.construction == "kim23":  # the three terms of Õ(d + n + √(nN)), from the weights
        from exactmem.checks.measures.kim23 import parts as kim23_parts

        parts = kim23_parts(model)
    if args.json:
        from exactmem.commands import emit_json, file_sha256

        emit_json(
            {
                "path": args.out,
                "sha256": digest,
                "file_sha256": file_sha256(args.out),
                "construction": args.construction,
                "options": {k: v for k, v in options.items() if k != "seed"},
                "seed": args.seed,
                "data": args.data,
                "resources": res.as_dict(),
                **({"parameters_by_part": parts} if parts else {}),
            }
        )
        return EXIT_VERIFIED
    print(
        f"wrote {args.out} (sha256 {digest[:16]}…): width {res.width}, depth {res.depth}, "
        f"{res.dense_parameters} dense / {res.nonzero_parameters} non-zero parameters, "
        f"max {res.max_bits} bits per parameter"
    )
    if parts:
        print(
            f"non-zero parameters by part: d {parts['d']} (token projection), n {parts['n']} "
            f"(contextual mapping), √(nN) {parts['sqrt_nN']} (memorizer)"
        )
    return EXIT_VERIFIED
