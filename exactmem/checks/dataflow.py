"""Dataflow over the weights: the checked lanes produce the output.

A checklist probes some lanes and hidden units of a model and validates their evaluated values
(a memorizer's matches and extracted labels, the context ids after the attention layer). That
says nothing about the output unless the output is *computed from* them: a model may carry a
checked memorizer as dead code beside a parallel circuit that produces the labels. This module
decides, from the non-zero weights alone, whether every path from the model's input to a set of
targets (by default its outputs) passes through a *cut*: the units the checklist validated.
If so, the targets are a function of the cut's values (on every input, not only the data); if
not, the check names the input lanes and the first units that bypass the cut.

The graph has one level per place a value lives: the input, the stream before each sub-layer
(after the embedding), each hidden layer of an MLP, the final stream and the output. An edge
is a non-zero weight; a residual sub-layer adds the identity; attention joins every lane a head
writes to every lane its value map reads (and, unless the scores are ``uniform``, every lane its
query and key maps read); a layer norm joins all the lanes it normalises. Positions are merged
(a lane depends on a lane at any position): the cut is a statement about every position.

Only a probe of one unit can be part of a cut: a checked combination ``u − v`` of two units
says nothing about ``u + v``, which a circuit could read instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from exactmem.core.model import MLP, Attention, LayerNorm, Transformer

if TYPE_CHECKING:
    from exactmem.checks.certificate import Check

__all__ = [
    "Graph",
    "Unit",
    "cut_check",
    "graph",
    "lane_units",
    "memorizer_cut",
    "memorizer_dataflow",
    "memorizer_readout",
    "merged",
    "probe_unit",
]

Unit = tuple[int, int]  # (level, index in the level)


@dataclass(frozen=True)
class Level:
    """One place values live: ``deps[i]`` lists the units of the level before that unit ``i``
    reads through a non-zero weight (None for the input level)."""

    name: str
    width: int
    deps: tuple[tuple[int, ...], ...] | None
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Graph:
    """The levels of a model in evaluation order, and where each sub-layer's levels start."""

    levels: tuple[Level, ...]
    streams: tuple[int, ...]  # level of the stream before sub-layer p (p = len: after the last)
    hidden: tuple[tuple[int, ...], ...]  # per sub-layer, the levels of its hidden layers

    @property
    def output(self) -> int:
        return len(self.levels) - 1

    def describe(self, unit: Unit) -> str:
        level = self.levels[unit[0]]
        name = level.names[unit[1]] if unit[1] < len(level.names) else ""
        return f"{level.name} unit {unit[1]}" + (f" ({name})" if name else "")


def _rows(affine) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(c for c, _ in row) for row in affine.rows)


def graph(model: Transformer) -> Graph:
    """The dataflow graph of ``model``'s non-zero weights (see the module docstring)."""
    levels = [Level("the input", model.input_dim, None)]
    width = model.input_dim
    if model.embed is not None:
        levels.append(
            Level("the embedded stream", model.embed.out_dim, _rows(model.embed), model.embed.names)
        )
        width = model.embed.out_dim
    streams, hidden = [], []
    for p, s in enumerate(model.sublayers):
        streams.append(len(levels) - 1)
        mine: list[int] = []
        if isinstance(s, MLP):
            # a residual MLP's input reaches its output around the hidden layers: the stream's
            # lanes ride along each hidden level as pass-through units after the layer's own
            # (so a level reads only the one before it, and the bypass is a path of its own)
            carry = width if s.residual and len(s.layers) > 1 else 0
            before = 0  # where the pass-through units start in the level before
            for j, layer in enumerate(s.layers[:-1]):
                own = (layer.names or ("",) * layer.out_dim) if carry else layer.names
                levels.append(
                    Level(
                        f"sub-layer {p} hidden layer {j}",
                        layer.out_dim + carry,
                        _rows(layer) + tuple((before + i,) for i in range(carry)),
                        tuple(own) + tuple(f"the residual of lane {i}" for i in range(carry)),
                    )
                )
                mine.append(len(levels) - 1)
                before = layer.out_dim
            last = s.layers[-1]
            deps = _rows(last)
            if s.residual:  # lane i of the input: the stream's (one layer) or its pass-through
                deps = tuple(tuple(sorted({*d, before + i})) for i, d in enumerate(deps))
            width = last.out_dim
            levels.append(Level(f"the stream after sub-layer {p}", width, deps, last.names))
        elif isinstance(s, Attention):
            extra: list[set[int]] = [{i} for i in range(width)]
            for h in s.heads:
                values = _rows(h.value)
                scores: set[int] = set()
                if s.score != "uniform":  # uniform weights are 1/n whatever the scores
                    scores = {c for r in _rows(h.query) + _rows(h.key) for c in r}
                for i, row in enumerate(_rows(h.output)):
                    if row:
                        extra[i] |= {c for v in row for c in values[v]} | scores
            deps = tuple(tuple(sorted(d)) for d in extra)
            levels.append(Level(f"the stream after sub-layer {p}", width, deps))
        elif isinstance(s, LayerNorm):
            if s.source is None or s.target is None:
                deps = (tuple(range(width)),) * width
            else:
                src = tuple(range(s.source, s.source + s.width))
                targets = range(s.target, s.target + s.width)
                deps = tuple(src if i in targets else (i,) for i in range(width))
            levels.append(Level(f"the stream after sub-layer {p}", width, deps))
        else:  # a positional table adds constants
            levels.append(
                Level(f"the stream after sub-layer {p}", width, tuple((i,) for i in range(width)))
            )
        hidden.append(tuple(mine))
    streams.append(len(levels) - 1)
    if model.unembed is not None:
        levels.append(
            Level("the output", model.unembed.out_dim, _rows(model.unembed), model.unembed.names)
        )
    else:
        final = levels[-1]
        levels.append(Level("the output", width, tuple((i,) for i in range(width)), final.names))
    return Graph(tuple(levels), tuple(streams), tuple(hidden))


