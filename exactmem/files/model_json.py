"""The model as JSON, both ways: the exact IR written as the model file's ``model`` object and
read back, field by field, with an error naming the path of anything malformed; and the model's
canonical hash (SHA-256 of its canonical JSON)."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import weakref
from itertools import chain

from exactmem.core.errors import InputError
from exactmem.core.exact import from_hex, to_hex
from exactmem.core.model import (
    ACTIVATIONS,
    MASKS,
    MAX_SCALE,
    MLP,
    SCORE_MODES,
    Affine,
    Attention,
    AttentionHead,
    LayerNorm,
    PositionalEncoding,
    Probe,
    Transformer,
    mlp_problem,
    model_meta_problem,
    shape_problem,
)
from exactmem.core.weight_rows import BlockRows, rows_text
from exactmem.runtime.gcpause import paused_gc

MODEL_FORMAT = "exactmem.model/1"


def canonical_hash(obj: object) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _affine_json(a: Affine) -> dict:
    return {
        "in": a.in_dim,
        "den": to_hex(a.denominator),
        "names": list(a.names),
        "rows": [[[col, to_hex(v)] for col, v in row] for row in a.rows],
        "bias": [to_hex(b) for b in a.bias],
    }


def _rational_json(v) -> list[str]:
    return [to_hex(int(v.numerator)), to_hex(int(v.denominator))]


def _rational_from(obj: object, where: str):
    from gmpy2 import mpq

    if not isinstance(obj, list) or len(obj) != 2:
        raise InputError(f"{where}: expected [numerator, denominator] in hex")
    p, q = from_hex(obj[0], where), from_hex(obj[1], where)
    if q < 1:
        raise InputError(f"{where}: denominator must be positive")
    return mpq(p, q)


def _sublayer_json(
    s: MLP | Attention | PositionalEncoding | LayerNorm, _affine_json=_affine_json
) -> dict:
    if isinstance(s, LayerNorm):
        return {
            "kind": "layernorm",
            "label": s.label,
            "gain": [_rational_json(v) for v in s.gain],
            "bias": [_rational_json(v) for v in s.bias],
            "eps": _rational_json(s.eps),
            **({} if s.target is None else {"source": s.source, "target": s.target}),
        }
    if isinstance(s, PositionalEncoding):
        return {
            "kind": "positional",
            "label": s.label,
            "table": [[_rational_json(v) for v in row] for row in s.table],
        }
    if isinstance(s, MLP):
        obj = {
            "kind": "mlp",
            "label": s.label,
            "residual": s.residual,
            "meta": s.meta,
            "layers": [_affine_json(a) for a in s.layers],
            "probes": [[p.name, p.layer, [[c, to_hex(v)] for c, v in p.terms]] for p in s.probes],
        }
        if s.activation != "relu":  # ReLU files (and their hashes) stay as they were
            obj["activation"] = s.activation
        return obj
    obj = {
        "kind": "attention",
        "label": s.label,
        "score": s.score,
        "mask": s.mask,
        "heads": [
            {k: _affine_json(getattr(h, k)) for k in ("query", "key", "value", "output")}
            for h in s.heads
        ],
    }
    if s.scale != 1:  # unscaled files (and their hashes) stay as they were
        obj["scale"] = f"1/sqrt({s.scale})"
    return obj


def model_to_json(model: Transformer, _affine_json=_affine_json) -> dict:
    """The model's JSON content; ``_affine_json`` encodes each affine map (the container
    writer packs them into arrays instead, in the same order)."""
    return {
        "input_dim": model.input_dim,
        "embed": _affine_json(model.embed) if model.embed else None,
        "unembed": _affine_json(model.unembed) if model.unembed else None,
        "sublayers": [_sublayer_json(s, _affine_json) for s in model.sublayers],
        "meta": model.meta,
        "token_inputs": model.token_inputs,
    }


def model_hash(model: Transformer) -> str:
    """SHA-256 of the model's canonical JSON, computed from its weights (never read from a file).

    Computed once per model object: loading a container hashes the model it built, and the
    certificate asks again. The answer is kept here, beside a weak reference to the model and
    the text of its ``meta`` dicts — the only mutable parts of a model (the weights are frozen
    dataclasses of tuples) — and given again only to the same, living object with the same
    meta; nothing a caller passes in or a file says is taken for it."""
    labels = _meta_text(model)
    known = _HASHED.get(id(model))
    if known is not None and known[0]() is model and known[2] == labels:
        return known[1]
    with paused_gc():  # model_to_json makes a list per weight, none in a cycle
        digest = _block_digest(model) or canonical_hash(model_to_json(model))
    if _frozen_weights(model):  # a model built by hand may hold lists: hashed afresh each time
        _remember(model, digest, labels)
    return digest


def _block_digest(model: Transformer) -> str | None:
    """:func:`canonical_hash` of ``model_to_json(model)`` with the rows of every block map
    (:class:`exactmem.core.weight_rows.BlockRows`) written by
    :func:`~exactmem.core.weight_rows.rows_text`
    in NumPy: the same text, hashed piece by piece. None when no map is a block, or when the
    marker left in a block's place is found elsewhere (a meta string holding it)."""
    blocks: list[BlockRows] = []
    marker = f"exactmem-block-{secrets.token_hex(16)}-"

    def marked(a: Affine) -> dict:
        if type(a.rows) is not BlockRows:
            return _affine_json(a)
        blocks.append(a.rows)
        return {
            "in": a.in_dim,
            "den": to_hex(a.denominator),
            "names": list(a.names),
            "rows": f"{marker}{len(blocks) - 1}",
            "bias": [to_hex(b) for b in a.bias],
        }

    obj = model_to_json(model, marked)
    if not blocks:
        return None
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    pieces = text.split(f'"{marker}')
    if len(pieces) != len(blocks) + 1 or text.count(marker) != len(blocks):
        return None
    digest = hashlib.sha256(pieces[0].encode())
    seen = set()
    for piece in pieces[1:]:  # (sorted keys put the unembedding after the sublayers)
        index, rest = piece.split('"', 1)
        if not index.isdigit() or index in seen or int(index) >= len(blocks):
            return None
        seen.add(index)
        digest.update(rows_text(blocks[int(index)]))
        digest.update(rest.encode())
    return digest.hexdigest()


