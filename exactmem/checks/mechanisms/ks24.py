"""The mechanisms the ks24 checklist tests (:mod:`exactmem.checks.measures.ks24`), each check with
its
breakers, and the small seeded dataset ``exactmem selftest ks24`` builds on.

Kajitsuka & Sato 2024 (ICLR, arXiv 2307.14023): one softmax self-attention layer with a single
rank-one head is a contextual mapping — softmax attention computes the Boltzmann operator — and
one token-wise FFN after it memorizes the labels. Only the abstract was at hand: the mechanisms
below are those of our reconstruction (docs/ks24.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

from gmpy2 import mpq

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.core.model import MLP, Affine, Attention, Transformer
from exactmem.datasets.dataset import Dataset

PAPER = "Kajitsuka & Sato, ICLR 2024 (arXiv 2307.14023)"


def example(N: int = 16, n: int = 3, d: int = 2, vocab: int = 8, C: int = 3, seed: int = 1):
    """N seq-to-seq pairs of n distinct tokens drawn from ``vocab`` non-zero integer vectors in
    [−9, 9]^d, labels in 1..C a function of (token, multiset): tokens recur across sequences,
    so the Boltzmann term is what tells their contexts apart."""
    rng = random.Random(seed)
    table: dict[tuple, None] = {}
    while len(table) < vocab:
        z = tuple(mpq(rng.randint(-9, 9)) for _ in range(d))
        if any(z):
            table.setdefault(z, None)
    seqs = [tuple(rng.sample(range(vocab), n)) for _ in range(N)]
    first: dict = {}
    labels = tuple(
        tuple(first.setdefault((tuple(sorted(s)), t), rng.randint(1, C)) for t in s) for s in seqs
    )
    return Dataset("seq2seq", labels, C, vocab=tuple(table), sequences=tuple(seqs))


def _parts(model: Transformer) -> tuple[Attention, MLP]:
    """The head's layer and the FFN of an honest ks24 model."""
    att, ffn = model.sublayers
    if not isinstance(att, Attention) or not isinstance(ffn, MLP):
        raise ValueError("not a ks24 model: one attention layer, then one FFN")
    return att, ffn


def _head(model: Transformer, **maps: Affine) -> Transformer:
    att, ffn = _parts(model)
    head = replace(att.heads[0], **maps)
    return replace(model, sublayers=(replace(att, heads=(head,)), ffn))


def _zero_query(model: Transformer, ds: Dataset) -> Transformer:
    """W_Q = 0: every score 0, plain averaging."""
    q = _parts(model)[0].heads[0].query
    return _head(model, query=Affine(q.in_dim, ((),), (0,)))


def _zero_output(model: Transformer, ds: Dataset) -> Transformer:
    """W_O = 0: the ids are the tokens' own projections, one per token whatever its context."""
    o = _parts(model)[0].heads[0].output
    return _head(model, output=Affine(o.in_dim, tuple(() for _ in o.rows), (0,) * o.out_dim))


def _merging_key(model: Transformer, ds: Dataset) -> Transformer:
    """W_K (and W_Q = λ·W_K with it) orthogonal to the difference of two distinct tokens: the
    projection s = W_K z merges them."""
    head = _parts(model)[0].heads[0]
    a, b = (ds.vocab[t] for t in ds.sequences[0][:2])
    diff = [x - y for x, y in zip(a, b, strict=True)]
    i = next(j for j, x in enumerate(diff) if x)
    k = (i + 1) % len(diff)
    row = [mpq(0)] * len(diff)
    row[i], row[k] = -diff[k], diff[i]  # row · diff = 0, row ≠ 0 (d ≥ 2)
    c, q = head.query.rows[0][0]  # λ = W_Q[c] / W_K[c]
    lam = mpq(q, head.query.denominator) / mpq(dict(head.key.rows[0])[c], head.key.denominator)
    key = Affine.from_rationals([row], len(row))
    query = Affine.from_rationals([[lam * x for x in row]], len(row))
    value = Affine.from_rationals([row], len(row))
    return _head(model, query=query, key=key, value=value)