def probe_unit(g: Graph, sublayer: int, mlp: MLP, name: str) -> Unit | None:
    """The one hidden unit probe ``name`` of the MLP at ``sublayer`` reads; None when there is
    no such probe or it combines several units (it cannot be part of a cut)."""
    for probe in mlp.probes:
        if probe.name == name:
            if len(probe.terms) != 1 or not 0 <= probe.layer < len(g.hidden[sublayer]):
                return None
            return g.hidden[sublayer][probe.layer], probe.terms[0][0]
    return None


def lane_units(g: Graph, stream: int, names: Sequence[str], lanes: Iterable[str]) -> set[Unit]:
    """The units of lanes ``lanes`` (by ``names``, the trace's names of the stream before
    sub-layer ``stream``): the same index a check reads by name, so a lane named falsely is
    tied to the weights here or the cut fails."""
    level = g.streams[stream]
    return {(level, names.index(lane)) for lane in lanes if lane in names}


def memorizer_readout(
    g: Graph, sublayer: int, mlp: MLP, layout: Mapping, prefix: str = ""
) -> tuple[set[Unit], list[str]]:
    """The read-out units of a Lemma C.1 memorizer whose Stage III checks passed: per slot k the
    match indicator ``match[k]`` and the label it selects (``label[k]``; the packed labels
    ``W[k]`` for the peel gadget). ``prefix``: a sub-network's probe prefix (``net0.``).
    Returns the units and the probes that are missing or not one unit (named in the check)."""
    K = layout.get("group_size") if isinstance(layout, Mapping) else None
    gadget = layout.get("gadget") if isinstance(layout, Mapping) else None
    if not isinstance(K, int) or isinstance(K, bool) or K < 0:
        return set(), [f"{prefix}layout"]
    if 2 * K > len(mlp.probes):
        # the layout comes from the file: K slots need 2K probes, so a larger group_size is
        # refused before anything iterates over it (a huge K would exhaust time and memory)
        return set(), [f"{prefix}layout (group_size {K} > the {len(mlp.probes)} probes / 2)"]
    holder = "W" if gadget == "peel" else "label"
    units, missing = set(), []
    for k in range(K):
        for lane in (f"match[{k}]", f"{holder}[{k}]"):
            unit = probe_unit(g, sublayer, mlp, prefix + lane)
            if unit is None:
                missing.append(prefix + lane)
            else:
                units.add(unit)
    return units, missing


