"""A checkpoint as its library saves it: one safetensors file, or a folder written by Hugging
Face ``save_pretrained`` — ``model.safetensors`` or the shards a
``model.safetensors.index.json`` lists, and ``config.json``.

Everything here is hostile input. ``config.json`` and the index go through the strict JSON
reader (:mod:`exactmem.core.json_input`: bounded size and nesting, no repeated keys, no NaN); the
numbers that change the function (``layer_norm_epsilon``) are read as the exact decimal the file
writes (:func:`exactmem.core.exact.parse_rational`), never through a float; every field read has its
type checked and every error names the file and the field. A shard is a plain file name in the
folder (no path, no ``..``); every tensor the index lists must be in the shard it names, and
every tensor of a shard must be listed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gmpy2 import mpq

from exactmem.checkpoints.safetensors_io import DyadicTensor, read_safetensors
from exactmem.core import limits
from exactmem.core.errors import InputError
from exactmem.core.exact import parse_rational
from exactmem.core.json_input import parse_json

__all__ = ["Checkpoint", "GPT2_ACTIVATIONS", "Gpt2Config", "read_checkpoint"]

# the activation names of transformers' ACT2FN that exactmem computes, as IR activations;
# any other name (silu, quick_gelu, gelu_fast with its truncated constant, …) is refused by name
GPT2_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "gelu_python": "gelu",
    "relu": "relu",
}
_SHARD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.safetensors")
MAX_SHARDS = 10_000


@dataclass
class Gpt2Config:
    """What a GPT-2 ``config.json`` says about the function (typed, exact)."""

    n_head: int
    n_embd: int | None = None
    n_layer: int | None = None
    n_positions: int | None = None
    n_inner: int | None = None
    vocab_size: int | None = None
    eps: mpq = field(default_factory=lambda: mpq(1, 100000))
    activation: str = "gelu_tanh"
    tied: bool = True
    scale_attn_weights: bool = True
    by_layer: bool = False


@dataclass
class Checkpoint:
    """The tensors of a checkpoint, its ``__metadata__`` (of the first file), its GPT-2 config
    (when a ``config.json`` is beside it) and how many bytes it takes."""

    where: str
    tensors: dict[str, DyadicTensor]
    meta: dict[str, str]
    size: int
    config: dict | None = None
    config_where: str = ""


class _Number(str):
    """A JSON number's text, kept to read it exactly."""


def _json(path: Path, what: str) -> tuple[object, object]:
    """``path`` parsed strictly (bounded), and again with its numbers kept as text."""
    raw = limits.read_limited(path, what)
    obj = parse_json(raw, f"{what} file {path}")
    # checked above; numbers kept as text where an int could be long (a size is ≤ 10⁹ anyway)
    exact = json.loads(
        bytes(raw).decode("utf-8"),
        parse_float=_Number,
        parse_int=lambda t: int(t) if len(t) <= 18 else _Number(t),
    )
    return obj, exact


def _shards(folder: Path, index: Path) -> tuple[dict[str, DyadicTensor], dict, int]:
    where = f"index file {index}"
    obj, _ = _json(index, "index")
    if not isinstance(obj, dict) or not isinstance(obj.get("weight_map"), dict):
        raise InputError(f"{where}: expected an object with a 'weight_map' object")
    weight_map = obj["weight_map"]
    if not weight_map:
        raise InputError(f"{where}: weight_map is empty")
    for tensor, name in weight_map.items():
        if not isinstance(name, str):
            raise InputError(f"{where}: weight_map[{tensor[:60]!r}] is not a file name")
    files = sorted(set(weight_map.values()))
    if len(files) > MAX_SHARDS:
        raise InputError(f"{where}: {len(files)} shards, more than {MAX_SHARDS}")
    tensors: dict[str, DyadicTensor] = {}
    meta: dict[str, str] = {}
    size = 0
    for name in files:
        if not _SHARD.fullmatch(name) or ".." in name:
            raise InputError(
                f"{where}: weight_map names the shard {name[:60]!r}: a shard is a plain "
                "file name ending in .safetensors, in the index's folder"
            )
        shard = folder / name
        found, file_meta = read_safetensors(shard)
        meta = meta or file_meta
        size += os.stat(shard).st_size
        for tensor in found:
            if weight_map.get(tensor) != name:
                raise InputError(
                    f"checkpoint {shard}: tensor {tensor!r} is not listed for this shard in {index}"
                )
            tensors[tensor] = found[tensor]
    for tensor, name in weight_map.items():
        if tensor not in tensors:
            raise InputError(f"{where}: tensor {tensor!r} is not in its shard {name!r}")
    return tensors, meta, size


