"""A float64 evaluation of a model: what a trained model's own framework would say, printed
beside a certificate and labelled as float. It decides nothing (the verdict comes from the exact
or Arb evaluation); its use is to show where the two disagree.

Every weight is rounded to float64 (exact for the float32, float16 and bfloat16 weights of an
imported checkpoint), then the model runs as in :mod:`exactmem.evaluate.softmax`: token-wise
MLPs and affine maps, attention with uniform or softmax (max-subtracted) weights, hardmax with
ties averaged, positional tables added; the causal mask and GELU (with the error function) as the
ball evaluator has them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from gmpy2 import mpq

from exactmem.core.model import MLP, Affine, Attention, LayerNorm, PositionalEncoding, Transformer
from exactmem.core.weight_rows import BlockRows

__all__ = ["as_float", "float_logits"]


def as_float(q) -> float:
    """The nearest double to an exact rational, ±inf beyond the doubles' range (as a float
    framework would hold it) rather than an OverflowError."""
    try:
        return float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def _matrix(a: Affine) -> tuple[np.ndarray, np.ndarray]:
    """(W, b) of ``a`` in float64: each entry the nearest double to coefficient/denominator."""
    w = np.zeros((a.out_dim, a.in_dim))
    for i, row in enumerate(a.rows):
        for j, c in row:
            w[i, j] = as_float(mpq(c, a.denominator))
    b = np.array([as_float(mpq(x, a.denominator)) for x in a.bias])
    return w, b


class _Block:
    """A block map's weights (:class:`exactmem.core.weight_rows.BlockRows`) in float64 as a block:
    ``W·z`` is ``block·z[cols_at]`` placed at ``rows_at`` (the other rows of W are 0)."""

    def __init__(self, a: Affine, scaled: np.ndarray):
        self.scaled, self.rows_at, self.cols_at, self.out = (
            scaled,
            a.rows.rows_at,
            a.rows.cols_at,
            a.out_dim,
        )

    def __matmul__(self, z: np.ndarray) -> np.ndarray:
        y = np.zeros((self.out, z.shape[1]))
        y[self.rows_at] = self.scaled @ z[self.cols_at]
        return y


def _block_matrix(a: Affine) -> _Block | None:
    """W of a block map, or None: block / denominator is the nearest double to
    coefficient/denominator when it is exact, which is checked — a power-of-two denominator
    below 2^1000 whose quotients neither underflow nor lose a bit (w·den == block again)."""
    den = a.denominator
    if den & (den - 1) or den.bit_length() > 1000:
        return None
    block = a.rows.block
    scaled = block / float(den)
    if not (scaled * float(den) == block).all():
        return None
    return _Block(a, scaled)


class _Cache(dict):
    """Float matrices by the identity of their map (hashing a large map's rows would cost as
    much as converting it); the map is kept so that its id stays its own."""

    def get_matrix(self, a: Affine) -> tuple[np.ndarray | _Block, np.ndarray]:
        hit = self.get(id(a))
        if hit is None and isinstance(a.rows, BlockRows) and (w := _block_matrix(a)) is not None:
            bias = np.array([as_float(mpq(x, a.denominator)) for x in a.bias])
            hit = self[id(a)] = (a, w, bias)
        if hit is None:
            hit = self[id(a)] = (a, *_matrix(a))
        return hit[1], hit[2]


def _apply(cache: _Cache, a: Affine, z: np.ndarray) -> np.ndarray:
    """``a`` applied to every column of ``z`` (shape ``[width, positions]``)."""
    w, b = cache.get_matrix(a)
    return w @ z + b[:, None]


def _attention(cache: _Cache, att: Attention, z: np.ndarray) -> np.ndarray:
    n = z.shape[1]
    keys_at = np.arange(n - 1) if att.mask == "context" and n > 1 else np.arange(n)
    out = z.copy()
    # causal: query position j sees the keys 0..j only
    seen = keys_at[:, None] <= np.arange(n)[None, :] if att.mask == "causal" else None
    for h in att.heads:
        q, k, v = (_apply(cache, m, z) for m in (h.query, h.key, h.value))
        scores = k[:, keys_at].T @ q  # [keys, queries]
        if getattr(att, "scale", 1) != 1:
            scores = scores / math.sqrt(att.scale)
        if seen is not None:
            scores = np.where(seen, scores, -np.inf)
        if att.score == "uniform":
            weights = np.full_like(scores, 1 / len(keys_at))
            if seen is not None:
                weights = seen / seen.sum(axis=0, keepdims=True)
        elif att.score == "softmax":
            e = np.exp(scores - scores.max(axis=0, keepdims=True))
            weights = e / e.sum(axis=0, keepdims=True)
        else:
            top = scores == scores.max(axis=0, keepdims=True)
            weights = top / top.sum(axis=0, keepdims=True)
        out = out + _apply(cache, h.output, v[:, keys_at] @ weights)
    return out


_erf = np.vectorize(math.erf, otypes=[float])


def _gelu(h: np.ndarray) -> np.ndarray:
    """GELU x·Φ(x) with the error function (as ``torch.nn.GELU()``), float64."""
    return 0.5 * h * (1 + _erf(h / math.sqrt(2)))


def _gelu_tanh(h: np.ndarray) -> np.ndarray:
    """GELU's tanh approximation ½x(1 + tanh(√(2/π)(x + 0.044715x³))) (as Hugging Face's
    ``gelu_new`` and ``torch.nn.GELU(approximate="tanh")``), float64."""
    return 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))


_ACTIVATIONS = {"gelu": _gelu, "gelu_tanh": _gelu_tanh, "relu": lambda h: np.maximum(h, 0)}


def _mlp(cache: _Cache, mlp: MLP, z: np.ndarray) -> np.ndarray:
    h = z
    act = _ACTIVATIONS[getattr(mlp, "activation", "relu")]
    for i, layer in enumerate(mlp.layers):
        h = _apply(cache, layer, h)
        if i < len(mlp.layers) - 1:
            h = act(h)
    return z + h if mlp.residual else h


def float_logits(
    model: Transformer,
    vocab: Sequence[Sequence[mpq]],
    sequences: Sequence[Sequence[int]],
    *,
    positions: str = "last",
) -> np.ndarray:
    """The float64 outputs at the last position of every sequence, shape ``[N, outputs]`` —
    or, with ``positions="all"``, at every position, shape ``[N, n, outputs]`` (inf and nan
    where float64 overflows, as a float framework would say: no warnings)."""
    with np.errstate(all="ignore"):
        return _float_logits(model, vocab, sequences, positions)


def _float_logits(model, vocab, sequences, positions: str = "last") -> np.ndarray:
    cache = _Cache()
    table = None if model.token_inputs else np.array([[as_float(x) for x in v] for v in vocab])
    rows = []
    for seq in sequences:
        if model.token_inputs:
            z = np.zeros((model.input_dim, len(seq)))
            z[list(seq), np.arange(len(seq))] = 1.0
        else:
            z = table[list(seq)].T
        if model.embed:
            z = _apply(cache, model.embed, z)
        for sub in model.sublayers:
            if isinstance(sub, MLP):
                z = _mlp(cache, sub, z)
            elif isinstance(sub, PositionalEncoding):
                z = z + np.array([[as_float(x) for x in r] for r in sub.table[: z.shape[1]]]).T
            elif isinstance(sub, Attention):
                z = _attention(cache, sub, z)
            elif isinstance(sub, LayerNorm):
                z = layer_norm_floats(sub, z)
            else:
                raise ValueError(f"no float semantics for {type(sub).__name__}")
        if model.unembed:
            z = _apply(cache, model.unembed, z)
        rows.append(z.T if positions == "all" else z[:, -1])
    return np.array(rows)


def layer_norm_floats(ln: LayerNorm, z: np.ndarray) -> np.ndarray:
    """float64 layer norm of every column of ``z`` (shape ``[width, positions]``)."""
    if ln.source is None or ln.target is None:
        return _floats(ln, z)
    out = z.copy()
    out[ln.target : ln.target + ln.width] = _floats(ln, z[ln.source : ln.source + ln.width])
    return out


def _floats(ln: LayerNorm, z: np.ndarray) -> np.ndarray:
    gain = np.array([as_float(g) for g in ln.gain])[:, None]
    bias = np.array([as_float(b) for b in ln.bias])[:, None]
    centred = z - z.mean(axis=0, keepdims=True)
    var = (centred * centred).mean(axis=0, keepdims=True)
    return gain * centred / np.sqrt(var + as_float(ln.eps)) + bias
