"""``exactmem convert``: a dataset or model file from JSON to the binary container or back.

What the input holds is read from it (the container's header, the JSON file's ``format``); the
output's form from its name (``.exm``: the container of :mod:`exactmem.files.container`; ``.json``
or ``.json.gz``: JSON). The content is checked on the way as every command checks its inputs,
and its canonical SHA-256 is the same in both files."""

from __future__ import annotations

import argparse

from exactmem.core.errors import EXIT_VERIFIED, InputError
from exactmem.runtime.progress import Progress


def _kind(path: str) -> tuple[str, object]:
    """``dataset`` or ``model`` (the format the file states), and a JSON file's parsed object
    (None for a container)."""
    from exactmem.datasets.dataset import FORMAT, read_json_file
    from exactmem.files.container import is_container, read_header
    from exactmem.files.model_json import MODEL_FORMAT

    kinds = {FORMAT: "dataset", MODEL_FORMAT: "model"}
    obj: object = None
    if is_container(path):
        fmt = read_header(path).get("format")
    else:
        obj = read_json_file(path, "input")
        fmt = obj.get("format") if isinstance(obj, dict) else None
    if fmt not in kinds:
        raise InputError(
            f"input file {path}: format {fmt!r:.60} is neither {FORMAT!r} nor {MODEL_FORMAT!r}"
        )
    return kinds[fmt], obj


def run(args: argparse.Namespace) -> int:
    from exactmem.core.outputs import check_output, note_json_at_scale

    check_output(args.output, "OUT", [args.input])
    progress = Progress(not args.quiet)
    with progress.phase(f"reading {args.input}"):
        kind, obj = _kind(args.input)
    if kind == "dataset":
        from exactmem.datasets.dataset import dataset_hash, parse_dataset
        from exactmem.files.dataset_files import load_dataset, save_dataset

        with progress.phase(f"checking {args.input}"):
            if obj is None:
                ds = load_dataset(args.input)
            else:  # parsed once: checked as load_dataset checks it
                source = f"dataset file {args.input}"
                try:
                    ds = parse_dataset(obj, allow_floats=args.allow_floats, source=source)
                except InputError as exc:
                    if str(exc).startswith(source):
                        raise
                    raise InputError(f"{source}: {exc}") from None
        with progress.phase(f"writing {args.output}"):
            save_dataset(ds, args.output)
        progress.close()
        note_json_at_scale(ds.size, {"OUT": args.output})
        digest = dataset_hash(ds)
    else:
        from exactmem.files.model_files import load_model, save_model

        with progress.phase(f"reading {args.input}"):
            model, digest = load_model(args.input)
        with progress.phase(f"writing {args.output}"):
            save_model(model, args.output)
    if args.json:
        from exactmem.commands import emit_json, file_sha256

        emit_json(
            {
                "path": args.output,
                "kind": kind,
                "sha256": digest,
                "file_sha256": file_sha256(args.output),
            }
        )
    else:
        print(f"wrote {args.output}: the {kind} of {args.input} (sha256 {digest[:16]}…)")
    return EXIT_VERIFIED
