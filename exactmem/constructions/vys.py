"""The memorizing ReLU network of Vardi, Yehudai & Shamir 2022 (Theorem 3.1), in the extended
form that Kajitsuka & Sato 2025 use twice (Lemma C.1: extra points that must map to 0).

Three stages (Vardi, Yehudai & Shamir 2022, Theorem 3.1; Kajitsuka & Sato 2025, Lemma C.1):

* **Stage I** — exact projection (Lemma C.2, our reconstruction): scale the
  rational inputs by their common denominator L, draw an integer direction w ∈ [−K, K]^d
  (K = 1, 2, 4, … first, K = V² as the fallback), resample until the V projections are
  distinct, and set
  ``t(x) = 2·(L·wᵀx − p_min) + 2``. Keys are integers ≥ 2, pairwise ≥ 2 apart.
* **Stage II** — group selection (Lemma G.3): the labelled keys, sorted, form m groups of K
  slots; each group owns two packed integers, u_j (keys, ρ bits each) and w_j (labels, c bits
  each), slot 0 most significant. A telescoping sum of integer steps ``S_{a_j}(t)`` selects
  (u_j, w_j) in m − 1 layers. Padding slots hold key 0 and label 0: no key is below 2, and a
  matched pad would output 0 anyway.
* **Stage III** — bit extraction (Lemma G.6 with G.4/G.5). Three gadgets:

  - ``keyed`` (default): the integer bit-peel (Lemma G.3, reconstructed) with the slot's key
    and label assembled in small group-shared lanes, matched on t − key: no unit that reads the
    input's key t ever sees a packed integer, so the fast evaluator keeps inputs in int64 and
    computes the packed integers once per group (:func:`_stage3_keyed`).
  - ``peel``: the integer bit-peel (Lemma G.3, reconstructed). Slot k's match is read
    without assembling its key: with U the remaining packed keys (slot k on top, at bit
    P = ρ(K−1−k)), ``t = key_k  ⇔  0 ≤ U − t·2^P < 2^P``. Label bits are gated by the match
    with σ(b + m − 1) and summed into the output. One layer per bit, U and W in parallel.
  - ``tent``: paper style, Telgarsky's tent map on a pair of trajectories (Lemma A.7 / G.4)
    with the affine read-out b_k = ½ − 2^{n−k}·D_k, then a two-layer hat for the match and a
    select unit σ(y − 2^c(1 − m)).

ρ = bitlen(max key) and c = bitlen(C) — the paper swaps the two (docs/check.md, the Lemma C.1
erratum).
The group size K is chosen to minimise the actual depth; the paper's ⌈√(N / log₂ N)⌉ is
reported beside it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gmpy2 import mpq

from exactmem.constructions.circuit import Circuit, Lin, const, var
from exactmem.constructions.gadgets import (
    and_bit,
    interval_match,
    interval_match_finish,
    step,
    tent,
)
from exactmem.core.errors import InputError
from exactmem.core.exact import bitlen
from exactmem.core.exact_arrays import LIMIT
from exactmem.core.model import MLP, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.runtime.progress import Steps

__all__ = [
    "DEFAULT_GADGET",
    "GADGETS",
    "Packing",
    "emit",
    "pack",
    "MemorizerWitness",
    "Projection",
    "build",
    "build_memorizer",
    "choose_group_size",
    "integer_projection",
    "paper_group_size",
    "stage3_layers",
]

GADGETS = ("keyed", "peel", "tent")
# the steps build_memorizer tells its Steps: points, keys, packing, II, III, the circuit
MEMORIZER_STEPS = 6
DEFAULT_GADGET = "keyed"
Vector = Sequence[mpq]


# --------------------------------------------------------------------------- Stage I


@dataclass(frozen=True)
class Projection:
    """``t(x) = factor·scale·directionᵀx + shift``: an integer on the data (Lemma C.2).

    The Stage I map uses factor 2 and shift 2 − 2·p_min, so keys are ≥ 2 and ≥ 2 apart;
    :meth:`identity` (t = x) serves integer keys given directly (the §A.8 test vector).
    """

    scale: int
    direction: tuple[int, ...]
    shift: int
    factor: int = 2

    @classmethod
    def identity(cls) -> Projection:
        return cls(1, (1,), 0, 1)

    def key(self, x: Vector) -> int:
        dot = sum((mpq(w) * xi for w, xi in zip(self.direction, x, strict=True)), mpq(0))
        value = self.factor * self.scale * dot + self.shift
        if value.denominator != 1:
            raise InputError(f"point {tuple(map(str, x))} is off the projection's integer lattice")
        return int(value)

    def expr(self, inputs: Sequence[str]) -> Lin:
        f = self.factor * self.scale
        terms = {name: mpq(f * w) for name, w in zip(inputs, self.direction, strict=True) if w}
        return Lin(terms, mpq(self.shift))


def _integral(points: Sequence[Vector]) -> tuple[int, list[list[int]]]:
    """(s, the points times s as integers), s the least common denominator of all coordinates."""
    scale = math.lcm(*[int(x.denominator) for p in points for x in p])
    return scale, [[int(x * scale) for x in p] for p in points]


def all_distinct(values: np.ndarray) -> bool:
    """Whether the entries of a 1-D array are pairwise distinct (by sorting: from NumPy 2.3
    ``np.unique`` hashes, 100× slower on a million distinct int64)."""
    if values.dtype == object:
        return len(set(values.tolist())) == len(values)
    s = np.sort(values)
    return bool((s[1:] != s[:-1]).all())


def integer_projection(
    points: Sequence[Vector],
    rng: random.Random,
    *,
    bound: int | None = None,
    attempts: int = 64,
    integral: tuple[int, list[list[int]]] | None = None,
) -> Projection:
    """Stage I: an integer direction that keeps all points apart (resampled until it does).

    For a fixed pair P(wᵀ(x − x') = 0) ≤ 1/(2K + 1), so with K = V² one draw succeeds with
    probability > ½ (Vardi et al. 2022, Lemma A.2, exact-arithmetic variant). Without a
    given ``bound`` the search first tries a few directions with |w_i| ≤ 1, 2, 4, … below V²:
    keys then need fewer bits (fewer Stage III layers, and int64 rows for the fast
    evaluator); the V² draws remain the fallback, so the guarantee is unchanged.
    """
    V = len(points)
    d = len(points[0])
    scale, integral = integral or _integral(points)
    top = bound if bound is not None else max(V * V, 1)
    tiers = [] if bound is not None else [1 << e for e in range(max(top.bit_length() - 1, 0))]
    reach = max((abs(x) for p in integral for x in p), default=0) * d
    # the direction itself must fit int64 too: with all points at 0 the reach is 0 whatever w
    matrix = np.array(integral, dtype=np.int64) if max(reach, 1) * top < 2**62 else None
    for B in [*tiers, top]:
        for _ in range(attempts if B == top else 3):
            w = [rng.randint(-B, B) for _ in range(d)]
            if matrix is not None:
                proj = matrix @ np.array(w, dtype=np.int64)
                if all_distinct(proj):
                    return Projection(scale, tuple(w), 2 - 2 * int(proj.min()))
                continue
            proj = [sum(wi * xi for wi, xi in zip(w, p, strict=True)) for p in integral]
            if len(set(proj)) == V:
                return Projection(scale, tuple(w), 2 - 2 * min(proj))
    raise InputError(
        f"no injective projection found in {attempts} draws with |w_i| ≤ {top}: "
        "are two points equal?"
    )


# --------------------------------------------------------------------------- layout


def paper_group_size(N: int) -> int:
    """K = max(1, ⌈√(N / log₂ max(N, 2))⌉) (Kajitsuka & Sato 2025, Lemma C.1)."""
    return max(1, math.ceil(math.sqrt(N / math.log2(max(N, 2)))))


def stage3_layers(gadget: str, K: int, rho: int, c: int) -> int:
    """Hidden layers of Stage III for K slots (mirrors the layouts built below)."""
    if gadget == "peel":  # the last slot: its match, c label bits and their AND gates
        return (K - 1) * max(rho, c + 1) + c + 2
    if gadget == "keyed":
        return keyed_layers(K, rho, c)
    return K * (rho + max(c, 2) + 1) + 1  # the last slot's select in a layer of its own


def choose_group_size(N: int, gadget: str, rho: int, c: int) -> int:
    """The group size K that minimises total depth (m − 1) + Stage III + 1."""
    best_K, best = 1, None
    top = min(N, 4 * math.isqrt(N) + 4)
    for K in range(1, top + 1):
        depth = (math.ceil(N / K) - 1) + stage3_layers(gadget, K, rho, c) + 1
        if best is None or depth < best:
            best_K, best = K, depth
    return best_K


# --------------------------------------------------------------------------- witness


# --------------------------------------------------------------------------- Stage II


def _stage2(circ: Circuit, t: Lin, thresholds, us, ws) -> tuple[Lin, Lin, Lin]:
    """Telescoping group selection: U = u_1 + Σ_j (u_j − u_{j−1})·S_{a_j}(t) (Lemma G.3)."""
    U, W = const(us[0]), const(ws[0])
    for j in range(1, len(us)):
        units, s = step(f"s2.{j}", t, thresholds[j - 1])
        circ.layer({"t": t, "U": U, "W": W, **units})
        circ.probe(f"step[{j}]", s)
        t = var("t")
        U = var("U") + (us[j] - us[j - 1]) * s
        W = var("W") + (ws[j] - ws[j - 1]) * s
    return t, U, W


# --------------------------------------------------------------------------- Stage III


def _stage3_peel(
    circ: Circuit, t: Lin, U: Lin, W: Lin, K: int, rho: int, c: int, carry_key: bool
) -> Lin:
    """Integer bit-peel extraction; one layer per bit, U and W in parallel (width ≤ 11).

    Slot k spans L = max(ρ, c + 1) layers from layer kL, where U[k] and W[k] are probed. Its
    key bits are peeled off U from layer kL, its match is read there; its label bits are
    peeled off W from layer kL + 1, so that every label bit reads the probed W[k] unit (the
    output depends on the input only through the checked W[k] and match[k]:
    :mod:`exactmem.checks.dataflow`), and gated by the match one layer later. The last slot peels no
    key bits (its key is U itself)."""
    L = max(rho, c + 1)
    total = stage3_layers("peel", K, rho, c)
    last_slot = (K - 1) * L
    out: Lin | None = None
    due: list[tuple[str, Lin, Lin, int]] = []  # AND units for this layer: name, bit, flag, weight
    for g in range(total):
        k, i = divmod(g, L)
        units: dict[str, Lin] = {}
        if g < last_slot or g == 0 or carry_key:
            units["t"] = t
        if g <= last_slot:
            units["U"] = U
        if g < last_slot + c:
            units["W"] = W
        if out is not None:
            units["out"] = out
        and_names = []
        for name, bit, flag, weight in due:
            units[name] = and_bit(bit, flag)
            and_names.append((name, weight))
        due = []
        u_bit = w_bit = None
        p = q = 0
        if k < K:
            P, Q = rho * (K - 1 - k), c * (K - 1 - k)
            if i == 0:
                units.update(interval_match(f"s3.{k}", U - t * 2**P, 2**P))
            elif i == 1:
                units[f"s3.{k}.m"] = interval_match_finish(f"s3.{k}")
            elif i <= c:
                units[f"s3.{k}.m"] = var(f"s3.{k}.m")
            if i < rho and k < K - 1:
                p = P + rho - 1 - i
                su, u_bit = step(f"s3.{k}.u{i}", U, 2**p)
                units.update(su)
            if 1 <= i <= c:
                q = Q + c - i
                sw, w_bit = step(f"s3.{k}.w{i - 1}", W, 2**q)
                units.update(sw)
                due.append((f"s3.{k}.and{i - 1}", w_bit, var(f"s3.{k}.m"), 2 ** (c - i)))
        circ.layer(units)
        if k < K and i == 0:
            circ.probe(f"U[{k}]", var("U"))
            circ.probe(f"W[{k}]", var("W"))
            if g == 0:
                circ.probe("key", var("t"))
        if k < K and i == 1:
            circ.probe(f"match[{k}]", var(f"s3.{k}.m"))
        # expressions over this layer, for the next one
        t = var("t")
        U = var("U") - (2**p) * u_bit if u_bit is not None else var("U")
        W = var("W") - (2**q) * w_bit if w_bit is not None else var("W")
        if and_names:
            out = (var("out") if out is not None else const(0)) + sum(
                (var(n) * wt for n, wt in and_names), const(0)
            )
        elif out is not None:
            out = var("out")
    if due:
        raise AssertionError("peel layout left label bits unread")  # stage3_layers is wrong
    return out


def keyed_layers(K: int, rho: int, c: int) -> int:
    """Hidden layers of the keyed Stage III: K slots of L = max(ρ, c) layers; the last slot's
    select comes max(ρ + 3, L + 1) layers after its start."""
    L = max(rho, c)
    return (K - 1) * L + max(rho + 4, L + 2)


def _stage3_keyed(
    circ: Circuit, t: Lin, U: Lin, W: Lin, K: int, rho: int, c: int, carry_key: bool
) -> Lin:
    """Integer bit-peel with assembled segments: every lane that varies from input to input
    stays as small as the key (the fast evaluator's int64 rows).

    Slot k peels its ρ key bits off U from its first layer and its c label bits off W in its
    last c layers (L = max(ρ, c) layers per slot, so the label bits stay clear of the previous
    slot's match), and assembles them, v = 2v + bit and y = 2y + bit, in lanes that depend only
    on the group. The complete key is written to lane ``vk`` (layer kL + ρ) and matched on
    t − vk with a two-layer hat (Lemma G.5); at layer S_k = kL + max(ρ + 3, L + 1) the label,
    held in lane ``yh{k mod 2}``, is selected with σ(y − 2^c(1 − m)) and added to the output.
    Every unit that reads t reads only small lanes (t, vk, the indicator, the held label), never
    the packed integers or their step units.
    """
    L = max(rho, c)
    total = keyed_layers(K, rho, c)
    last_u, last_w = (K - 1) * L + rho - 1, K * L - 1
    last_match = (K - 1) * L + rho + 1
    select_at = {k * L + max(rho + 3, L + 1): k for k in range(K)}
    out: Lin | None = None
    u_prev: tuple[int, Lin] | None = None  # (power, bit) peeled in the previous layer
    w_prev: tuple[int, Lin] | None = None
    for g in range(total):
        k, i = divmod(g, L)
        units: dict[str, Lin] = {}
        if g < last_match or carry_key:
            units["t"] = t
        Ucur = U - (2 ** u_prev[0]) * u_prev[1] if u_prev else U
        Wcur = W - (2 ** w_prev[0]) * w_prev[1] if w_prev else W
        u_bit = w_bit = None
        p = q = 0
        if k < K and i < rho:
            p = rho * (K - 1 - k) + rho - 1 - i
            su, u_bit = step(f"s3.{k}.u{i}", Ucur, 2**p)
            units.update(su)
        if g < last_u:
            units["U"] = Ucur
        j = i - (L - c)  # label bit j of slot k in its last c layers
        if k < K and 0 <= j < c:
            q = c * (K - 1 - k) + c - 1 - j
            sw, w_bit = step(f"s3.{k}.w{j}", Wcur, 2**q)
            units.update(sw)
        if g < last_w:
            units["W"] = Wcur
        if k < K and 1 <= i < rho:  # key bits 0..i−1 of slot k
            units["v"] = (2 * var("v") if i > 1 else const(0)) + u_prev[1]
        if k < K and 1 <= j < c:
            units["y"] = (2 * var("y") if j > 1 else const(0)) + w_prev[1]
        for kk in range(max(0, k - 3), min(K, k + 1)):
            start = kk * L
            hold = f"yh{kk % 2}"
            if g == start + L:  # the complete label of slot kk
                units[hold] = (2 * var("y") if c > 1 else const(0)) + w_prev[1]
            elif start + L < g < start + max(rho + 3, L + 1):
                units[hold] = var(hold)
            if g == start + rho:  # the complete key of slot kk
                units["vk"] = (2 * var("v") if rho > 1 else const(0)) + u_prev[1]
            elif g == start + rho + 1:  # match on t − vk
                units.update(interval_match(f"s3.{kk}", var("t") - var("vk"), 1))
            elif g == start + rho + 2:
                units[f"s3.{kk}.m"] = interval_match_finish(f"s3.{kk}")
            elif start + rho + 2 < g < start + max(rho + 3, L + 1):
                units[f"s3.{kk}.m"] = var(f"s3.{kk}.m")
        selected = select_at.get(g)
        if selected is not None:
            hold, m = f"yh{selected % 2}", var(f"s3.{selected}.m")
            units[f"s3.{selected}.sel"] = var(hold) - 2**c * (1 - m)
        if out is not None:
            units["out"] = out
        circ.layer(units)
        if g == 0:
            circ.probe("key", var("t"))
        for kk in range(max(0, k - 3), min(K, k + 1)):
            if g == kk * L + rho:
                circ.probe(f"key[{kk}]", var("vk"))
            if g == kk * L + L:
                circ.probe(f"label[{kk}]", var(f"yh{kk % 2}"))
            if g == kk * L + rho + 2:
                circ.probe(f"match[{kk}]", var(f"s3.{kk}.m"))
        t = var("t")
        U = var("U") if "U" in units else U
        W = var("W") if "W" in units else W
        u_prev = (p, u_bit) if u_bit is not None else None
        w_prev = (q, w_bit) if w_bit is not None else None
        if selected is not None:
            out = (var("out") if out is not None else const(0)) + var(f"s3.{selected}.sel")
        elif out is not None:
            out = var("out")
    return out


def _stage3_tent(
    circ: Circuit, t: Lin, U: Lin, W: Lin, K: int, rho: int, c: int, carry_key: bool
) -> Lin:
    """Paper-style extraction: tent-map trajectory pairs (Lemma G.4), hat match, select.

    Slot k's select σ(y − 2^c(1 − m)) reads the probed label lane y and the carried match one
    layer after its last layer (the next slot's first, or a layer of its own after the last
    slot), so that the output depends on the input only through the checked label[k] and
    match[k] (:mod:`exactmem.checks.dataflow`)."""
    Su, Sw = 2 ** (K * rho + 1), 2 ** (K * c + 1)
    zu, zu2 = 2 * U, 2 * U + 1  # z = u/2^n and z' = z + 2^{-(n+1)}, in units of 2^{-(n+1)}
    zw, zw2 = 2 * W, 2 * W + 1
    out: Lin = const(0)
    span = max(c, 2)
    pending: tuple[str, Lin] | None = None  # the previous slot's select, due in this layer
    for k in range(K):
        v: Lin = const(0)
        y: Lin = const(0)
        m: Lin | None = None
        more = k < K - 1
        for i in range(rho + span + 1):
            units: dict[str, Lin] = {"out": out} if out.terms else {}
            if pending is not None:
                units[pending[0]] = pending[1]
            if more or i < rho or carry_key:
                units["t"] = t
            if more and i >= rho:
                units["zu"], units["zu2"] = zu, zu2
            if i < rho or (more and i >= rho + c):
                units["zw"], units["zw2"] = zw, zw2
            if 1 <= i <= rho:
                units["v"] = v
            if i > rho:
                units["y"] = y
            if i < rho:
                a, zu_next = tent(f"s3.{k}.zu{i}", zu, Su)
                b, zu2_next = tent(f"s3.{k}.zv{i}", zu2, Su)
                units.update(a)
                units.update(b)
            if i == rho:
                units.update(interval_match(f"s3.{k}", t - v, 1))
            if i == rho + 1:
                units[f"s3.{k}.m"] = interval_match_finish(f"s3.{k}")
            elif i > rho + 1:
                units[f"s3.{k}.m"] = m
            if rho <= i < rho + c:
                a, zw_next = tent(f"s3.{k}.zw{i - rho}", zw, Sw)
                b, zw2_next = tent(f"s3.{k}.zx{i - rho}", zw2, Sw)
                units.update(a)
                units.update(b)
            circ.layer(units)
            if k == 0 and i == 0:
                circ.probe("key", var("t"))
            if i == rho:
                circ.probe(f"key[{k}]", var("v"))
            if i == rho + 1:
                circ.probe(f"match[{k}]", var(f"s3.{k}.m"))
            if i == rho + span:
                circ.probe(f"label[{k}]", var("y"))
            out = var("out") if "out" in units else const(0)
            if pending is not None:
                out = out + var(pending[0])
                pending = None
            t, zu, zu2, zw, zw2 = var("t"), var("zu"), var("zu2"), var("zw"), var("zw2")
            if i < rho:
                bit_index = k * rho + i + 1
                zu, zu2 = zu_next, zu2_next
                bit = (2**bit_index - (zu2 - zu)) * mpq(1, 2 ** (bit_index + 1))
                v = (2 * var("v") if i else const(0)) + bit
            elif i == rho:
                v = var("v")
            if rho <= i < rho + c:
                bit_index = k * c + (i - rho) + 1
                zw, zw2 = zw_next, zw2_next
                bit = (2**bit_index - (zw2 - zw)) * mpq(1, 2 ** (bit_index + 1))
                y = (2 * var("y") if i > rho else const(0)) + bit
            elif i > rho:
                y = var("y")
            if i >= rho + 1:
                m = var(f"s3.{k}.m")
            if i == rho + span:
                pending = (f"s3.{k}.sel", var("y") - 2**c * (1 - var(f"s3.{k}.m")))
    assert pending is not None
    units = {"out": out} if out.terms else {}
    if carry_key:
        units["t"] = var("t")
    circ.layer({**units, pending[0]: pending[1]})
    return (var("out") if out.terms else const(0)) + var(pending[0])


# --------------------------------------------------------------------------- builder


def _pack(values: Sequence[int], bits: int) -> int:
    total = 0
    for v in values:
        total = (total << bits) | v
    return total


@dataclass(frozen=True)
class Packing:
    """The packed layout of one Lemma C.1 network over integer keys (Stage II and III data).

    Keys of the first ``labelled`` points are packed, sorted, in groups of K slots; the rest are
    extra points that must map to 0.
    """

    gadget: str
    key_bits: int
    label_bits: int
    group_size: int
    groups: int
    thresholds: tuple[int, ...]
    packed_keys: tuple[int, ...]
    packed_labels: tuple[int, ...]
    group_of: tuple[int, ...]
    slot_of: tuple[int, ...]
    paper_group_size: int
    bit_widths: str

    def layout(self) -> dict:
        return {
            "lemma": "Kajitsuka & Sato 2025, Lemma C.1 (Vardi et al. 2022, Theorem 3.1)",
            "gadget": self.gadget,
            "key_bits": self.key_bits,
            "label_bits": self.label_bits,
            "group_size": self.group_size,
            "groups": self.groups,
            "paper_group_size": self.paper_group_size,
            "bit_widths": self.bit_widths,
        }


def pack(
    keys: Sequence[int],
    labels: Sequence[int],
    *,
    num_classes: int,
    gadget: str = DEFAULT_GADGET,
    group_size: int | None = None,
    bit_widths: str = "corrected",
    max_group_size: int | None = None,
) -> Packing:
    """Sort the labelled keys (the first ``len(labels)``), group them and pack u_j, w_j."""
    N = len(labels)
    rho = bitlen(max(keys[:N]))
    c = bitlen(num_classes)
    if bit_widths == "paper":
        rho, c = c, rho  # as printed in Lemma C.1, Stage III (an erratum of the paper): refuted
    elif bit_widths != "corrected":
        raise InputError(f"bit_widths must be 'corrected' or 'paper', got {bit_widths!r}")
    K = group_size if group_size is not None else choose_group_size(N, gadget, rho, c)
    if max_group_size is not None:
        K = min(K, max_group_size)
    if K < 1:
        raise InputError(f"group_size must be ≥ 1, got {K}")
    order = sorted(range(N), key=lambda i: keys[i])
    m = math.ceil(N / K)
    group_of = [0] * len(keys)
    slot_of = [-1] * len(keys)
    us, ws, thresholds = [], [], []
    for j in range(m):
        members = order[j * K : (j + 1) * K]
        for s, i in enumerate(members):
            group_of[i], slot_of[i] = j, s
        pad = K - len(members)
        us.append(_pack([keys[i] for i in members] + [0] * pad, rho))
        ws.append(_pack([labels[i] for i in members] + [0] * pad, c))
        if j:
            thresholds.append(keys[members[0]])
    for i in range(N, len(keys)):
        group_of[i] = sum(1 for a in thresholds if keys[i] >= a)
    return Packing(
        gadget,
        rho,
        c,
        K,
        m,
        tuple(thresholds),
        tuple(us),
        tuple(ws),
        tuple(group_of),
        tuple(slot_of),
        paper_group_size(N),
        bit_widths,
    )


def emit(
    circ: Circuit,
    t: Lin,
    packing: Packing,
    *,
    carry_key: bool = False,
    steps: Steps | None = None,
    label: str = "memorizer",
) -> Lin:
    """Append Stages II and III of one memorizer to ``circ``; returns the output expression."""
    steps = steps or Steps(None, "", 0)
    p = packing
    steps.step(f"{label}: Stage II, {len(p.thresholds)} groups")
    t, U, W = _stage2(circ, t, p.thresholds, p.packed_keys, p.packed_labels)
    steps.step(f"{label}: Stage III, {p.gadget} gadget")
    stage3 = {"peel": _stage3_peel, "keyed": _stage3_keyed, "tent": _stage3_tent}[p.gadget]
    return stage3(circ, t, U, W, p.group_size, p.key_bits, p.label_bits, carry_key)


def _validated_points(points, labels, num_classes, extra_points, gadget) -> list:
    if gadget not in GADGETS:
        raise InputError(f"gadget {gadget!r} is not one of {', '.join(GADGETS)}")
    if not points:
        raise InputError("the memorizer needs at least one labelled point")
    if len(labels) != len(points):
        raise InputError(f"{len(labels)} labels for {len(points)} points")
    for i, y in enumerate(labels):
        if not 1 <= y <= num_classes:
            raise InputError(f"labels[{i}]: {y} is outside 1..C with C = {num_classes}")
    everything = list(points) + list(extra_points)
    d = len(everything[0])
    for i, p in enumerate(everything):
        if len(p) != d:
            raise InputError(f"point {i}: {len(p)} coordinates, expected {d}")
    seen: dict[tuple, int] = {}
    for i, p in enumerate(everything):
        j = seen.setdefault(tuple(p), i)
        if j != i:
            raise InputError(f"points {j} and {i} are equal; the memorizer needs distinct points")
    return everything


def _keys(everything, projection, seed, direction_bound) -> tuple[Projection, list[int]]:
    scale, integral = _integral(everything)
    if projection is None:
        projection = integer_projection(
            everything, random.Random(seed), bound=direction_bound, integral=(scale, integral)
        )
    keys = _projected(projection, everything, scale, integral)
    if min(keys) < 1 or len(set(keys)) != len(keys):
        raise InputError("the projection must give distinct keys ≥ 1 on all points")
    return projection, keys


def _projected(projection: Projection, points, scale: int, integral: list[list[int]]) -> list[int]:
    """``projection.key`` of every point, as one int64 matrix product when every partial sum is
    proved below 2⁶² (points = integral / scale), point by point otherwise."""
    f = projection.factor * projection.scale
    top = max((abs(x) for row in integral for x in row), default=0)
    # every factor bounded on its own too: a zero direction makes the product 0 whatever the
    # coordinates (one point, 1e20), and the int64 matrix must still hold them
    spread = sum(abs(w) for w in projection.direction)
    reach = top * f * spread
    if max(reach, top, f, scale, spread) >= LIMIT:
        return [projection.key(p) for p in points]
    num = (np.array(integral, np.int64) @ np.array(projection.direction, np.int64)) * f
    off = np.flatnonzero(num % scale)
    if off.size:
        projection.key(points[int(off[0])])  # raises, naming the point
    return [k + projection.shift for k in (num // scale).tolist()]


def build_memorizer(
    points: Sequence[Vector],
    labels: Sequence[int],
    *,
    num_classes: int,
    extra_points: Sequence[Vector] = (),
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
    """Lemma C.1: a plain MLP Q^d → Q with F(x_i) = y_i and F(extra) = 0, exactly.

    With ``carry_key`` the Stage I key t(x) is carried through every layer and returned as a
    second output ``key`` (Kajitsuka & Sato 2025, eqs. (50)–(51): F^(FF)_1 = (φ̃, F, 0), the
    token id sharing φ̃'s projection, as Lemma C.2 allows). ``steps`` hears its
    :data:`MEMORIZER_STEPS` steps.
    """
    steps = steps or Steps(None, "", 0)
    steps.step(f"{label}: {len(points) + len(extra_points)} points")
    everything = _validated_points(points, labels, num_classes, extra_points, gadget)
    steps.step(f"{label}: Stage I keys")
    projection, keys = _keys(everything, projection, seed, direction_bound)
    steps.step(f"{label}: packing")
    packing = pack(
        keys,
        labels,
        num_classes=num_classes,
        gadget=gadget,
        group_size=group_size,
        bit_widths=bit_widths,
    )
    names = tuple(input_names) if input_names else tuple(f"x{j}" for j in range(len(points[0])))
    mlp = memorizer_network(
        names, projection, packing, carry_key=carry_key, steps=steps, label=label
    )
    return mlp, _witness(packing, keys, labels, len(extra_points), projection)


def memorizer_network(
    names: tuple[str, ...],
    projection: Projection,
    packing: Packing,
    *,
    carry_key: bool,
    steps: Steps,
    label: str,
) -> MLP:
    """Lemma C.1's network from its Stage I projection and its packing (Stages II–III), on
    inputs ``names``; with ``carry_key`` the key t(x) as a second output."""
    circ = Circuit(names)
    out = emit(circ, projection.expr(names), packing, carry_key=carry_key, steps=steps, label=label)
    steps.step(f"{label}: {circ.depth} layers")
    outputs = {"out": out, "key": var("t")} if carry_key else {"out": out}
    return circ.finish(outputs, residual=False, label=label, meta=packing.layout())


@dataclass(frozen=True)
class MemorizerWitness(Packing):
    """What the construction intends (untrusted: the verifier measures everything itself):
    the packing plus every point's key and label (labelled first, then extra points)."""

    keys: tuple[int, ...] = ()
    labels: tuple[int, ...] = ()
    projection: Projection | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in self.layout().items() if k not in ("lemma", "bit_widths")}


def _witness(p: Packing, keys, labels, extra: int, projection) -> MemorizerWitness:
    return MemorizerWitness(
        **vars(p), keys=tuple(keys), labels=tuple(labels) + (0,) * extra, projection=projection
    )


def build(
    dataset: Dataset, options: dict, *, progress: Callable[..., Any] | None = None
) -> tuple[Transformer, MemorizerWitness]:
    """``build --construction vys``: memorize a ``points`` dataset (duplicates with equal
    labels are merged; the verifier still checks every point). ``progress`` hears its steps
    (:class:`exactmem.runtime.progress.Steps`)."""
    if dataset.task != "points":
        raise InputError(
            f"construction 'vys' needs task 'points', the dataset has {dataset.task!r}"
        )
    steps = Steps(progress, "building vys", 1 + MEMORIZER_STEPS)
    steps.step("merging equal points")
    first: dict[tuple, int] = {}
    pts, labs = [], []
    for i, (p, y) in enumerate(zip(dataset.points, dataset.labels, strict=True)):
        j = first.setdefault(tuple(p), i)
        if j == i:
            pts.append(p)
            labs.append(y)
        elif dataset.labels[j] != y:
            raise InputError(
                f"points[{j}] and points[{i}] are equal but labelled {dataset.labels[j]} and {y}"
            )
    mlp, witness = build_memorizer(
        pts,
        labs,
        num_classes=dataset.num_classes,
        gadget=options.get("gadget", DEFAULT_GADGET),
        group_size=options.get("group_size"),
        seed=options.get("seed", 0),
        direction_bound=options.get("direction_bound"),
        bit_widths=options.get("bit_widths", "corrected"),
        steps=steps,
    )
    model = Transformer(
        input_dim=dataset.dim,
        sublayers=(mlp,),
        meta={"construction": "vys", "options": dict(options)},
    )
    steps.done()
    return model, witness