def read_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """The checkpoint at ``path``: a safetensors file, or a folder holding
    ``model.safetensors`` (or the shards of ``model.safetensors.index.json``) and, optionally,
    ``config.json`` (parsed strictly; read by :func:`gpt2_config`)."""
    path = Path(path)
    if not path.is_dir():
        tensors, meta = read_safetensors(path)
        return Checkpoint(f"checkpoint {path}", tensors, meta, os.stat(path).st_size)
    single, index = path / "model.safetensors", path / "model.safetensors.index.json"
    if single.exists():
        tensors, meta = read_safetensors(single)
        size = os.stat(single).st_size
    elif index.exists():
        tensors, meta, size = _shards(path, index)
    else:
        raise InputError(
            f"checkpoint folder {path}: neither model.safetensors nor "
            "model.safetensors.index.json (only safetensors weights are read: no pickle)"
        )
    config = path / "config.json"
    found = None
    if config.exists():
        found = _json(config, "config")
    ckpt = Checkpoint(f"checkpoint {path}", tensors, meta, size)
    if found is not None:
        obj, exact = found
        if not isinstance(obj, dict) or not isinstance(exact, dict):
            raise InputError(f"config file {config}: expected a JSON object")
        ckpt.config, ckpt.config_where = exact, f"config file {config}"
    return ckpt


def _int(config: dict, key: str, where: str, *, required: bool = False) -> int | None:
    value = config.get(key)
    if value is None:
        if required:
            raise InputError(f"{where}: {key} is missing")
        return None
    if type(value) is not int or not 1 <= value <= 10**9:
        raise InputError(f"{where}: {key} = {str(value)[:40]} is not a positive integer")
    return value


def _bool(config: dict, key: str, where: str, default: bool) -> bool:
    value = config.get(key, default)
    if type(value) is not bool:
        raise InputError(f"{where}: {key} = {str(value)[:40]} is not true or false")
    return value


def gpt2_config(config: dict, where: str) -> Gpt2Config:
    """The fields of a Hugging Face GPT-2 ``config.json`` that decide the function, typed and
    exact: ``model_type`` must be ``gpt2``; ``activation_function`` one exactmem computes (a
    name it does not know is refused by name, never replaced); ``layer_norm_epsilon`` the
    exact decimal written; cross-attention refused."""
    kind = config.get("model_type")
    if kind != "gpt2":
        raise InputError(f"{where}: model_type = {str(kind)[:40]!r}, not 'gpt2'")
    out = Gpt2Config(_int(config, "n_head", where, required=True) or 1)
    out.n_embd = _int(config, "n_embd", where)
    out.n_layer = _int(config, "n_layer", where)
    out.n_positions = _int(config, "n_positions", where)
    out.n_inner = _int(config, "n_inner", where)
    out.vocab_size = _int(config, "vocab_size", where)
    if "layer_norm_epsilon" in config:
        raw = config["layer_norm_epsilon"]
        text = str(raw) if isinstance(raw, _Number) else raw
        out.eps = parse_rational(text, f"{where}: layer_norm_epsilon")
        if not out.eps > 0:
            raise InputError(f"{where}: layer_norm_epsilon must be positive, got {out.eps}")
    act = config.get("activation_function", "gelu_new")
    if not isinstance(act, str) or act not in GPT2_ACTIVATIONS:
        raise InputError(
            f"{where}: activation_function = {str(act)[:40]!r} is not one exactmem computes "
            f"({', '.join(GPT2_ACTIVATIONS)}); it is refused, never replaced by another"
        )
    out.activation = GPT2_ACTIVATIONS[act]
    out.tied = _bool(config, "tie_word_embeddings", where, True)
    out.scale_attn_weights = _bool(config, "scale_attn_weights", where, True)
    out.by_layer = _bool(config, "scale_attn_by_inverse_layer_idx", where, False)
    if _bool(config, "add_cross_attention", where, False):
        raise InputError(f"{where}: add_cross_attention = true: cross-attention is not read")
    return out