def memorizer_cut(g: Graph, sublayer: int, mlp: MLP) -> tuple[set[Unit], list[str]]:
    """:func:`memorizer_readout` of the memorizer at ``sublayer``, or the union over the
    sub-networks of a Theorem F.1 split one (probes ``net{j}.``; their layouts in the MLP's
    ``subnetworks``). The layouts come from the file: the stage checks validate them against
    the probes, and a layout that names fewer read-out units only makes the cut harder to pass."""
    meta = mlp.meta if isinstance(mlp.meta, Mapping) else {}
    if any(p.name.startswith("net0.") for p in mlp.probes):
        subs = meta.get("subnetworks")
        if not isinstance(subs, list) or not subs:
            return set(), ["the sub-networks' layouts"]
        units: set[Unit] = set()
        missing: list[str] = []
        for j, layout in enumerate(subs):
            u, m = memorizer_readout(g, sublayer, mlp, layout, f"net{j}.")
            units |= u
            missing += m
        return units, missing
    return memorizer_readout(g, sublayer, mlp, meta)


def _bypass(g: Graph, targets: Mapping[int, set[int]], cut: set[Unit]):
    """Walk back from ``targets`` without crossing ``cut``: (the input units reached, the cut
    units reached, the first level after the input with units reached, and those units)."""
    by_level: dict[int, set[int]] = {}
    for level, index in cut:
        by_level.setdefault(level, set()).add(index)
    current: set[int] = set()
    hit: set[Unit] = set()
    first: tuple[int, set[int]] | None = None
    for level in range(g.output, -1, -1):
        current |= targets.get(level, set())
        stop = by_level.get(level, set())
        hit |= {(level, i) for i in current & stop}
        current -= stop
        if level == 0:
            return current, hit, first
        if current:
            first = (level, set(current))
        deps = g.levels[level].deps
        assert deps is not None
        current = {c for i in current for c in deps[i]}
    return set(), hit, first


def cut_check(
    name: str,
    model: Transformer,
    cut: Iterable[Unit],
    *,
    what: str,
    targets: Iterable[Unit] | None = None,
    missing: Sequence[str] = (),
    g: Graph | None = None,
    require_use: bool = True,
) -> Check:
    """``name`` passes when every path from the input to ``targets`` (default: every output)
    crosses ``cut`` and (with ``require_use``) the targets read at least one cut unit; ``what``
    names the cut in the message. ``missing``: probes the cut should hold but the model lacks
    (a failure)."""
    from exactmem.checks.certificate import Check

    g = g or graph(model)
    cut = set(cut)
    goal: dict[int, set[int]] = {}
    for level, index in (
        [(g.output, i) for i in range(g.levels[-1].width)] if targets is None else targets
    ):
        goal.setdefault(level, set()).add(index)
    leak, hit, first = _bypass(g, goal, cut)
    figures = {"cut_units": len(cut), "cut_units_used": len(hit)}
    bad = []
    if missing:
        bad.append(f"probes {', '.join(missing[:4])} are missing or read more than one unit")
    if leak:
        assert first is not None
        lanes = ", ".join(str(i) for i in sorted(leak)[:6])
        level, units = first
        shown = "; ".join(g.describe((level, i)) for i in sorted(units)[:4])
        bad.append(
            f"{len(leak)} input lanes ({lanes}) reach the output other than through {what}: "
            f"{len(units)} units of {g.levels[level].name} bypass it ({shown})"
        )
    elif require_use and not hit and not missing:
        bad.append(f"the output reads none of {what}: the probed stages are dead code")
    goal_name = "the output" if targets is None else "the checked lanes"
    detail = "; ".join(bad) if bad else f"every path from the input to {goal_name} crosses {what}"
    return Check(name, not bad, detail, figures)


def memorizer_dataflow(name: str, model: Transformer, sublayer: int) -> Check:
    """The output of ``model`` is computed from the checked read-out (matches and selected
    labels, Lemma C.1 Stage III) of the memorizer at ``sublayer``: a parallel circuit beside
    it, or a memorizer left as dead code, fails ``name``."""
    g = graph(model)
    mlp = model.sublayers[sublayer]
    assert isinstance(mlp, MLP)
    cut, missing = memorizer_cut(g, sublayer, mlp)
    return cut_check(
        name,
        model,
        cut,
        what=f"the memorizer's checked read-out ({len(cut)} match and label units)",
        missing=missing,
        g=g,
    )


def merged(name: str, checks: Sequence[Check]) -> Check:
    """One check that passes when all of ``checks`` pass (their details joined)."""
    from exactmem.checks.certificate import Check

    failed = [c for c in checks if not c.passed]
    shown = failed or list(checks)
    figures: dict = {}
    for c in checks:
        figures.update(c.figures)
    return Check(name, not failed, "; ".join(c.detail for c in shown), figures)
