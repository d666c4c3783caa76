"""What an exact run produces and records: the outputs, the streams after each sub-layer, the
probes' lanes, per-layer statistics and, when asked, every attention head's queries, keys, values,
scores and pattern. Shared by the reference and fast evaluators (they fill the same records)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from gmpy2 import mpq

from exactmem.core.errors import MissingPartError
from exactmem.core.model import (
    Attention,
)
from exactmem.evaluate.arithmetic import _columns

Batch = list[np.ndarray]  # one object array of int numerators per coordinate


@dataclass(frozen=True)
class LayerStat:
    """Activation pattern of one ReLU layer over the distinct inputs reaching it.

    ``min_nonzero`` is the smallest non-zero |pre-activation| (the sign margin), ``zeros`` the
    number of pre-activations exactly 0 (inputs on a ReLU kink).
    """

    sublayer: int
    layer: int
    units: int
    inputs: int
    zeros: int
    min_nonzero: mpq | None


@dataclass(frozen=True)
class AttentionStat:
    """Score pattern of one attention sub-layer: columns whose scores were not all equal.

    Where every column's scores are equal the weights are exactly 1/n under softmax and
    hardmax alike (Kajitsuka & Sato 2025, eq. (39))."""

    sublayer: int
    columns: int
    unequal_columns: int


@dataclass(frozen=True, eq=False)
class Stream:
    """The residual stream after one sub-layer: exact numerators per lane and distinct row over
    one denominator, and the row of every (sequence, position).

    Kept as integer arrays (a million rows of rationals as Python objects would cost gigabytes
    and seconds); :attr:`rows` and :meth:`lane` build the rationals when asked."""

    names: tuple[str, ...]
    columns: Batch  # per lane, numerators per distinct row (object or int64 arrays)
    den: int
    index: np.ndarray

    @property
    def size(self) -> int:
        """The number of distinct rows."""
        return len(self.columns[0]) if self.columns else len(np.unique(self.index))

    @property
    def rows(self) -> list[tuple[mpq, ...]]:
        """Exact columns per distinct row (built on every call)."""
        return _columns(self.columns, self.den)

    def numerators(self, name: str) -> np.ndarray:
        """Numerators over :attr:`den` of one lane, per distinct row."""
        if name not in self.names:
            raise MissingPartError(f"the stream has no lane {name!r}")
        return self.columns[self.names.index(name)]

    def lane(self, name: str) -> list[mpq]:
        """Exact values of one lane, per distinct row."""
        return [mpq(int(v), self.den) for v in self.numerators(name)]


class Outputs(Sequence):
    """``outputs[i][k]``: the output columns (tuples of mpq) at position k of sequence i,
    built on access from the numerators per distinct row (:class:`Stream`'s layout)."""

    index: np.ndarray  # type: ignore[assignment]  # (the row of each position, not Sequence.index)

    def __init__(self, columns: Batch, den: int, index: np.ndarray):
        self.columns, self.den, self.index = columns, den, index

    def __len__(self) -> int:
        return len(self.index)

    def _column(self, r: int) -> tuple[mpq, ...]:
        return tuple(mpq(int(col[r]), self.den) for col in self.columns)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return [self._column(int(r)) for r in self.index[i]]

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence) or len(self) != len(other):
            return False
        return all(a == b for a, b in zip(self, other, strict=True))

    def __repr__(self) -> str:
        return f"Outputs({len(self)} sequences × {self.index.shape[1]} positions)"

    def first_lane(self) -> tuple[np.ndarray, int]:
        """(numerators of lane 0 per (sequence, position), denominator): the label lane."""
        return np.asarray(self.columns[0])[self.index], self.den


@dataclass(eq=False)
class HeadRecord:
    """What one attention head computed on every sequence, recorded when :func:`run` is asked
    (``record=Recording(attention=True)``): the analogue of TransformerLens's ``hook_q``,
    ``hook_k``, ``hook_v``, ``hook_attn_scores`` and ``hook_pattern``, exact. Every array holds
    integer numerators (Python ints in object arrays) over the denominator beside it, as the
    evaluators keep their values (:func:`exactmem.reports.tracing.trace` lays them out as
    rationals).

    ``queries`` (over ``query_den``), ``keys`` (``key_den``), ``values`` (``value_den``):
    (sequences, positions, head size); None for a ``uniform`` head's queries and keys, which it
    never computes. ``scores`` (``score_den``): (sequences, queries, keys), ⟨q, k⟩ before the
    sub-layer's division by √scale, 0 where the key is masked (``visible``: (queries, keys)
    booleans), None for a uniform head. ``weights`` (``weight_den``): the attention pattern,
    0 for a masked key; ``exact`` (sequences, queries) is False for a softmax column whose
    scores are not all equal — its weights are transcendental, left 0 here
    (:func:`exactmem.evaluate.softmax.softmax_balls` encloses them)."""

    sublayer: int
    head: int
    score: str
    mask: str
    visible: np.ndarray
    queries: np.ndarray | None
    keys: np.ndarray | None
    values: np.ndarray
    scores: np.ndarray | None
    weights: np.ndarray
    exact: np.ndarray
    query_den: int = 1
    key_den: int = 1
    value_den: int = 1
    score_den: int = 1
    weight_den: int = 1


