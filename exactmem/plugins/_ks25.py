"""The checklist shared by the Kajitsuka & Sato 2025 constructions (Theorem 4.1 and its
variants): items 3–9 and both memorizers' Lemma C.1 stages (:func:`exactmem.checks.measures.ks25.
check_ks25`), and Theorem 4.2 on the constant sequences of the dataset's tokens, which the core
runs with the other lower bounds (``lower_bound.theorem_4_2``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Construction, Evidence, Unset
from exactmem.plugins import builtin

PAPER = "Kajitsuka & Sato 2025"

# The key and label bits of the two memorizers of every variant, for any option value and any
# random draw of the builder (constructions/ks25.py; our reconstruction, the paper states the
# depth as Õ(√N)), position-aware or not: with ``position_aware`` token k of a sequence becomes
# (x, k) ∈ Q^{d+1} (datasets/dataset.with_positions), so there are at most nω tokens, of norm at
# most r + n, and lcd is unchanged (k is an integer). F1 memorizes the witness tokens
# (|A| ≤ min(nω, N − 1), Lemma B.1; ω without positions) with the sequence weights as labels,
# f ≤ 3√π·N²·|A| + 1 ≤ 6N²·min(nω, N) = F for all three Lemma B.2 schemes (random: N'²; union:
# ⌈√|A|⌉·N'²; printed: ⌈N²|S|√π·v⌉ + ⌊2N²|S|√π⌋); its keys are the token ids
# 2·lcd·wᵀ(x − x_min) + 2 with |w_i| ≤ (nω)² (the Stage I search's last tier over at most nω
# tokens, Lemma C.2) and ‖x − x_min‖₁ ≤ 2√(d + 1)·(r + n), at most T (Theorem E.1's ids are at
# most ω ≤ T). F2 memorizes at most M context ids (f(x), id(x), Σf/n) — M = N, or nN for
# seq-to-seq — at scale n with |w_i| ≤ M², coordinates spread at most 2F + T (deep sets: the
# sum alone), so its keys are at most 2n·M²·(2F + T) + 2; its labels have bitlen(C) bits. Every
# define is an integer (ceilings of the logarithms), which keeps the formulas within the
# grammar's node limit.
MEMORIZER_BITS = {
    "At": "Min(n*omega, N)",
    "F": "6*N**2*At",
    "T": "4*ceiling(sqrt(d + 1))*lcd*(n*omega)**2*(ceiling(r) + n) + 2",
    "rho1": "ceiling(log(T, 2)) + 1",
    "c1": "Max(ceiling(log(F, 2)) + 1, 2)",
    "rho2": "ceiling(log(2*n*M**2*(2*F + T) + 2, 2)) + 1",
    "c2": "Max(ceiling(log(C, 2)) + 1, 2)",
}


# The largest parameter's bits of every variant, for every option value and draw: the model is
# F1 (Theorem E.1: an embedding table), the uniform attention (weights 0 and 1) and F2, two
# Lemma C.1 memorizers whose bits plugins/vys.py bounds gadget by gadget: K(ρ + c) + e + 4 for
# K slots, keys (and |Stage I's shift|) below 2^ρ, c label bits and Stage I coefficients of at
# most e bits. Here, our reconstruction from constructions/ks25.py, bit_budget.py,
# memorizer_arrays.py:
# * K: the builder's group size of least depth (vys.choose_group_size over 1 ≤ K ≤
#   min(N_m, 4√N_m + 4), N_m labelled points; not an option; a bit budget only caps it, K_B,
#   on parts of B² ≤ N_m points). With ρ, c the true key and label bits, ℓ = max(ρ, c) and
#   a = ρ + c + 3, every gadget's Stage III takes between (K − 1)ℓ and K·a + 1 layers
#   (vys.stage3_layers), so (K − 1)ℓ ≤ depth(K) ≤ depth(K₀) ≤ N_m/K₀ + K₀·a + 2 at
#   K₀ = ⌈√(N_m/a)⌉ (in range): ≤ 2√(N_m·a) + a + 2; hence
#   K(ρ + c) ≤ (ρ + c) + 2(K − 1)ℓ ≤ 3(ρ + c) + 4√(N_m·a) + 10, increasing in N_m, ρ, c;
# * F1 memorizes |A| ≤ N − 1 witness tokens (Lemma B.1); its labels, the weights f, are at most
#   3√π·N²·|A| + 1 ≤ 6N³ for all three Lemma B.2 schemes (|A| < N also when position_aware
#   makes up to nω tokens); its keys are the token ids 2·lcd·wᵀ(x − x_min) + 2 over at most nω
#   tokens (position_aware appends the position k ≤ n: d + 1 coordinates, norm ≤ r + n), with
#   |w_i| ≤ (nω)² (the Stage I search's last tier), so keys and the shift are at most
#   4⌈√(d+1)⌉·lcd·(nω)²·(⌈r⌉ + n) + 2 and the coefficients 2·lcd·w_i have ⌈log₂(lcd·(nω)²)⌉ + 2
#   bits (token_ids=weakened halves both); Theorem E.1's table holds f ≤ 6N³ and ids ≤ ω;
# * F2 memorizes at most M context ids (f(x), id(x), Σf/n), each coordinate in [0, 6N³] or an
#   id, over a denominator dividing n, with |w_i| ≤ M², so its keys and shift are at most
#   2n·M²·(12N³ + T) + 2 and its coefficients 2·n·w_i (deep sets: 2n·1) have
#   ⌈log₂(n·M²)⌉ + 2 bits; its labels bitlen(C) bits;
# so max_bits ≤ max over F1, F2 of 3(ρ + c) + 4√(N_m(ρ + c + 3)) + e + 14, N_m ≤ N for F1 and
# ≤ M for F2 (the attention's 0 and 1, the table's f ≤ 6N³ and ids ≤ ω have fewer bits).
# These defines are apart from the depth's (MEMORIZER_BITS), which count ω tokens.
MAX_BITS = {
    "Fb": "6*N**3",
    "Tb": "4*ceiling(sqrt(d + 1))*lcd*(n*omega)**2*(ceiling(r) + n) + 2",
    "rb1": "ceiling(log(Tb, 2)) + 1",
    "eb1": "Max(rb1, ceiling(log(lcd*(n*omega)**2, 2)) + 2)",
    "rb2": "ceiling(log(2*n*M**2*(2*Fb + Tb) + 2, 2)) + 1",
    "eb2": "Max(rb2, ceiling(log(n*M**2, 2)) + 2)",
    "cb1": "ceiling(log(Fb, 2)) + 1",
    "cb2": "ceiling(log(C, 2)) + 1",
    "bits1": "3*(rb1 + cb1) + ceiling(4*sqrt(N*(rb1 + cb1 + 3))) + eb1",
    "bits2": "3*(rb2 + cb2) + ceiling(4*sqrt(M*(rb2 + cb2 + 3))) + eb2",
    "bits": "Max(bits1, bits2) + 16",
}


# With --set bit_budget=B every variant splits both memorizers as Theorem F.1 does
# (constructions/ks25.py): the layers are those plugins/ks25_bit_budget.py derives, F2's N
# context ids read as M; without it the memorizers are not split (bound_checks.Unset).
SPLIT = {
    "B": "bit_budget",
    "KB": "Max(1, ceiling(B/sqrt(log(Max(B, 2), 2))))",
    "part1": "Max(B**2 + rho1 + c1 + 1, ceiling(B**2/KB) + KB*(rho1 + c1 + 1))",
    "part2": "Max(B**2 + rho2 + c2 + 1, ceiling(B**2/KB) + KB*(rho2 + c2 + 1))",
}


def memorizer_bounds(items: str, width: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(defines, bounds) of the depth and dense parameters of a Theorem 4.1 variant whose F2
    memorizes at most ``items`` context ids, beside its fitted ``width``.

    Without a bit budget the group size is the builder's choice of least depth
    (vys.choose_group_size, not an option), so each memorizer of N_m points has at most the
    layers of K = 1: N_m − 1 for Stage II, Stage III ρ + max(c, 2) + 2 ≤ ρ + c + 3 for every
    gadget (vys.stage3_layers), and its read-out. The model is F1 (or Theorem E.1's embedding
    table, no layer), one attention layer and F2; each layer has at most ``width`` outputs
    reading at most max(d + 1, width) inputs (d + 1 with positions), and the embedding table
    3(ω + 1) parameters."""
    defines: dict[str, Any] = {"M": items, **MEMORIZER_BITS, **MAX_BITS, **SPLIT}
    defines["layers"] = Unset(
        "ceiling(At/B**2)*part1 + ceiling(M/B**2)*part2 + 3",
        "At + rho1 + c1 + 4 + 1 + M + rho2 + c2 + 4",
    )
    bounds = {
        # the input stream: d lanes (d + 1 with positions); every layer after it has at most
        # ``width`` outputs
        "width": f"Max(d + 1, {width})",
        "depth": "layers",
        "dense_parameters": f"layers*{width}*(Max(d + 1, {width}) + 1) + 3*omega + 3",
        "max_bits": "bits",
    }
    return defines, bounds


def checklist_run(variant: str) -> Callable[[Evidence], list[Check]]:
    def run(evidence: Evidence) -> list[Check]:
        from exactmem.checks.measures.ks25 import check_ks25

        assert evidence.trace is not None  # evaluates "exact"
        budget = evidence.options.get("bit_budget")  # the user's --set, never the file's
        return check_ks25(
            evidence.trace, evidence.model, evidence.dataset, evidence.view, variant, budget
        )

    return run


def ks25_construction(
    name: str,
    result: str,
    *,
    tasks: tuple[str, ...],
    summary: str,
    bounds: Mapping[str, str],
    source: str,
    consistency: str | None = None,
    bound_defines: Mapping[str, Any] | None = None,
) -> Construction:
    from exactmem.checks.mechanisms import ks25 as mechanisms

    return builtin(
        name,
        f"{PAPER}, {result}",
        mechanisms,
        tasks=tasks,
        summary=summary,
        run=checklist_run(name),
        evaluates="exact",
        bounds=bounds,
        source=source,
        bound_defines=bound_defines,
        consistency=consistency,
        lower_bounds=("lower_bound.theorem_4_2",),
    )
