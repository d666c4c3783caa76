"""Write the tiny checkpoints of tests/data/checkpoints/ as their libraries save them, with the
framework's own float64 logits beside each (issue 29 point 7).

Needs PyTorch and Hugging Face transformers (``pip install -e '.[train]' transformers``); the
default test suite does not: it reads the files this script committed
(tests/test_checkpoints_real.py). Run from the repository root:

    python tests/data/checkpoints/make_checkpoints.py

Each folder holds the weights (float32, as saved), ``tokens.npy`` (int64 [n, T]: the
sequences), ``logits.npy`` (float64 [n, T, V], or [n, C] for the attention models: the logits
the framework computes after ``model.double()``, i.e. the function of the saved float32 weights
evaluated in float64) and, for ``mahdavi24``, ``vocab.npy`` (the integer input vectors).

* ``hf_gpt2_lm/`` — ``GPT2LMHeadModel.save_pretrained``: ``gelu_new`` (tanh GELU), d = 16,
  2 heads of d_h = 8 (not a square: 1/√8 is irrational), tied head (not stored).
* ``hf_gpt2_base/`` — ``GPT2Model.save_pretrained`` (no ``transformer.`` prefix), ReLU,
  2 blocks with 2 heads of d_h = 4, scores also scaled by 1/(layer index + 1)
  (``scale_attn_by_inverse_layer_idx``), sharded (``model.safetensors.index.json``); its
  logits are the last hidden state times the token embedding (the tied head of the LM model).
* ``nanogpt_nobias/`` — nanoGPT with ``bias=False``, the non-flash path (``attn.bias`` causal
  buffers), written by ``safetensors.torch.save_model`` (the tied weight is kept once, as
  ``lm_head.weight``), ``n_head`` in ``__metadata__``; erf GELU, d_h = 8.
* ``mha_mahdavi/`` — a plain ``nn.MultiheadAttention(6, 2)`` state dict (``in_proj_*``,
  ``out_proj.*``, biases), d_h = 3: ``--arch mahdavi24 --heads 2``; the query (last vector)
  attends to its context.
* ``mha_dana/`` — token and positional embeddings, ``nn.MultiheadAttention(4, 1)`` under
  ``attn.`` with biases, the skip connection, an unembedding: ``--arch dana25 --heads 1``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file, save_model
from torch import nn
from torch.nn import functional as F

HERE = Path(__file__).resolve().parent
torch.manual_seed(29)


# --- nanoGPT ------------------------------------------------------------------------------
# A re-typed minimal copy of the structure of Karpathy's nanoGPT ``model.py``
# (https://github.com/karpathy/nanoGPT, MIT licence): GPTConfig with the ``bias`` flag,
# LayerNorm with an optional bias, CausalSelfAttention with the flash and non-flash paths and
# the ``attn.bias`` causal buffer, MLP with erf GELU, pre-norm Block, tied wte / lm_head.
# Dropout, training and generation are left out (they do not change the saved tensors).


class GPTConfig:
    def __init__(self, block_size, vocab_size, n_layer, n_head, n_embd, bias, flash):
        self.block_size, self.vocab_size = block_size, vocab_size
        self.n_layer, self.n_head, self.n_embd = n_layer, n_head, n_embd
        self.bias, self.flash = bias, flash


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.n_head, self.n_embd = config.n_head, config.n_embd
        self.flash = config.flash
        if not self.flash:
            size = config.block_size
            self.register_buffer("bias", torch.tril(torch.ones(size, size)).view(1, 1, size, size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT

    def forward(self, idx):  # the logits at every position (nanoGPT returns the last in eval)
        pos = torch.arange(idx.size(1))
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


# --- helpers ------------------------------------------------------------------------------


def _perturbed(model: nn.Module) -> None:
    """Random LayerNorm gains and biases (freshly made ones are 1 and 0: too easy a test)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name:
                p.add_(0.3 * torch.randn_like(p))


def _save_arrays(folder: Path, tokens, logits, **more) -> None:
    np.save(folder / "tokens.npy", np.asarray(tokens, dtype=np.int64))
    np.save(folder / "logits.npy", np.asarray(logits, dtype=np.float64))
    for name, value in more.items():
        np.save(folder / f"{name}.npy", value)


