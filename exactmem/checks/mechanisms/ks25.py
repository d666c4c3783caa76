"""The mechanisms the Kajitsuka & Sato 2025 checklists (ks25-next-token, ks25-seq2seq,
ks25-token-ids, ks25-deep-sets, ks25-bit-budget) test, each check with its breakers.

Theorem 4.1's network is F^(FF)_1 (Lemma B.3's memorizer of φ̃, carrying the token id of
Lemma C.2), one uniform attention layer (eq. (53): the context id (φ̃(x_k), id(x_k), mean φ̃))
and F^(FF)_2 (Lemma C.1's memorizer of the context ids). The breakers change an honest model on
the IR, or the builder's options (:class:`~exactmem.checks.checklist.Breaker`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from gmpy2 import mpq

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.checks.mechanisms.vys import (
    lower_bound,
    memorizer_specs,
    one_layer,
    output_plus_one,
    scale_row,
    shift_bias,
    with_layer,
    with_sublayer,
    zero_bypass,
)
from exactmem.core.model import MLP, Affine, Attention, Transformer
from exactmem.datasets.dataset import Dataset

PAPER = "Kajitsuka & Sato 2025"
LANES = {"phi": 0, "tid": 1, "seq": 2}  # the construction's lanes (the breakers' own layout)


def _attention_at(model: Transformer) -> int:
    return next(i for i, s in enumerate(model.sublayers) if isinstance(s, Attention))


def _first_row(model: Transformer, lane: str, change: Callable[[Affine, int], Affine]):
    """Apply ``change`` to the row of ``lane`` where it is written before the attention: F1's
    last layer, or the embedding table (Theorem E.1)."""
    row = LANES[lane]
    if model.embed is not None:
        return replace(model, embed=change(model.embed, row))
    mlp = model.sublayers[0]
    assert isinstance(mlp, MLP)
    last = len(mlp.layers) - 1
    return with_sublayer(model, 0, with_layer(mlp, last, change(mlp.layers[last], row)))


def lane_plus(lane: str, amount: mpq) -> Callable:
    def broken(model: Transformer, dataset: Dataset) -> Transformer:
        return _first_row(model, lane, lambda a, r: shift_bias(a, [r], amount))

    return broken


def lane_times(lane: str, factor: mpq) -> Callable:
    def broken(model: Transformer, dataset: Dataset) -> Transformer:
        return _first_row(model, lane, lambda a, r: scale_row(a, r, factor))

    return broken


def phi_zeroed(model: Transformer, dataset: Dataset) -> Transformer:
    """φ̃ ≡ 0: the witness set A is empty, so distinct multisets restrict to the same one."""
    return lane_times("phi", mpq(0))(model, dataset)


def phi_constant(model: Transformer, dataset: Dataset) -> Transformer:
    """φ̃ ≡ 1: every token is a witness, and every sequence of n tokens sums to n."""

    def one(a: Affine, r: int) -> Affine:
        rows = list(a.rows)
        rows[r] = ()
        bias = list(a.bias)
        bias[r] = a.denominator
        return replace(a, rows=tuple(rows), bias=tuple(bias))

    return _first_row(model, "phi", one)


def attention_hardmax(model: Transformer, dataset: Dataset) -> Transformer:
    """The attention made non-uniform: hardmax on the token id (W_Q = W_K = e_tid)."""
    at = _attention_at(model)
    att = model.sublayers[at]
    assert isinstance(att, Attention)
    width = att.heads[0].query.in_dim
    tid = Affine(width, (((LANES["tid"], 1),),), (0,))
    heads = tuple(replace(h, query=tid, key=tid) for h in att.heads)
    subs = list(model.sublayers)
    subs[at] = replace(att, heads=heads, score="hardmax")
    return replace(model, sublayers=tuple(subs))


def seq_shrunk(model: Transformer, dataset: Dataset) -> Transformer:
    """The sequence id's gap shrunk: the attention writes mean φ̃ / 10⁹ (context ids of one
    token closer than 1/n)."""
    at = _attention_at(model)
    att = model.sublayers[at]
    assert isinstance(att, Attention)
    heads = tuple(
        replace(h, output=replace(h.output, denominator=h.output.denominator * 10**9))
        for h in att.heads
    )
    subs = list(model.sublayers)
    subs[at] = replace(att, heads=heads)
    return replace(model, sublayers=tuple(subs))


def _low(dataset: Dataset) -> int:
    return max((abs(int(x)) + 1 for v in dataset.vocab for x in v), default=0)


def f2_bypass(model: Transformer, dataset: Dataset) -> Transformer:
    """A unit of F2 that is 0 on every context id (all lanes ≥ 0), added to the output: the
    output no longer depends on the input through F2's checked read-out only."""
    at = len(model.sublayers) - 1
    return zero_bypass(model, at, [LANES["seq"]], 0, [0])


