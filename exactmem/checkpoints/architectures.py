"""Trained checkpoints as exact models: the tensor names of each supported architecture and how
its weights become the IR (:mod:`exactmem.core.model`).

Every weight of the checkpoint is read as the exact dyadic rational its bits encode
(:mod:`exactmem.checkpoints.safetensors_io`); nothing is rounded. Every tensor of the file must be
used
(an unknown name is an error, not ignored), every named tensor must be there with the shape the
others imply, and each error names the tensor. Linear maps follow PyTorch's ``nn.Linear``
convention: ``weight`` has shape ``[out, in]``; embedding tables ``nn.Embedding``'s
``[tokens, width]``.

Attention scores of the per-head tensor names (``attn.{h}.query.weight``, …) are
``(W_K x)ᵀ(W_Q y)`` exactly: a model trained with scores scaled by ``1/√d_h`` folds the scale
into its query weights before saving, or is saved as ``nn.MultiheadAttention`` (which scales).

``mahdavi24`` — Mahdavi, Liao & Thrampoulidis 2024: one multi-head softmax attention layer on
input vectors in Q^d; a sequence is the context tokens followed by the query, the query attends
to its context only, and the logits are ``Σ_h W_O^h W_V^h E softmax(Eᵀ W_K^hᵀ W_Q^h e)``:

* ``attn.{h}.query.weight`` ``[d_h, d]``, ``attn.{h}.key.weight`` ``[d_h, d]``,
* ``attn.{h}.value.weight`` ``[d_v, d]``, ``attn.{h}.output.weight`` ``[C, d_v]``,

for heads h = 0 … H − 1.

``dana25`` — Dana, Pydi & Chevaleyre 2025: an attention-only Transformer on token ids: token and
positional embeddings, one multi-head softmax attention layer with its skip connection, read at
the last position through the unembedding, ``W_U (x_S + Σ_h W_O^h W_V^h X softmax(Xᵀ W_K^hᵀ
W_Q^h x_S))``:

* ``embed.weight`` ``[N, d]`` (row t embeds token t), ``pos.weight`` ``[S, d]`` (row k is added
  at position k; sequences have length S),
* ``attn.{h}.query.weight`` ``[d_h, d]``, ``attn.{h}.key.weight`` ``[d_h, d]``,
  ``attn.{h}.value.weight`` ``[d_v, d]``, ``attn.{h}.output.weight`` ``[d, d_v]``,
* ``unembed.weight`` ``[C, d]``.

A causal mask changes nothing here: only the last position is read, after one attention layer.

``ks25`` — the experimental model of Kajitsuka & Sato 2025 (their eq. (165)) on token ids: an
embedding of width m, L residual ReLU feed-forward blocks x + W₂ ReLU(W₁x + b₁) + b₂, one
uniform-attention layer with its skip connection x + W_O W_V (mean of the tokens), L more
blocks, a linear readout W_U x + b_U at the last position:

* ``embed.weight`` ``[N, m]``,
* ``ff1.{i}.fc.weight`` ``[q, m]``, ``ff1.{i}.fc.bias`` ``[q]``, ``ff1.{i}.proj.weight``
  ``[m, q]``, ``ff1.{i}.proj.bias`` ``[m]`` for i = 0 … L − 1, and the same under ``ff2``,
* ``attn.value.weight`` ``[s, m]``, ``attn.output.weight`` ``[m, s]``,
* ``unembed.weight`` ``[C, m]``, ``unembed.bias`` ``[C]``.

Every function of it is rational (ReLU, weights exactly 1/n): the exact evaluators run it.

``madden24`` — the one-layer decoder of Madden, Fox & Thrampoulidis 2024 on token ids:
embedding plus positional encoding, causal softmax attention *without* a skip connection, an
FNN ``W₂ GELU(W₁ h + b₁) + b₂`` read at the last position (its outputs are the logits):

* ``embed.weight`` ``[N, d]``, ``pos.weight`` ``[S, d]`` (the encoding as trained, e.g.
  sinusoidal, given as its table),
* ``attn.{h}.query.weight`` ``[d_h, d]``, ``attn.{h}.key.weight`` ``[d_h, d]``,
  ``attn.{h}.value.weight`` ``[d_v, d]``, each with an optional ``.bias``;
  ``attn.{h}.output.weight`` ``[d, d_v]`` and an optional ``attn.output.bias`` ``[d]`` (added
  once, after the sum of the heads),
* ``fnn.fc.weight`` ``[m, d]``, ``fnn.fc.bias`` ``[m]``, ``fnn.proj.weight`` ``[C, m]``,
  ``fnn.proj.bias`` ``[C]`` (biases optional).

In the IR the stream has 2d + 1 lanes: the input in the first d, the attention's output written
into the next d (so nothing is added to it), which is all the FNN reads, and the constant 1
(attention maps are linear in the IR: their biases are read from that lane).

``gpt`` — a GPT-style pre-norm decoder with nanoGPT's tensor names: blocks
x + Attn(LN₁(x)), x + MLP(LN₂(x)) with causal multi-head attention (scores scaled by
1/√d_h) and a GELU MLP, a final layer norm and the unembedding, tied to the token embedding
when ``lm_head.weight`` is absent:

* ``transformer.wte.weight`` ``[V, d]``, ``transformer.wpe.weight`` ``[S, d]``,
* per block i: ``transformer.h.{i}.ln_1.weight``, ``.bias`` ``[d]``;
  ``transformer.h.{i}.attn.c_attn.weight`` ``[3d, d]`` and ``.bias`` ``[3d]`` (query, key,
  value stacked, each split into H heads of d/H); ``transformer.h.{i}.attn.c_proj.weight``
  ``[d, d]``, ``.bias``; ``transformer.h.{i}.ln_2.*``; ``transformer.h.{i}.mlp.c_fc.weight``
  ``[4d, d]`` (any hidden width), ``.bias``; ``transformer.h.{i}.mlp.c_proj.weight``
  ``[d, 4d]``, ``.bias``,
* ``transformer.ln_f.weight``, ``.bias`` ``[d]``; ``lm_head.weight`` ``[V, d]`` (optional).

The number of heads H is not in the shapes: ``heads`` (``--heads``) or the header's
``__metadata__`` entry ``n_head`` (1 to 6 ASCII digits). The 1/√d_h score scale is folded into
the query weights exactly when d_h is a square, and is otherwise the attention's ``scale``
(enclosed on Arb balls). Absent biases (nanoGPT's ``bias=False``), the tied weight stored as
``lm_head.weight`` and the ``attn.bias`` causal-mask buffers are read as
:mod:`exactmem.checkpoints.gpt_import` says.

``gpt2`` — Hugging Face GPT-2 as ``save_pretrained`` writes it (a folder: ``config.json`` and
the weights, sharded or not; :mod:`exactmem.checkpoints.checkpoint_files`,
:mod:`exactmem.checkpoints.gpt_import`).

``mahdavi24`` and ``dana25`` also read a ``torch.nn.MultiheadAttention`` state dict in place of
the per-head tensors (:mod:`exactmem.checkpoints.mha_import`). Layer norms use eps = 1/100000
(PyTorch's default 1e-5) unless the metadata gives ``ln_eps`` (an exact decimal or fraction,
read as every number of a file is: ASCII, within ``--max-digits`` and ``--max-exponent``,
never cut). In the IR the stream has 2d + 1 lanes: the residual in the first d, each layer
norm writes its normalisation into the next d (a branch layer norm), which is what attention,
MLP and unembedding read, and the constant 1 for the attention biases; they write back into
the first d.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gmpy2 import mpq

from exactmem.checkpoints.safetensors_io import DyadicTensor
from exactmem.checkpoints.tensors import (
    _OUTPUT,
    _carrying_one,
    _charge_rationals,
    _embedding_with_one,
    _Output,
    _place,
    _positions,
    _Tensors,
    _transpose,
    _widen,
    affine_biased,
    affine_of,
)
from exactmem.core.errors import InputError
from exactmem.core.exact import parse_rational
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    PositionalEncoding,
    Transformer,
)

__all__ = ["ARCHITECTURES", "affine_of", "import_checkpoint"]


def _head(ts: _Tensors, h: int, d: int, out: int | None):
    """Head h's four maps on a stream of width d (output map of ``out`` rows, or the stream)."""
    q = ts.take(f"attn.{h}.query.weight", (None, d))
    k = ts.take(f"attn.{h}.key.weight", (q.shape[0], d))
    v = ts.take(f"attn.{h}.value.weight", (None, d))
    o = ts.take(f"attn.{h}.output.weight", (out, v.shape[0]))
    return q, k, v, o


