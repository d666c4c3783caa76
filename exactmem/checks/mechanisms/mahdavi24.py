"""The mechanisms the mahdavi24 checklist tests (Mahdavi, Liao & Thrampoulidis 2024, ICLR),
each check with its breakers.

Every breaker changes the honest built model on the IR (:mod:`exactmem.core.model`) so that exactly
one mechanism of Theorem 1 / Proposition 2 is gone: a head's key map zeroed (it attends
uniformly: its block of the features is one fixed point), a head duplicated (two equal blocks),
a head's W_O zeroed (its features read by nothing), a head removed (H − 1 heads: below the
capacity and Proposition 2's ceiling), a head's score
form cut to rank one (d_h = 1: the head designs nothing), the embedding projected so that the
contexts the attention reads lose rank (A2), the mask opened or a layer appended (not Theorem
1's model), every W_O zeroed, with or without a bypass through the skip connection (the output
not computed from the heads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer
from exactmem.datasets.attention_data import random_instance
from exactmem.datasets.dataset import Dataset

PAPER = "Mahdavi, Liao & Thrampoulidis 2024 (ICLR, arXiv 2306.02010)"


def _attention(model: Transformer) -> Attention:
    att = model.sublayers[0]
    assert isinstance(att, Attention)
    return att


def _with_heads(model: Transformer, heads) -> Transformer:
    att = _attention(model)
    return replace(model, sublayers=(replace(att, heads=tuple(heads)),))


def zero_key(model: Transformer, dataset: Dataset) -> Transformer:
    """Head 0's key map zeroed: every score 0, the head attends uniformly to its context."""
    heads = list(_attention(model).heads)
    k = heads[0].key
    heads[0] = replace(heads[0], key=Affine(k.in_dim, ((),) * k.out_dim, k.bias, 1))
    return _with_heads(model, heads)


def duplicate_head(model: Transformer, dataset: Dataset) -> Transformer:
    """Head 1 replaced by a copy of head 0: two equal blocks of features."""
    heads = list(_attention(model).heads)
    heads[1] = heads[0]
    return _with_heads(model, heads)


def remove_head(model: Transformer, dataset: Dataset) -> Transformer:
    """The last head removed: H − 1 heads."""
    return _with_heads(model, _attention(model).heads[:-1])


def rank_one_scores(model: Transformer, dataset: Dataset) -> Transformer:
    """Head 0's query and key maps cut to their last non-zero row (the saturating u·λvᵀ):
    its score form has rank one, d_h = 1."""
    heads = list(_attention(model).heads)
    q, k = heads[0].query, heads[0].key
    last = max(i for i, r in enumerate(q.rows) if r)
    keep = tuple(r if i == last else () for i, r in enumerate(q.rows))
    keep_k = tuple(r if i == last else () for i, r in enumerate(k.rows))
    heads[0] = AttentionHead(
        Affine(q.in_dim, keep, q.bias, q.denominator),
        Affine(k.in_dim, keep_k, k.bias, k.denominator),
        heads[0].value,
        heads[0].output,
    )
    return _with_heads(model, heads)


def collapse_embedding(model: Transformer, dataset: Dataset) -> Transformer:
    """The embedding keeps only the first n − 1 coordinates of a token (the others zero): the
    n context columns the attention reads have rank ≤ n − 1 (A2 fails)."""
    n = len(dataset.sequences[0]) - 1
    e = model.embed
    assert e is not None
    rows = tuple(tuple((j, c) for j, c in row if j < n - 1) for row in e.rows)
    return replace(model, embed=replace(e, rows=rows))


def _zero_outputs(heads) -> tuple[AttentionHead, ...]:
    return tuple(
        replace(h, output=Affine(h.output.in_dim, ((),) * h.output.out_dim, h.output.bias, 1))
        for h in heads
    )


def silence_read_head(model: Transformer, dataset: Dataset) -> Transformer:
    """The last head with a non-zero W_O has it zeroed: the head still attends and mixes its
    value vector, but nothing reads it — its features no longer reach the output (issue 26).
    The others are untouched; the honest build leaves a head unwritten only when the read-out
    needs none of its coordinates."""
    heads = list(_attention(model).heads)
    last = max(i for i, h in enumerate(heads) if any(h.output.rows))
    heads[last] = _zero_outputs([heads[last]])[0]
    return _with_heads(model, heads)


def dead_heads(model: Transformer, dataset: Dataset) -> Transformer:
    """W_O := 0 for every head: the attention adds nothing, the read lanes stay constant."""
    return _with_heads(model, _zero_outputs(_attention(model).heads))


def dead_heads_with_bypass(model: Transformer, dataset: Dataset) -> Transformer:
    """W_O := 0 with a bypass: every head's W_O zeroed and the embedding writes the query's
    first coordinate into every lane the read-out reads, so the output reaches the query
    through the attention sub-layer's skip connection (review r1, F2: with an affine fit of the
    labels there, the model memorized with dead attention)."""
    e, u = model.embed, model.unembed
    assert e is not None and u is not None
    read = {c for row in u.rows for c, _ in row}
    rows = tuple(((0, e.denominator),) if i in read else r for i, r in enumerate(e.rows))
    dead = _with_heads(model, _zero_outputs(_attention(model).heads))
    return replace(dead, embed=replace(e, rows=rows))