def _frozen_weights(model: Transformer) -> bool:
    """Whether every part ``model_to_json`` reads but the meta is a frozen IR object, a tuple or
    an immutable scalar (the IR's own types; the public constructors accept lists, which could
    change after the model was hashed)."""
    from fractions import Fraction

    from gmpy2 import mpq, mpz

    scalars = {int, bool, str, type(None), type(mpz(0)), type(mpq(0)), Fraction}

    def flat(values) -> bool:
        return type(values) is tuple and set(map(type, values)) <= scalars

    def rows(values) -> bool:  # tuples of (column, coefficient) pairs or of rationals
        if type(values) is not tuple or not set(map(type, values)) <= {tuple}:
            return False
        pairs = list(chain.from_iterable(values))
        if not set(map(type, pairs)) <= scalars | {tuple}:
            return False
        return set(map(type, chain.from_iterable(p for p in pairs if type(p) is tuple))) <= scalars

    def affine(a) -> bool:
        return (
            type(a) is Affine
            and flat((a.in_dim, a.denominator))
            and flat(a.bias)
            and flat(a.names)
            and (type(a.rows) is BlockRows or rows(a.rows))  # (a block is read-only)
        )

    if type(model) is not Transformer or not flat((model.input_dim, model.token_inputs)):
        return False
    if type(model.sublayers) is not tuple:
        return False
    maps = [m for m in (model.embed, model.unembed) if m is not None]
    for s in model.sublayers:
        kind = type(s)
        if kind is MLP:
            if type(s.layers) is not tuple or type(s.probes) is not tuple:
                return False
            if not flat((s.label, s.residual, s.activation)):
                return False
            if any(type(p) is not Probe or not flat((p.name, p.layer)) for p in s.probes):
                return False
            if not rows(tuple(p.terms for p in s.probes)):
                return False
            maps += s.layers
        elif kind is Attention:
            if type(s.heads) is not tuple or not flat((s.label, s.score, s.mask, s.scale)):
                return False
            for h in s.heads:
                if type(h) is not AttentionHead:
                    return False
                maps += [h.query, h.key, h.value, h.output]
        elif kind is PositionalEncoding:
            if not flat((s.label,)) or not rows(s.table):
                return False
        elif kind is LayerNorm:
            if not (flat(s.gain) and flat(s.bias) and flat((s.eps, s.label, s.source, s.target))):
                return False
        else:
            return False
    return all(map(affine, maps))