def _mahdavi(ts: _Tensors, meta: dict) -> Transformer:
    H = ts.heads()
    d = ts.peek("attn.0.query.weight", 2)[1]
    C = ts.peek("attn.0.output.weight", 2)[0]
    width = d + C
    lanes = tuple(f"x{i}" for i in range(d)) + tuple(f"logit{c}" for c in range(C))
    heads = []
    for h in range(H):
        q, k, v, o = _head(ts, h, d, C)
        heads.append(
            AttentionHead(
                _widen(affine_of(q), width),
                _widen(affine_of(k), width),
                _widen(affine_of(v), width),
                _widen(affine_of(o), o.shape[1], before=d),
            )
        )
    embed = Affine(d, tuple(((i, 1),) for i in range(d)) + ((),) * C, (0,) * width, 1, lanes)
    unembed = Affine(width, tuple(((d + c, 1),) for c in range(C)), (0,) * C)
    attention = Attention(tuple(heads), "softmax", "mha", "context")
    return Transformer(d, (attention,), embed, unembed, meta)


def _dana(ts: _Tensors, meta: dict) -> Transformer:
    emb = ts.take("embed.weight", (None, None))
    N, d = emb.shape
    pos = ts.take("pos.weight", (None, d))
    H = ts.heads()
    heads = []
    for h in range(H):
        q, k, v, o = _head(ts, h, d, d)
        heads.append(AttentionHead(*(affine_of(t) for t in (q, k, v, o))))
    unembed = affine_of(ts.take("unembed.weight", (None, d)))
    table = affine_of(emb)  # [N, d]: row t is token t's embedding; the IR's E_in is d × N
    embed = _transpose(table, names=())
    _charge_rationals(pos)
    positions = PositionalEncoding(
        tuple(tuple(pos.value(k * d + i) for i in range(d)) for k in range(pos.shape[0])), "pos"
    )
    attention = Attention(tuple(heads), "softmax", "aot")
    return Transformer(N, (positions, attention), embed, unembed, meta, token_inputs=True)


