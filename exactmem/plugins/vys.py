"""The built-in construction ``vys`` (Vardi, Yehudai & Shamir 2022, Theorem 3.1), registered as a
plugin: its checklist reads the Lemma C.1 stages of the one memorizing MLP
(:func:`exactmem.checks.memorizer.check_memorizer`)."""

from __future__ import annotations

from exactmem.checks.certificate import Check, ChecklistStructureError
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import vys as mechanisms
from exactmem.checks.memorizer import check_memorizer
from exactmem.core.model import MLP
from exactmem.plugins import builtin

PAPER = "Vardi, Yehudai & Shamir 2022, Theorem 3.1"
NAME = "vys"

# The fitted ([tight]) width of proofs/vys_theorem_3_1.toml and proofs/vys_tent_gadget.toml, and
# the depth and dense parameters of every model the builder makes (constructions/vys.py), our
# reconstruction from its layout — the paper states no constant:
# * Stage I folds into the first layer; Stage II takes m − 1 layers for m = ⌈N/K⌉ groups of K
#   slots, Stage III vys.stage3_layers(gadget, K, ρ, c), the read-out one: at most
#   ⌈N/K⌉ + K(ρ + c + 3) + 1 for every gadget and either bit_widths (the tent's
#   K(ρ + max(c, 2) + 1) + 1 is the most, with ρ and c swapped or not);
# * the keys are 2·lcd·wᵀ(x − x_min) + 2 with |w_i| ≤ W (the direction bound given, else the
#   Stage I search's last tier N² ≤ max(N², 2⁶⁴), the option's limit) and ‖x − x_min‖₁ ≤ 2√d·r,
#   so ρ ≤ ⌈log₂(4⌈√d⌉·lcd·W·⌈r⌉ + 2)⌉ + 1; c = bitlen(C);
# * without --set group_size=K the depth is bounded for every K ≤ N: ⌈N/K⌉ + Ka is convex in K,
#   so at most its value at K = 1 or K = N, below N·a + 2 (a = ρ + c + 3 ≥ 1);
# * each layer has at most 11 outputs (the width bound) reading at most max(d, 11) inputs
DEFINES = {
    "W": ("direction_bound", "Max(N**2, 2**64)"),
    "rho": "ceiling(log(4*ceiling(sqrt(d))*lcd*W*ceiling(r) + 2, 2)) + 1",
    "c": "ceiling(log(C, 2)) + 1",
    "a": "rho + c + 3",
    "layers": ("ceiling(N/group_size) + group_size*a + 1", "N*a + 2"),
}
BOUNDS = {
    "width": "11",
    "depth": "layers",
    "dense_parameters": "layers*11*(Max(d, 11) + 1)",
}


def run(evidence: Evidence) -> list[Check]:
    """Theorem 3.1's network is one MLP: a layer beside it would escape the checklist."""
    model, trace = evidence.model, evidence.trace
    assert trace is not None  # evaluates "exact": the core hands no checklist a missing trace
    first = model.sublayers[0] if len(model.sublayers) == 1 else None
    if not isinstance(first, MLP) or model.embed or model.unembed:
        raise ChecklistStructureError("the model is not one MLP")
    from exactmem.checks.dataflow import memorizer_dataflow

    expected = dict(enumerate(evidence.dataset.labels))
    checks = check_memorizer(trace, first, expected, lambda r: f"points[{r}]")
    # the checked read-out must be what produces the output
    return [*checks, memorizer_dataflow("vys.dataflow", model, 0)]


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("points",),
    summary="Lemma C.1 stages I–III of the memorizer (points)",
    run=run,
    evaluates="exact",
    bounds=BOUNDS,
    source="width: proofs/vys_theorem_3_1.toml, [tight]; depth and parameters: the builder's "
    "layout at the stated group_size and direction_bound (--set; for every value when not "
    "given; our reconstruction)",
    bound_defines=DEFINES,
)
