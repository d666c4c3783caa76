"""Importing and certifying a trained-size attention model: time and peak memory.

    python benchmarks/trained_import.py [--tokens 1000] [--d 48] [--heads 4] [--head-dim 12]
                                        [--length 8] [--examples 100] [--dtype float32]
    python benchmarks/trained_import.py --arch gpt [--tokens 1000] [--d 64] [--heads 4]
                                        [--blocks 1] [--length 8] [--examples 100]

A ``dana25`` checkpoint (token and positional embeddings, one softmax attention layer, the
unembedding; C = tokens) with random float weights is written through ``safetensors.numpy``
(the default shape has ≈ 1.06·10⁵ parameters) — or, with ``--arch gpt``, a GPT-style pre-norm
decoder (nanoGPT names: ``--blocks`` blocks of layer norms, causal attention with ``--heads``
heads of d/H, a GELU MLP of width 4d; tied unembedding), then in a fresh process each:

* import — ``exactmem import`` (read, decode every weight exactly, write the model file);
* load — reading the model file back (hash and strict checks);
* certify — ``certify`` on ``--examples`` random sequences labelled with the float64 argmax
  (what a model trained to 100 % would have): every label on Arb balls, each example's margin,
  the float64 evaluation beside;
* peak RSS of that process (``ru_maxrss``).

Timings are wall-clock on a shared machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

STAGES = ("import", "certify")


def write_gpt(path: Path, args) -> int:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(args.seed)
    V, d, S = args.tokens, args.d, args.length
    t = {
        "transformer.wte.weight": rng.standard_normal((V, d)),
        "transformer.wpe.weight": rng.standard_normal((S, d)) * 0.1,
    }
    for i in range(args.blocks):
        at = f"transformer.h.{i}"
        for ln in ("ln_1", "ln_2"):
            t[f"{at}.{ln}.weight"] = 1 + 0.1 * rng.standard_normal(d)
            t[f"{at}.{ln}.bias"] = 0.1 * rng.standard_normal(d)
        for name, rows, cols in (("attn.c_attn", 3 * d, d), ("attn.c_proj", d, d),
                                 ("mlp.c_fc", 4 * d, d), ("mlp.c_proj", d, 4 * d)):  # fmt: skip
            t[f"{at}.{name}.weight"] = rng.standard_normal((rows, cols)) / np.sqrt(cols)
            t[f"{at}.{name}.bias"] = 0.02 * rng.standard_normal(rows)
    t["transformer.ln_f.weight"] = np.ones(d)
    t["transformer.ln_f.bias"] = np.zeros(d)
    t = {k: v.astype(np.dtype(args.dtype)) for k, v in t.items()}
    save_file(t, str(path), metadata={"n_head": str(args.heads)})
    return sum(v.size for v in t.values())


def write_checkpoint(path: Path, args) -> int:
    from safetensors.numpy import save_file

    if args.arch == "gpt":
        return write_gpt(path, args)
    rng = np.random.default_rng(args.seed)
    dt = np.dtype(args.dtype)
    N, d, S, dh = args.tokens, args.d, args.length, args.head_dim
    scale = 1 / np.sqrt(d)
    tensors = {
        "embed.weight": rng.standard_normal((N, d)),
        "pos.weight": rng.standard_normal((S, d)) * 0.1,
        "unembed.weight": rng.standard_normal((N, d)) * scale,
    }
    for h in range(args.heads):
        for name, shape in (("query", (dh, d)), ("key", (dh, d)), ("value", (dh, d))):
            tensors[f"attn.{h}.{name}.weight"] = rng.standard_normal(shape) * scale
        tensors[f"attn.{h}.output.weight"] = rng.standard_normal((d, dh)) / np.sqrt(dh)
    tensors = {k: v.astype(dt) for k, v in tensors.items()}
    save_file(tensors, str(path))
    return sum(v.size for v in tensors.values())


def stage(name: str, work: Path, args) -> dict:
    """One stage in this process (run by the parent in a fresh one)."""
    from exactmem.commands.main import main

    t0 = time.perf_counter()
    figures: dict = {}
    if name == "import":
        code = main(
            ["import", str(work / "m.safetensors"), "--arch", args.arch, "--out",
             str(work / "m.json"), "--quiet"]
        )  # fmt: skip
        assert code == 0
    else:
        from exactmem import Dataset
        from exactmem.checks.certify import certify
        from exactmem.evaluate.floats import float_logits
        from exactmem.files.model_files import load_model

        model, _ = load_model(work / "m.json")
        figures["load_s"] = round(time.perf_counter() - t0, 2)
        rng = np.random.default_rng(args.seed + 1)
        seqs = rng.integers(0, args.tokens, (args.examples, args.length)).tolist()
        logits = float_logits(model, [[0]] * args.tokens, seqs)
        labels = [int(np.argmax(r)) + 1 for r in logits]
        vocab = [[t] for t in range(args.tokens)]
        data = Dataset.from_tokens(seqs, labels, vocab=vocab, num_classes=args.tokens)
        t1 = time.perf_counter()
        cert = certify(model, data, per_layer=False, max_precision=args.max_precision)
        figures["certify_s"] = round(time.perf_counter() - t1, 2)
        check = cert.checks[0]
        figures.update(
            verdict=cert.verdict,
            precision=check.figures.get("precision"),
            smallest_margin=check.figures.get("margins", {}).get("smallest"),
            median_margin=check.figures.get("margins", {}).get("q50"),
            float=check.figures.get("float", {}).get("accuracy"),
            disagreements=check.figures.get("float", {}).get("disagreements"),
        )
    figures["seconds"] = round(time.perf_counter() - t0, 2)
    figures["cpu_s"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_utime, 2)
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="dana25", choices=("dana25", "gpt"))
    p.add_argument("--blocks", type=int, default=1, help="gpt: decoder blocks")
    p.add_argument("--max-precision", type=int, default=16384)
    p.add_argument("--tokens", type=int, default=1000)
    p.add_argument("--d", type=int, default=48)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=12)
    p.add_argument("--length", type=int, default=8)
    p.add_argument("--examples", type=int, default=100)
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.stage:
        print(json.dumps(stage(args.stage, Path(args.work), args)))
        return
    with tempfile.TemporaryDirectory(prefix="exactmem-trained-") as tmp:
        work = Path(tmp)
        params = write_checkpoint(work / "m.safetensors", args)
        size = (work / "m.safetensors").stat().st_size
        print(f"{args.arch} checkpoint: {params} parameters ({args.dtype}, {size} bytes)")
        for name in STAGES:
            out = subprocess.run(
                [sys.executable, __file__, *sys.argv[1:], "--stage", name, "--work", tmp],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            if name == "import":
                figures["model_file_mb"] = round((work / "m.json").stat().st_size / 2**20, 1)
            print(f"{name}: {json.dumps(figures)}")


if __name__ == "__main__":
    main()