def seq_before_bypass(model: Transformer, dataset: Dataset) -> Transformer:
    """F1 writes into the (unchecked) seq lane a unit that is 0 on the data; the residual
    attention carries it into the context id: the checked lanes no longer cut the input off."""
    if model.embed is not None:  # Theorem E.1: the embedding writes token 0 into seq
        return _first_row(model, "seq", lambda a, r: _with_entry(a, r, 0))
    return zero_bypass(model, 0, range(model.input_dim), _low(dataset), [LANES["seq"]])


def _with_entry(a: Affine, row: int, col: int) -> Affine:
    rows = list(a.rows)
    rows[row] = tuple(sorted({**dict(rows[row]), col: a.denominator}.items()))
    return replace(a, rows=tuple(rows))


def f1_bypass(model: Transformer, dataset: Dataset) -> Transformer:
    """A unit of F1 that is 0 on the data, added to φ̃: φ̃ no longer comes from F1's checked
    read-out only."""
    return zero_bypass(model, 0, range(model.input_dim), _low(dataset), [LANES["phi"]])


def _f2_at(model: Transformer) -> int:
    return len(model.sublayers) - 1


def _memorizer(prefix: str, first: bool) -> tuple[CheckSpec, ...]:
    """Lemma C.1's stage checks of F1 (φ̃, Lemma B.3: sub-layer 0) or F2 (the last)."""
    return memorizer_specs(prefix, 0 if first else -1, PAPER + " (Lemma C.1)", key_bias=not first)


def _bit_count(token_ids: bool) -> CheckSpec:
    """The shared bit-count spec; for token ids its breaker keeps the embedding table (the
    shared one drops it, and the dataset's token ids then no longer fit the model's input)."""
    spec = lower_bound("lower_bound.bit_count")
    if not token_ids:
        return spec
    return replace(spec, breakers=(Breaker("one affine map", "capacity", spec.name, one_layer),))