def _heads(heads: int | None, file_meta: dict, where: str) -> int | None:
    """The head count: ``--heads``, else the metadata's ``n_head`` — ASCII digits only
    (``"²"`` and ``"٣"`` are digits to :meth:`str.isdigit` and :func:`int`, not to a file)."""
    if heads is not None:
        return heads
    raw = file_meta.get("n_head")
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 1 <= len(raw) <= 6:
        raise InputError(
            f"{where}: __metadata__ n_head = {raw[:20]!r} is not a head count (1 to 6 ASCII digits)"
        )
    return int(raw)


def _eps(file_meta: dict, where: str) -> mpq | None:
    """The metadata's ``ln_eps``, read as every number of a file is
    (:func:`exactmem.core.exact.parse_rational`: exact, ASCII, within ``--max-digits`` and
    ``--max-exponent``; a value too long is refused, never cut)."""
    raw = file_meta.get("ln_eps")
    if raw is None:
        return None
    eps = parse_rational(raw, f"{where}: __metadata__ ln_eps")
    if not eps > 0:
        raise InputError(f"{where}: __metadata__ ln_eps must be positive, got {eps}")
    return eps


def _optional_bias(ts: _Tensors, name: str, rows: int) -> DyadicTensor | None:
    return ts.take(name, (rows,)) if name in ts.tensors else None


def _map(ts: _Tensors, name: str, cols: int, rows: int | None = None) -> Affine:
    """``name.weight`` (and ``name.bias`` when present) as an exact affine map."""
    w = ts.take(f"{name}.weight", (rows, cols))
    b = _optional_bias(ts, f"{name}.bias", w.shape[0])
    return affine_of(w) if b is None else affine_biased(w, b)


def _madden(ts: _Tensors, meta: dict) -> Transformer:
    emb = ts.take("embed.weight", (None, None))
    N, d = emb.shape
    pos = ts.take("pos.weight", (None, d))
    H = ts.heads()
    width, one = 2 * d + 1, 2 * d
    heads = []
    for h in range(H):
        q = _map(ts, f"attn.{h}.query", d)
        k = _map(ts, f"attn.{h}.key", d, q.out_dim)
        v = _place(_map(ts, f"attn.{h}.value", d), width, one=one)
        w = ts.take(f"attn.{h}.output.weight", (d, v.out_dim))
        bias = _optional_bias(ts, "attn.output.bias", d) if h == 0 else None  # added once
        if bias is None:
            o = _place(affine_of(w), v.out_dim, row=d, rows=width)
        else:
            o = _place(affine_biased(w, bias), v.out_dim + 1, row=d, rows=width, one=v.out_dim)
            v = _carrying_one(v, one)
        heads.append(AttentionHead(_place(q, width, one=one), _place(k, width, one=one), v, o))
    attention = Attention(tuple(heads), "softmax", "attn", "causal")
    fc = _map(ts, "fnn.fc", d)
    proj = _map(ts, "fnn.proj", fc.out_dim)
    fnn = MLP((_place(fc, width, col=d), proj), residual=False, label="fnn", activation="gelu")
    embed = _embedding_with_one(emb, N, width)
    return Transformer(
        N, (_positions(pos, d, width), attention, fnn), embed, None, meta, token_inputs=True
    )