def _shift_steps(model: Transformer, ds: Dataset) -> Transformer:
    """The re-quantizer's step units g_c = ReLU(1 − h_c) moved to ReLU(3/2 − h_c): their bias
    off by ½, so g_c is 3/2 where it should be 1."""
    att, ffn = _parts(model)
    steps = ffn.layers[-2]
    moved = replace(
        steps,
        rows=tuple(tuple((c, 2 * x) for c, x in row) for row in steps.rows),
        bias=tuple(2 * b + steps.denominator for b in steps.bias),
        denominator=2 * steps.denominator,
    )
    layers = (*ffn.layers[:-2], moved, ffn.layers[-1])
    return replace(model, sublayers=(att, replace(ffn, layers=layers)))


def _two_directions(model: Transformer, ds: Dataset) -> Transformer:
    """One row of the FFN's first layer turned off the common direction: it reads no single
    context id."""
    att, ffn = _parts(model)
    first = ffn.layers[0]
    rows = list(first.rows)
    row = dict(rows[0])
    row[0] = row.get(0, 0) + 1
    row[1 % first.in_dim] = row.get(1 % first.in_dim, 0) + 2
    rows[0] = tuple(sorted((c, x) for c, x in row.items() if x))
    first = replace(first, rows=tuple(rows))
    return replace(model, sublayers=(att, replace(ffn, layers=(first, *ffn.layers[1:]))))


def _bypass(model: Transformer, w2_reads: bool, around: str) -> Transformer:
    """The FFN cut to its first layer (the units reading the id) and a residual W₂ that writes
    lane ``k`` ≠ j (j the lane the head writes) from the first unit when ``w2_reads``, else
    nothing; the read-out reads lane k, and lane j too when ``around`` is "head"."""
    att, ffn = _parts(model)
    first = ffn.layers[0]
    d = first.in_dim
    written = {i for i, row in enumerate(att.heads[0].output.rows) if row}
    j = min(written)
    k = next(i for i in range(d) if i not in written)
    rows = tuple(((0, 1),) if i == k and w2_reads else () for i in range(d))
    w2 = Affine(first.out_dim, rows, (0,) * d)
    read = ((k, 1), (j, 1)) if around == "head" else ((k, 1),)
    return replace(
        model,
        sublayers=(att, MLP((first, w2), residual=True, label=ffn.label)),
        unembed=Affine(d, (tuple(sorted(read)),), (0,)),
    )


def _dead_ffn(model: Transformer, ds: Dataset) -> Transformer:
    """The FFN's read-out zeroed (W₂ = 0) and a bypass added: the read-out reads a token lane
    the head does not write, through the residual — the FFN is dead code."""
    return _bypass(model, False, "token")


def _around_ffn(model: Transformer, ds: Dataset) -> Transformer:
    """The read-out reads the lane the head writes through the residual, around the FFN's
    units that read the id (which it also reads)."""
    return _bypass(model, True, "head")


def _head_lane_bypass(model: Transformer, ds: Dataset) -> Transformer:
    """The reviewer's bypass (issue 26): the head reads and writes one lane j only (W_Q = W_K =
    W_V = e_jᵀ, W_O = e_j), C logits read by argmax take the label from lane j — the head's
    output, through the residual, around the FFN — and the FFN's one unit ReLU(z_j) writes lane
    k ≠ j, which every logit reads with weight 1: its contribution cancels in every margin. The
    FFN's role, mapping the context ids to labels, is gone; the head still writes the lane."""
    att, ffn = _parts(model)
    d = model.input_dim
    j, k = 0, 1 % d
    lane = Affine(d, (((j, 1),),), (0,))
    head = replace(
        att.heads[0], query=lane, key=lane, value=lane, output=Affine(1, tuple(
            ((0, 1),) if i == j else () for i in range(d)), (0,) * d)
    )  # fmt: skip
    w2 = Affine(1, tuple(((0, 1),) if i == k else () for i in range(d)), (0,) * d)
    logits = Affine(
        d, tuple(tuple(sorted({j: c, k: 1}.items())) for c in range(1, ds.num_classes + 1)),
        (0,) * ds.num_classes,
    )  # fmt: skip
    return replace(
        model,
        sublayers=(
            replace(att, heads=(head,)),
            MLP((lane, w2), residual=True, label=ffn.label),
        ),
        unembed=logits,
    )


CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "ks24": (
        CheckSpec(
            "ks24.separation",
            PAPER,
            "the hypothesis (tokenwise separated, distinct tokens per sequence) and the "
            "projection step",
            "s = W_K z takes distinct values on the distinct tokens, so the scores λ·s_k·s_l "
            "tell every pair of tokens apart",
            (
                Breaker(
                    "key merges two tokens",
                    "the projection's injectivity on the tokens",
                    "ks24.separation",
                    model=_merging_key,
                ),
            ),
        ),
        CheckSpec(
            "ks24.boltzmann",
            PAPER,
            "softmax attention as the Boltzmann operator",
            "W_Q = λ·W_K with λ > 0 and W_V ∥ W_K: token k receives the Boltzmann-weighted mean "
            "Σ s_l e^{λ s_k s_l} / Σ e^{λ s_k s_l}, which the FFN's ids read (β ≠ 0)",
            (
                Breaker(
                    "temperature 0",
                    "the Boltzmann operator (λ → 0: plain averaging)",
                    "ks24.boltzmann",
                    options={"temperature": "0"},
                ),
                Breaker(
                    "query zeroed",
                    "the head's scores",
                    "ks24.boltzmann",
                    model=_zero_query,
                ),
            ),
        ),
        CheckSpec(
            "ks24.contextual_mapping",
            PAPER,
            "one rank-one softmax head is a contextual mapping",
            "the ids wᵀc after the head, evaluated on the model, are apart between any two "
            "(multiset, token) classes (a collision is refuted exactly)",
            (
                Breaker(
                    "output map zeroed",
                    "the context the head adds to each token",
                    "ks24.contextual_mapping",
                    model=_zero_output,
                ),
            ),
        ),
        CheckSpec(
            "ks24.requantization",
            PAPER,
            "the FFN memorizes the labels (our exact re-quantizer)",
            "every unit of the FFN's last hidden layer is exactly 0 or 1 at every token, so "
            "the outputs after it are exact",
            (
                Breaker(
                    "step bias moved",
                    "the re-quantizer's exact steps",
                    "ks24.requantization",
                    model=_shift_steps,
                ),
            ),
        ),
        CheckSpec(
            "ks24.dataflow",
            PAPER,
            "the FFN on the context ids memorizes the labels",
            "every path from the input to the output crosses the FFN's units reading the id "
            "wᵀz (or, in the residual form, a token lane no head writes), at least one of those "
            "units reaches the output without cancelling in every margin, and no constant in "
            "place of the FFN gives every label",
            (
                Breaker(
                    "mechanism read-out zeroed, bypass added",
                    "the FFN as the producer of the output",
                    "ks24.dataflow",
                    model=_dead_ffn,
                ),
                Breaker(
                    "read-out around the FFN",
                    "the FFN as the only path from the head to the output",
                    "ks24.dataflow",
                    model=_around_ffn,
                ),
                Breaker(
                    "head lane read around the FFN, its unit cancelling",
                    "the FFN as the map from context ids to labels",
                    "ks24.dataflow",
                    model=_head_lane_bypass,
                ),
            ),
        ),
        CheckSpec(
            "ks24.structure",
            PAPER,
            "the architecture: one rank-one head, one FFN reading one context id",
            "the FFN's first-layer rows are multiples of one direction (the id it reads)",
            (
                Breaker(
                    "first layer of rank two",
                    "the single context id the FFN reads",
                    "ks24.structure",
                    model=_two_directions,
                ),
            ),
        ),
    ),
}

# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {"ks24": example}