def open_mask(model: Transformer, dataset: Dataset) -> Transformer:
    """The query attends to itself (mask ``none``): not Theorem 1's model."""
    return replace(model, sublayers=(replace(_attention(model), mask="none"),))


def append_layer(model: Transformer, dataset: Dataset) -> Transformer:
    """A residual ReLU layer after the attention (it adds zero): a layer the checklist does
    not read."""
    width = model.embed.out_dim if model.embed else model.input_dim
    zero = Affine(width, ((),) * width, (0,) * width)
    return replace(model, sublayers=(*model.sublayers, MLP((zero, zero), residual=True)))


CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "mahdavi24": (
        CheckSpec(
            "mahdavi.assumptions",
            PAPER,
            "Theorem 1's hypotheses: n < d, A1 (any n queries independent), A2 (each context "
            "of rank n)",
            "the columns the attention reads — the data through the model's own embedding — "
            "satisfy A1 and A2 (exact ranks, Kruskal rank by subsets)",
            (
                Breaker(
                    "embedding collapsed to n − 1 coordinates",
                    "A2: the contexts the attention reads lose rank",
                    "mahdavi.assumptions",
                    model=collapse_embedding,
                ),
            ),
        ),
        CheckSpec(
            "mahdavi.feature_rank",
            PAPER,
            "Theorem 1 (the proof's high-rank representation)",
            "the features the output reads (row t: the value vectors W_V^h Σ_j a_hj^(t) X_j "
            "of the heads h whose U·W_O^h reaches the output, from the model's own attention) "
            "have rank T, so every label vector is reachable by a linear readout on them",
            (
                Breaker(
                    "head 0's key map zeroed",
                    "head 0's designed attention (it attends uniformly)",
                    "mahdavi.feature_rank",
                    model=zero_key,
                ),
                Breaker(
                    "head 1 duplicated from head 0",
                    "the heads' allocation of examples (two equal blocks)",
                    "mahdavi.feature_rank",
                    model=duplicate_head,
                ),
                Breaker(
                    "a head's W_O zeroed",
                    "the features the output reads: the last head it reads writes nothing",
                    "mahdavi.feature_rank",
                    model=silence_read_head,
                ),
            ),
        ),
        CheckSpec(
            "mahdavi.rank_ceiling",
            PAPER,
            "Proposition 2 (shared context: rank Z ≤ H(n − 1) + 1 for any weights)",
            "with one context shared by every example the measured rank and T stay within "
            "H(n − 1) + 1",
            (
                Breaker(
                    "the last head removed",
                    "one head's H(n − 1) share of the ceiling",
                    "mahdavi.rank_ceiling",
                    model=remove_head,
                ),
            ),
        ),
        CheckSpec(
            "mahdavi.capacity",
            PAPER,
            "Theorem 1: T = H(min(n, d_h) − 1) + 1",
            "T is within the capacity, with d_h of each head the rank of its score form "
            "W_Q^hᵀW_K^h (what its d_h rows can design)",
            (
                Breaker(
                    "head 0's score form cut to rank one",
                    "head 0's designed attention on its group (d_h = 1)",
                    "mahdavi.capacity",
                    model=rank_one_scores,
                ),
                Breaker(
                    "the last head removed",
                    "one head (H − 1 heads)",
                    "mahdavi.capacity",
                    model=remove_head,
                ),
            ),
        ),
        CheckSpec(
            "mahdavi.readout",
            PAPER,
            "Theorem 1's model MHA(e, E) = Σ_h softmax(·)·E W_V^h W_O^h (no skip connection)",
            "the read-out reads the stream only at lanes the input does not reach through the "
            "attention's skip connection (a dataflow cut on the non-zero weights), and at least "
            "one of them a head writes with W_O^h W_V^h ≠ 0",
            (
                Breaker(
                    "W_O := 0 with a bypass",
                    "the heads' part in the output (the query reaches it by the skip connection)",
                    "mahdavi.readout",
                    model=dead_heads_with_bypass,
                ),
                Breaker(
                    "W_O := 0",
                    "every head's output (the read lanes are constant)",
                    "mahdavi.readout",
                    model=dead_heads,
                ),
            ),
        ),
        CheckSpec(
            "mahdavi24.structure",
            PAPER,
            "Theorem 1's model: one multi-head attention layer, the query attending to its "
            "context only",
            "the model is one attention layer with mask 'context' and nothing after it",
            (
                Breaker(
                    "the mask opened",
                    "the query attends to itself",
                    "mahdavi24.structure",
                    model=open_mask,
                ),
                Breaker(
                    "a layer appended",
                    "a sub-layer the checklist would not read",
                    "mahdavi24.structure",
                    model=append_layer,
                ),
            ),
        ),
    ),
}


def example() -> Dataset:
    """9 examples sharing one context of n = 3 tokens in Q^6 (Proposition 2's regime, so the
    ceiling check runs), 3 classes: with 4 heads T = 4·2 + 1, the capacity and the ceiling."""
    return random_instance(9, 3, 6, 3, seed=1, shared_context=True)


# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {"mahdavi24": example}
EXAMPLE_OPTIONS: dict[str, dict] = {"mahdavi24": {"heads": 4}}