def _gpt(ts: _Tensors, meta: dict, heads: int | None = None, eps: mpq | None = None):
    """nanoGPT's decoder (:mod:`exactmem.checkpoints.gpt_import`): ``nn.Linear`` layout, erf
    GELU."""
    from exactmem.checkpoints.gpt_import import GptForm, import_gpt

    form = GptForm(heads, mpq(1, 100000) if eps is None else eps)
    return import_gpt(ts, meta, form)


def _gpt2(ts: _Tensors, meta: dict, config, heads: int | None = None) -> Transformer:
    """Hugging Face GPT-2 (:mod:`exactmem.checkpoints.gpt_import`): Conv1D layout,
    ``config.json``."""
    from exactmem.checkpoints.checkpoint_files import gpt2_config
    from exactmem.checkpoints.gpt_import import GptForm, import_gpt

    if config is None:
        raise InputError(
            f"{ts.where}: --arch gpt2 reads the config.json beside the weights: give the folder "
            "save_pretrained wrote"
        )
    c = gpt2_config(*config)
    if heads is not None and heads != c.n_head:
        raise InputError(f"{ts.where}: --heads {heads}, but config.json n_head = {c.n_head}")
    prefix = "transformer." if any(n.startswith("transformer.") for n in ts.tensors) else ""
    form = GptForm(
        c.n_head,
        c.eps,
        c.activation,
        conv1d=True,
        prefix=prefix,
        tied=c.tied,
        scale_weights=c.scale_attn_weights,
        by_layer=c.by_layer,
        sizes={
            "n_embd": c.n_embd,
            "n_layer": c.n_layer,
            "n_positions": c.n_positions,
            "n_inner": c.n_inner,
            "vocab_size": c.vocab_size,
        },
    )
    meta["options"]["model"] = "GPT2LMHeadModel" if prefix else "GPT2Model"
    if not prefix and "lm_head.weight" not in ts.tensors and c.tied:
        form.notes.append(
            "GPT2Model has no head: the logits are read through the tied token embedding, as "
            "GPT2LMHeadModel's"
        )
    return import_gpt(ts, meta, form)


def _ks_blocks(ts: _Tensors, stack: str, m: int) -> list[MLP]:
    blocks = []
    i = 0
    while f"{stack}.{i}.fc.weight" in ts.tensors:
        fc = ts.take(f"{stack}.{i}.fc.weight", (None, m))
        q = fc.shape[0]
        first = affine_biased(fc, ts.take(f"{stack}.{i}.fc.bias", (q,)))
        proj = ts.take(f"{stack}.{i}.proj.weight", (m, q))
        second = affine_biased(proj, ts.take(f"{stack}.{i}.proj.bias", (m,)))
        blocks.append(MLP((first, second), residual=True, label=f"{stack}.{i}"))
        i += 1
    return blocks


def _ks(ts: _Tensors, meta: dict) -> Transformer:
    emb = ts.take("embed.weight", (None, None))
    N, m = emb.shape
    ff1 = _ks_blocks(ts, "ff1", m)
    ff2 = _ks_blocks(ts, "ff2", m)
    if len(ff1) != len(ff2):
        raise InputError(
            f"{ts.where}: {len(ff1)} blocks ff1.* but {len(ff2)} blocks ff2.* (the model has "
            "L of each)"
        )
    value = ts.take("attn.value.weight", (None, m))
    output = ts.take("attn.output.weight", (m, value.shape[0]))
    zero = Affine(m, ((),), (0,))
    head = AttentionHead(zero, zero, affine_of(value), affine_of(output))
    attention = Attention((head,), "uniform", "ua")
    W = ts.take("unembed.weight", (None, m))
    unembed = affine_biased(W, ts.take("unembed.bias", (W.shape[0],)))
    embed = _transpose(affine_of(emb), names=())
    sublayers = (*ff1, attention, *ff2)
    return Transformer(N, sublayers, embed, unembed, meta, token_inputs=True)


