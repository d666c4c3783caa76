"""Theorem F.1 of Kajitsuka & Sato 2025: the memorizer under a bit budget B, split into
sub-networks of at most B² points, each a Lemma C.1 memorizer of its own (:mod:`vys`), every
other point an extra point it must leave alone."""

from __future__ import annotations

import math
from collections.abc import Sequence

from exactmem.constructions.circuit import Circuit, const, var
from exactmem.constructions.vys import (
    DEFAULT_GADGET,
    MEMORIZER_STEPS,
    Packing,
    Projection,
    Vector,
    _keys,
    _validated_points,
    emit,
    pack,
)
from exactmem.core.errors import InputError
from exactmem.core.model import MLP
from exactmem.runtime.progress import Steps

__all__ = ["budget_group_size", "build_split_memorizer"]


def budget_group_size(B: int) -> int:
    """Slots per group under bit budget B: K_B = ⌈B / √log₂ B⌉ (Kajitsuka & Sato 2025,
    Theorem F.1)."""
    return max(1, math.ceil(B / math.sqrt(math.log2(max(B, 2)))))


def build_split_memorizer(
    points: Sequence[Vector],
    labels: Sequence[int],
    *,
    num_classes: int,
    budget: int,
    extra_points: Sequence[Vector] = (),
    gadget: str = DEFAULT_GADGET,
    seed: int = 0,
    input_names: Sequence[str] | None = None,
    label: str = "memorizer",
    carry_key: bool = False,
    projection: Projection | None = None,
    steps: Steps | None = None,
) -> tuple[MLP, list[Packing]]:
    """Theorem F.1 (Kajitsuka & Sato 2025, App. F): the labelled points split into ⌈N/B²⌉
    sub-networks of B² points, each a Lemma C.1 network that maps every other point to 0; run
    one after the other on the shared key t and summed into the lane ``acc``. Groups hold at
    most K_B = ⌈B/√log₂ B⌉ slots, which caps the packed integers at K_B·max(ρ, c) bits.
    """
    if budget < 2:
        raise InputError(f"bit budget B must be ≥ 2, got {budget}")
    steps = steps or Steps(None, "", 0)
    steps.step(f"{label}: {len(points) + len(extra_points)} points")
    everything = _validated_points(points, labels, num_classes, extra_points, gadget)
    steps.step(f"{label}: Stage I keys")
    projection, keys = _keys(everything, projection, seed, None)
    N = len(points)
    chunk = budget * budget
    order = sorted(range(N), key=lambda i: keys[i])
    names = tuple(input_names) if input_names else tuple(f"x{j}" for j in range(len(points[0])))
    circ = Circuit(names)
    t = projection.expr(names)
    packings = []
    parts = [order[s : s + chunk] for s in range(0, N, chunk)]
    steps.add(3 * len(parts) - (MEMORIZER_STEPS - 2))  # packing, II and III of each part
    for j, part in enumerate(parts):
        steps.step(f"{label}: sub-network {j + 1}/{len(parts)}")
        mine = set(part)
        others = [i for i in range(len(everything)) if i not in mine]
        sub_keys = [keys[i] for i in part] + [keys[i] for i in others]
        packing = pack(
            sub_keys,
            [labels[i] for i in part],
            num_classes=num_classes,
            gadget=gadget,
            max_group_size=budget_group_size(budget),
        )
        packings.append(packing)
        circ.probe_prefix = f"net{j}."
        last = j == len(parts) - 1
        out = emit(circ, t, packing, carry_key=carry_key or not last, steps=steps, label=label)
        t = var("t")
        circ.keep["acc"] = (circ.keep["acc"] if j else const(0)) + out
    circ.probe_prefix = ""
    total = circ.keep.pop("acc")
    outputs = {"out": total, "key": var("t")} if carry_key else {"out": total}
    meta = {
        "lemma": "Kajitsuka & Sato 2025, Theorem F.1 (sub-networks of Lemma C.1, summed)",
        "budget": budget,
        "subnetworks": [{"label": label, **p.layout()} for p in packings],
        "points": [[int(i) for i in part] for part in parts],
    }
    mlp = circ.finish(outputs, residual=False, label=label, meta=meta)
    return mlp, packings