def _meta_text(model: Transformer) -> str:
    metas = [model.meta, *(s.meta for s in model.sublayers if isinstance(s, MLP))]
    return json.dumps(metas, sort_keys=True, separators=(",", ":"), default=repr)


def _remember(model: Transformer, digest: str, labels: str) -> None:
    key = id(model)

    def forget(ref: weakref.ref) -> None:
        if _HASHED.get(key, (None,))[0] is ref:
            del _HASHED[key]

    try:
        _HASHED[key] = (weakref.ref(model, forget), digest, labels)
    except TypeError:  # pragma: no cover - a model class without weak references
        pass


AFFINE_FIELDS = ("in", "den", "names", "rows", "bias")


SUBLAYER_FIELDS = {
    "mlp": ("kind", "label", "residual", "meta", "layers", "probes", "activation"),
    "attention": ("kind", "label", "score", "mask", "heads", "scale"),
    "positional": ("kind", "label", "table"),
    "layernorm": ("kind", "label", "gain", "bias", "eps", "source", "target"),
}


HEAD_FIELDS = ("query", "key", "value", "output")


MODEL_FIELDS = ("input_dim", "embed", "unembed", "sublayers", "meta", "token_inputs")


MODEL_FILE_FIELDS = ("format", "sha256", "model")