ARCHITECTURES: dict[str, tuple[str, Callable[..., Transformer]]] = {
    "mahdavi24": ("Mahdavi et al. 2024: one multi-head attention layer on vectors", _mahdavi),
    "dana25": ("Dana et al. 2025: attention-only Transformer on token ids", _dana),
    "ks25": ("Kajitsuka & Sato 2025 (eq. 165): ReLU blocks, uniform attention, ReLU blocks", _ks),
    "madden24": ("Madden et al. 2024: one-layer decoder, causal attention, GELU FNN", _madden),
    "gpt": ("GPT-style pre-norm decoder (nanoGPT names): LayerNorm, causal MHA, GELU", _gpt),
    "gpt2": ("Hugging Face GPT-2 as save_pretrained writes it (Conv1D, config.json)", _gpt2),
}


def detect_arch(config: dict | None) -> str | None:
    """The architecture a checkpoint names itself: ``gpt2`` when its ``config.json`` says
    ``model_type: gpt2``; else None (give ``--arch``)."""
    return "gpt2" if isinstance(config, dict) and config.get("model_type") == "gpt2" else None


def import_checkpoint(
    path: str | Path, arch: str | None, *, heads: int | None = None
) -> Transformer:
    """The model of a safetensors checkpoint of architecture ``arch`` (see the module
    docstring), every weight exact: a file, or a folder written by Hugging Face
    ``save_pretrained`` (``model.safetensors`` or its shards, ``config.json``;
    :mod:`exactmem.checkpoints.checkpoint_files`). ``arch`` None: read from ``config.json``. Its
    ``meta``
    records the architecture and the checkpoint's dtypes as labels. ``heads``: the number of
    heads of a ``gpt`` checkpoint (else its ``__metadata__`` entry ``n_head``) or of an
    attention checkpoint saved as ``nn.MultiheadAttention``."""
    from exactmem.checkpoints.checkpoint_files import read_checkpoint

    if arch is not None and arch not in ARCHITECTURES:
        raise InputError(f"--arch {arch!r} is unknown; available: {', '.join(ARCHITECTURES)}")
    ckpt = read_checkpoint(path)
    if arch is None:
        arch = detect_arch(ckpt.config)
        if arch is None:
            raise InputError(
                f"{ckpt.where}: no config.json names its architecture: give --arch "
                f"({', '.join(ARCHITECTURES)})"
            )
    elif ckpt.config is not None and arch != "gpt2":
        raise InputError(
            f"{ckpt.config_where}: --arch {arch} reads no config.json, whose settings would be "
            "ignored (a save_pretrained folder is --arch gpt2)"
        )
    ts = _Tensors(ckpt.tensors, f"{ckpt.where} (--arch {arch})")
    token = _OUTPUT.set(_Output(ts.where, ckpt.size))
    try:
        config = None if ckpt.config is None else (ckpt.config, ckpt.config_where)
        return _import(ts, arch, heads, ckpt.meta, ckpt.tensors, config)
    finally:
        _OUTPUT.reset(token)


def _import(
    ts: _Tensors, arch: str, heads: int | None, file_meta: dict, tensors: dict, config=None
):
    meta = {
        "construction": f"imported:{arch}",
        "theorem": "trained weights, imported exactly (no construction's promise)",
        "options": {"arch": arch, "dtypes": sorted({t.dtype for t in tensors.values()})},
    }
    if arch == "gpt":
        model = _gpt(ts, meta, _heads(heads, file_meta, ts.where), _eps(file_meta, ts.where))
    elif arch == "gpt2":
        model = _gpt2(ts, meta, config, heads)
    elif arch in ("mahdavi24", "dana25") and _mha_prefix(ts) is not None:
        from exactmem.checkpoints.mha_import import import_mha, refuse_flags

        refuse_flags(file_meta, ts.where)

        model = import_mha(ts, arch, meta, _heads(heads, file_meta, ts.where), _mha_prefix(ts))
    else:
        if heads is not None:
            raise InputError(
                f"--heads is for --arch gpt and nn.MultiheadAttention checkpoints (the heads of "
                f"{arch} are its tensors)"
            )
        model = ARCHITECTURES[arch][1](ts, meta)
    ts.finish()
    return model


def _mha_prefix(ts: _Tensors) -> str | None:
    """Where a ``torch.nn.MultiheadAttention`` state dict sits in the checkpoint (``""``,
    ``attn.`` or an encoder layer's ``self_attn.``), or None."""
    for prefix in ("", "attn.", "self_attn."):
        if f"{prefix}in_proj_weight" in ts.tensors or f"{prefix}q_proj_weight" in ts.tensors:
            return prefix
    return None
