"""The built-in construction ``kim23`` (Kim, Kim & Mozafari 2023), registered as a plugin: its
checklist (:func:`exactmem.checks.measures.kim23.check_kim23`) reads the core's exact evaluation of
the
model's hardmax limit, and certifies a softmax model equal to that limit."""

from __future__ import annotations

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Evidence
from exactmem.checks.mechanisms import kim23 as mechanisms
from exactmem.plugins import builtin

PAPER = "Kim, Kim & Mozafari 2023"
NAME = "kim23"

# proofs/kim23.toml's [tight] width, and the depth and dense parameters of every model the
# builder makes (constructions/kim23.py, kim23_softmax.py), our reconstruction from its layout
# (the paper's weights were not at hand; its statement is Õ(d + n + √(nN)) parameters):
# * n rounds of a max-read attention, a residual reset FFN (2 layers; 3 under softmax) and a
#   count attention: at most 5n layers;
# * token keys s·wᵀ(x − x_min) + 1 ≤ 2√d·lcd·ω²·r + 1 (|w_i| ≤ ω², the Stage I search's last
#   tier), T = n times that with positions; the reads M_r lie in [1 − nL, T], L = T + 1, and
#   c_r ≤ n, so S = Σ α_r M_r (c_r under softmax) + β_r c_r spans at most
#   2n²K'(n(T + 1) + 1) with |α_r|, |β_r| ≤ K' (the functional bound given, else the search's
#   last tier N'² ≤ max(N², 2⁶⁴), the option's limit); the memorizer's keys are
#   2(A(S − S_min) + t) with A the id multiplier (given, else T + 1 ≤ max(T + 1, 2⁶⁴));
# * the memorizer (Lemma C.1) of at most nN ids: ⌈nN/K⌉ + K(ρ + c + 3) + 1 layers at group
#   size K for every gadget; without --set group_size, for every K ≤ nN (convex in K: at most
#   nN·(ρ + c + 3) + 2);
# * each layer has at most 12 outputs reading at most max(d, 12) inputs; the embedding and the
#   positional table hold at most 7(d + n + 1) more.
# max_bits (bits of p/q: bitlen(|p|) + ⌈log₂ q⌉ + 1; every weight here is an integer):
# * E_in: coefficients lcd·w_i (bitlen ≤ ⌈log₂(lcd·ω²)⌉ + 1), the bias 1 − p_min with
#   |p_min| ≤ lcd·ω²·√d·r ≤ T; the positional table k·T/n ≤ T;
# * the rounds: 1, α_r and β_r·n (|·| ≤ n·K'), −L = −(T + 1); under softmax also the
#   temperature λ (the option, ≤ 2⁶⁴; its default bitlen(4(n − 1)nL) is smaller), 4, 3, 2, and
#   B = nL: all of at most ρ bits, ρ's argument exceeding n·K'·(T + 1), but λ;
# * the memorizer: Stage I reads the lanes t and S with coefficients 2 and 2A (≤ 2^ρ) and the
#   shift −2A·S_min (|S| ≤ n²K'(n(T + 1) + 1), so |shift| ≤ 2^{ρ−1}); its keys have at most ρ
#   bits and its labels c, so plugins/vys.py's lemma gives at most K(ρ + c) + e + 4 bits at
#   group size K (e the largest Stage I bitlen): at the stated group_size, else for every
#   K ≤ nN (the option's limit; the builder's choice is at most the items)
DEFINES = {
    "T": "n*(2*ceiling(sqrt(d))*lcd*omega**2*ceiling(r) + 1)",
    "Kf": ("functional_bound", "Max(N**2, 2**64)"),
    "A": ("id_multiplier", "Max(T + 1, 2**64)"),
    "rho": "ceiling(log(2*(A*2*n**2*Kf*(n*(T + 1) + 1) + T), 2)) + 1",
    "c": "ceiling(log(C, 2)) + 1",
    "a": "rho + c + 3",
    "mem": ("ceiling(n*N/group_size) + group_size*a + 1", "n*N*a + 2"),
    "layers": "5*n + mem",
    "lam": ("temperature", "2**64"),
    "e": "Max(rho, ceiling(log(lcd*omega**2, 2)) + 2, ceiling(log(lam, 2)) + 2)",
    "bits": ("group_size*(rho + c) + e + 8", "n*N*(rho + c) + e + 8"),
}
BOUNDS = {
    "width": "12",
    "depth": "layers",
    "dense_parameters": "layers*12*(Max(d, 12) + 1) + 7*(d + n + 1)",
    "max_bits": "bits",
}


def run(evidence: Evidence) -> list[Check]:
    from exactmem.checks.measures.kim23 import check_kim23

    assert evidence.trace is not None  # evaluates the hardmax limit exactly
    return check_kim23(evidence.trace, evidence.model, evidence.dataset, evidence.view)


construction = builtin(
    NAME,
    PAPER,
    mechanisms,
    tasks=("seq2seq", "next-token"),
    summary="Kim et al. 2023: 2n attention layers of head size 1, context values equal on "
    "equivalent sequences, (context, token) ids distinct where labels differ, attention "
    "ties and margins, the memorizer's Lemma C.1 stages",
    run=run,
    evaluates="hardmax-limit",
    bounds=BOUNDS,
    bound_defines=DEFINES,
    source="width: proofs/kim23.toml, [tight]; depth, parameters and bits: the builder's "
    "layout at the stated group_size, functional_bound, id_multiplier and temperature (--set; "
    "for every value when not given; our reconstruction)",
    limit_check="kim23.softmax",
)
