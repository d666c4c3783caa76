"""``exactmem inspect MODEL``: what a model file holds — its sub-layers, lanes and resources,
all read off the weights — and, labelled as such, what the file says about itself.

A model file's ``meta`` (construction, theorem, options) is the file's word: anyone can write
it, so it is shown as a label and never used as a criterion (docs/trust.md)."""

from __future__ import annotations

import argparse
import json

from exactmem.core.errors import EXIT_VERIFIED
from exactmem.core.wording import plural

LANES_SHOWN = 12  # lane names printed per sub-layer; --json lists them all
SAID_CHARS = 2000  # a meta entry longer than this (a memorizer layout) is summarised


def _text(s: str) -> str:
    """A name from the file as printable text (control characters escaped, never sent to the
    terminal)."""
    return s if s.isprintable() else json.dumps(s)


def _lanes(names: tuple[str, ...]) -> str:
    if not names:
        return "unnamed"
    shown = ", ".join(_text(n) for n in names[:LANES_SHOWN])
    return shown + (f", … ({len(names)} lanes)" if len(names) > LANES_SHOWN else "")


def _runs(widths: list[int]) -> str:
    """Layer widths with repeats folded: ``3 → 5 ×7 → 6``."""
    runs: list[list[int]] = []
    for w in widths:
        if runs and runs[-1][0] == w:
            runs[-1][1] += 1
        else:
            runs.append([w, 1])
    return " → ".join(f"{w} ×{k}" if k > 1 else str(w) for w, k in runs)


def _said(meta: dict) -> dict:
    """The file's meta with its long entries summarised (they are data, not shown in full)."""
    out: dict = {}
    for key, value in meta.items():
        text = json.dumps(value)
        out[str(key)] = value if len(text) <= SAID_CHARS else f"({len(text)} characters omitted)"
    return out


def describe(model) -> list[dict]:
    """One record per sub-layer: kind, label, widths, depth, lanes, and for attention the heads
    and score mode; all from the weights except ``label``, the file's name for it."""
    from exactmem.core.model import MLP, Attention, LayerNorm

    records = []
    for i, s in enumerate(model.sublayers):
        if isinstance(s, MLP):
            records.append(
                {
                    "index": i,
                    "kind": "mlp",
                    "label": s.label,
                    "residual": s.residual,
                    "activation": s.activation,
                    "layers": len(s.layers),
                    "widths": [s.in_dim, *(layer.out_dim for layer in s.layers)],
                    "probes": len(s.probes),
                    "lanes": list(s.layers[-1].names),
                }
            )
        elif isinstance(s, Attention):
            head = s.heads[0] if s.heads else None
            records.append(
                {
                    "index": i,
                    "kind": "attention",
                    "label": s.label,
                    "score": s.score,
                    "mask": s.mask,
                    **({"scale": f"1/sqrt({s.scale})"} if s.scale != 1 else {}),
                    "heads": len(s.heads),
                    "head_dim": head.query.out_dim if head else 0,
                    "value_dim": head.value.out_dim if head else 0,
                }
            )
        elif isinstance(s, LayerNorm):
            records.append(
                {"index": i, "kind": "layer norm", "label": s.label, "width": s.width}
                | ({} if s.target is None else {"source": s.source, "target": s.target})
            )
        else:
            records.append(
                {
                    "index": i,
                    "kind": "positional encoding",
                    "label": s.label,
                    "positions": len(s.table),
                    "width": s.width,
                }
            )
    return records


def run(args: argparse.Namespace) -> int:
    from exactmem.core.model import resources
    from exactmem.files.model_files import load_model

    model, digest = load_model(args.model)  # format, hash and every field checked
    res = resources(model)
    layers = describe(model)
    said = _said(model.meta)
    inputs = (
        f"token ids 0..{model.input_dim - 1} (an embedding table)"
        if model.token_inputs
        else f"token vectors in Q^{model.input_dim}"
    )
    if args.json:
        from exactmem.commands import emit_json

        emit_json(
            {
                "path": args.model,
                "sha256": digest,
                "inputs": inputs,
                "input_dim": model.input_dim,
                "token_inputs": model.token_inputs,
                "embed": None if model.embed is None else list(model.embed.names),
                "unembed": None if model.unembed is None else list(model.unembed.names),
                "sublayers": layers,
                "resources": res.as_dict(),
                "file_says": said,
            }
        )
        return EXIT_VERIFIED
    print(f"model {args.model}: sha256 {digest} (checked)")
    print(f"inputs: {inputs}")
    if model.embed is not None:
        print(
            f"E_in: {model.embed.in_dim} → {model.embed.out_dim}, lanes {_lanes(model.embed.names)}"
        )
    print(f"sub-layers ({len(layers)}):")
    for r in layers:
        name = f"{r['index']:>3}  {r['kind']:<10} {_text(r['label']) or '-':<8}"
        if r["kind"] == "mlp":
            widths = _runs(r["widths"])
            sigma = "" if r["activation"] == "relu" else f" {r['activation']}"
            print(
                f"{name} {'residual' if r['residual'] else 'plain'}{sigma}, {r['layers']} layers, "
                f"widths {widths}, {r['probes']} probes; lanes {_lanes(tuple(r['lanes']))}"
            )
        elif r["kind"] == "attention":
            print(
                f"{name} {r['score']}, {r['heads']} head(s) of dimension {r['head_dim']}, "
                f"mask {r['mask']}" + (f", scores × {r['scale']}" if "scale" in r else "")
            )
        elif r["kind"] == "layer norm":
            print(f"{name} token-wise, width {r['width']}")
        else:
            print(f"{name} {r['positions']} positions of width {r['width']}")
    if model.unembed is not None:
        print(f"E_out: {model.unembed.in_dim} → {model.unembed.out_dim}")
    print(
        f"resources: width {res.width}, depth {res.depth}, "
        f"{plural(res.relu_layers, 'ReLU layer')}, "
        f"{res.dense_parameters} dense / {res.nonzero_parameters} non-zero parameters, "
        f"max {res.max_bits} bits per parameter, {res.total_bits} bits in all"
    )
    print("the file says (its own word: a label, never a criterion of a verdict):")
    if not said:
        print("  nothing")
    for key, value in said.items():
        print(f"  {_text(key)}: {json.dumps(value, ensure_ascii=False)}")
    return EXIT_VERIFIED