def _specs(variant: str) -> tuple[CheckSpec, ...]:
    theorem = {
        "ks25-next-token": "Theorem 4.1",
        "ks25-seq2seq": "Corollary 4.1",
        "ks25-token-ids": "Theorem E.1",
        "ks25-deep-sets": "Theorem D.1",
        "ks25-bit-budget": "Theorem F.1",
    }[variant]
    token_ids = variant == "ks25-token-ids"
    specs = [
        CheckSpec(
            "labels",
            PAPER,
            f"{theorem} (exact labels)",
            "the output at each judged position is its label, exactly",
            (Breaker("output + 1", "the selected label as output", "labels", output_plus_one),),
        ),
        _bit_count(token_ids),
        lower_bound("lower_bound.theorem_4_2"),
        CheckSpec(
            f"{variant}.structure",
            PAPER,
            f"{theorem} (eq. (4): F1, one attention layer, F2)",
            "the network is F1 → attention → F2 (the embedding table for token ids), all of it "
            "read by the checklist",
            (Breaker("one affine map", "the architecture", f"{variant}.structure", one_layer),),
        ),
        CheckSpec(
            "ks25.phi_values",
            PAPER,
            "Lemma B.3",
            "φ̃ is a non-negative integer on every token, its support A smaller than N",
            (Breaker("φ̃ + ½", "integer φ̃", "ks25.phi_values", lane_plus("phi", mpq(1, 2))),),
        ),
        CheckSpec(
            "ks25.token_ids",
            PAPER,
            "Theorem E.1 (ids ≥ 1 apart)" if token_ids else "Lemma C.2",
            "distinct tokens get integer token ids, at least "
            + ("1" if token_ids else "2")
            + " apart",
            (
                Breaker(
                    "token id + ½",
                    "integer token ids",
                    "ks25.token_ids",
                    lane_plus("tid", mpq(1, 2)),
                ),
            ),
        ),
        CheckSpec(
            "ks25.witness_set",
            PAPER,
            "Lemma B.1",
            "distinct multisets stay distinct restricted to the witness set A = supp φ̃",
            (Breaker("φ̃ ≡ 0", "the witness set", "ks25.witness_set", phi_zeroed),),
        ),
        CheckSpec(
            "ks25.sequence_sums",
            PAPER,
            "Lemmas B.2/B.3",
            "the sums of φ̃ over distinct multisets are pairwise ≥ 1 apart",
            (
                Breaker("φ̃ ≡ 1", "distinct sums", "ks25.sequence_sums", phi_constant),
                *_printed_b2(variant),
            ),
        ),
        CheckSpec(
            "ks25.attention",
            PAPER,
            "eqs. (39), (53) (uniform attention)",
            "all scores equal, weights exactly 1/n, output (φ̃(x_k), id(x_k), mean φ̃)",
            (
                Breaker(
                    "hardmax on the token id",
                    "uniform weights",
                    "ks25.attention",
                    attention_hardmax,
                ),
            ),
        ),
        CheckSpec(
            "ks25.phi_range",
            PAPER,
            "Lemma B.3 (range)",
            "φ̃ ≤ ⌈4N³√π⌉ and every sum ≤ 4nN³√π",
            (Breaker("φ̃ × 10¹²", "φ̃'s range", "ks25.phi_range", lane_times("phi", mpq(10**12))),),
        ),
        CheckSpec(
            "ks25.token_id_range",
            PAPER,
            "Theorem E.1 (ids in [1, ω])" if token_ids else "Lemma C.2 (range)",
            "token ids in [1, ω]" if token_ids else "0 ≤ token ids ≤ 10rM²√(πd)/δ",
            (
                Breaker(
                    "token id × 10¹²",
                    "the token ids' range",
                    "ks25.token_id_range",
                    lane_times("tid", mpq(10**12)),
                ),
            ),
        ),
        CheckSpec(
            "ks25.dataflow.f2",
            PAPER,
            f"{theorem} (F2 = Lemma C.1's memorizer of the context ids)",
            "the output is computed from F2's checked read-out alone",
            (
                Breaker(
                    "zero-valued bypass of F2",
                    "the output produced by F2's read-out",
                    "ks25.dataflow.f2",
                    f2_bypass,
                ),
            ),
        ),
        CheckSpec(
            "ks25.dataflow.lanes",
            PAPER,
            f"{theorem} (eq. (53): F2 reads the context id)",
            "F2 reads only the checked context-id lanes, and they read only φ̃ and the token id "
            "(the lanes the checks locate by name are the ones the weights use)",
            (
                Breaker(
                    "a value in the unchecked seq lane",
                    "the checked lanes cut the input off",
                    "ks25.dataflow.lanes",
                    seq_before_bypass,
                ),
            ),
        ),
    ]
    if variant == "ks25-deep-sets":
        specs.append(
            CheckSpec(
                "deepsets.set_ids",
                PAPER,
                "Theorem D.1",
                "distinct multisets have set ids (mean φ̃) at least 1/n apart",
                (Breaker("set id gap shrunk", "the set ids' gap", "deepsets.set_ids", seq_shrunk),),
            )
        )
    else:
        specs.append(
            CheckSpec(
                "ks25.context_ids",
                PAPER,
                "eq. (55)",
                "distinct (token, multiset) pairs give context ids ≥ 1/n apart",
                (
                    Breaker(
                        "sequence id gap shrunk",
                        "the context ids' gap",
                        "ks25.context_ids",
                        seq_shrunk,
                    ),
                ),
            )
        )
    if not token_ids:
        specs.append(
            CheckSpec(
                "ks25.dataflow.f1",
                PAPER,
                "Lemma B.3 (F1 = Lemma C.1's memorizer of φ̃)",
                "φ̃ is computed from F1's checked read-out alone",
                (
                    Breaker(
                        "zero-valued bypass of F1",
                        "φ̃ produced by F1's read-out",
                        "ks25.dataflow.f1",
                        f1_bypass,
                    ),
                ),
            )
        )
    if variant == "ks25-bit-budget":
        specs += _split_specs()
    else:
        if not token_ids:
            specs += _memorizer("phi.", True)
        specs += _memorizer("f2.", False)
    return tuple(specs)


