"""Shared test helpers: tiny models and datasets built exactly."""

from __future__ import annotations

from gmpy2 import mpq

from exactmem.constructions.vys import Projection, build_memorizer
from exactmem.data import Dataset
from exactmem.evaluate.reference import run_points
from exactmem.model import Transformer


def points_dataset(points, labels, C=None) -> Dataset:
    pts = tuple(tuple(mpq(x) for x in p) for p in points)
    return Dataset(task="points", labels=tuple(labels), num_classes=C or max(labels), points=pts)


def memorize_keys(keys, labels, *, C=None, extra=(), **kw):
    """Lemma C.1 on integer keys given directly (identity Stage I), evaluated exactly."""
    pts = [(mpq(k),) for k in keys]
    extra_pts = [(mpq(k),) for k in extra]
    mlp, witness = build_memorizer(
        pts,
        labels,
        num_classes=C or max(labels),
        extra_points=extra_pts,
        projection=Projection.identity(),
        **kw,
    )
    model = Transformer(1, (mlp,))
    trace = run_points(model, pts + extra_pts)
    return model, witness, [o[0][0] for o in trace.outputs], trace