def _tokens(n: int, T: int, V: int) -> torch.Tensor:
    return torch.randint(0, V, (n, T))


def hf_gpt2() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

    V, T = 11, 6
    config = GPT2Config(
        vocab_size=V, n_positions=8, n_embd=16, n_layer=1, n_head=2, n_inner=24,
        activation_function="gelu_new", bos_token_id=0, eos_token_id=0, initializer_range=0.5,
    )  # fmt: skip
    lm = GPT2LMHeadModel(config).eval()
    _perturbed(lm)
    folder = HERE / "hf_gpt2_lm"
    lm.save_pretrained(folder)
    tokens = _tokens(4, T, V)
    with torch.no_grad():
        logits = lm.double()(tokens).logits
    _save_arrays(folder, tokens, logits)

    config = GPT2Config(
        vocab_size=V, n_positions=8, n_embd=8, n_layer=2, n_head=2, n_inner=16,
        activation_function="relu", bos_token_id=0, eos_token_id=0, initializer_range=0.5,
        scale_attn_by_inverse_layer_idx=True,
    )  # fmt: skip
    base = GPT2Model(config).eval()
    _perturbed(base)
    folder = HERE / "hf_gpt2_base"
    base.save_pretrained(folder, max_shard_size=1500)  # shards and an index
    with torch.no_grad():
        double = base.double()
        hidden = double(tokens).last_hidden_state
        logits = hidden @ double.wte.weight.T  # the tied head of GPT2LMHeadModel
    _save_arrays(folder, tokens, logits)


def nanogpt() -> None:
    V, T = 11, 6
    config = GPTConfig(8, V, n_layer=1, n_head=2, n_embd=16, bias=False, flash=False)
    model = GPT(config).eval()
    _perturbed(model)
    folder = HERE / "nanogpt_nobias"
    folder.mkdir(exist_ok=True)
    save_model(model, str(folder / "model.safetensors"), metadata={"n_head": "2"})
    tokens = _tokens(4, T, V)
    with torch.no_grad():
        logits = model.double()(tokens)
    _save_arrays(folder, tokens, logits)


def mha() -> None:
    E, H, K = 6, 2, 20
    attn = nn.MultiheadAttention(E, H, batch_first=True).eval()
    with torch.no_grad():
        attn.in_proj_bias.normal_(0, 0.5)
        attn.out_proj.bias.normal_(0, 0.5)
    folder = HERE / "mha_mahdavi"
    folder.mkdir(exist_ok=True)
    save_file(attn.state_dict(), str(folder / "model.safetensors"))
    vocab = torch.randint(-2, 3, (K, E)).double()
    tokens = torch.stack([torch.randperm(K)[:4] for _ in range(5)])  # 3 context vectors, query
    with torch.no_grad():
        a = attn.double()
        x = vocab[tokens]
        logits = a(x[:, -1:], x[:, :-1], x[:, :-1], need_weights=False)[0][:, 0]
    _save_arrays(folder, tokens, logits, vocab=vocab.numpy().astype(np.int64))

    N, S, E, C = 9, 5, 4, 3

    class Dana(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(N, E)
            self.pos = nn.Embedding(S, E)
            self.attn = nn.MultiheadAttention(E, 1, batch_first=True)
            self.unembed = nn.Linear(E, C, bias=False)

        def forward(self, idx):
            X = self.embed(idx) + self.pos.weight[None, : idx.size(1)]
            last = X[:, -1:]
            return self.unembed(last + self.attn(last, X, X, need_weights=False)[0])[:, 0]

    dana = Dana().eval()
    with torch.no_grad():
        dana.attn.in_proj_bias.normal_(0, 0.5)
    folder = HERE / "mha_dana"
    folder.mkdir(exist_ok=True)
    save_file(dana.state_dict(), str(folder / "model.safetensors"))
    tokens = _tokens(5, S, N)
    with torch.no_grad():
        logits = dana.double()(tokens)
    _save_arrays(folder, tokens, logits)


def main() -> None:
    hf_gpt2()
    nanogpt()
    mha()
    sizes = {
        p.relative_to(HERE).as_posix(): p.stat().st_size
        for p in sorted(HERE.rglob("*"))
        if p.is_file() and p.name != Path(__file__).name
    }
    print(json.dumps(sizes, indent=1))


if __name__ == "__main__":
    main()