def _only(obj: object, allowed: tuple[str, ...], where: str) -> dict:
    """``obj`` as an object with no field outside ``allowed``."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object, got {type(obj).__name__}")
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        raise InputError(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(allowed)})")
    return obj


def _field(obj: object, key: str, kind: type | tuple, where: str):
    if not isinstance(obj, dict) or key not in obj:
        raise InputError(f"{where}: missing field '{key}'")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InputError(f"{where}.{key}: wrong type {type(value).__name__}")
    return value


def _index(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}: expected a non-negative integer index")
    return value


def _affine_from(obj: object, where: str) -> Affine:
    if isinstance(obj, Affine):  # built from a binary container's arrays, checked there
        return obj
    _only(obj, AFFINE_FIELDS, where)
    in_dim = _index(_field(obj, "in", int, where), f"{where}.in")
    den = from_hex(_field(obj, "den", str, where), f"{where}.den")
    if den < 1:
        raise InputError(f"{where}.den: denominator must be a positive integer, got {den}")
    names = _field(obj, "names", list, where)
    rows_raw = _field(obj, "rows", list, where)
    bias_raw = _field(obj, "bias", list, where)
    rows = []
    for i, row in enumerate(rows_raw):
        if not isinstance(row, list):
            raise InputError(f"{where}.rows[{i}]: expected a list of [column, value] pairs")
        entries = []
        for j, pair in enumerate(row):
            at = f"{where}.rows[{i}][{j}]"
            if not isinstance(pair, list) or len(pair) != 2:
                raise InputError(f"{at}: expected [column, value]")
            col = _index(pair[0], f"{at}[0]")
            if col >= in_dim:
                raise InputError(f"{at}[0]: column {col} ≥ the map's {in_dim} input columns")
            value = from_hex(pair[1], f"{at}[1]")
            if value == 0:
                raise InputError(f"{at}[1]: zero entries are left out of a sparse row")
            entries.append((col, value))
        rows.append(tuple(entries))
    if len(bias_raw) != len(rows):
        raise InputError(f"{where}.bias: {len(bias_raw)} entries for {len(rows)} rows")
    bias = tuple(from_hex(b, f"{where}.bias[{i}]") for i, b in enumerate(bias_raw))
    for i, n in enumerate(names):
        if not isinstance(n, str):
            raise InputError(f"{where}.names[{i}]: expected a string")
    if names and len(names) != len(rows):
        raise InputError(f"{where}.names: {len(names)} names for {len(rows)} rows")
    try:
        return Affine(in_dim, tuple(rows), bias, den, tuple(names))
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


def _probe_from(p: object, where: str) -> Probe:
    if not (
        isinstance(p, list) and len(p) == 3 and isinstance(p[0], str) and isinstance(p[2], list)
    ):
        raise InputError(f"{where}: expected [name, layer, terms]")
    layer = _index(p[1], f"{where}[1]")
    terms = []
    for j, t in enumerate(p[2]):
        if not isinstance(t, list) or len(t) != 2:
            raise InputError(f"{where}[2][{j}]: expected [unit, value]")
        terms.append((_index(t[0], f"{where}[2][{j}][0]"), from_hex(t[1], f"{where}[2][{j}][1]")))
    return Probe(p[0], layer, tuple(terms))


def _layer_norm_from(obj: dict, label: str, where: str) -> LayerNorm:
    """A layer norm's gain and bias (equal lengths, at least one entry) and positive eps."""
    parts = {}
    for key in ("gain", "bias"):
        raw = _field(obj, key, list, where)
        parts[key] = tuple(_rational_from(v, f"{where}.{key}[{j}]") for j, v in enumerate(raw))
    if not parts["gain"]:
        raise InputError(f"{where}.gain: a layer norm needs at least one entry")
    if len(parts["bias"]) != len(parts["gain"]):
        raise InputError(
            f"{where}.bias: {len(parts['bias'])} entries, the gain has {len(parts['gain'])}"
        )
    eps = _rational_from(_field(obj, "eps", list, where), f"{where}.eps")
    if not eps > 0:
        raise InputError(f"{where}.eps: must be positive (it keeps √(σ² + eps) away from 0)")
    lanes = {}
    for key in ("source", "target"):  # a branch layer norm (pre-norm): both or neither
        if key in obj:
            lanes[key] = _field(obj, key, int, where)
            if isinstance(lanes[key], bool) or lanes[key] < 0:
                raise InputError(f"{where}.{key}: must be a lane index ≥ 0")
    if len(lanes) == 1:
        raise InputError(f"{where}: 'source' and 'target' go together (a branch layer norm)")
    return _checked(lambda: LayerNorm(parts["gain"], parts["bias"], eps, label, **lanes), where)


def _sublayer_from(obj: object, where: str) -> MLP | Attention | PositionalEncoding | LayerNorm:
    kind = _field(obj, "kind", str, where)
    if kind not in SUBLAYER_FIELDS:
        raise InputError(f"{where}.kind: unknown sub-layer kind {kind!r}")
    _only(obj, SUBLAYER_FIELDS[kind], where)
    label = _field(obj, "label", str, where)
    if kind == "layernorm":
        return _layer_norm_from(obj, label, where)
    if kind == "mlp":
        layers = tuple(
            _affine_from(a, f"{where}.layers[{i}]")
            for i, a in enumerate(_field(obj, "layers", list, where))
        )
        if not layers:
            raise InputError(f"{where}.layers: an MLP needs at least one layer")
        probes = tuple(
            _probe_from(p, f"{where}.probes[{i}]")
            for i, p in enumerate(_field(obj, "probes", list, where))
        )
        residual = _field(obj, "residual", bool, where)
        meta = _field(obj, "meta", dict, where)
        activation = _activation_from(obj, where)
        if problem := mlp_problem(layers, residual, probes, where):
            raise InputError(f"{problem[0]}: {problem[1]}")
        return _checked(lambda: MLP(layers, residual, probes, label, meta, activation), where)
    if kind == "attention":
        heads = []
        for i, h in enumerate(_field(obj, "heads", list, where)):
            at = f"{where}.heads[{i}]"
            _only(h, HEAD_FIELDS, at)
            maps = {k: _field(h, k, (dict, Affine), at) for k in HEAD_FIELDS}
            parts = {k: _affine_from(m, f"{at}.{k}") for k, m in maps.items()}
            for k, a in parts.items():
                if any(a.bias):
                    raise InputError(f"{at}.{k}.bias: attention maps are linear: biases must be 0")
            heads.append(AttentionHead(**parts))
        score = _field(obj, "score", str, where)
        mask = _field(obj, "mask", str, where)
        for key, value, allowed in (("score", score, SCORE_MODES), ("mask", mask, MASKS)):
            if value not in allowed:
                raise InputError(f"{where}.{key}: {value!r:.40} is not one of {', '.join(allowed)}")
        scale = _scale_from(obj, where)
        return _checked(lambda: Attention(tuple(heads), score, label, mask, scale), where)
    table = []
    for k, row in enumerate(_field(obj, "table", list, where)):
        if not isinstance(row, list) or (table and len(row) != len(table[0])):
            raise InputError(f"{where}.table[{k}]: rows must be lists of equal length")
        table.append(
            tuple(_rational_from(v, f"{where}.table[{k}][{j}]") for j, v in enumerate(row))
        )
    return PositionalEncoding(tuple(table), label)


