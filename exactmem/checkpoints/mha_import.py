"""The attention architectures (``mahdavi24``, ``dana25``) saved as a plain
``torch.nn.MultiheadAttention`` state dict.

``nn.MultiheadAttention(E, H)`` stores ``in_proj_weight`` ``[3E, E]`` (the query, key and value
maps stacked, each split into H heads of d_h = E/H rows), ``in_proj_bias`` ``[3E]``,
``out_proj.weight`` ``[E, E]`` and ``out_proj.bias`` ``[E]``, and scales the scores by 1/√d_h.
The state dict may sit at the top of the file, under ``attn.`` or, for the attention of an
``nn.TransformerEncoderLayer``, under ``self_attn.`` (the encoder layer's feed-forward block and
norms are no part of these architectures: such tensors are refused by name).

Biases are read exactly. The IR's attention maps are linear (bias-free), so a checkpoint with
biases gets one more lane holding the constant 1, as ``madden24`` and ``gpt`` do: the query,
key and value maps read their biases there, the value map of head 0 carries the constant
through the softmax mixing (whose weights sum to 1) and the output map reads ``out_proj.bias``
from it, added once. Separate projections (``q_proj_weight``: ``kdim``/``vdim`` ≠ E) and
``add_bias_kv`` (``bias_k``, ``bias_v``) are not read (refused naming the tensor).
``add_zero_attn`` (a zero key and value appended to every sequence) leaves no tensor in the
state dict: a checkpoint is read as built without it, unless its ``__metadata__`` says
``add_zero_attn`` is true — refused by name, never read as something else.

``mahdavi24``: input vectors in Q^E; the query (last) attends to its context; the logits are
the attention's E outputs (C = E). ``dana25``: ``embed.weight`` ``[N, E]``, ``pos.weight``
``[S, E]``, the attention with its skip connection, ``unembed.weight`` ``[C, E]``, read at the
last position.
"""

from __future__ import annotations

import math

from exactmem.core.errors import InputError
from exactmem.core.model import Affine, Attention, AttentionHead, Transformer

__all__ = ["import_mha", "refuse_flags"]

# constructor flags that change the function but leave no tensor: their metadata spellings of
# "off" (anything else is refused by name)
_OFF = ("false", "False", "0")


def refuse_flags(file_meta: dict, where: str) -> None:
    """Refuse a checkpoint whose ``__metadata__`` says it was saved from an
    ``nn.MultiheadAttention(..., add_zero_attn=True)``: the zero key and value column it appends
    is not part of the IR's attention."""
    raw = file_meta.get("add_zero_attn")
    if raw is not None and str(raw) not in _OFF:
        raise InputError(
            f"{where}: __metadata__ add_zero_attn = {str(raw)[:20]!r}: a zero key and value "
            "appended to every sequence (nn.MultiheadAttention's add_zero_attn) is not "
            "implemented; only add_zero_attn = false is read"
        )


def import_mha(ts, arch: str, meta: dict, heads: int | None, prefix: str) -> Transformer:
    """The exact model of an ``nn.MultiheadAttention`` checkpoint of ``arch`` (module
    docstring); ``heads``: ``--heads`` or ``__metadata__`` ``n_head`` (not in the shapes)."""
    from exactmem.checkpoints.tensors import (
        _carrying_one,
        _cols,
        _embedding_with_one,
        _place,
        _positions,
        _rows,
        _transpose,
        affine_biased,
        affine_of,
    )

    if f"{prefix}q_proj_weight" in ts.tensors:
        raise InputError(
            f"{ts.where}: tensor '{prefix}q_proj_weight': separate query/key/value projections "
            "(kdim or vdim other than embed_dim) are not read"
        )
    w = ts.take(f"{prefix}in_proj_weight", (None, None))
    three_e, d = w.shape
    if three_e != 3 * d:
        raise InputError(
            f"{ts.where}: tensor '{prefix}in_proj_weight': shape {list(w.shape)}, expected "
            f"[{3 * d}, {d}] (query, key and value of embed_dim {d} stacked)"
        )
    name = f"{prefix}in_proj_bias"
    b = ts.take(name, (3 * d,)) if name in ts.tensors else None
    ow = ts.take(f"{prefix}out_proj.weight", (d, d))
    name = f"{prefix}out_proj.bias"
    ob = ts.take(name, (d,)) if name in ts.tensors else None
    if heads is None or heads < 1 or d % heads:
        raise InputError(
            f"{ts.where}: nn.MultiheadAttention's head count is not in its shapes: give --heads H "
            f"(or __metadata__ n_head) dividing embed_dim = {d} (got {heads})"
        )
    dh = d // heads
    root = math.isqrt(dh)
    square = root * root == dh
    biased = b is not None or ob is not None
    qkv = affine_of(w) if b is None else affine_biased(w, b)
    proj = affine_of(ow) if ob is None else affine_biased(ow, ob)
    if arch == "mahdavi24":
        out_row, width = d, 2 * d + biased  # input lanes, logit lanes, the constant
    else:
        emb = ts.take("embed.weight", (None, d))
        pos = ts.take("pos.weight", (None, d))
        out_row, width = 0, d + biased  # the skip connection: the output adds to the input
    one = width - 1 if biased else None
    attn_heads = []
    for h in range(heads):
        lo = h * dh
        value = _place(_rows(qkv, 2 * d + lo, 2 * d + lo + dh), width, one=one)
        if h == 0 and ob is not None and one is not None:  # out_proj.bias, added once
            value = _carrying_one(value, one)
            out = _place(_cols(proj, lo, lo + dh, True), dh + 1, row=out_row, rows=width, one=dh)
        else:
            out = _place(_cols(proj, lo, lo + dh, False), dh, row=out_row, rows=width)
        attn_heads.append(
            AttentionHead(
                _place(_rows(qkv, lo, lo + dh, root if square else 1), width, one=one),
                _place(_rows(qkv, d + lo, d + lo + dh), width, one=one),
                value,
                out,
            )
        )
    scale = 1 if square else dh
    options = meta["options"]
    options.update(
        {
            "heads": heads,
            "form": f"nn.MultiheadAttention ({prefix or 'top level'})",
            "score_scale": f"1/{root} (exact)" if square else f"1/sqrt({dh}) (Arb)",
            "biases": "read through a constant lane" if biased else "none",
        }
    )
    if arch == "mahdavi24":
        lanes = (
            tuple(f"x{i}" for i in range(d))
            + tuple(f"logit{c}" for c in range(d))
            + (("one",) if biased else ())
        )
        rows = tuple(((i, 1),) for i in range(d)) + ((),) * (width - d)
        bias = (0,) * (width - 1) + ((1,) if biased else (0,))
        embed = Affine(d, rows, bias, 1, lanes)
        unembed = Affine(width, tuple(((d + c, 1),) for c in range(d)), (0,) * d)
        attention = Attention(tuple(attn_heads), "softmax", "mha", "context", scale)
        return Transformer(d, (attention,), embed, unembed, meta)
    N = emb.shape[0]
    embed = _embedding_with_one(emb, N, width) if biased else _transpose(affine_of(emb), ())
    unembed = _place(affine_of(ts.take("unembed.weight", (None, d))), width)
    attention = Attention(tuple(attn_heads), "softmax", "aot", "none", scale)
    return Transformer(N, (_positions(pos, d, width), attention), embed, unembed, meta, True)
