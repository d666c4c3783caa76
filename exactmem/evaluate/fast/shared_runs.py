"""Runs of class-shared layers: planned once, evaluated class by class in one compiled pass.

Kajitsuka & Sato 2025, Lemma C.1, Stage III peels the packed integer a group selected one bit
per layer, with a read-out every thirty layers or so; its shared units read class-shared lanes
only (besides σ(x) = x of lanes carried along), the read-outs' row units read row lanes and a
few shared values. Classes cannot split there (a shared unit never reads a row lane), so each
class may go through the shared units of all the layers at once: :mod:`exactmem.evaluate.
run_kernel` does, with the class's values in a few registers of limbs, storing the shared
values that row units and probes read as it computes them; the engine then computes the row
units layer by layer from those. That spares the per-layer work of :class:`~exactmem.evaluate.
fast._Engine` (≈ 150 µs of Python a layer, and the kernel's setup) and keeps a class's values
in cache. The arithmetic is in full length — O(limbs) per unit, where the per-layer path
touches only the limbs a term reaches — so a run is taken while its values are short
(``RUN_LIMBS``).

:func:`plan` decides from the structure alone which layers form the run and lays out its
program (which register every value lives in); the engine (:meth:`~exactmem.evaluate.fast.
_Engine.shared_run`) supplies the values and turns the kernel's per-unit statistics into the
per-layer statistics the reference evaluator reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from exactmem.core.model import Affine
from exactmem.evaluate.fast.digits import _magnitude_limbs, _paired, _sparse

__all__ = [
    "MAX_LAYERS",
    "MIN_LAYERS",
    "ROW_UNITS",
    "RUN_LIMBS",
    "Plan",
    "plan",
    "register_limbs",
    "units_program",
]

MIN_LAYERS = 2  # a shorter run saves less than its planning costs
RUN_LIMBS = 64  # longer inputs: the per-layer path, whose cost does not grow with the length
ROW_UNITS = True  # row units beside shared ones in runs (False: such layers end a run)
MAX_LAYERS = 64  # one run of 561 layers was slower than runs of 64 (the per-unit statistics)


@dataclass(frozen=True)
class Plan:
    """The program of a run of layers [start, stop).

    Values are named ("in", position) for the run's input lanes, ("unit", k) for the output of
    the kernel's unit k (units numbered in layer order) and ("row", r) for the output of the
    run's row unit r (a unit reading a row lane: computed by the engine per row after the
    kernel, from the lanes it reads — shared values among them stored on the way, ``taps``).
    ``origins[l]``: for each σ(x) = x unit of layer l, the value it carries; ``final``: the
    value at each output position; ``positions[l]``: the values at layer l's input positions
    (``positions[layers]`` = ``final``); ``rows[l]``: layer l's row units as (position, row,
    bias, r). ``loads``: (input position, register) of the inputs the units read."""

    start: int
    stop: int
    n_in: int
    layer_units: list[int]  # units of layer l: layer_units[l] .. layer_units[l + 1] − 1
    origins: list[list[tuple[str, int]]]
    final: list[tuple[str, int]]
    loads: list[tuple[int, int]]
    registers: int
    reach: int  # the highest limb a coefficient or bias digit starts at
    bias_limbs: int  # limbs of the largest bias
    arrays: tuple[np.ndarray, ...]  # out_reg, same, tptr, treg, treg2, dptr, doff, dval, bptr,
    # boff, bval, ta, tb, cptr, cval: the kernel's program
    positions: list[list[tuple[str, int]]] = field(default_factory=list)
    rows: list[list[tuple]] = field(default_factory=list)
    taps: list[int] = field(default_factory=list)  # units whose values are stored as computed

    @property
    def layers(self) -> int:
        return self.stop - self.start


def register_limbs(p: Plan, inputs: list[int]) -> int:
    """Limbs per register: the longest input's or bias's, plus the highest digit of a
    coefficient (a product w·(a − b) of a step pair is that long), two for a sign and a carry,
    and one per thirty layers (a value may double in each, as an accumulator of bits 2x + b
    does). The kernel's work follows the limbs in use, not these; a value that outgrows them is
    refused by the kernel, and the run goes layer by layer."""
    return max([p.bias_limbs, *inputs]) + p.reach + 2 + p.layers // 30 + 1


def _unit_kind(row, b, carried: Sequence[int], shared: list[bool], nonneg: list[bool]) -> str:
    """ "alias" for σ(x) = x of a non-negative lane (as the engine's layer plans decide it),
    "unit" for a unit reading non-negative shared lanes only, "row" for one reading a row lane
    (the engine's, per row, after the kernel), else "" (the run stops)."""
    if len(row) == 1 and row[0][1] == 1 and b == 0 and nonneg[carried[row[0][0]]]:
        return "alias"
    if all(shared[carried[c]] and nonneg[carried[c]] for c, _ in row):
        return "unit"
    if any(not shared[carried[c]] for c, _ in row):
        return "row"
    return ""


def _int64_row(row) -> bool:
    """Whether a row unit may be one of a run (the engine's row units take weights below 2^62;
    whether its values stay below is known only from the lanes' bounds, after the kernel)."""
    return ROW_UNITS and all(abs(w) < 1 << 62 for _, w in row)


def plan(
    layers: Sequence[Affine],
    start: int,
    stop_at: int,
    probes: Callable[[int], Sequence],
    shared: Sequence[bool],
    nonneg: Sequence[bool],
) -> Plan | None:
    """The run starting at layer ``start`` of an MLP's ReLU layers: every layer before
    ``stop_at`` that has integer weights and whose units are aliases, shared units, or row
    units beside at least one shared unit (a stretch of row units alone is the per-layer
    path's); None if fewer than MIN_LAYERS qualify. ``probes(l)``: the terms of layer l's
    probes (their shared values are stored as computed); ``shared`` and ``nonneg``: the
    current lanes' kinds."""
    n_in = len(shared)
    is_shared, is_nonneg = list(shared), list(nonneg)
    carried = list(range(n_in))  # value per position
    kinds: list[list[tuple]] = []
    read: list[list] = []
    stop = start
    while stop < stop_at and stop - start < MAX_LAYERS:
        a = layers[stop]
        if a.denominator != 1:
            break
        units = []
        for row, b in zip(a.rows, a.bias, strict=True):
            kind = _unit_kind(row, b, carried, is_shared, is_nonneg)
            if not kind or (kind == "row" and not _int64_row(row)):
                break
            units.append((kind, tuple(row), b))  # (rows are tuples by type, not check)
        if len(units) < len(a.rows):
            break
        if any(k == "row" for k, _, _ in units) and not any(k == "unit" for k, _, _ in units):
            break
        nxt = []
        for kind, row, _ in units:
            if kind == "alias":
                nxt.append(carried[row[0][0]])
            else:
                nxt.append(len(is_shared))
                is_shared.append(kind == "unit")
                is_nonneg.append(True)
        kinds.append(units)
        read.append(list(probes(stop)))
        carried = nxt
        stop += 1
    if stop - start < MIN_LAYERS:
        return None
    return _layout(start, stop, n_in, kinds, read)


def units_program(rows: Sequence, biases: Sequence[int], n_in: int) -> Plan:
    """The program of one layer's shared units alone (the layer's other units go the per-layer
    way): unit j of ``rows`` is output position j; every input is a shared non-negative lane."""
    units = [("unit", tuple(row), b) for row, b in zip(rows, biases, strict=True)]
    return _layout(0, 1, n_in, [units], [[]])


def _layout(start: int, stop: int, n_in: int, kinds: list[list[tuple]], probed: list[list]) -> Plan:
    """Registers for the values (a value's register is free once no position carries it) and
    the kernel's arrays; units with equal terms are put side by side to share their linear part.
    Row units get values −1, −2, … (no register); the shared values they or a probe read are
    stored as computed (taps)."""
    steps = []  # per layer: (values carried in, [(row, position, bias)] of units, values out)
    carried = list(range(n_in))
    read_inputs: set[int] = set()
    rows: list[list[tuple]] = []
    tapped: set[int] = set()
    k = n_in
    r = 0
    for units, terms_read in zip(kinds, probed, strict=True):
        out: list = []
        aliased = []
        computed = []
        deferred = []
        for j, (kind, row, b) in enumerate(units):
            if kind == "alias":
                v = carried[row[0][0]]
                out.append(v)
                aliased.append(v)
            elif kind == "row":
                out.append(-1 - r)
                deferred.append((j, row, b, r))
                r += 1
                tapped.update(carried[c] for c, _ in row if carried[c] >= n_in)
            else:
                out.append(None)
                computed.append((row, j, b))
        computed.sort(key=_row_of)  # stable: equal rows keep their order
        for row, j, _ in computed:
            out[j] = k
            k += 1
            for c, _ in row:
                if carried[c] < n_in:
                    read_inputs.add(carried[c])
        for terms in terms_read:
            tapped.update(out[c] for c, _ in terms if out[c] >= n_in)
        steps.append((carried, computed, out, aliased))
        rows.append(deferred)
        carried = out

    def named(v: int) -> tuple[str, int]:
        if v < 0:
            return ("row", -1 - v)
        return ("in", v) if v < n_in else ("unit", v - n_in)

    reg: dict[int, int] = {}
    free: list[int] = []
    registers = 0
    loads = []
    for v in sorted(read_inputs):
        reg[v] = registers
        loads.append((v, registers))
        registers += 1
    out_reg, same, tptr, treg, treg2, dptr, doff, dval = [], [], [0], [], [], [0], [], []
    bptr, boff, bval = [0], [], []
    ta, tb, cptr, cval = [], [], [0], []  # a step pair's difference when it is bias − bias
    made: dict[int, tuple] = {}  # value → (layer, row, bias, number) of the unit making it
    layer_units, origins = [0], []
    reach = bias_limbs = 0
    terms_of: dict[tuple, list] = {}  # a row's terms as (lane, partner, digits): units share rows
    for l_, (before, computed, after, aliased) in enumerate(steps):
        previous = None
        for row, j, b in computed:  # new registers: none is read in this layer
            if free:
                r = free.pop()
            else:
                r = registers
                registers += 1
            u = len(out_reg)
            out_reg.append(r)
            shares = row == previous  # the unit before's linear part: the kernel reuses it
            same.append(shares)
            previous = row
            terms = () if shares else terms_of.get(row)
            if terms is None:
                terms = terms_of[row] = _terms(row)
            for c, c2, offs, digits in terms:
                x = before[c]
                treg.append(reg[x])
                doff += offs
                dval += digits
                dptr.append(len(doff))
                if offs and offs[-1] > reach:
                    reach = offs[-1]
                if c2 < 0:
                    treg2.append(-1)
                    ta.append(-1)
                    tb.append(-1)
                else:
                    y = before[c2]
                    treg2.append(reg[y])
                    mx, my = made.get(x), made.get(y)
                    if _constant_difference(mx, my):
                        ta.append(mx[3])
                        tb.append(my[3])
                        gap = mx[2] - my[2]
                        cval += _limbs_of(abs(gap))
                        cval.append(1 if gap >= 0 else -1)
                    else:
                        ta.append(-1)
                        tb.append(-1)
                cptr.append(len(cval))
            made[after[j]] = (l_, row, b, u)
            tptr.append(len(treg))
            offs, digits = _sparse(b)
            if offs:
                boff += offs
                bval += digits
                reach = max(reach, offs[-1])
                bias_limbs = max(bias_limbs, offs[-1] + 1)
            bptr.append(len(boff))
            reg[after[j]] = r
        layer_units.append(len(out_reg))
        origins.append([named(v) for v in aliased])
        for v in set(before) - set(after):
            if v in reg:
                free.append(reg.pop(v))
    arr = lambda xs: np.array(xs, np.int64)  # noqa: E731
    arrays = (
        arr(out_reg),
        np.array(same, np.bool_),
        *(arr(x) for x in (tptr, treg, treg2, dptr, doff, dval, bptr, boff, bval)),
        *(arr(x) for x in (ta, tb, cptr, cval)),
    )
    return Plan(
        start=start,
        stop=stop,
        n_in=n_in,
        layer_units=layer_units,
        origins=origins,
        final=[named(v) for v in carried],
        loads=loads,
        registers=registers,
        reach=reach,
        bias_limbs=bias_limbs,
        arrays=arrays,
        positions=[[named(v) for v in step[0]] for step in steps] + [[named(v) for v in carried]],
        rows=rows,
        taps=sorted(v - n_in for v in tapped),
    )


def _row_of(unit: tuple) -> tuple:
    return unit[0]


def _terms(row: tuple) -> list[tuple]:
    """A row's terms for the kernel: (lane, partner or −1, offsets, digits)."""
    return [(c, c2, *_sparse(w)) for c, c2, w in _paired(list(row))]


def _constant_difference(a: tuple | None, b: tuple | None) -> bool:
    """Whether a step pair's difference x − y is a constant wherever neither is clipped: x and
    y computed by units of one layer with the same linear part z (x = σ(z + b_x), y = σ(z +
    b_y), so x − y = b_x − b_y when z + b_x ≥ 0 and z + b_y ≥ 0; Stage III's hi − lo, 1).
    ``a``, ``b``: (layer, row, bias, number) of the units, None for a run's input."""
    return a is not None and b is not None and a[0] == b[0] and a[1] == b[1]


def _limbs_of(m: int) -> list[int]:
    """The 30-bit limbs of m ≥ 0, little-endian (none for 0), in linear time."""
    return _magnitude_limbs(m)
