"""Let a model of text windows recite its text (:func:`recite`): the model's exact next-unit
predictions, fed back as a sliding window. Apart from :mod:`exactmem.datasets.text` because it
evaluates
a model, which the dataset side of the package never does."""

from __future__ import annotations

from typing import Any

from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.text import symbol_id, symbols_of
from exactmem.evaluate.reference import run

__all__ = ["recite"]


def recite(model: Any, dataset: Dataset, steps: int | None = None) -> list[str]:
    """Let ``model`` recite the text of ``dataset`` (written by ``generate text``): start from
    its first window, predict the next unit exactly (the output itself, or the argmax of one
    output per symbol), slide the window, repeat ``steps`` times (by default N, which gives
    back all W + N units when every window is memorized). Returns the units. Tokens are made
    as :meth:`exactmem.Dataset.from_text` makes them, ``(i,)`` or, in a position-aware dataset,
    ``(i, k)`` for the k-th token of the window, so the model sees at every step what it would
    see on the dataset's own windows. Raises :class:`InputError` when the dataset has no text
    vocabulary or the model predicts something that is no symbol id."""
    symbols = symbols_of(dataset)
    if symbols is None or not dataset.sequences:
        raise InputError("recite needs a dataset of text windows (exactmem generate text)")
    first = [symbol_id(dataset.vocab[t], len(symbols)) for t in dataset.sequences[0]]
    if any(i is None for i in first):
        raise InputError("recite: the first window's tokens carry no symbol ids")
    window: list[int] = [i for i in first if i is not None]
    aware = len(dataset.vocab[0]) == 2  # (symbol id, position): windows() made them so
    units = [symbols[i - 1] for i in window]
    for step in range(len(dataset.sequences) if steps is None else steps):
        tokens = [(mpq(i), mpq(k + 1)) if aware else (mpq(i),) for k, i in enumerate(window)]
        out = run(model, tokens, [list(range(len(tokens)))], positions="last").outputs[0][-1]
        y = out[0] if len(out) == 1 else _argmax(out) if len(out) == len(symbols) else None
        if y is None or y != int(y) or not 1 <= int(y) <= len(symbols):
            raise InputError(
                f"recite: step {step} predicts {[str(v) for v in out][:4]}, not a symbol id "
                f"1..{len(symbols)}"
            )
        units.append(symbols[int(y) - 1])
        window = window[1:] + [int(y)]
    return units


def _argmax(values: Any) -> int | None:
    """The 1-based index of the one largest output (a readout by argmax), or None on a tie."""
    top = max(values)
    best = [k for k, v in enumerate(values) if v == top]
    return best[0] + 1 if len(best) == 1 else None