def _activation_from(obj: dict, where: str) -> str:
    """An MLP's optional ``activation``: absent means ``relu``; written only when it is not,
    so a file that spells out ``"relu"`` is not one this version wrote (refused: one spelling
    per model, one hash)."""
    if "activation" not in obj:
        return "relu"
    value = obj["activation"]
    if not isinstance(value, str) or value not in ACTIVATIONS or value == "relu":
        allowed = ", ".join(repr(a) for a in ACTIVATIONS if a != "relu")
        raise InputError(
            f"{where}.activation: {value!r:.40} is not one of {allowed} (omit the field for relu)"
        )
    return value


_SCALE = re.compile(r"1/sqrt\(([1-9][0-9]{0,5})\)")


def _scale_from(obj: dict, where: str) -> int:
    """An attention's optional ``scale``, the text ``"1/sqrt(k)"`` (k of 1 to 6 ASCII digits,
    k ≥ 2): its scores are divided by √k. Absent means 1; written only when it is not, so
    ``"1/sqrt(1)"`` is refused (one spelling per model, one hash)."""
    if "scale" not in obj:
        return 1
    value = obj["scale"]
    match = _SCALE.fullmatch(value) if isinstance(value, str) else None
    if match is None or match[1] == "1":
        raise InputError(
            f'{where}.scale: {value!r:.40} is not "1/sqrt(k)" with k an integer from 2 to '
            f"{MAX_SCALE} (omit the field for unscaled scores)"
        )
    return int(match[1])


def _checked(make, where: str):
    """Build an IR value; its own checks become input errors naming ``where``."""
    try:
        return make()
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{where}: {exc}") from None


def model_from_json(obj: object, where: str = "model") -> Transformer:
    """The model of a file's ``model`` object, checked field by field (see above)."""
    _only(obj, MODEL_FIELDS, where)
    input_dim = _index(_field(obj, "input_dim", int, where), f"{where}.input_dim")
    embed = obj.get("embed")
    unembed = obj.get("unembed")
    subs = tuple(
        _sublayer_from(s, f"{where}.sublayers[{i}]")
        for i, s in enumerate(_field(obj, "sublayers", list, where))
    )
    meta = _field(obj, "meta", dict, where)
    token_inputs = _field(obj, "token_inputs", bool, where)
    embed_map = _affine_from(embed, f"{where}.embed") if embed is not None else None
    unembed_map = _affine_from(unembed, f"{where}.unembed") if unembed is not None else None
    problem = shape_problem(input_dim, subs, embed_map, unembed_map, token_inputs)
    problem = problem or model_meta_problem(meta)
    if problem:
        raise InputError(f"{where}.{problem[0]}: {problem[1]}")
    return _checked(
        lambda: Transformer(input_dim, subs, embed_map, unembed_map, meta, token_inputs), where
    )


# id(model) → (weak reference to it, its SHA-256, its meta text then): model_hash's memory
_HASHED: dict[int, tuple[weakref.ref, str, str]] = {}
