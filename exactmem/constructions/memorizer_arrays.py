"""Lemma C.1's memorizer (:mod:`exactmem.constructions.vys`) on points given as integer arrays.

Kajitsuka & Sato 2025 apply Lemma C.1 a second time to the context ids, one point per distinct
(last token, multiset): ten million points at N = 10⁷. As tuples of rationals they cost
gigabytes and minutes; here they are one int64 matrix over a common denominator
(:class:`IntegerPoints`), and Stage I (the projection, Lemma C.2), the keys and the packing of
Stage II run on whole arrays. The draws, keys, groups and packed integers are those of
:func:`~exactmem.constructions.vys.build_memorizer` on the same points — the model is the same,
byte for byte — and every product is proved to fit in int64 before it is taken (exact Python
integers otherwise, :mod:`exactmem.core.exact_arrays`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpq

from exactmem.constructions.vys import (
    DEFAULT_GADGET,
    GADGETS,
    MemorizerWitness,
    Packing,
    Projection,
    _pack,
    all_distinct,
    choose_group_size,
    memorizer_network,
    paper_group_size,
)
from exactmem.core.errors import InputError
from exactmem.core.exact import bitlen
from exactmem.core.exact_arrays import LIMIT, first_seen_ids, top
from exactmem.core.model import MLP
from exactmem.runtime.progress import Steps

__all__ = ["IntegerPoints", "build_memorizer_on_rows", "pack_rows", "projection_of_rows"]

PACK_CHUNK = 1 << 20  # values expanded at a time while packing (64 bytes each)


@dataclass(frozen=True, eq=False)
class IntegerPoints:
    """The points ``rows[i] / scale`` in Q^d: ``rows`` an (V, d) int64 matrix and ``scale`` the
    least common denominator of all coordinates (what Stage I multiplies by)."""

    scale: int
    rows: np.ndarray

    @classmethod
    def over(cls, numerators: np.ndarray, denominator: int) -> IntegerPoints:
        """The points ``numerators / denominator``, brought to their least common
        denominator."""
        dens = denominator // np.gcd(numerators, denominator)
        scale = math.lcm(1, *np.unique(dens).tolist())
        return cls(scale, numerators // (denominator // scale))

    def __len__(self) -> int:
        return len(self.rows)

    def vectors(self) -> list[tuple[mpq, ...]]:
        """The points as tuples of rationals (what the list-based builders take)."""
        return [tuple(mpq(x, self.scale) for x in row) for row in self.rows.tolist()]


def _dot(rows: np.ndarray, w: Sequence[int]) -> np.ndarray:
    """rows · w exactly: int64 when proved below 2⁶², Python ints otherwise."""
    if top(rows) * sum(abs(x) for x in w) < LIMIT and max(map(abs, w), default=0) < LIMIT:
        return rows @ np.array(w, np.int64)
    return rows.astype(object) @ np.array(w, dtype=object)


def projection_of_rows(
    points: IntegerPoints, rng: random.Random, *, bound: int | None = None, attempts: int = 64
) -> Projection:
    """:func:`~exactmem.constructions.vys.integer_projection` on an integer matrix: the same
    draws in the same order, each tried on the whole matrix at once."""
    V, d = points.rows.shape
    top_bound = bound if bound is not None else max(V * V, 1)
    tiers = [] if bound is not None else [1 << e for e in range(max(top_bound.bit_length() - 1, 0))]
    for B in [*tiers, top_bound]:
        for _ in range(attempts if B == top_bound else 3):
            w = [rng.randint(-B, B) for _ in range(d)]
            proj = _dot(points.rows, w)
            if all_distinct(proj):
                return Projection(points.scale, tuple(w), 2 - 2 * int(proj.min()))
    raise InputError(
        f"no injective projection found in {attempts} draws with |w_i| ≤ {top_bound}: "
        "are two points equal?"
    )


def keys_of_rows(projection: Projection, points: IntegerPoints) -> np.ndarray:
    """``projection.key`` of every point (int64 when proved to fit), naming the first point
    off the projection's integer lattice."""
    f = projection.factor * projection.scale
    num = _dot(points.rows, [w * f for w in projection.direction])
    if num.dtype == object:
        off = [i for i, v in enumerate(num.tolist()) if v % points.scale]
    else:
        off = np.flatnonzero(num % points.scale).tolist()
    if off:
        projection.key(points.vectors()[off[0]])  # raises, naming the point
    keys = num // points.scale
    shift = projection.shift
    if keys.dtype != object and top(keys) + abs(shift) < LIMIT:
        return keys + shift
    return keys.astype(object) + shift


