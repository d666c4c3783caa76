"""Shared test helpers: tiny models and datasets built exactly."""

from __future__ import annotations

import numpy as np
from gmpy2 import mpq

from exactmem.constructions.vys import Projection, build_memorizer
from exactmem.core.errors import InconclusiveError
from exactmem.core.model import Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.evaluate import fast, reference
from exactmem.evaluate.reference import run_points


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


def same_trace(a, b):
    assert a.outputs == b.outputs
    assert a.stats == b.stats
    assert a.attention == b.attention
    assert set(a._lanes) == set(b._lanes)
    for name in a._lanes:
        assert list(a.lane(name).ravel()) == list(b.lane(name).ravel()), name
        assert all(type(v) is not np.int64 for v in b.lane(name).ravel())
    assert len(a.streams) == len(b.streams)
    for x, y in zip(a.streams, b.streams, strict=True):
        assert x.names == y.names and x.rows == y.rows
        assert (x.index == y.index).all()


def both(model, vocab, sequences, **kw):
    """Run both evaluators; they must agree, also on raising InconclusiveError."""
    results = []
    for module in (reference, fast):
        try:
            results.append(module.run(model, vocab, sequences, **kw))
        except InconclusiveError:
            results.append(None)
    a, b = results
    assert (a is None) == (b is None)
    if a is not None:
        same_trace(a, b)
    return b


def run_folded(module, model, ds, **kw):
    from exactmem.checks.certificate import step_folds

    folds = step_folds(model)
    trace = module.run(model, ds.vocab, ds.sequences, positions="last", folds=folds, **kw)
    return trace, folds


def same_folds(a, b):
    """Step folds (Stage II) and match folds (Stage III) in the same states."""
    from exactmem.checks.certificate import MatchFold

    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert x.seen == y.seen and x.seen
        if isinstance(x, MatchFold):
            names, kept = ("hits", "slot", "off"), "off_values"
        else:
            names, kept = ("ones", "flags", "ramp", "rise"), "ramp_values"
        for name in names:
            assert getattr(x, name).tolist() == getattr(y, name).tolist(), name
        assert getattr(x, kept) == getattr(y, kept)


def certify_built(model: Transformer, dataset: Dataset, **kw):
    """``certify`` with the criteria of the test that built ``model``: the checklist of the
    construction it called, and — for a softmax regression readout, whose outputs are
    transcendental — the tolerance it asked the construction to reach; Theorem F.1's bit
    budget as ``verify --set`` states it. The test is the user
    here; the library itself never reads these from a model."""
    from exactmem.checks.certify import certify
    from exactmem.core.model import Attention

    meta = model.meta
    kw.setdefault("construction", meta.get("construction"))
    softmax = any(isinstance(s, Attention) and s.score == "softmax" for s in model.sublayers)
    if meta.get("construction") == "mahdavi24" and softmax and meta.get("readout") == "regression":
        kw.setdefault("tolerance", meta.get("tolerance"))
    if meta.get("construction") == "madden24" and dataset.targets:
        kw.setdefault("tolerance", meta.get("options", {}).get("tolerance", "1/1000"))
    if meta.get("construction") == "ks25-bit-budget":  # the budget the test built with
        kw.setdefault("options", {"bit_budget": meta["options"]["bit_budget"]})
    return certify(model, dataset, **kw)


def claim_instances(tier: str) -> list:
    """(claim, instance) for every instance of the shipped claims in ``tier``."""
    from exactmem.claims.proofs import find_proofs_dir, load_claims

    return [
        (claim, inst)
        for claim in load_claims(find_proofs_dir(None))
        for inst in claim.instances
        if inst.tier == tier
    ]


def text_windows(
    text: str,
    window: int,
    unit: str = "char",
    *,
    positions: str = "auto",
    source: str = "text",
    progress=None,
):
    """The dataset of ``text``'s windows (:meth:`Dataset.from_text` under the tests' short
    signature; :func:`exactmem.datasets.text.windows` itself returns the plain record)."""
    from exactmem.datasets.dataset import Dataset

    return Dataset.from_text(
        text, window=window, unit=unit, positions=positions, source=source, progress=progress
    )
