"""The trained networks, one per architecture of :mod:`exactmem.checkpoints.architectures`, each
with
``tensors()``: its weights as float32 NumPy arrays under that architecture's tensor names, so
``exactmem import --arch ARCH`` reads the saved checkpoint. Scores are ``(W_K x)ᵀ(W_Q y)``
without a ``1/√d_h`` factor (nothing to fold before saving: the saved bits are the trained
ones).

Imported by :mod:`exactmem.train.experiments` only after :func:`exactmem.train.require_torch`."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["DanaNet", "KSNet", "MaddenNet", "MahdaviNet", "sinusoidal"]


def _param(*shape: int, scale: float) -> nn.Parameter:
    return nn.Parameter(torch.randn(*shape) * scale)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float32)


def _heads_attend(q, k, v, o, X, y):
    """Σ_h o_h v_h Xᵀ softmax(X k_hᵀ q_h y): X [B, n, d] keys, y [B, d] the query token."""
    qy = torch.einsum("hed,bd->bhe", q, y)
    kx = torch.einsum("hed,bnd->bhne", k, X)
    weights = torch.softmax(torch.einsum("bhne,bhe->bhn", kx, qy), dim=-1)
    vx = torch.einsum("hed,bnd->bhne", v, X)
    mixed = torch.einsum("bhn,bhne->bhe", weights, vx)
    return torch.einsum("hoe,bhe->bo", o, mixed)


class MahdaviNet(nn.Module):
    """``mahdavi24``: one multi-head softmax attention layer; the query (last token) attends to
    its context only; logits Σ_h W_O^h W_V^h E softmax(Eᵀ W_K^hᵀ W_Q^h e)."""

    arch = "mahdavi24"

    def __init__(self, d: int, heads: int, head_dim: int, classes: int, scale: float = 1.0):
        super().__init__()
        s = scale / d
        self.q = _param(heads, head_dim, d, scale=s)
        self.k = _param(heads, head_dim, d, scale=s)
        self.v = _param(heads, head_dim, d, scale=s)
        self.o = _param(heads, classes, head_dim, scale=1 / head_dim)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return _heads_attend(self.q, self.k, self.v, self.o, X[:, :-1], X[:, -1])

    def tensors(self) -> dict[str, np.ndarray]:
        out = {}
        for h in range(self.q.shape[0]):
            for name, p in (("query", self.q), ("key", self.k), ("value", self.v)):
                out[f"attn.{h}.{name}.weight"] = _np(p[h])
            out[f"attn.{h}.output.weight"] = _np(self.o[h])
        return out


class DanaNet(nn.Module):
    """``dana25``: token and positional embeddings, one multi-head softmax attention layer with
    its skip connection, read at the last position through the unembedding."""

    arch = "dana25"

    def __init__(self, tokens: int, length: int, d: int, heads: int, head_dim: int, classes: int):
        super().__init__()
        self.embed = _param(tokens, d, scale=1.0)
        self.pos = _param(length, d, scale=1.0)
        s = d**-0.5
        self.q = _param(heads, head_dim, d, scale=s)
        self.k = _param(heads, head_dim, d, scale=s)
        self.v = _param(heads, head_dim, d, scale=s)
        self.o = _param(heads, d, head_dim, scale=head_dim**-0.5)
        self.unembed = _param(classes, d, scale=s)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        X = self.embed[ids] + self.pos[None, : ids.shape[1]]
        last = X[:, -1]
        return (last + _heads_attend(self.q, self.k, self.v, self.o, X, last)) @ self.unembed.T

    def tensors(self) -> dict[str, np.ndarray]:
        out = {"embed.weight": _np(self.embed), "pos.weight": _np(self.pos)}
        for h in range(self.q.shape[0]):
            for name, p in (("query", self.q), ("key", self.k), ("value", self.v)):
                out[f"attn.{h}.{name}.weight"] = _np(p[h])
            out[f"attn.{h}.output.weight"] = _np(self.o[h])
        out["unembed.weight"] = _np(self.unembed)
        return out


class KSNet(nn.Module):
    """``ks25``: Kajitsuka & Sato 2025's experimental model (their eq. (165)): a token
    embedding, ``blocks`` residual ReLU feed-forward blocks, one uniform-attention layer with
    its skip connection, ``blocks`` more feed-forward blocks, a linear readout at the last
    position."""

    arch = "ks25"

    def __init__(self, tokens: int, width: int, hidden: int, blocks: int, classes: int):
        super().__init__()
        self.embed = nn.Embedding(tokens, width)
        self.ff1 = nn.ModuleList(_block(width, hidden) for _ in range(blocks))
        self.value = nn.Linear(width, width, bias=False)
        self.output = nn.Linear(width, width, bias=False)
        self.ff2 = nn.ModuleList(_block(width, hidden) for _ in range(blocks))
        self.unembed = nn.Linear(width, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        X = self.embed(ids)
        for b in self.ff1:
            X = X + b(X)
        X = X + self.output(self.value(X.mean(dim=1, keepdim=True)))
        for b in self.ff2:
            X = X + b(X)
        return self.unembed(X[:, -1])

    def tensors(self) -> dict[str, np.ndarray]:
        out = {"embed.weight": _np(self.embed.weight)}
        for stack, blocks in (("ff1", self.ff1), ("ff2", self.ff2)):
            for i, b in enumerate(blocks):
                out[f"{stack}.{i}.fc.weight"] = _np(b[0].weight)
                out[f"{stack}.{i}.fc.bias"] = _np(b[0].bias)
                out[f"{stack}.{i}.proj.weight"] = _np(b[2].weight)
                out[f"{stack}.{i}.proj.bias"] = _np(b[2].bias)
        out["attn.value.weight"] = _np(self.value.weight)
        out["attn.output.weight"] = _np(self.output.weight)
        out["unembed.weight"] = _np(self.unembed.weight)
        out["unembed.bias"] = _np(self.unembed.bias)
        return out


def _block(width: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width))


def sinusoidal(length: int, d: int) -> torch.Tensor:
    """The standard sinusoidal positional encoding (Vaswani et al. 2017), ``[length, d]``."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float32) / d)
    table = torch.zeros(length, d)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : d // 2]
    return table


