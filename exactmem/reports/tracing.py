"""A look inside a run: ``exactmem.trace(model, dataset)``, the analogue of TransformerLens's
``run_with_cache``, exact.

The trusted reference evaluator (:mod:`exactmem.evaluate.reference`) runs the model as its file
defines it and records, because it is asked to (:class:`~exactmem.evaluate.records.Recording`;
a normal run records nothing), every attention head's queries, keys, values, scores and
pattern and every ReLU layer's pre-activations. :class:`RunCache` lays them out per
(sequence, position) under names:

======================================  ==========================================  ============
key                                     what                                        shape
======================================  ==========================================  ============
``embed``                               the stream entering sub-layer 0             (N, n, w)
``sublayers.{s}``                       the stream after sub-layer s                (N, P, w)
``sublayers.{s}.heads.{h}.q|k|v``       head h's queries, keys, values              (N, n, d_h)
``sublayers.{s}.scores``                ⟨q, k⟩ per head (None: a masked key)        (N, H, n, n)
``sublayers.{s}.pattern``               the attention weights per head              (N, H, n, n)
``sublayers.{s}.pre.{l}``               layer l's pre-activations (a ReLU MLP)      (N, P, m)
``probes.{name}``                       a probe's value (a named lane of the MLP)   (N, P)
``outputs``                             the model's outputs                         (N, P, out)
======================================  ==========================================  ============

Scores are ⟨q, k⟩ as the query and key maps give them, before an attention's division by
√scale (``Attention.scale``; hardmax and equal scores do not depend on it, softmax weights do).
Every value is an exact rational (``gmpy2.mpq``) but one: softmax weights of a column whose
scores are not all equal are transcendental, so there ``pattern`` holds Arb balls
(``flint.arb``, :func:`exactmem.evaluate.softmax.softmax_balls` of the exact scores) that
enclose them — and the stream after that sub-layer is no longer exact, so the trace stops
there (:attr:`RunCache.stopped` says where and why; the scores of that sub-layer are still
recorded). A GELU MLP stops it the same way, before the MLP. P is n (every position is
traced, next-token data included).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from gmpy2 import mpq

from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.model import MLP, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import with_positions
from exactmem.evaluate.records import HeadRecord, Recording, Stream
from exactmem.evaluate.reference import run

__all__ = ["RunCache", "feed", "trace"]


@dataclass(eq=False)
class RunCache:
    """What :func:`trace` recorded: ``cache[key]`` is an object array (keys in
    :attr:`names`, listed in the module's docstring), ``cache.lanes(key)`` the lane names of a
    stream, ``cache.lane(key, name)`` one lane of it as an (N, P) array.

    ``dataset`` is the dataset as the model reads it (with each token's position appended when
    the model's input is one wider than the tokens); ``stopped`` is None when every sub-layer
    was evaluated exactly, else (the sub-layer, why) where exact evaluation ended."""

    model: Transformer
    dataset: Dataset
    feed: str
    stopped: tuple[int, str] | None = None
    _store: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _names: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    @property
    def names(self) -> list[str]:
        """The recorded keys, in evaluation order."""
        return list(self._store)

    @property
    def exact(self) -> bool:
        """True when every sub-layer was evaluated exactly (nothing transcendental met)."""
        return self.stopped is None

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._store:
            near = [k for k in self._store if k.split(".")[:2] == key.split(".")[:2]]
            raise KeyError(
                f"{key!r} was not recorded ({len(self._store)} keys in .names"
                + (f"; beside it: {', '.join(near[:8])})" if near else ")")
            )
        return self._store[key]

    def __contains__(self, key: object) -> bool:
        return key in self._store

    def lanes(self, key: str) -> tuple[str, ...]:
        """The lane names of the stream ``key`` (``embed`` or ``sublayers.{s}``); unnamed lanes
        are ``#j``."""
        return self._names[key]

    def lane(self, key: str, name: str) -> np.ndarray:
        """One lane of the stream ``key``, shape (N, P)."""
        names = self.lanes(key)
        if name not in names:
            raise KeyError(f"{key} has no lane {name!r}; its lanes: {', '.join(names)}")
        return self[key][:, :, names.index(name)]


def feed(model: Transformer, dataset: Dataset) -> tuple[str, Dataset]:
    """How the dataset enters the model, from its input width (as :func:`exactmem.certify`
    reads it): token ids, the token vectors, or the vectors with their position appended."""
    if dataset.task == "points":
        return "points", dataset
    if model.token_inputs:
        return "token ids", dataset
    if model.input_dim == dataset.dim:
        return "vectors", dataset
    if model.input_dim == dataset.dim + 1:
        return "vectors with positions", with_positions(dataset)
    raise InputError(
        f"the model takes inputs of dimension {model.input_dim}, the dataset's tokens have "
        f"{dataset.dim} (or {dataset.dim + 1} with their position appended)"
    )


def trace(
    model: Transformer,
    dataset: Dataset,
    *,
    attention: bool = True,
    preactivations: bool = True,
    precision: int = 128,
) -> RunCache:
    """Run ``model`` on ``dataset`` with the reference evaluator and keep everything it
    computed: the streams after every sub-layer, the probes, each attention head's queries,
    keys, values, scores and pattern (``attention``) and the ReLU pre-activations
    (``preactivations``). Exact rationals throughout; softmax weights of unequal scores as
    Arb balls at ``precision`` bits, after which the trace stops (:class:`RunCache`).
    docs/inside-a-run.md shows it on a model."""
    how, fed = feed(model, dataset)
    cache = RunCache(model, fed, how)
    stop = next(
        (i for i, s in enumerate(model.sublayers) if isinstance(s, MLP) and s.activation != "relu"),
        None,
    )
    evaluated = model
    if stop is not None:  # GELU is transcendental: the exact run ends before it
        evaluated = replace(model, sublayers=model.sublayers[:stop], unembed=None)
        cache.stopped = (stop, "a GELU MLP is transcendental: the exact trace ends before it")
    record = Recording(attention=attention, preactivations=preactivations)
    if how == "points":
        vocab, sequences = fed.points, [[i] for i in range(fed.size)]
    else:
        vocab, sequences = fed.vocab, fed.sequences
    try:
        run(evaluated, vocab, sequences, record=record)
    except InconclusiveError as exc:
        if record.trace is None:  # pragma: no cover - refused before any sub-layer ran
            raise
        # the sub-layer that could not be evaluated exactly: the one after the last stream
        # kept (a softmax column of unequal scores, a LayerNorm of irrational root)
        at = record.stopped[0] if record.stopped else len(record.trace.streams)
        cache.stopped = (at, str(exc))
    _lay_out(cache, record, precision)
    return cache


def _stream(stream: Stream) -> np.ndarray:
    """(N, P, width) exact values of a stream, from its distinct rows and their index."""
    rows = stream.rows
    width = len(stream.columns)
    table = np.empty((len(rows), width), dtype=object)
    for r, row in enumerate(rows):
        table[r, :] = row
    return table[stream.index]


def _lane_names(stream: Stream) -> tuple[str, ...]:
    width = len(stream.columns)
    names = tuple(stream.names)
    return names if len(names) == width else tuple(f"#{j}" for j in range(width))


def _lay_out(cache: RunCache, record: Recording, precision: int) -> None:
    trace = record.trace
    if trace is None:  # pragma: no cover - run() sets it first thing
        return
    store, names = cache._store, cache._names
    if trace.embedded is not None:
        store["embed"] = _stream(trace.embedded)
        names["embed"] = _lane_names(trace.embedded)
    heads: dict[int, list[HeadRecord]] = {}
    for h in record.heads:
        heads.setdefault(h.sublayer, []).append(h)
    for s in range(len(cache.model.sublayers)):
        for h in heads.get(s, []):
            for what in ("queries", "keys", "values"):
                numerators = getattr(h, what)
                den = getattr(h, f"{what[:-1] if what != 'queries' else 'query'}_den")
                store[f"sublayers.{s}.heads.{h.head}.{what[0]}"] = (
                    None if numerators is None else _rationals(numerators, den)
                )
        if s in heads:
            store[f"sublayers.{s}.scores"] = np.stack([_scores(h) for h in heads[s]], axis=1)
            scale = getattr(cache.model.sublayers[s], "scale", 1)
            store[f"sublayers.{s}.pattern"] = np.stack(
                [_pattern(h, precision, scale) for h in heads[s]], axis=1
            )
        for (sub, layer), (Z, zden, index) in record.pre.items():
            if sub == s:
                table = np.empty((len(Z[0]) if Z else 0, len(Z)), dtype=object)
                for u, z in enumerate(Z):
                    table[:, u] = [mpq(int(v), zden) for v in z]
                store[f"sublayers.{s}.pre.{layer}"] = table[index]
        if s < len(trace.streams):
            store[f"sublayers.{s}"] = _stream(trace.streams[s])
            names[f"sublayers.{s}"] = _lane_names(trace.streams[s])
    for name in trace._lanes:
        store[f"probes.{name}"] = trace.lane(name)
    if cache.stopped is None:
        out = trace.outputs
        table = np.empty((len(out.columns[0]) if out.columns else 0, len(out.columns)), object)
        for j, col in enumerate(out.columns):
            table[:, j] = [mpq(int(v), out.den) for v in col]
        store["outputs"] = table[out.index]


def _rationals(numerators: np.ndarray, den: int) -> np.ndarray:
    """Integer numerators over ``den`` as an object array of mpq."""
    out = np.empty(numerators.shape, dtype=object)
    for at, v in np.ndenumerate(numerators):
        out[at] = mpq(int(v), den)
    return out


def _scores(head: HeadRecord) -> np.ndarray:
    """The head's scores as rationals, None for a masked key (and everywhere for a uniform
    head, which computes none)."""
    N, n = head.values.shape[:2]
    if head.scores is None:
        return np.full((N, n, n), None, dtype=object)
    out = _rationals(head.scores, head.score_den)
    out[:, ~head.visible] = None
    return out


def _pattern(head: HeadRecord, precision: int, scale: int = 1) -> np.ndarray:
    """The head's weights: the exact ones recorded, and Arb enclosures (softmax of the exact
    scores divided by √scale, :func:`exactmem.evaluate.softmax.softmax_balls`) where they are
    transcendental."""
    weights = _rationals(head.weights, head.weight_den)
    missing = np.argwhere(~head.exact)
    if not len(missing) or head.scores is None:
        return weights
    from flint import ctx

    from exactmem.evaluate.softmax import softmax_balls, to_ball

    old = ctx.prec
    ctx.prec = precision
    try:
        root = to_ball(mpq(scale)).sqrt()
        for i, q in missing.tolist():
            at = np.flatnonzero(head.visible[q]).tolist()
            scores = [mpq(int(head.scores[i, q, k]), head.score_den) for k in at]
            balls = softmax_balls([to_ball(x) / root for x in scores])
            for k, b in zip(at, balls, strict=True):
                weights[i, q, k] = b
    finally:
        ctx.prec = old
    return weights