def _printed_b2(variant: str) -> tuple[Breaker, ...]:
    """Lemma B.2's printed weights on the counterexample of proofs/ks25_lemma_b2_erratum.toml
    (a next-token dataset: not for seq-to-seq; the bit budget's split needs more points)."""
    if variant in ("ks25-seq2seq", "ks25-bit-budget"):
        return ()
    return (
        Breaker(
            "printed Lemma B.2 weights",
            "distinct sums (the printed construction's shift by K)",
            "ks25.sequence_sums",
            options={"sequence_weights": "paper", "paper_direction": "380/461,-261/461"},
            dataset={"generator": "lemma_b2_counterexample"},
        ),
    )


def _split_specs() -> list[CheckSpec]:
    """Theorem F.1: the stage checks of every sub-network (names ``phi.net{j}.…``,
    ``f2.net{j}.…``), broken on F2's first sub-network, and the ownership of the inputs."""
    out = []
    for s in memorizer_specs("f2.net0.", -1, PAPER + " (Theorem F.1, Lemma C.1)"):
        stage = s.name[len("f2.net0.") :]
        out.append(replace(s, name=stage, breakers=tuple(_on_net0(b) for b in s.breakers)))
    out.append(
        CheckSpec(
            "split.ownership",
            PAPER,
            "Theorem F.1",
            "each labelled input is matched by exactly one sub-network, an extra input by none",
            (
                Breaker(
                    "match of net0 raised",
                    "one owner per input",
                    "f2.split.ownership",
                    model=_net0("match[0]", mpq(1)),
                ),
            ),
        )
    )
    out.append(
        CheckSpec(
            "split.budget",
            PAPER,
            "Theorem F.1",
            "the labelled points split into ⌈N/B²⌉ sub-networks of at most B² points (an unsplit "
            "memorizer is one), groups of at most K_B = ⌈B/√log₂ B⌉ slots, at the bit budget B "
            "the user states (--set bit_budget=B)",
            (
                Breaker(
                    "built at half the budget",
                    "⌈N/B²⌉ sub-networks of B² points",
                    "split.budget",
                    options={"bit_budget": 2},
                ),
            ),
        )
    )
    return out


def _net0(name: str, amount: mpq) -> Callable:
    from exactmem.checks.mechanisms.vys import move_probe_bias

    def broken(model: Transformer, dataset: Dataset) -> Transformer:
        return move_probe_bias(len(model.sublayers) - 1, "net0." + name, amount)(model, dataset)

    return broken


def _on_net0(b: Breaker) -> Breaker:
    """A memorizer breaker aimed at F2's sub-network 0 (probe names ``net0.…``)."""
    from exactmem.checks.mechanisms.vys import move_probe_bias, move_step_bias

    stage = b.fails.split(".", 2)[-1]
    at = -1
    model: Callable = {
        "stage1.keys": lambda m, d: move_probe_bias(
            len(m.sublayers) + at, "net0.key", mpq(-(10**12))
        )(m, d),
        "stage2.groups": lambda m, d: move_step_bias(len(m.sublayers) + at, "net0.")(m, d),
        "stage3.segments": lambda m, d: move_probe_bias(
            len(m.sublayers) + at, "net0.label[0]", mpq(2**200)
        )(m, d),
        "stage3.match": lambda m, d: move_probe_bias(
            len(m.sublayers) + at, "net0.match[0]", mpq(1, 2)
        )(m, d),
    }[stage]
    return replace(b, fails="f2.net0." + stage, model=model)


VARIANTS = (
    "ks25-next-token",
    "ks25-seq2seq",
    "ks25-token-ids",
    "ks25-deep-sets",
    "ks25-bit-budget",
)

CHECKS: dict[str, tuple[CheckSpec, ...]] = {v: _specs(v) for v in VARIANTS}


def _example(variant: str) -> Callable[[], Dataset]:
    def example() -> Dataset:
        """30 sequences of 4 tokens in Q² over 12 tokens, 4 labels (seeded): both memorizers
        have several groups; a second or two to build and verify."""
        from exactmem.datasets.sequences import random_sequences

        return random_sequences(
            30,
            4,
            2,
            12,
            4,
            1,
            task="seq2seq" if variant == "ks25-seq2seq" else "next-token",
            labels_by="multiset" if variant == "ks25-deep-sets" else "key",
        )

    return example


# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {v: _example(v) for v in VARIANTS}

# the builder options of each example (Theorem F.1 needs its bit budget)
EXAMPLE_OPTIONS: dict[str, Mapping[str, Any]] = {"ks25-bit-budget": {"bit_budget": 4}}