class MaddenNet(nn.Module):
    """``madden24``: Madden, Fox & Thrampoulidis 2024's one-layer decoder — embedding plus a
    fixed sinusoidal encoding, one causal softmax attention head with biases and no skip
    connection, an FNN Linear(d → m), GELU, Linear(m → C), read at the last position."""

    arch = "madden24"

    def __init__(self, tokens: int, length: int, d: int, width: int, classes: int):
        super().__init__()
        self.embed = nn.Embedding(tokens, d)
        self.register_buffer("pos", sinusoidal(length, d))
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.output = nn.Linear(d, d)
        self.fc = nn.Linear(d, width)
        self.proj = nn.Linear(width, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        X = self.embed(ids) + self.pos[None, : ids.shape[1]]
        last = X[:, -1]  # causal: the last position sees every position
        scores = torch.einsum("bne,be->bn", self.key(X), self.query(last))
        mixed = torch.einsum("bn,bne->be", torch.softmax(scores, dim=-1), self.value(X))
        return self.proj(nn.functional.gelu(self.fc(self.output(mixed))))

    def tensors(self) -> dict[str, np.ndarray]:
        out = {"embed.weight": _np(self.embed.weight), "pos.weight": _np(self.pos)}
        for name in ("query", "key", "value"):
            lin = getattr(self, name)
            out[f"attn.0.{name}.weight"] = _np(lin.weight)
            out[f"attn.0.{name}.bias"] = _np(lin.bias)
        out["attn.0.output.weight"] = _np(self.output.weight)
        out["attn.output.bias"] = _np(self.output.bias)
        out["fnn.fc.weight"], out["fnn.fc.bias"] = _np(self.fc.weight), _np(self.fc.bias)
        out["fnn.proj.weight"], out["fnn.proj.bias"] = _np(self.proj.weight), _np(self.proj.bias)
        return out