def _over_one_den(values: np.ndarray) -> tuple[np.ndarray, int]:
    """An object array of mpq (None read as 0) as integer numerators over their lcm."""
    flat = [v for v in values.reshape(-1).tolist() if v is not None]
    den = math.lcm(*[int(v.denominator) for v in flat]) if flat else 1
    out = np.zeros(values.shape, dtype=object)
    for at, v in np.ndenumerate(values):
        if v is not None:
            out[at] = int(v.numerator) * (den // int(v.denominator))
    return out, den


def _head_record(sublayer: int, head: int, att: Attention, book: dict, visible) -> HeadRecord:
    """A :class:`HeadRecord` from the per-sequence rationals the reference computed."""
    uniform = att.score == "uniform"
    exact = np.array(
        [
            [book["weights"][i, q, 0] is not None for q in range(visible.shape[0])]
            for i in range(book["weights"].shape[0])
        ],
        dtype=bool,
    ).reshape(book["weights"].shape[:2])
    q, qd = (None, 1) if uniform else _over_one_den(book["queries"])
    k, kd = (None, 1) if uniform else _over_one_den(book["keys"])
    v, vd = _over_one_den(book["values"])
    sc, sd = (None, 1) if uniform else _over_one_den(book["scores"])
    w, wd = _over_one_den(book["weights"])
    return HeadRecord(sublayer, head, att.score, att.mask, visible, q, k, v, sc, w, exact,
                      qd, kd, vd, sd, wd)  # fmt: skip


@dataclass(eq=False)
class Recording:
    """What :func:`run` records beyond the streams and probes, only when asked (a normal run
    records nothing and pays nothing): every attention head's queries, keys, values, scores
    and pattern (:class:`HeadRecord`), and every ReLU layer's pre-activations
    (``preactivations[(sublayer, layer)] = (numerators per unit per distinct row, den,
    row index per (sequence, position))``).

    The caller keeps the object: it is filled as the evaluation goes, so what was recorded
    before an :class:`~exactmem.core.errors.InconclusiveError` (softmax with unequal scores) is
    still there, with the partial trace in ``trace``. Pre-activations are recorded on the plain
    path of this module; attention on it too, or in the fast evaluator's hardmax step
    (:func:`exactmem.evaluate.hardmax.hardmax_mix`), with the same values; the shortcut for
    all-equal scores stands aside."""

    attention: bool = False
    preactivations: bool = False
    heads: list[HeadRecord] = field(default_factory=list)
    pre: dict[tuple[int, int], tuple[Batch, int, np.ndarray]] = field(default_factory=dict)
    trace: Trace | None = None
    stopped: tuple[int, str] | None = None  # (sub-layer, why) where exact evaluation stopped


@dataclass
class Trace:
    """Outputs and named lanes of one evaluation.

    ``outputs[i][k]`` is the output at position k of sequence i (only the last position when
    evaluated with ``positions="last"``). ``lane(name)[i][k]`` is the value of probe ``name``;
    ``streams[s]`` the stream after sub-layer s.
    """

    outputs: Sequence[list[tuple[mpq, ...]]]
    stats: list[LayerStat] = field(default_factory=list)
    attention: list[AttentionStat] = field(default_factory=list)
    streams: list[Stream] = field(default_factory=list)
    embedded: Stream | None = None
    folds: dict = field(default_factory=dict)  # key → consumer of a family of probes
    _lanes: dict[str, tuple[np.ndarray, int, np.ndarray]] = field(default_factory=dict)

    def lane(self, name: str) -> np.ndarray:
        """Exact values of a probe, shape (sequences, positions): ints, or mpq when needed."""
        if name not in self._lanes:
            raise MissingPartError(f"the model has no probe {name!r}")
        numerators, den, index = self._lanes[name]
        if numerators.dtype != object:
            numerators = numerators.astype(object)  # Python ints, never numpy scalars
        values = numerators if den == 1 else np.array([mpq(v, den) for v in numerators], object)
        return values[index]

    def lane_raw(self, name: str) -> tuple[np.ndarray, int, np.ndarray]:
        """(numerators per row, denominator, row index per (sequence, position))."""
        if name not in self._lanes:
            raise MissingPartError(f"the model has no probe {name!r}")
        return self._lanes[name]
