"""Models derived from a model's attention layer, whose outputs are the quantities an attention
checklist reads — evaluated by the trusted evaluators, never by a checklist's own arithmetic.

A checklist of an attention construction reads what a head *mixes*: Mahdavi et al. 2024's
features Σ_j a_hj X_j (the attention-weighted columns a head's value map reads), Dana et al.
2025's W_O^h W_V^h A_h(t) beside the skip term, Madden et al. 2024's attention output (the
head's contribution, for injectivity) and GELU features of the last-position output. Each is
the output of a model that keeps the original's embedding, positional tables and query and key
maps (so the attention weights are the original's, for every score mode and mask) and only
re-routes what the heads write into lanes of their own:
the evaluator that runs the model runs these too (:mod:`exactmem.evaluate.reference` exactly,
:mod:`exactmem.evaluate.softmax` on Arb balls), with one semantics.
"""

from __future__ import annotations

from dataclasses import replace

from gmpy2 import mpq

from exactmem.checks.certificate import ChecklistStructureError
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    PositionalEncoding,
    Transformer,
)

__all__ = ["attention_inputs_model", "gelu_features_model", "mixture_model", "stream_width"]


def stream_width(model: Transformer) -> int:
    """The width of the stream after the embedding."""
    return model.embed.out_dim if model.embed else model.input_dim


def _widened(a: Affine, width: int) -> Affine:
    """``a`` reading a stream widened to ``width`` lanes (the new lanes unread)."""
    return replace(a, in_dim=width, names=())


def _lanes(in_dim: int, take: range) -> Affine:
    """The map reading lanes ``take`` of a stream of ``in_dim`` lanes."""
    return Affine(in_dim, tuple(((j, 1),) for j in take), (0,) * len(take))


def _placement(in_dim: int, width: int, at: int) -> Affine:
    """Q^in_dim → Q^width writing its input into lanes at … at + in_dim − 1 (zero elsewhere)."""
    rows: list[tuple[tuple[int, int], ...]] = [()] * width
    for j in range(in_dim):
        rows[at + j] = ((j, 1),)
    return Affine(in_dim, tuple(rows), (0,) * width)


def _embedding(model: Transformer, extra: int) -> Affine:
    """The model's embedding (the identity if it has none) with ``extra`` zero lanes after."""
    e = model.embed if model.embed is not None else _lanes(model.input_dim, range(model.input_dim))
    return Affine(e.in_dim, e.rows + ((),) * extra, e.bias + (0,) * extra, e.denominator)


def _front(model: Transformer, att: Attention, extra: int) -> list:
    """The sub-layers before ``att`` (positional tables only), widened by ``extra`` zero lanes."""
    at = model.sublayers.index(att)
    front = []
    for s in model.sublayers[:at]:
        if not isinstance(s, PositionalEncoding):
            raise ChecklistStructureError("only positional tables may precede the attention")
        pad = (mpq(0),) * extra
        front.append(PositionalEncoding(tuple(tuple(r) + pad for r in s.table), s.label))
    return front


def _placed(a: Affine, width: int, at: int) -> Affine:
    """``a`` writing its outputs into lanes at … at + a.out_dim − 1 of ``width`` (zero
    elsewhere)."""
    rows = ((),) * at + a.rows + ((),) * (width - at - a.out_dim)
    return Affine(a.in_dim, rows, (0,) * width, a.denominator)


def mixture_model(
    model: Transformer,
    att: Attention,
    *,
    values: bool,
    keep_stream: bool,
    outputs: bool = False,
):
    """The model up to ``att`` whose head h writes into a block of new lanes of its own what it
    mixes: Σ_j a_hj X_j of the columns X_j it reads (``values=False``: the identity in place of
    its value map), Σ_j a_hj W_V^h X_j (``values=True``) or, with ``outputs`` too,
    W_O^h Σ_j a_hj W_V^h X_j — what the head adds to the stream, so a head whose W_O^h W_V^h
    is 0 contributes a block of zeros (review r1, F5). The unembedding reads the blocks, after
    the stream (the skip term) with ``keep_stream``. The attention weights a_hj are the
    original's: the query and key maps, score mode and mask are kept, and they read the
    original lanes only."""
    if outputs and not values:
        raise ValueError("outputs=True applies W_O after the value map: it needs values=True")
    w = stream_width(model)
    blocks = [
        w if not values else (h.output.out_dim if outputs else h.value.out_dim) for h in att.heads
    ]
    width = w + sum(blocks)
    heads, at = [], w
    for h, b in zip(att.heads, blocks, strict=True):
        value = _widened(h.value, width) if values else _lanes(width, range(w))
        heads.append(
            AttentionHead(
                _widened(h.query, width),
                _widened(h.key, width),
                value,
                _placed(h.output, width, at) if outputs else _placement(b, width, at),
            )
        )
        at += b
    mixing = Attention(tuple(heads), att.score, att.label, att.mask, att.scale)
    read = range(0 if keep_stream else w, width)
    return Transformer(
        model.input_dim,
        (*_front(model, att, width - w), mixing),
        _embedding(model, width - w),
        _lanes(width, read),
        {},
        model.token_inputs,
    )


def attention_inputs_model(model: Transformer, att: Attention) -> Transformer:
    """The model up to (not including) ``att``: its outputs are the columns ``att`` reads."""
    return Transformer(
        model.input_dim, tuple(_front(model, att, 0)), model.embed, None, {}, model.token_inputs
    )


def gelu_features_model(front: Transformer, first: Affine, activation: str) -> Transformer:
    """``front`` followed by σ(first·h + b): the FNN's first layer and its activation, read out
    by the identity (an MLP applies σ after every layer but its last)."""
    m = first.out_dim
    mlp = MLP((first, _lanes(m, range(m))), residual=False, label="features", activation=activation)
    return Transformer(
        front.input_dim, (*front.sublayers, mlp), front.embed, None, {}, front.token_inputs
    )
