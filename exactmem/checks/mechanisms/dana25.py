"""The mechanisms the dana25 checklist tests (Dana, Pydi & Chevaleyre 2025, AISTATS), each
check with its breakers.

Every breaker changes the honest built model on the IR so that one mechanism of Theorem 1 is
gone: Lemma 2's rank of the features [W_O^h W_V^h A_h(t)]_h ++ x_S(t) (a head duplicated: two
equal blocks; a head's query zeroed: it averages the context uniformly; every W_O zeroed: the
skip term alone), the count H·d_h + d (a head removed; a value map cut to rank one; every W_O
zeroed), the attention-only architecture (a layer appended, the causal mask).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.core.model import MLP, Affine, Attention, Transformer
from exactmem.datasets.attention_data import random_associations
from exactmem.datasets.dataset import Dataset

PAPER = "Dana, Pydi & Chevaleyre 2025 (AISTATS, arXiv 2411.10115)"


def _attention(model: Transformer) -> Attention:
    att = model.sublayers[-1]
    assert isinstance(att, Attention)
    return att


def _with(model: Transformer, **changes) -> Transformer:
    att = replace(_attention(model), **changes)
    return replace(model, sublayers=(*model.sublayers[:-1], att))


def duplicate_head(model: Transformer, dataset: Dataset) -> Transformer:
    """Head 1 replaced by a copy of head 0: their feature blocks are equal."""
    heads = list(_attention(model).heads)
    heads[1] = heads[0]
    return _with(model, heads=tuple(heads))


def zero_query(model: Transformer, dataset: Dataset) -> Transformer:
    """Every head's query map zeroed: all scores 0, every head averages the context uniformly
    (token averaging), so the heads' features are images of one mean."""
    heads = []
    for h in _attention(model).heads:
        q = h.query
        heads.append(replace(h, query=Affine(q.in_dim, ((),) * q.out_dim, q.bias, 1)))
    return _with(model, heads=tuple(heads))


def remove_head(model: Transformer, dataset: Dataset) -> Transformer:
    """The last head removed: H − 1 heads."""
    return _with(model, heads=_attention(model).heads[:-1])


def rank_one_value(model: Transformer, dataset: Dataset) -> Transformer:
    """Head 0's value map keeps its first row only (its other rows zero): d_h = 1 for it."""
    heads = list(_attention(model).heads)
    v = heads[0].value
    rows = (v.rows[0],) + ((),) * (v.out_dim - 1)
    heads[0] = replace(heads[0], value=replace(v, rows=rows))
    return _with(model, heads=tuple(heads))


def dead_heads(model: Transformer, dataset: Dataset) -> Transformer:
    """W_O := 0 with a bypass: every head's output map zeroed, the skip term x_S(t) the only
    path to the unembedding (review r1, F5: with the last tokens' embeddings re-chosen, the
    skip term alone fitted the labels while the heads' W_V^h A_h were credited with rank)."""
    heads = tuple(
        replace(h, output=Affine(h.output.in_dim, ((),) * h.output.out_dim, h.output.bias, 1))
        for h in _attention(model).heads
    )
    return _with(model, heads=heads)


def heads_beside_unembedding(model: Transformer, dataset: Dataset) -> Transformer:
    """The stream widened by a copy of its lanes that the unembedding does not read, every
    head's W_O moved whole onto the copy: the heads attend and write what they wrote, with the
    same rank, but only where nothing reads them (the skip term the only path read)."""
    att = _attention(model)
    e, u = model.embed, model.unembed
    assert e is not None and u is not None
    w = e.out_dim
    heads = []
    for h in att.heads:
        o = h.output
        out = Affine(o.in_dim, ((),) * w + o.rows, (0,) * (2 * w), o.denominator)
        heads.append(
            replace(
                h,
                query=replace(h.query, in_dim=2 * w, names=()),
                key=replace(h.key, in_dim=2 * w, names=()),
                value=replace(h.value, in_dim=2 * w, names=()),
                output=out,
            )
        )
    front = [
        replace(s, table=tuple(tuple(r) + (type(r[0])(0),) * w for r in s.table))
        for s in model.sublayers[:-1]
    ]
    return replace(
        model,
        embed=replace(e, rows=e.rows + ((),) * w, bias=e.bias + (0,) * w, names=()),
        unembed=replace(u, in_dim=2 * w, names=()),
        sublayers=(*front, replace(att, heads=tuple(heads))),
    )


