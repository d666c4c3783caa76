"""``exactmem predict MODEL --data D``: the model's exact outputs on every sequence (or point)
of a dataset file, computed by :func:`exactmem.api.run`.

Predicting is not certifying: the outputs are printed beside the dataset's labels, and nothing
is judged (``verify`` does that, by the criteria you give).

Softmax attention with unequal scores has no exact output (its weights are transcendental).
There ``predict`` prints what can be proved instead: enclosures from Arb ball arithmetic
(:func:`exactmem.evaluate.softmax.run_balls`), each output as exact rational bounds
``[lo, hi]`` that contain it, and, for a model with several outputs, the argmax whenever one
output's lower bound exceeds every other's upper bound. The precision doubles for the sequences
not yet decided; an argmax still undecided at the cap (two outputs that may be equal) ends the
command with exit 4, naming the sequence."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Literal

from gmpy2 import mpq

from exactmem.core.errors import EXIT_VERIFIED, InconclusiveError
from exactmem.core.wording import plural
from exactmem.runtime.progress import Progress, counter

ROWS_SHOWN = 1000  # sequences printed as text; --json lists every one
BALL_START = 64  # bits of the first ball evaluation; doubled for the undecided sequences
BALL_BLOCK = 64  # sequences per call of the ball evaluator (a step of the progress bar)


def _vector(values) -> str:
    from exactmem.core.exact import format_rational

    texts = [format_rational(v) for v in values]
    return texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"


def run(args: argparse.Namespace) -> int:
    from exactmem.api import run as run_model
    from exactmem.core.exact import format_rational
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model

    progress = Progress(not args.quiet)
    with progress.phase(f"reading {args.model} and {args.data}"):
        model, digest = load_model(args.model)
        dataset = load_dataset(args.data, allow_floats=args.allow_floats)
    positions: Literal["all", "last"] = args.positions or (
        "all" if dataset.task == "seq2seq" else "last"
    )
    # printed once the work reports: the input checks come first
    inputs = plural(dataset.size, "input")
    progress.later(f"evaluating on {inputs} with the {args.evaluator} evaluator")
    try:
        with progress.phase(f"evaluating {dataset.size} inputs", outer=True):
            outputs = run_model(
                model, dataset, positions=positions, evaluator=args.evaluator, progress=progress
            )
        progress.flush()  # a run that reported nothing on the way still says what it did
    except InconclusiveError:  # unequal softmax scores: no exact output exists
        progress("softmax attention: certified enclosures on Arb balls instead", force=True)
        try:
            balls = ball_predictions(model, dataset, positions, progress)
        finally:
            progress.close()
        return _print_balls(args, digest, dataset, positions, balls)
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
        f"{plural(dataset.size, what)} of {args.data}, outputs of {args.model} "
        f"(sha256 {digest[:16]}…) at {where}, exact; the dataset's label beside each"
    )
    words = _Words.of(dataset)
    for i, (seq, label) in enumerate(zip(outputs, dataset.labels, strict=True)):
        if i == ROWS_SHOWN:
            print(f"… {dataset.size - ROWS_SHOWN} more (--json lists every one)")
            break
        out = seq[-1] if positions == "last" else seq
        if words is not None:
            print(words.row(i, out if positions == "last" else None, label))
            continue
        text = _vector(out) if positions == "last" else "[" + ", ".join(map(_vector, out)) + "]"
        shown = list(label) if isinstance(label, tuple) else label
        print(f"{what}s[{i}]: {text}  label {shown}")
    return EXIT_VERIFIED


@dataclass(frozen=True)
class _Words:
    """A text dataset's vocabulary (``generate text``: ``meta["symbols"]``), to print each
    window, output and label with the unit it stands for. The file's own word: it labels the
    numbers, which are printed too; it decides nothing."""

    dataset: object
    symbols: list[str]

    @classmethod
    def of(cls, dataset) -> _Words | None:
        from exactmem.datasets.text import symbols_of

        if dataset.task != "next-token":
            return None
        symbols = symbols_of(dataset)
        return None if symbols is None else cls(dataset, symbols)

    def unit(self, value) -> str:
        """``9 "i"`` for a symbol id, the bare value otherwise."""
        from exactmem.core.exact import format_rational

        text = format_rational(value)
        if value == int(value) and 1 <= int(value) <= len(self.symbols):
            return f"{text} {json.dumps(self.symbols[int(value) - 1], ensure_ascii=False)}"
        return text

    def row(self, i: int, out, label) -> str:
        from exactmem.datasets.text import window_text

        window = window_text(self.dataset, i)  # type: ignore[arg-type]
        shown = f" {json.dumps(window, ensure_ascii=False)}" if window is not None else ""
        if out is None or len(out) != 1:
            got = "(" + ", ".join(map(self.unit, out)) + ")" if out is not None else "?"
        else:
            got = self.unit(out[0])
        return f"sequences[{i}]{shown}: {got}  label {self.unit(label)}"


# --------------------------------------------------------------------------- softmax models


@dataclass(frozen=True)
class BallPrediction:
    """One sequence on balls: per judged position, each output's exact bounds (lo, hi), the
    certified argmax (1-based, as labels count; None for a one-output model) and the bits."""

    bounds: list[list[tuple[mpq, mpq]]]
    argmax: list[int | None]
    precision: int


def _argmax(bounds: list[tuple[mpq, mpq]]) -> int | None:
    """The output whose lower bound exceeds every other output's upper bound (1-based), or
    None when the enclosures overlap."""
    best = max(range(len(bounds)), key=lambda j: bounds[j][0])
    lo = bounds[best][0]
    if all(hi < lo for j, (_, hi) in enumerate(bounds) if j != best):
        return best + 1
    return None


def ball_predictions(
    model, dataset, positions: str, progress=None, *, limit: int | None = None
) -> list[BallPrediction]:
    """Certified enclosures of every judged output, the precision doubled from
    :data:`BALL_START` bits for the sequences whose argmax is not yet decided (a one-output
    model is decided at once). Raises :class:`InconclusiveError` naming the first sequence
    still undecided at ``limit`` bits (the ball evaluator's cap by default)."""
    from exactmem.api import _inputs
    from exactmem.core.balls import ball_bounds
    from exactmem.evaluate.softmax import MAX_PRECISION, run_balls

    limit = MAX_PRECISION if limit is None else limit
    vocab, sequences = _inputs(model, dataset)
    results: dict[int, BallPrediction] = {}
    pending = list(range(len(sequences)))
    precision = BALL_START
    while pending:
        told = counter(progress, f"balls at {precision} bits", len(pending))
        undecided = []
        for start in range(0, len(pending), BALL_BLOCK):
            block = pending[start : start + BALL_BLOCK]
            trace = run_balls(
                model,
                vocab,
                [sequences[i] for i in block],
                precision=precision,
                positions=positions,
            )
            for i, cols in zip(block, trace.outputs, strict=True):
                judged = cols[-1:] if positions == "last" else cols
                if not all(x.is_finite() for col in judged for x in col):
                    undecided.append(i)  # a score beyond Arb's exponent range: no bound yet
                    continue
                bounds = [[ball_bounds(x) for x in col] for col in judged]
                argmax = [_argmax(b) if len(b) > 1 else None for b in bounds]
                if any(len(b) > 1 and a is None for b, a in zip(bounds, argmax, strict=True)):
                    undecided.append(i)
                results[i] = BallPrediction(bounds, argmax, precision)
            told(min(start + BALL_BLOCK, len(pending)))
        pending = undecided
        if pending and precision * 2 > limit:
            what = "point" if dataset.task == "points" else "sequence"
            why = (
                "the enclosures of two outputs still overlap"
                if pending[0] in results
                else "an enclosure is not finite"
            )
            raise InconclusiveError(
                f"{what}s[{pending[0]}]: the argmax is not decided at {precision} bits ({why}; "
                f"{len(pending)} undecided in all)"
            )
        precision *= 2
    return [results[i] for i in range(len(sequences))]


def _interval(bounds: tuple[mpq, mpq]) -> str:
    from exactmem.core.exact import format_rational

    lo, hi = bounds
    return format_rational(lo) if lo == hi else f"[{format_rational(lo)}, {format_rational(hi)}]"


def _ball_row(p: BallPrediction, positions: str) -> str:
    def one(bounds, argmax) -> str:
        if argmax is None:
            return " ".join(map(_interval, bounds)) if len(bounds) > 1 else _interval(bounds[0])
        rival = max(hi for j, (_, hi) in enumerate(bounds) if j != argmax - 1)
        from exactmem.core.exact import format_rational

        return (
            f"argmax {argmax} (output {argmax} ∈ {_interval(bounds[argmax - 1])}, every other "
            f"≤ {format_rational(rival)})"
        )

    if positions == "last":
        return one(p.bounds[0], p.argmax[0])
    if all(a is not None for a in p.argmax):
        return "argmax [" + ", ".join(str(a) for a in p.argmax) + "]"
    return "[" + ", ".join(one(b, a) for b, a in zip(p.bounds, p.argmax, strict=True)) + "]"


def _print_balls(args, digest: str, dataset, positions: str, balls: list[BallPrediction]) -> int:
    from exactmem.core.exact import format_rational

    if args.json:
        from exactmem.commands import emit_json

        emit_json(
            {
                "model": args.model,
                "model_sha256": digest,
                "data": args.data,
                "task": dataset.task,
                "positions": positions,
                "exact": False,
                "bounds": [
                    [
                        [[format_rational(lo), format_rational(hi)] for lo, hi in col]
                        for col in p.bounds
                    ]
                    for p in balls
                ],
                "argmax": [p.argmax for p in balls],
                "precision": [p.precision for p in balls],
                "labels": [list(y) if isinstance(y, tuple) else y for y in dataset.labels],
            }
        )
        return EXIT_VERIFIED
    what = "point" if dataset.task == "points" else "sequence"
    where = "the last position" if positions == "last" else "every position"
    outputs = len(balls[0].bounds[0]) if balls else 0
    said = "the certified argmax" if outputs > 1 else "each output"
    top = max((p.precision for p in balls), default=BALL_START)
    print(
        f"{plural(dataset.size, what)} of {args.data}, outputs of {args.model} "
        f"(sha256 {digest[:16]}…) "
        f"at {where}: softmax attention has no exact outputs, so these are BOUNDS — {said} "
        f"from certified enclosures [lo, hi] (exact rationals that contain the true value; Arb "
        f"balls at up to {top} bits); the dataset's label beside each"
    )
    for i, (p, label) in enumerate(zip(balls, dataset.labels, strict=True)):
        if i == ROWS_SHOWN:
            print(f"… {dataset.size - ROWS_SHOWN} more (--json lists every one)")
            break
        shown = list(label) if isinstance(label, tuple) else label
        print(f"{what}s[{i}]: {_ball_row(p, positions)}  label {shown}")
    return EXIT_VERIFIED
