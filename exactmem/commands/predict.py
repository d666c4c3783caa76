"""``exactmem predict MODEL --data D``: the model's exact outputs on every sequence (or point)
of a dataset file, computed by :func:`exactmem.api.run`.

Predicting is not certifying: the outputs are printed beside the dataset's labels, and nothing
is judged (``verify`` does that, by the criteria you give)."""

from __future__ import annotations

import argparse
from typing import Literal

from exactmem.errors import EXIT_VERIFIED
from exactmem.progress import Progress

ROWS_SHOWN = 1000  # sequences printed as text; --json lists every one


def _vector(values) -> str:
    from exactmem.exact import format_rational

    texts = [format_rational(v) for v in values]
    return texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"


def run(args: argparse.Namespace) -> int:
    from exactmem.api import run as run_model
    from exactmem.data import load_dataset
    from exactmem.exact import format_rational
    from exactmem.io import load_model

    progress = Progress(not args.quiet)
    with progress.phase(f"reading {args.model} and {args.data}"):
        model, digest = load_model(args.model)
        dataset = load_dataset(args.data, allow_floats=args.allow_floats)
    positions: Literal["all", "last"] = args.positions or (
        "all" if dataset.task == "seq2seq" else "last"
    )
    progress(f"evaluating on {dataset.size} inputs with the {args.evaluator} evaluator", force=True)
    try:
        with progress.phase(f"evaluating {dataset.size} inputs", outer=True):
            outputs = run_model(
                model, dataset, positions=positions, evaluator=args.evaluator, progress=progress
            )
    finally:
        progress.close()
    if args.json:
        from exactmem.commands import emit_json

        emit_json(
            {
                "model": args.model,
                "model_sha256": digest,
                "data": args.data,
                "task": dataset.task,
                "positions": positions,
                "outputs": [[[format_rational(v) for v in vec] for vec in seq] for seq in outputs],
                "labels": [list(y) if isinstance(y, tuple) else y for y in dataset.labels],
            }
        )
        return EXIT_VERIFIED
    what = "point" if dataset.task == "points" else "sequence"
    where = "the last position" if positions == "last" else "every position"
    print(
        f"{dataset.size} {what}s of {args.data}, outputs of {args.model} "
        f"(sha256 {digest[:16]}…) at {where}, exact; the dataset's label beside each"
    )
    for i, (seq, label) in enumerate(zip(outputs, dataset.labels, strict=True)):
        if i == ROWS_SHOWN:
            print(f"… {dataset.size - ROWS_SHOWN} more (--json lists every one)")
            break
        out = seq[-1] if positions == "last" else seq
        text = _vector(out) if positions == "last" else "[" + ", ".join(map(_vector, out)) + "]"
        shown = list(label) if isinstance(label, tuple) else label
        print(f"{what}s[{i}]: {text}  label {shown}")
    return EXIT_VERIFIED
