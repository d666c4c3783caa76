"""Pictures of a trace (:func:`exactmem.trace`): the attention patterns of chosen sub-layers on
one sequence, every cell coloured by its weight and annotated with its exact score and weight.

Colours are floats (for the eye only); the numbers written in the cells are the exact values
the trace holds — rationals, or the midpoint of an Arb enclosure marked ``≈`` where a softmax
weight is transcendental. Needs matplotlib (the ``[plot]`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.core.exact import format_rational
from exactmem.reports.plot import _matplotlib, _save, figure_format
from exactmem.reports.tracing import RunCache

__all__ = ["plot_patterns"]


def _weight(w) -> tuple[float, str]:
    """(colour value, cell text) of one weight: exact rational, or an Arb ball's midpoint."""
    if isinstance(w, type(mpq(0))):
        return float(w), format_rational(w)
    # the midpoint's own decimal: a float would round e^(−20000) to 0
    return float(w.mid()), "≈" + w.mid().str(3, radius=False)


def _score(s) -> str:
    if s is None:
        return ""
    text = format_rational(s)
    return text if len(text) <= 7 else f"{float(s):.3g}"


def plot_patterns(
    cache: RunCache,
    out: str | os.PathLike,
    *,
    sublayers: Sequence[int],
    sequence: int = 0,
    head: int = 0,
) -> str:
    """Draw head ``head``'s pattern of each attention sub-layer in ``sublayers`` on sequence
    ``sequence``: one panel per sub-layer, queries down, keys across; a masked key is grey.
    Returns a one-line summary; the format follows the extension of ``out``."""
    fmt = figure_format(out)
    for s in sublayers:
        if f"sublayers.{s}.pattern" not in cache:
            raise InputError(f"sublayers[{s}]: no attention pattern was recorded there")
    if not 0 <= sequence < cache.dataset.size:
        raise InputError(f"sequence {sequence}: the dataset has {cache.dataset.size}")
    _, Figure, _ = _matplotlib()
    fig = Figure(figsize=(max(6.4, 3.4 * len(sublayers) + 0.8), 3.6), layout="constrained")
    axes = fig.subplots(1, len(sublayers), squeeze=False)[0]
    image = None
    for ax, s in zip(axes, sublayers, strict=True):
        pattern = cache[f"sublayers.{s}.pattern"][sequence, head]
        scores = cache[f"sublayers.{s}.scores"][sequence, head]
        n = pattern.shape[0]
        sub = cache.model.sublayers[s]
        visible = np.array([[scores[q, k] is not None for k in range(n)] for q in range(n)])
        if sub.score == "uniform":  # a uniform head records no scores: every key it sees
            visible = np.array([[pattern[q, k] != 0 for k in range(n)] for q in range(n)])
        colour = np.full((n, n), np.nan)
        for q in range(n):
            for k in range(n):
                if not visible[q, k]:
                    continue
                value, text = _weight(pattern[q, k])
                colour[q, k] = value
                cell = f"{text}\n{_score(scores[q, k])}" if scores[q, k] is not None else text
                ink = "white" if value > 0.6 else "black"  # legible on the dark cells
                ax.text(k, q, cell, ha="center", va="center", fontsize=7, color=ink)
        masked = np.ma.masked_invalid(colour)
        cmap = _cmap()
        image = ax.imshow(masked, cmap=cmap, vmin=0, vmax=1)
        label = f" '{sub.label}'" if sub.label else ""
        ax.set_title(f"sublayers[{s}]{label}: {sub.score}", fontsize=9)
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xlabel("key position", fontsize=8)
        ax.set_ylabel("query position", fontsize=8)
    fig.suptitle(
        f"attention patterns on sequence {sequence}, head {head}: weight (top) and score ⟨q, k⟩",
        fontsize=9,
    )
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.8, label="weight")
    size = _save(fig, out, fmt)
    return (
        f"wrote {os.fspath(out)} ({fmt}, {size} bytes): {len(sublayers)} attention patterns of "
        f"sequence {sequence}"
    )


def _cmap():
    matplotlib, _, _ = _matplotlib()
    return matplotlib.colormaps["Blues"].with_extremes(bad="#d9d9d9")  # masked keys grey
