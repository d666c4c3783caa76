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
# * each layer has at most 11 outputs (the width bound) reading at most max(d, 11) inputs.
# max_bits: a parameter is one coefficient or constant of a unit's affine expression (the Lin
# of constructions/circuit.py, folded over the layer's denominator and counted in lowest terms,
# core/model.py resources): bitlen(|p|) + ⌈log₂ q⌉ + 1 bits. The largest, gadget by gadget:
# * packed integers: with ρ' = bitlen(largest key), c' = bitlen(C) (the built ones, ≤ ρ, c),
#   K values each below 2^B (B = max(ρ', c')) shifted by s ≤ B bits each are below
#   2^{B + s(K−1) + 1} ≤ 2^Q, Q = K(ρ' + c') ≤ K(ρ + c), in both bit_widths (with paper's
#   swap a key wider than its slot overlaps the next one: OR ≤ sum); so every u_j, w_j, and
#   every difference u_j − u_{j−1}, w_j − w_{j−1}, lies in (−2^Q, 2^Q);
# * Stage I (the first layer, and Stage III's first when there is one group, m = 1): the
#   coefficients 2·lcd·w_i have bitlen ≤ ⌈log₂(lcd·W)⌉ + 2, the shift 2 − 2·p_min has
#   |shift| ≤ 2 + 2·lcd·W·√d·r ≤ 2^{ρ−1} (ρ's definition); e = max of the two;
# * Stage II: steps t − a (+1) with a a key < 2^ρ' (bias |shift − a + 1| ≤ 2^{e+1}); lanes U, W
#   start at the constant u_1, w_1 and add (u_j − u_{j−1})·S: below 2^Q;
# * keyed: steps on U − 2^p·bit, p < Q (bias u_1 − 2^p + 1 when m = 1: |·| ≤ 2^Q), lanes
#   v, y, vk = 2v + bit (2, ±1), the hat on t − vk (±1), select y − 2^c'(1 − m) with c' the
#   label bits (≤ Q), the output's sum (1): at most Q + 2 bits;
# * peel: as keyed, and the match on U − 2^P·t with P ≤ (K − 1)·max(ρ', c') ≤ Q: with m = 1
#   t is Stage I's expression, coefficients 2^P·2·lcd·w_i (bitlen ≤ Q + e) and biases
#   ±(u_1 − 2^P·shift) − 2^P + 1 (|·| ≤ 2^Q + 2^{P+e} ≤ 2^{Q+e+1}); the AND gates (±1) and
#   the label weights 2^{c'−i}: at most Q + e + 2 bits;
# * tent: tent units 4z − 2·2^{Ks+1} on z = 2U (+1), s the key slot's bits (Ks ≤ Q):
#   coefficients 8(u_j − u_{j−1}), biases 8u_1 + 4 − 2^{Ks+2} (|·| < 2^{Q+3}); the read-out
#   (2^i − (z' − z))/2^{i+1}, i ≤ Q: coefficients ±2^{−(i+1)} (i + 3 bits), biases ½; the hat
#   on t − v, select as keyed: at most Q + 4 bits;
# so max_bits ≤ Q + e + 4 ≤ K(ρ + c) + e + 8 at the group_size K built, and N(ρ + c) + e + 8 for
# every group_size ≤ N (the option's limit; the builder's own choice is ≤ N). plugins/_ks25.py
# uses the lemma max_bits ≤ Q + e + 4 for its two memorizers.
DEFINES = {
    "W": ("direction_bound", "Max(N**2, 2**64)"),
    "rho": "ceiling(log(4*ceiling(sqrt(d))*lcd*W*ceiling(r) + 2, 2)) + 1",
    "c": "ceiling(log(C, 2)) + 1",
    "a": "rho + c + 3",
    "layers": ("ceiling(N/group_size) + group_size*a + 1", "N*a + 2"),
    "e": "Max(rho, ceiling(log(lcd*W, 2)) + 2)",
    "bits": ("group_size*(rho + c) + e + 8", "N*(rho + c) + e + 8"),
}
BOUNDS = {
    "width": "Max(d, 11)",  # the input stream of d lanes, then layers of at most 11 outputs
    "depth": "layers",
    "dense_parameters": "layers*11*(Max(d, 11) + 1)",
    "max_bits": "bits",
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
    source="width: proofs/vys_theorem_3_1.toml, [tight]; depth, parameters and bits: the "
    "builder's layout at the stated group_size and direction_bound (--set; for every value "
    "when not given; our reconstruction)",
    bound_defines=DEFINES,
)
