"""The mechanisms the vys checklist tests, each check with its breakers.

Vardi, Yehudai & Shamir 2022, Theorem 3.1, in the extended form Kajitsuka & Sato 2025 restate
as Lemma C.1: Stage I projects each point to an integer key, Stage II selects the key's group
with a telescoping sum of steps, Stage III extracts the group's packed keys and labels bit by
bit and selects the label of the slot whose key matches. The breakers below change an honest
model on the IR (:mod:`exactmem.core.model`) and are shared with the Kajitsuka–Sato checklists
(:mod:`exactmem.checks.mechanisms.ks25`), whose two feed-forward networks are such memorizers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from gmpy2 import mpq

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.checks.mechanisms.lower_bounds import CHECKS as LOWER_BOUNDS
from exactmem.core.model import MLP, Affine, Transformer
from exactmem.datasets.dataset import Dataset, random_points

PAPER = "Vardi, Yehudai & Shamir 2022 (Theorem 3.1); Kajitsuka & Sato 2025 (Lemma C.1)"


def lower_bound(name: str) -> CheckSpec:
    """The shared spec of a construction-independent lower-bound check
    (:mod:`exactmem.checks.mechanisms.lower_bounds`)."""
    return next(s for s in LOWER_BOUNDS if s.name == name)


# --------------------------------------------------------------------------- IR surgery


def with_sublayer(model: Transformer, at: int, mlp: MLP) -> Transformer:
    subs = list(model.sublayers)
    subs[at] = mlp
    return replace(model, sublayers=tuple(subs))


def with_layer(mlp: MLP, j: int, layer: Affine) -> MLP:
    layers = list(mlp.layers)
    layers[j] = layer
    return replace(mlp, layers=tuple(layers))


def halved(layer: Affine) -> Affine:
    """The same map over twice the denominator (so a bias can move by half a unit)."""
    return replace(
        layer,
        rows=tuple(tuple((c, 2 * v) for c, v in row) for row in layer.rows),
        bias=tuple(2 * b for b in layer.bias),
        denominator=2 * layer.denominator,
    )


def shift_bias(layer: Affine, units: Sequence[int], amount: mpq) -> Affine:
    """``layer`` with the biases of ``units`` moved by the rational ``amount``."""
    amount = mpq(amount)
    while (amount * layer.denominator).denominator != 1:
        layer = halved(layer)
    delta = int(amount * layer.denominator)
    bias = list(layer.bias)
    for u in units:
        bias[u] += delta
    return replace(layer, bias=tuple(bias))


def scale_row(layer: Affine, row: int, factor: mpq) -> Affine:
    """``layer`` with output ``row`` (weights and bias) multiplied by ``factor``."""
    factor = mpq(factor)
    while any((factor * v).denominator != 1 for _, v in layer.rows[row]) or (
        (factor * layer.bias[row]).denominator != 1
    ):
        layer = halved(layer)
    rows = list(layer.rows)
    rows[row] = tuple((c, int(factor * v)) for c, v in rows[row] if factor * v)
    bias = list(layer.bias)
    bias[row] = int(factor * bias[row])
    return replace(layer, rows=tuple(rows), bias=tuple(bias))


def probe_of(mlp: MLP, name: str):
    return next(p for p in mlp.probes if p.name == name)


def move_probe_bias(sublayer: int, name: str, amount: mpq) -> Callable:
    """A breaker moving the bias of the units probe ``name`` reads by ``amount``."""

    def broken(model: Transformer, dataset: Dataset) -> Transformer:
        mlp = model.sublayers[sublayer]
        assert isinstance(mlp, MLP)
        probe = probe_of(mlp, name)
        units = [u for u, _ in probe.terms]
        layer = shift_bias(mlp.layers[probe.layer], units, amount)
        return with_sublayer(model, sublayer, with_layer(mlp, probe.layer, layer))

    return broken


def move_step_bias(sublayer: int, prefix: str = "") -> Callable:
    """Stage II: the first step S_a(t) moved by half a unit, so that the key at its threshold
    reads the step on its ramp (value ½): the group indicator is no longer 0 or 1."""

    def broken(model: Transformer, dataset: Dataset) -> Transformer:
        mlp = model.sublayers[sublayer]
        assert isinstance(mlp, MLP)
        name = next(p.name for p in mlp.probes if p.name.startswith(prefix + "step["))
        return move_probe_bias(sublayer, name, mpq(-1, 2))(model, dataset)

    return broken


def zero_bypass(
    model: Transformer, sublayer: int, columns: Sequence[int], low: int, into: Sequence[int]
) -> Transformer:
    """A parallel path in the MLP at ``sublayer`` that is 0 on the data: a unit σ(−x − low − 1)
    reading input columns ``columns`` of that MLP (all ≥ −low on the data), carried through every
    hidden layer and added to its output rows ``into``. The values do not change; the output
    now depends on the input other than through whatever the checklist probed."""
    mlp = model.sublayers[sublayer]
    assert isinstance(mlp, MLP)
    layers = list(mlp.layers)
    first = layers[0]
    row = tuple((c, -first.denominator) for c in sorted(columns))
    layers[0] = replace(
        first,
        rows=first.rows + (row,),
        bias=first.bias + (-(low + 1) * len(columns) * first.denominator,),
        names=first.names + ("bypass",) if first.names else (),
    )
    for j in range(1, len(layers)):
        layer = layers[j]
        col = layer.in_dim
        if j < len(layers) - 1:
            rows = layer.rows + (((col, layer.denominator),),)
            bias = layer.bias + (0,)
            names = layer.names + ("bypass",) if layer.names else ()
        else:
            rows = tuple(
                (*r, (col, layer.denominator)) if i in into else r for i, r in enumerate(layer.rows)
            )
            bias, names = layer.bias, layer.names
        layers[j] = Affine(col + 1, rows, bias, layer.denominator, names)
    return with_sublayer(model, sublayer, replace(mlp, layers=tuple(layers)))


def parallel_lookup(model: Transformer, dataset: Dataset) -> Transformer:
    """Issue 26, file C: 3N lookup units beside the memorizer — a hat of an integer key at
    each point, weighted by its label — their sum carried through the layers and the output
    rewired to read only that sum. The labels come out exactly and every stage of the (now
    dead) memorizer still checks."""
    mlp = model.sublayers[0]
    assert isinstance(mlp, MLP)
    points, labels = dataset.points, dataset.labels
    den = 1
    for p in points:
        for x in p:
            den = den * int(x.denominator) // _gcd(den, int(x.denominator))
    bound = 2 * max(abs(int(x * den)) for p in points for x in p) + 1
    direction = [bound**j for j in range(len(points[0]))]  # injective on the integer lattice
    keys = [sum(w * int(x * den) for w, x in zip(direction, p, strict=True)) for p in points]
    layers = list(mlp.layers)
    first = layers[0]
    D = first.denominator
    coeffs = tuple((j, w * den * D) for j, w in enumerate(direction))
    hats = []
    for k in keys:
        for shift in (1, 0, -1):  # σ(t − k + 1) − 2σ(t − k) + σ(t − k − 1): 1 at t = k
            hats.append((coeffs, (shift - k) * D))
    base = first.out_dim
    layers[0] = Affine(
        first.in_dim,
        first.rows + tuple(r for r, _ in hats),
        first.bias + tuple(b for _, b in hats),
        D,
    )
    carried = None  # the column of the lookup's sum in the layer before
    for j in range(1, len(layers)):
        layer = layers[j]
        last = j == len(layers) - 1
        if carried is None:
            extra = 3 * len(keys)
            terms: dict[int, int] = {}
            for i, y in enumerate(labels):
                for s, w in enumerate((1, -2, 1)):
                    terms[base + 3 * i + s] = terms.get(base + 3 * i + s, 0) + w * y
            row = tuple((c, v * layer.denominator) for c, v in sorted(terms.items()) if v)
        else:
            extra = 1
            row = ((carried, layer.denominator),)
        in_dim = layer.in_dim + extra
        if last:
            layers[j] = Affine(in_dim, (row,), (0,), layer.denominator)
        else:
            layers[j] = Affine(in_dim, layer.rows + (row,), layer.bias + (0,), layer.denominator)
            carried = layer.out_dim
    return with_sublayer(model, 0, replace(mlp, layers=tuple(layers)))


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def output_plus_one(model: Transformer, dataset: Dataset) -> Transformer:
    """Every output one more than the memorizer selected (the last layer's bias moved)."""
    at = len(model.sublayers) - 1
    mlp = model.sublayers[at]
    assert isinstance(mlp, MLP)
    last = len(mlp.layers) - 1
    layer = shift_bias(mlp.layers[last], [0], mpq(1))
    return with_sublayer(model, at, with_layer(mlp, last, layer))


def one_layer(model: Transformer, dataset: Dataset) -> Transformer:
    """The whole network replaced by one affine map reading nothing: too few parameters
    times bits for the labels (and no memorizer)."""
    if model.token_inputs:  # token ids: a one-lane zero embedding table, output 0
        embed = Affine(model.input_dim, ((),), (0,))
        mlp = MLP((Affine(1, ((),), (0,)),), residual=False)
        return replace(model, sublayers=(mlp,), embed=embed, unembed=None)
    mlp = MLP((Affine(model.input_dim, ((),), (1,)),), residual=False)
    return replace(model, sublayers=(mlp,), embed=None, unembed=None)


def two_sublayers(model: Transformer, dataset: Dataset) -> Transformer:
    """An identity MLP after the memorizer: a layer the checklist does not read."""
    identity = MLP((Affine(1, (((0, 1),),), (0,)),), residual=False)
    return replace(model, sublayers=(*model.sublayers, identity))


def no_layout(model: Transformer, dataset: Dataset) -> Transformer:
    """The memorizer's layout (group size, bit widths, gadget) stripped from the file."""
    mlp = model.sublayers[0]
    assert isinstance(mlp, MLP)
    return with_sublayer(model, 0, replace(mlp, meta={}))


def rho_overstated(sublayer: int) -> Callable:
    """Stage I's bit width: the layout claims one key bit more than the largest key has."""

    def broken(model: Transformer, dataset: Dataset) -> Transformer:
        mlp = model.sublayers[sublayer]
        assert isinstance(mlp, MLP)
        meta = {**mlp.meta, "key_bits": int(mlp.meta["key_bits"]) + 1}
        return with_sublayer(model, sublayer, replace(mlp, meta=meta))

    return broken


def _result(stage: str) -> str:
    return f"Lemma C.1, {stage}"


def memorizer_specs(
    prefix: str, sublayer: int, paper: str = PAPER, *, key_bias: bool = True
) -> tuple[CheckSpec, ...]:
    """The Lemma C.1 checks of the memorizer whose checks are named ``prefix``… at
    ``sublayer``, with breakers moving one stage's bias. ``key_bias``: whether moving the key
    unit's bias is a breaker of Stage I (not for Lemma B.3's memorizer, whose labels φ̃ are read
    from its own output: a broken key zeroes φ̃ and leaves nothing to check)."""
    key_breakers = (
        Breaker(
            "key bias moved",
            "keys ≥ 2 (the key unit's bias lowered far below the data)",
            f"{prefix}stage1.keys",
            model=move_probe_bias(sublayer, "key", mpq(-(10**12))),
        ),
    )
    return (
        CheckSpec(
            f"{prefix}stage1.keys",
            paper,
            _result("Stage I"),
            "the projection t(x) gives integer keys ≥ 2, pairwise ≥ 2 apart, and ρ = "
            "bitlen(max key) bits hold every key",
            (
                *(key_breakers if key_bias else ()),
                Breaker(
                    "ρ overstated",
                    "ρ = bitlen(max key) (the key width the packing uses)",
                    f"{prefix}stage1.keys",
                    model=rho_overstated(sublayer),
                ),
            ),
        ),
        CheckSpec(
            f"{prefix}stage2.groups",
            paper,
            _result("Stage II"),
            "the telescoping steps S_a(t) are exactly 0 or 1 and monotone, so each key selects "
            "exactly one group's packed integers",
            (
                Breaker(
                    "step shifted by ½",
                    "a step exactly 0 or 1 at its threshold key",
                    f"{prefix}stage2.groups",
                    model=move_step_bias(sublayer),
                ),
            ),
        ),
        CheckSpec(
            f"{prefix}stage3.segments",
            paper,
            _result("Stage III (bit extraction, Lemma G.3–G.6)"),
            "the extracted key and label segments are exact ρ- and c-bit integers, the same for "
            "every input of a group",
            (
                Breaker(
                    "label lane moved",
                    "the slot's label segment a c-bit integer",
                    f"{prefix}stage3.segments",
                    model=_segment_breaker(sublayer),
                ),
            ),
        ),
        CheckSpec(
            f"{prefix}stage3.match",
            paper,
            _result("Stage III (match and select, Lemma G.5)"),
            "exactly one slot's indicator is 1 on each labelled input, holding its key and "
            "label; none on an extra point",
            (
                Breaker(
                    "match bias moved by ½",
                    "the match indicator exactly 0 or 1",
                    f"{prefix}stage3.match",
                    model=move_probe_bias(sublayer, "match[0]", mpq(1, 2)),
                ),
            ),
        ),
    )


def _segment_breaker(sublayer: int) -> Callable:
    def broken(model: Transformer, dataset: Dataset) -> Transformer:
        mlp = model.sublayers[sublayer]
        assert isinstance(mlp, MLP)
        names = {p.name for p in mlp.probes}
        lane = "label[0]" if "label[0]" in names else "W[0]"
        bits = int(mlp.meta.get("key_bits", 1)) + int(mlp.meta.get("label_bits", 1))
        return move_probe_bias(sublayer, lane, mpq(2 ** (bits * 64)))(model, dataset)

    return broken


CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "vys": (
        CheckSpec(
            "labels",
            PAPER,
            "Theorem 3.1 (F(x_i) = y_i)",
            "the network's output is every point's label, exactly",
            (Breaker("output + 1", "the selected label as output", "labels", output_plus_one),),
        ),
        lower_bound("lower_bound.bit_count"),
        CheckSpec(
            "vys.structure",
            PAPER,
            "Theorem 3.1 (one ReLU MLP)",
            "the network is one MLP, all of it read by the checklist",
            (Breaker("an MLP appended", "one MLP", "vys.structure", two_sublayers),),
        ),
        CheckSpec(
            "memorizer.layout",
            PAPER,
            "Lemma C.1 (layout: K slots, m groups, ρ and c)",
            "the layout the stage checks read matches the lanes the network probes",
            (Breaker("layout stripped", "the memorizer's layout", "memorizer.layout", no_layout),),
        ),
        *memorizer_specs("memorizer.", 0),
        CheckSpec(
            "vys.dataflow",
            PAPER,
            "Theorem 3.1 / Lemma C.1, Stage III read-out",
            "the output is computed from the checked read-out alone: every path from the input "
            "to the output crosses the match indicators and the selected labels",
            (
                Breaker(
                    "parallel lookup beside the memorizer",
                    "the output produced by the checked memorizer",
                    "vys.dataflow",
                    parallel_lookup,
                ),
            ),
        ),
    ),
}


def example() -> Dataset:
    """12 points in Q² with 3 labels: 12 groups of one slot (every stage present), a second
    to build and verify."""
    return random_points(12, 2, 3, seed=1)


# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {"vys": example}
