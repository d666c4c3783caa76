"""Trained checkpoints as exact models: the tensor names of each supported architecture and how
its weights become the IR (:mod:`exactmem.model`).

Every weight of the checkpoint is read as the exact dyadic rational its bits encode
(:mod:`exactmem.safetensors_io`); nothing is rounded. Every tensor of the file must be used
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
:mod:`exactmem.gpt_import` says.

``gpt2`` — Hugging Face GPT-2 as ``save_pretrained`` writes it (a folder: ``config.json`` and
the weights, sharded or not; :mod:`exactmem.checkpoint_files`, :mod:`exactmem.gpt_import`).

``mahdavi24`` and ``dana25`` also read a ``torch.nn.MultiheadAttention`` state dict in place of
the per-head tensors (:mod:`exactmem.mha_import`). Layer norms use eps = 1/100000
(PyTorch's default 1e-5) unless the metadata gives ``ln_eps`` (an exact decimal or fraction,
read as every number of a file is: ASCII, within ``--max-digits`` and ``--max-exponent``,
never cut). In the IR the stream has 2d + 1 lanes: the residual in the first d, each layer
norm writes its normalisation into the next d (a branch layer norm), which is what attention,
MLP and unembedding read, and the constant 1 for the attention biases; they write back into
the first d.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gmpy2 import mpq

from exactmem import limits
from exactmem.errors import InputError
from exactmem.exact import parse_rational
from exactmem.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    PositionalEncoding,
    Transformer,
)
from exactmem.safetensors_io import DyadicTensor
from exactmem.weight_rows import BlockRows, bit_length

__all__ = ["ARCHITECTURES", "affine_of", "import_checkpoint"]

_HEAD = re.compile(r"attn\.(0|[1-9][0-9]{0,5})\.(query|key|value|output)\.weight")


_ENTRY_TEXT = 8  # a weight's text beside its hex digits: [column, "0x…"],


@dataclass
class _Output:
    """The text the imported model's weights take, counted map by map as :func:`affine_of`
    makes them, against ``--max-bytes``: a map's weights share one power-of-two denominator,
    so a float64 map mixing subnormals (2^-1074) and huge values (2^1023) widens every weight
    to ~2100 bits — 525 hex digits for 8 bytes of checkpoint."""

    where: str
    source: int  # the checkpoint's bytes
    chars: int = 0

    def charge(self, chars: int) -> None:
        self.chars += chars
        cap = limits.current().max_bytes
        if self.chars > cap:
            raise InputError(
                f"{self.where}: the exact model's weights take at least {self.chars} bytes of "
                f"text, {self.chars / max(self.source, 1):.0f}× the checkpoint's {self.source} "
                f"bytes, more than the limit of {cap} (--max-bytes): the weights of each map "
                "share one power-of-two denominator, so tiny and huge values in one tensor "
                "widen all of them"
            )


_OUTPUT: ContextVar[_Output | None] = ContextVar("exactmem_import_output", default=None)


def _charge_rationals(t: DyadicTensor) -> None:
    """Count the text of ``t``'s values written one by one as rationals (a positional table,
    a layer norm's gain and bias): numerator and denominator, each in hex."""
    if (output := _OUTPUT.get()) is not None:
        m, e = t.mantissa, t.exponent
        bits = bit_length(m.astype(np.float64)) + np.abs(e)  # |m| < 2^53: exact
        output.charge(int(((bits + 3) // 4).sum()) + 2 * _ENTRY_TEXT * t.size)


CHUNK = 1 << 20  # weights converted at a time: the temporaries stay small beside the block


def _stripped(m: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(non-zero mask, m, e) with the mantissas' trailing zero bits moved into the exponents,
    so that the least common denominator is the least power of two."""
    nz = m != 0
    low = np.where(nz, np.abs(m) & -np.abs(m), 1)
    tz = np.round(np.log2(low.astype(np.float64))).astype(np.int64)
    return nz, m >> tz, e + tz


def affine_of(t: DyadicTensor, names: tuple[str, ...] = ()) -> Affine:
    """The bias-free linear map of a ``[out, in]`` weight tensor, exactly: integer coefficients
    over the least common power-of-two denominator."""
    if len(t.shape) != 2:
        raise InputError(f"tensor {t.name!r}: shape {list(t.shape)}, expected [out, in]")
    rows_n, cols_n = t.shape
    m, e = t.mantissa, t.exponent
    least = None
    for lo in range(0, m.size, CHUNK):
        nz, _, es = _stripped(m[lo : lo + CHUNK], e[lo : lo + CHUNK])
        if nz.any():
            low = int(es[nz].min())
            least = low if least is None else min(least, low)
    k = max(0, -least) if least is not None else 0
    # each coefficient m·2^(e + k) as a float64, exact while it stays finite (|m| < 2^53: the
    # significand of a float of at most 64 bits): one block (exactmem.weight_rows)
    block = np.empty(m.size)
    output = _OUTPUT.get()
    for lo in range(0, m.size, CHUNK):
        nz, ms, es = _stripped(m[lo : lo + CHUNK], e[lo : lo + CHUNK])
        shift = es + k
        if output is not None:  # counted before the next chunk is made
            bits = bit_length(ms[nz].astype(np.float64)) + shift[nz]  # |m| < 2^53: exact
            output.charge(int(((bits + 3) // 4).sum()) + _ENTRY_TEXT * int(nz.sum()))
        with np.errstate(over="ignore"):  # (inf: not a double, the tuples below keep it)
            block[lo : lo + CHUNK] = np.ldexp(ms.astype(np.float64), shift)
    if np.isfinite(block).all():
        rows_at = np.arange(rows_n)
        table = BlockRows(block.reshape(rows_n, cols_n), rows_at, np.arange(cols_n), rows_n)
        return Affine(cols_n, table, (0,) * rows_n, 1 << k, names)
    del block
    nz, m, e = _stripped(m, e)
    shift = e + k
    rows = []
    for i in range(rows_n):
        lo = i * cols_n
        cols = np.flatnonzero(nz[lo : lo + cols_n])
        rows.append(tuple((int(j), int(m[lo + j]) << int(shift[lo + j])) for j in cols))
    return Affine(cols_n, tuple(rows), (0,) * rows_n, 1 << k, names)


def affine_biased(w: DyadicTensor, b: DyadicTensor, names: tuple[str, ...] = ()) -> Affine:
    """``x ↦ w x + b`` exactly, over one power-of-two denominator (``w`` ``[out, in]``, ``b``
    ``[out]``): the bias is read as one more column of the weight."""
    out, cols = w.shape
    joined = DyadicTensor(
        w.name,
        w.dtype,
        (out, cols + 1),
        np.concatenate([w.mantissa.reshape(out, cols), b.mantissa.reshape(out, 1)], 1).ravel(),
        np.concatenate([w.exponent.reshape(out, cols), b.exponent.reshape(out, 1)], 1).ravel(),
    )
    a = affine_of(joined)
    if isinstance(a.rows, BlockRows):  # the last column of the block is the bias
        block = a.rows.block
        table = BlockRows(block[:, :cols], a.rows.rows_at, np.arange(cols), out)
        return Affine(cols, table, tuple(map(int, block[:, cols].tolist())), a.denominator, names)
    rows = tuple(tuple(t for t in row if t[0] < cols) for row in a.rows)
    bias = tuple(dict(row).get(cols, 0) for row in a.rows)
    return Affine(cols, rows, bias, a.denominator, names)


class _Tensors:
    """The checkpoint's tensors, each taken at most once with its shape checked; the names
    never taken are reported at the end."""

    def __init__(self, tensors: dict[str, DyadicTensor], where: str):
        self.tensors, self.where, self.used = tensors, where, set()

    def take(self, name: str, shape: tuple[int | None, ...]) -> DyadicTensor:
        t = self.tensors.get(name)
        if t is None:
            raise InputError(f"{self.where}: tensor {name!r} is missing")
        if len(t.shape) != len(shape) or any(
            want is not None and got != want for got, want in zip(t.shape, shape, strict=True)
        ):
            want = "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"
            raise InputError(
                f"{self.where}: tensor {name!r}: shape {list(t.shape)}, expected {want}"
            )
        if 0 in t.shape:
            raise InputError(f"{self.where}: tensor {name!r} is empty (shape {list(t.shape)})")
        self.used.add(name)
        return t

    def peek(self, name: str, rank: int) -> tuple[int, ...]:
        """The shape of tensor ``name`` (of ``rank`` dimensions), to size the others by."""
        t = self.tensors.get(name)
        if t is None:
            raise InputError(f"{self.where}: tensor {name!r} is missing")
        if len(t.shape) != rank or 0 in t.shape:  # (the reader refuses empty tensors too)
            raise InputError(
                f"{self.where}: tensor {name!r}: shape {list(t.shape)}, expected {rank} "
                "non-zero dimensions"
            )
        return t.shape

    def heads(self) -> int:
        found: dict[int, set[str]] = {}
        for name in self.tensors:
            if match := _HEAD.fullmatch(name):
                found.setdefault(int(match[1]), set()).add(match[2])
        if not found:
            raise InputError(f"{self.where}: no attention tensors attn.{{h}}.query.weight")
        count = max(found) + 1
        for h in range(count):
            missing = {"query", "key", "value", "output"} - found.get(h, set())
            if missing:
                raise InputError(
                    f"{self.where}: tensor 'attn.{h}.{sorted(missing)[0]}.weight' is missing "
                    f"(heads are numbered 0 … {count - 1})"
                )
        return count

    def finish(self) -> None:
        extra = sorted(set(self.tensors) - self.used)
        if extra:
            raise InputError(
                f"{self.where}: tensor {extra[0]!r} is not part of this architecture "
                f"({len(extra)} unused)"
            )


def _head(ts: _Tensors, h: int, d: int, out: int | None):
    """Head h's four maps on a stream of width d (output map of ``out`` rows, or the stream)."""
    q = ts.take(f"attn.{h}.query.weight", (None, d))
    k = ts.take(f"attn.{h}.key.weight", (q.shape[0], d))
    v = ts.take(f"attn.{h}.value.weight", (None, d))
    o = ts.take(f"attn.{h}.output.weight", (out, v.shape[0]))
    return q, k, v, o


def _widen(a: Affine, width: int, before: int = 0) -> Affine:
    """``a`` reading a stream of ``width`` columns (its own inputs first) and, with ``before``,
    writing below that many zero rows."""
    rows = ((),) * before + a.rows
    return Affine(width, rows, (0,) * len(rows), a.denominator)


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
    (:func:`exactmem.exact.parse_rational`: exact, ASCII, within ``--max-digits`` and
    ``--max-exponent``; a value too long is refused, never cut)."""
    raw = file_meta.get("ln_eps")
    if raw is None:
        return None
    eps = parse_rational(raw, f"{where}: __metadata__ ln_eps")
    if not eps > 0:
        raise InputError(f"{where}: __metadata__ ln_eps must be positive, got {eps}")
    return eps


def _transpose(a: Affine, names: tuple[str, ...]) -> Affine:
    if isinstance(a.rows, BlockRows):
        t = a.rows
        table = BlockRows(np.ascontiguousarray(t.block.T), t.cols_at, t.rows_at, a.in_dim)
        return Affine(a.out_dim, table, (0,) * a.in_dim, a.denominator, names)
    cols: list[list[tuple[int, int]]] = [[] for _ in range(a.in_dim)]
    for i, row in enumerate(a.rows):
        for j, c in row:
            cols[j].append((i, c))
    return Affine(a.out_dim, tuple(tuple(c) for c in cols), (0,) * a.in_dim, a.denominator, names)


def _optional_bias(ts: _Tensors, name: str, rows: int) -> DyadicTensor | None:
    return ts.take(name, (rows,)) if name in ts.tensors else None


def _map(ts: _Tensors, name: str, cols: int, rows: int | None = None) -> Affine:
    """``name.weight`` (and ``name.bias`` when present) as an exact affine map."""
    w = ts.take(f"{name}.weight", (rows, cols))
    b = _optional_bias(ts, f"{name}.bias", w.shape[0])
    return affine_of(w) if b is None else affine_biased(w, b)


def _place(
    a: Affine,
    width: int,
    col: int = 0,
    row: int = 0,
    rows: int | None = None,
    one: int | None = None,
) -> Affine:
    """``a`` on a stream of ``width`` lanes: reading from lane ``col`` on, writing from lane
    ``row`` on, into ``rows`` output lanes in all (the others zero). With ``one``, the bias
    becomes the coefficient of lane ``one``, which holds the constant 1: attention maps are
    linear in the IR, so an affine query, key, value or output map reads its bias there."""
    total = a.out_dim + row if rows is None else rows
    if isinstance(a.rows, BlockRows) and (
        placed_block := _place_block(a, width, col, row, total, one)
    ):
        return placed_block
    placed: list = [()] * total
    bias = [0] * total
    for i, r in enumerate(a.rows):
        entries = tuple((j + col, c) for j, c in r)
        if one is not None:
            entries += ((one, a.bias[i]),) if a.bias[i] else ()
        else:
            bias[row + i] = a.bias[i]
        placed[row + i] = entries
    return Affine(width, tuple(placed), tuple(bias), a.denominator)


def _place_block(
    a: Affine, width: int, col: int, row: int, total: int, one: int | None
) -> Affine | None:
    """:func:`_place` of a block map, kept one block: None where the bias cannot join it as
    column ``one`` (a row outside the block has a bias, or ``one`` is not after its columns)."""
    t = a.rows
    bias = [0] * total
    cols_at, block = t.cols_at + col, t.block
    if one is None:
        for i, b in enumerate(a.bias):
            bias[row + i] = b
    elif any(a.bias):
        if t.rows_at.size != a.out_dim or (cols_at.size and one <= cols_at[-1]):
            return None
        try:
            column = np.array([float(b) for b in a.bias])
        except OverflowError:
            return None
        if any(int(x) != b for x, b in zip(column.tolist(), a.bias, strict=True)):
            return None  # a bias of more than 53 significant bits: the tuples keep it
        block = np.concatenate([block, column[:, None]], axis=1)
        cols_at = np.append(cols_at, one)
    return Affine(
        width,
        BlockRows(block, t.rows_at + row, cols_at, total),
        tuple(bias),
        a.denominator,
    )


def _carrying_one(v: Affine, one: int) -> Affine:
    """Value map ``v`` with one more output, the constant lane ``one`` itself (softmax weights
    sum to 1, so it stays exactly 1 after mixing: the output map reads its bias there)."""
    if isinstance(v.rows, BlockRows) and _exact_float(v.denominator):
        t = v.rows
        q = int(np.searchsorted(t.cols_at, one))
        block, cols_at = t.block, t.cols_at
        if q == cols_at.size or cols_at[q] != one:  # lane `one` joins the block's columns
            block = np.insert(block, q, 0.0, axis=1)
            cols_at = np.insert(cols_at, q, one)
        extra = np.zeros((1, cols_at.size))
        extra[0, q] = float(v.denominator)
        table = BlockRows(
            np.concatenate([block, extra]), np.append(t.rows_at, v.out_dim), cols_at, v.out_dim + 1
        )
        return Affine(v.in_dim, table, (*v.bias, 0), v.denominator)
    return Affine(v.in_dim, (*v.rows, ((one, v.denominator),)), (*v.bias, 0), v.denominator)


def _exact_float(n: int) -> bool:
    try:
        return int(float(n)) == n
    except OverflowError:
        return False


def _embedding_with_one(emb: DyadicTensor, tokens: int, width: int) -> Affine:
    """The token table into the first lanes of a ``width``-lane stream whose last lane is the
    constant 1."""
    table = _place(_transpose(affine_of(emb), names=()), tokens, rows=width)
    bias = (*table.bias[:-1], table.denominator)
    return Affine(tokens, table.rows, bias, table.denominator)


def _positions(pos: DyadicTensor, d: int, width: int) -> PositionalEncoding:
    _charge_rationals(pos)
    return PositionalEncoding(
        tuple(
            tuple(pos.value(k * d + i) if i < d else mpq(0) for i in range(width))
            for k in range(pos.shape[0])
        ),
        "pos",
    )


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


def _rows(a: Affine, lo: int, hi: int, scale: int = 1) -> Affine:
    """Rows lo … hi − 1 of ``a``, divided by ``scale`` (exactly: a larger denominator)."""
    if isinstance(a.rows, BlockRows):
        t = a.rows
        p, q = np.searchsorted(t.rows_at, [lo, hi]).tolist()
        table = BlockRows(t.block[p:q], t.rows_at[p:q] - lo, t.cols_at, hi - lo)
        return Affine(a.in_dim, table, a.bias[lo:hi], a.denominator * scale)
    return Affine(a.in_dim, a.rows[lo:hi], a.bias[lo:hi], a.denominator * scale)


def _cols(a: Affine, lo: int, hi: int, with_bias: bool) -> Affine:
    """``a`` restricted to its input columns lo … hi − 1 (renumbered from 0), with or without
    its bias."""
    bias = a.bias if with_bias else (0,) * a.out_dim
    if isinstance(a.rows, BlockRows):
        t = a.rows
        p, q = np.searchsorted(t.cols_at, [lo, hi]).tolist()
        table = BlockRows(t.block[:, p:q], t.rows_at, t.cols_at[p:q] - lo, a.out_dim)
        return Affine(hi - lo, table, bias, a.denominator)
    rows = tuple(tuple((j - lo, c) for j, c in r if lo <= j < hi) for r in a.rows)
    bias = a.bias if with_bias else (0,) * a.out_dim
    return Affine(hi - lo, rows, bias, a.denominator)


def _gpt(ts: _Tensors, meta: dict, heads: int | None = None, eps: mpq | None = None):
    """nanoGPT's decoder (:mod:`exactmem.gpt_import`): ``nn.Linear`` layout, erf GELU."""
    from exactmem.gpt_import import GptForm, import_gpt

    form = GptForm(heads, mpq(1, 100000) if eps is None else eps)
    return import_gpt(ts, meta, form)


def _gpt2(ts: _Tensors, meta: dict, config, heads: int | None = None) -> Transformer:
    """Hugging Face GPT-2 (:mod:`exactmem.gpt_import`): Conv1D layout, ``config.json``."""
    from exactmem.checkpoint_files import gpt2_config
    from exactmem.gpt_import import GptForm, import_gpt

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
    :mod:`exactmem.checkpoint_files`). ``arch`` None: read from ``config.json``. Its ``meta``
    records the architecture and the checkpoint's dtypes as labels. ``heads``: the number of
    heads of a ``gpt`` checkpoint (else its ``__metadata__`` entry ``n_head``) or of an
    attention checkpoint saved as ``nn.MultiheadAttention``."""
    from exactmem.checkpoint_files import read_checkpoint

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
        from exactmem.mha_import import import_mha

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
