"""GPT-style pre-norm decoders as their libraries save them: nanoGPT's ``model.py`` (``--arch
gpt``) and Hugging Face's ``GPT2LMHeadModel`` / ``GPT2Model`` (``--arch gpt2``).

Both are blocks x + Attn(LN₁(x)), x + MLP(LN₂(x)) with causal multi-head attention, a final
layer norm and the unembedding (Radford et al. 2019; nanoGPT re-implements the same network).
They differ in how the weights are saved, and every difference is read, never guessed:

* **Layout.** nanoGPT's ``nn.Linear`` stores ``[out, in]``; Hugging Face's ``Conv1D`` stores
  ``[in, out]`` (``c_attn.weight`` is ``[d, 3d]``). ``--arch gpt2`` reads Conv1D's layout and
  a tensor in the other one is refused naming Conv1D. A *square* matrix (``attn.c_proj``)
  has the same shape either way: a hand conversion that transposed it alone is caught only by
  comparing the certified logits with the framework's.
* **Names.** ``GPT2LMHeadModel`` prefixes ``transformer.``; ``GPT2Model`` does not.
* **Configuration.** ``--arch gpt2`` reads ``config.json``
(:mod:`exactmem.checkpoints.checkpoint_files`):
  the head count, ``layer_norm_epsilon`` (exact), the activation (``gelu_new`` is the tanh
  approximation, a function of its own in the IR), whether the head is tied, the score scale
  flags. nanoGPT has no config: ``--heads`` or ``__metadata__`` ``n_head``, eps 1e-5, erf GELU.
* **Biases.** nanoGPT's ``bias=False`` saves no LayerNorm and no linear bias: they are read as
  0, and the import says so (``meta["options"]["absent_biases"]``).
* **The tied weight.** Stored as ``transformer.wte.weight``, or once as ``lm_head.weight``
  (what ``safetensors.torch.save_model`` keeps of nanoGPT's shared tensor), or both.
* **Mask buffers.** nanoGPT's non-flash path registers ``attn.bias``, the causal mask, as a
  ``[1, 1, S, S]`` buffer (S the rows of ``wpe``): accepted after checking it is exactly the
  lower-triangular ones.

The score scale 1/√d_h is folded into the query rows exactly when d_h is a square, and is
otherwise the attention's ``scale`` field (scores divided by √d_h, enclosed by Arb).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from gmpy2 import mpq

from exactmem.checkpoints.safetensors_io import DyadicTensor
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, LayerNorm, Transformer

__all__ = ["GptForm", "import_gpt"]


@dataclass
class GptForm:
    """How a decoder checkpoint is saved (see the module docstring)."""

    heads: int | None
    eps: mpq = field(default_factory=lambda: mpq(1, 100000))
    activation: str = "gelu"
    conv1d: bool = False  # Hugging Face Conv1D: weights [in, out]
    prefix: str = "transformer."
    tied: bool | None = None  # None: nanoGPT (tied when lm_head.weight is absent)
    scale_weights: bool = True  # scores scaled by 1/√d_h
    by_layer: bool = False  # and by 1/(layer index + 1)
    sizes: dict = field(default_factory=dict)  # config.json's n_embd, n_layer, … to check
    notes: list = field(default_factory=list)  # what the import report says it read otherwise


def _transposed(t: DyadicTensor) -> DyadicTensor:
    rows, cols = t.shape
    return DyadicTensor(
        t.name,
        t.dtype,
        (cols, rows),
        t.mantissa.reshape(rows, cols).T.ravel(),
        t.exponent.reshape(rows, cols).T.ravel(),
    )


def _zeros(name: str, n: int) -> DyadicTensor:
    return DyadicTensor(name, "absent", (n,), np.zeros(n, np.int64), np.zeros(n, np.int64))


class _Reader:
    def __init__(self, ts, form: GptForm):
        self.ts, self.form = ts, form
        self.absent: list[str] = []  # the biases read as 0

    def weight(self, name: str, cols: int, rows: int | None) -> DyadicTensor:
        """``name`` as ``[out, in]`` (read from Conv1D's ``[in, out]`` under ``conv1d``)."""
        if not self.form.conv1d:
            return self.ts.take(name, (rows, cols))
        t = self.ts.tensors.get(name)
        if t is not None and (
            len(t.shape) != 2 or t.shape[0] != cols or rows is not None and t.shape[1] != rows
        ):
            flipped = len(t.shape) == 2 and t.shape[1] == cols and rows in (None, t.shape[0])
            raise InputError(
                f"{self.ts.where}: tensor {name!r}: shape {list(t.shape)}, expected "
                f"[{cols}, {'?' if rows is None else rows}]: Hugging Face Conv1D stores its "
                "weight as [in, out]"
                + (
                    "; this one is [out, in] (a hand conversion to nn.Linear's layout?)"
                    if flipped
                    else ""
                )
            )
        return _transposed(self.ts.take(name, (cols, rows)))

    def bias(self, name: str, rows: int) -> DyadicTensor:
        if name in self.ts.tensors:
            return self.ts.take(name, (rows,))
        self.absent.append(name)
        return _zeros(name, rows)

    def linear(self, name: str, cols: int, rows: int | None = None) -> Affine:
        from exactmem.checkpoints.tensors import affine_biased

        w = self.weight(f"{name}.weight", cols, rows)
        return affine_biased(w, self.bias(f"{name}.bias", w.shape[0]))

    def norm(self, name: str, d: int, label: str) -> LayerNorm:
        from exactmem.checkpoints.tensors import _charge_rationals

        gain = self.ts.take(f"{name}.weight", (d,))
        bias = self.bias(f"{name}.bias", d)
        _charge_rationals(gain)
        _charge_rationals(bias)
        return LayerNorm(
            tuple(gain.values()), tuple(bias.values()), self.form.eps, label, source=0, target=d
        )

    def mask(self, name: str, n: int) -> None:
        """nanoGPT's ``attn.bias`` buffer: exactly the causal mask over the ``n`` positions
        (its ``block_size``, the rows of ``wpe``), or refused."""
        t = self.ts.tensors.get(name)
        if t is None:
            return
        if t.shape != (1, 1, n, n):
            raise InputError(
                f"{self.ts.where}: tensor {name!r}: shape {list(t.shape)}, expected "
                f"[1, 1, {n}, {n}] (nanoGPT's causal-mask buffer over the {n} positions of wpe)"
            )
        values = np.ldexp(t.mantissa.astype(np.float64), t.exponent).reshape(n, n)  # exact
        causal = np.tril(np.ones((n, n)))
        if not np.array_equal(values, causal):
            i, j = np.argwhere(values != causal)[0]
            raise InputError(
                f"{self.ts.where}: tensor {name!r} is not the causal mask: entry [0, 0, {i}, {j}] "
                f"is {values[i, j]!r}, the causal mask has {causal[i, j]:g} (1 on and below the "
                "diagonal, 0 above)"
            )
        self.ts.take(name, t.shape)


def _embeddings(r: _Reader, p: str):
    """(token table, unembedding tensor, notes) by the tied-weight rules of the docstring."""
    ts, form = r.ts, r.form
    wte_name, head_name = f"{p}wte.weight", "lm_head.weight"
    has_wte, has_head = wte_name in ts.tensors, head_name in ts.tensors
    if not has_wte and has_head and form.tied is not False:
        head = ts.take(head_name, (None, None))
        return head, head, [f"token embedding read from {head_name} (tied)"]
    wte = ts.take(wte_name, (None, None))
    if form.tied is False:
        return wte, ts.take(head_name, wte.shape), ["untied head (config.json)"]
    if not has_head:
        return wte, wte, []
    head = ts.take(head_name, wte.shape)
    if form.tied and not (
        np.array_equal(head.mantissa, wte.mantissa) and np.array_equal(head.exponent, wte.exponent)
    ):
        raise InputError(
            f"{ts.where}: tensor {head_name!r} differs from {wte_name!r}, but config.json says "
            "tie_word_embeddings (the framework would use the embedding for both)"
        )
    return wte, head, []


def _check_size(ts, form: GptForm, key: str, got: int) -> None:
    want = form.sizes.get(key)
    if want is not None and want != got:
        raise InputError(f"{ts.where}: config.json {key} = {want}, but the tensors give {got}")


def import_gpt(ts, meta: dict, form: GptForm) -> Transformer:
    """The exact model of a nanoGPT or Hugging Face GPT-2 checkpoint (``ts``: the tensors,
    taken with their shapes checked, :class:`exactmem.checkpoints.tensors._Tensors`)."""
    from exactmem.checkpoints.tensors import (
        _carrying_one,
        _cols,
        _embedding_with_one,
        _place,
        _positions,
        _rows,
        affine_of,
    )

    r, p = _Reader(ts, form), form.prefix
    wte, head, notes = _embeddings(r, p)
    notes = [*form.notes, *notes]
    V, d = wte.shape
    wpe = ts.take(f"{p}wpe.weight", (None, d))
    H = form.heads
    if H is None or H < 1 or d % H:
        raise InputError(
            f"{ts.where}: the number of heads must divide d = {d} (got {H}; give --heads H or "
            "the __metadata__ entry n_head)"
        )
    dh = d // H
    root = math.isqrt(dh)
    square = root * root == dh
    width, one = 2 * d + 1, 2 * d
    sublayers: list = [_positions(wpe, d, width)]
    i = 0
    while f"{p}h.{i}.ln_1.weight" in ts.tensors:
        at = f"{p}h.{i}"
        sublayers.append(r.norm(f"{at}.ln_1", d, f"h.{i}.ln_1"))
        r.mask(f"{at}.attn.bias", wpe.shape[0])
        qkv = r.linear(f"{at}.attn.c_attn", d, 3 * d)
        proj = r.linear(f"{at}.attn.c_proj", d, d)
        fold = (root if square else 1) if form.scale_weights else 1
        fold *= i + 1 if form.by_layer else 1  # an exact integer: into the query rows
        attn_heads = []
        for h in range(H):
            lo = h * dh
            value = _place(_rows(qkv, 2 * d + lo, 2 * d + lo + dh), width, col=d, one=one)
            if h == 0:  # c_proj's bias, added once: read from the constant carried by head 0
                value = _carrying_one(value, one)
                out = _place(_cols(proj, lo, lo + dh, True), dh + 1, rows=width, one=dh)
            else:
                out = _place(_cols(proj, lo, lo + dh, False), dh, rows=width)
            attn_heads.append(
                AttentionHead(
                    _place(_rows(qkv, lo, lo + dh, fold), width, col=d, one=one),
                    _place(_rows(qkv, d + lo, d + lo + dh), width, col=d, one=one),
                    value,
                    out,
                )
            )
        scale = dh if form.scale_weights and not square else 1
        sublayers.append(Attention(tuple(attn_heads), "softmax", f"h.{i}.attn", "causal", scale))
        sublayers.append(r.norm(f"{at}.ln_2", d, f"h.{i}.ln_2"))
        fc = r.linear(f"{at}.mlp.c_fc", d)
        down = r.linear(f"{at}.mlp.c_proj", fc.out_dim, d)
        _check_size(ts, form, "n_inner", fc.out_dim)
        sublayers.append(
            MLP(
                (_place(fc, width, col=d), _place(down, fc.out_dim, rows=width)),
                residual=True,
                label=f"h.{i}.mlp",
                activation=form.activation,
            )
        )
        i += 1
    if i == 0:
        raise InputError(f"{ts.where}: no blocks (tensor '{p}h.0.ln_1.weight')")
    for key, got in (("n_embd", d), ("n_layer", i), ("n_positions", wpe.shape[0])):
        _check_size(ts, form, key, got)
    _check_size(ts, form, "vocab_size", V)
    sublayers.append(r.norm(f"{p}ln_f", d, "ln_f"))
    unembed = _place(affine_of(head), width, col=d)
    embed = _embedding_with_one(wte, V, width)
    options = meta["options"]
    options["tied"] = head is wte
    options["heads"] = H
    options["activation"] = form.activation
    options["score_scale"] = (
        "none"
        if not form.scale_weights
        else (f"1/{root} (exact)" if square else f"1/sqrt({dh}) (Arb)")
    ) + (", 1/(layer + 1)" if form.by_layer else "")
    options["eps"] = str(form.eps)
    if r.absent:
        notes.append(
            f"{len(r.absent)} biases absent, read as 0 (e.g. {r.absent[0]}; bias=False)"
            if len(r.absent) > 1
            else f"bias {r.absent[0]} absent, read as 0"
        )
    options["absent_biases"] = len(r.absent)
    options["notes"] = notes
    options["layout"] = "Conv1D [in, out]" if form.conv1d else "nn.Linear [out, in]"
    return Transformer(V, tuple(sublayers), embed, unembed, meta, token_inputs=True)