def _pack_groups(values: np.ndarray, K: int, bits: int, m: int) -> list[int]:
    """Per group of K values (zero-padded to m groups), the integer with slot 0 in its top
    ``bits`` bits — :func:`vys._pack` of each group, the bits laid out by NumPy."""
    padded = np.zeros(m * K, values.dtype)
    padded[: len(values)] = values
    if values.dtype == object or bits > 62 or top(values) >= 1 << bits or values.min(initial=0) < 0:
        return [_pack(padded[j * K : (j + 1) * K].tolist(), bits) for j in range(m)]
    lead = -(K * bits) % 8  # zero bits in front, to whole bytes
    out: list[int] = []
    per = max(1, PACK_CHUNK // K)
    for g in range(0, m, per):
        chunk = padded[g * K : min(m, g + per) * K].astype(">u8")
        # each value's 64 bits, most significant first; its low ``bits`` of them, per group
        expanded = np.unpackbits(chunk.view(np.uint8).reshape(-1, 8), axis=1)[:, 64 - bits :]
        expanded = expanded.reshape(-1, K * bits)
        if lead:
            expanded = np.concatenate([np.zeros((len(expanded), lead), np.uint8), expanded], 1)
        packed = np.packbits(expanded, axis=1)
        out.extend(int.from_bytes(row, "big") for row in map(bytes, packed))
    return out


def pack_rows(
    keys: np.ndarray,
    labels: np.ndarray,
    *,
    num_classes: int,
    gadget: str = DEFAULT_GADGET,
    group_size: int | None = None,
    bit_widths: str = "corrected",
) -> Packing:
    """:func:`~exactmem.constructions.vys.pack` on arrays (every point labelled): the same
    groups and packed integers; ``group_of`` and ``slot_of`` are arrays."""
    N = len(labels)
    rho = bitlen(int(keys.max()))
    c = bitlen(num_classes)
    if bit_widths == "paper":
        rho, c = c, rho  # as printed in Lemma C.1, Stage III (an erratum of the paper): refuted
    elif bit_widths != "corrected":
        raise InputError(f"bit_widths must be 'corrected' or 'paper', got {bit_widths!r}")
    K = group_size if group_size is not None else choose_group_size(N, gadget, rho, c)
    if K < 1:
        raise InputError(f"group_size must be ≥ 1, got {K}")
    order = np.argsort(keys)  # the keys are distinct: one order
    m = math.ceil(N / K)
    rank = np.arange(N)
    group_of = np.empty(N, np.int64)
    slot_of = np.empty(N, np.int64)
    group_of[order], slot_of[order] = rank // K, rank % K
    thresholds = tuple(int(k) for k in keys[order[K::K]].tolist())
    return Packing(
        gadget,
        rho,
        c,
        K,
        m,
        thresholds,
        tuple(_pack_groups(keys[order], K, rho, m)),
        tuple(_pack_groups(labels[order], K, c, m)),
        group_of,
        slot_of,
        paper_group_size(N),
        bit_widths,
    )


def _distinct_rows(rows: np.ndarray) -> bool:
    """True when the rows are proved pairwise distinct by distinct 64-bit hashes (a sort);
    False says only that two hashes met (:func:`first_seen_ids` then decides)."""
    weights = np.random.default_rng(0).integers(1, 2**63, rows.shape[1], np.uint64) * 2 + 1
    h = np.zeros(len(rows), np.uint64)
    with np.errstate(over="ignore"):
        for j in range(rows.shape[1]):
            z = rows[:, j].astype(np.uint64) * weights[j]
            z ^= z >> np.uint64(29)
            z *= np.uint64(0xBF58476D1CE4E5B9)
            z ^= z >> np.uint64(32)
            h += z
    return all_distinct(h)


def _check_points(points: IntegerPoints, labels: np.ndarray, num_classes: int, gadget: str):
    """The checks of :func:`vys._validated_points`, on arrays, with the same messages."""
    if gadget not in GADGETS:
        raise InputError(f"gadget {gadget!r} is not one of {', '.join(GADGETS)}")
    if not len(points):
        raise InputError("the memorizer needs at least one labelled point")
    if len(labels) != len(points):
        raise InputError(f"{len(labels)} labels for {len(points)} points")
    bad = np.flatnonzero((labels < 1) | (labels > num_classes))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"labels[{i}]: {labels[i]} is outside 1..C with C = {num_classes}")
    if _distinct_rows(points.rows):
        return
    ids, firsts = first_seen_ids(points.rows)
    if len(firsts) != len(points):
        i = int(np.flatnonzero(firsts[ids] != np.arange(len(ids)))[0])
        j = int(firsts[ids[i]])
        raise InputError(f"points {j} and {i} are equal; the memorizer needs distinct points")


def build_memorizer_on_rows(
    points: IntegerPoints,
    labels: np.ndarray,
    *,
    num_classes: int,
    gadget: str = DEFAULT_GADGET,
    group_size: int | None = None,
    seed: int = 0,
    direction_bound: int | None = None,
    projection: Projection | None = None,
    bit_widths: str = "corrected",
    input_names: Sequence[str] | None = None,
    label: str = "memorizer",
    carry_key: bool = False,
    steps: Steps | None = None,
) -> tuple[MLP, MemorizerWitness]:
    """:func:`~exactmem.constructions.vys.build_memorizer` (Lemma C.1) for labelled points
    given as an :class:`IntegerPoints` and an int64 array of labels: the same network."""
    steps = steps or Steps(None, "", 0)
    labels = np.asarray(labels, np.int64)
    steps.step(f"{label}: {len(points)} points")
    _check_points(points, labels, num_classes, gadget)
    steps.step(f"{label}: Stage I keys")
    if projection is None:
        projection = projection_of_rows(points, random.Random(seed), bound=direction_bound)
    keys = keys_of_rows(projection, points)
    if keys.min() < 1 or not all_distinct(keys):
        raise InputError("the projection must give distinct keys ≥ 1 on all points")
    steps.step(f"{label}: packing")
    packing = pack_rows(
        keys,
        labels,
        num_classes=num_classes,
        gadget=gadget,
        group_size=group_size,
        bit_widths=bit_widths,
    )
    d = points.rows.shape[1]
    names = tuple(input_names) if input_names else tuple(f"x{j}" for j in range(d))
    mlp = memorizer_network(
        names, projection, packing, carry_key=carry_key, steps=steps, label=label
    )
    witness = MemorizerWitness(**vars(packing), keys=keys, labels=labels, projection=projection)
    return mlp, witness
