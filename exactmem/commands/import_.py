"""``exactmem import``: read a trained safetensors checkpoint of a known architecture as an
exact model file. Every weight is the dyadic rational its bits encode; what the model does is
judged by ``verify``."""

from __future__ import annotations

import argparse
from pathlib import Path

from exactmem.core.errors import EXIT_VERIFIED


def run(args: argparse.Namespace) -> int:
    from exactmem.checkpoints.architectures import import_checkpoint
    from exactmem.core.model import resources
    from exactmem.core.outputs import check_output
    from exactmem.files.model_files import save_model
    from exactmem.runtime.progress import Progress

    checkpoint = Path(args.checkpoint)
    # a save_pretrained folder: none of its files may be the output
    inputs = sorted(checkpoint.iterdir()) if checkpoint.is_dir() else [checkpoint]
    check_output(args.out, "--out", inputs)
    progress = Progress(not args.quiet)
    with progress.phase(f"reading {args.checkpoint} as {args.arch or 'its config.json says'}"):
        model = import_checkpoint(args.checkpoint, args.arch, heads=getattr(args, "heads", None))
    arch = model.meta["options"]["arch"]
    notes = model.meta["options"].get("notes", [])
    with progress.phase(f"writing {args.out}"):
        digest = save_model(model, args.out)
    res = resources(model)
    if args.json:
        from exactmem.commands import emit_json, file_sha256

        emit_json(
            {
                "path": args.out,
                "sha256": digest,
                "file_sha256": file_sha256(args.out),
                "arch": arch,
                "notes": notes,
                "checkpoint": args.checkpoint,
                "dtypes": model.meta["options"]["dtypes"],
                "resources": res.as_dict(),
            }
        )
        return EXIT_VERIFIED
    dtypes = ", ".join(model.meta["options"]["dtypes"])
    print(
        f"wrote {args.out} (sha256 {digest[:16]}…): {arch}, width {res.width}, "
        f"{res.dense_parameters} dense / {res.nonzero_parameters} non-zero parameters, "
        f"max {res.max_bits} bits per parameter, weights {dtypes} read exactly"
    )
    for note in notes:  # what was read otherwise than stored (absent biases, a tied name)
        print(f"  note: {note}")
    return EXIT_VERIFIED