def causal_mask(model: Transformer, dataset: Dataset) -> Transformer:
    """The causal mask: not every position is a key of every query (not the paper's layer)."""
    return _with(model, mask="causal")


def append_layer(model: Transformer, dataset: Dataset) -> Transformer:
    """A residual ReLU layer (adding zero) after the attention: not attention-only."""
    width = model.embed.out_dim if model.embed else model.input_dim
    zero = Affine(width, ((),) * width, (0,) * width)
    return replace(model, sublayers=(*model.sublayers, MLP((zero, zero), residual=True)))


CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "dana25": (
        CheckSpec(
            "dana.feature_rank",
            PAPER,
            "Lemma 2 (rank of the attention features), the heart of Theorem 1",
            "the features [W_O^h W_V^h A_h(t)]_h ++ x_S(t) of the T₀ distinct sequences have "
            "rank T₀ "
            "(certified on Arb balls), so a linear readout reaches every target",
            (
                Breaker(
                    "head 1 duplicated from head 0",
                    "the heads' independent features (two equal blocks)",
                    "dana.feature_rank",
                    model=duplicate_head,
                ),
                Breaker(
                    "every head's query zeroed",
                    "the softmax's dependence on the context (uniform averaging)",
                    "dana.feature_rank",
                    model=zero_query,
                ),
                Breaker(
                    "W_O := 0 with a bypass",
                    "every head's term W_O^h W_V^h A_h (the skip term the only path)",
                    "dana.feature_rank",
                    model=dead_heads,
                ),
                Breaker(
                    "the heads write only lanes the unembedding does not read",
                    "every head's term on the lanes read (the skip term the only path read)",
                    "dana.feature_rank",
                    model=heads_beside_unembedding,
                ),
            ),
        ),
        CheckSpec(
            "dana.capacity",
            PAPER,
            "Theorem 1 / Corollary 1: H·d_h + d associations",
            "T₀ ≤ Σ_h rank W_O^h W_V^h + rank of the skip terms e(t) + pos_S, all exact from "
            "the weights",
            (
                Breaker(
                    "the last head removed",
                    "one head's d_h features",
                    "dana.capacity",
                    model=remove_head,
                ),
                Breaker(
                    "head 0's value map cut to rank one",
                    "d_h − 1 of head 0's features",
                    "dana.capacity",
                    model=rank_one_value,
                ),
                Breaker(
                    "W_O := 0 with a bypass",
                    "every head's d_h features (rank W_O^h W_V^h = 0)",
                    "dana.capacity",
                    model=dead_heads,
                ),
            ),
        ),
        CheckSpec(
            "dana25.structure",
            PAPER,
            "§2's model: token ids, embeddings, positions, one attention layer with skip",
            "the model is token ids → embedding → positional tables → one softmax attention "
            "layer (every position a key) → unembedding, and nothing else",
            (
                Breaker(
                    "a layer appended",
                    "the attention-only architecture",
                    "dana25.structure",
                    model=append_layer,
                ),
                Breaker(
                    "the causal mask",
                    "every position a key",
                    "dana25.structure",
                    model=causal_mask,
                ),
            ),
        ),
    ),
}


def example() -> Dataset:
    """12 = 5·2 + 2 associations of 2 tokens over 10 (Corollary 1 with d = d_h = 2, H = 5)."""
    return random_associations(10, 2, 12, seed=12)


# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {"dana25": example}
EXAMPLE_OPTIONS: dict[str, dict] = {"dana25": {"d": 2, "head_dim": 2, "heads": 5}}
