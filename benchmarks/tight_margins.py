"""Tight certified margins on a nanoGPT of the shape issue 29 reports (4 layers, 8 heads,
d = 128, 0.8 M parameters): what stopping at the first deciding precision certified, and what
raising each example's precision until its margin is within 1 % certifies.

    # 1. write the checkpoint and its float64 logits (needs PyTorch: run it in a venv)
    python benchmarks/tight_margins.py --write DIR
    # 2. measure (exactmem alone)
    python benchmarks/tight_margins.py DIR

The model is tests/data/checkpoints/make_checkpoints.py's copy of nanoGPT (flash path, biases,
tied head), random weights: every matrix N(0, 0.02), the tied embedding then scaled by 10 (a
memorizing model's logits are large), torch seed 5; 64 random sequences of 64 tokens over 65
tokens, labelled by the float64 argmax at the last position. Printed: the 64-bit enclosures'
median logit radius; the examples certified at 64 bits and their margins (what the verifier
reported before the margins were tightened); then :func:`exactmem.checks.margins.argmax_margins`
— each example's precision, and how far its certified margin lies below the true (float64)
one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def write(folder: Path) -> None:
    import torch
    from safetensors.torch import save_model

    sys.path.insert(0, str(HERE.parent / "tests" / "data" / "checkpoints"))
    import make_checkpoints as mc

    torch.manual_seed(5)
    V, T, N = 65, 64, 64
    folder.mkdir(parents=True, exist_ok=True)
    model = mc.GPT(mc.GPTConfig(64, V, n_layer=4, n_head=8, n_embd=128, bias=True, flash=True))
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.02)
        model.lm_head.weight.mul_(10.0)
    save_model(model, str(folder / "model.safetensors"), metadata={"n_head": "8"})
    tokens = torch.randint(0, V, (N, T))
    with torch.no_grad():
        logits = model.double()(tokens)
    np.save(folder / "tokens.npy", tokens.numpy().astype(np.int64))
    np.save(folder / "logits64.npy", logits.numpy())
    print(f"{sum(p.numel() for p in model.parameters())} parameters written to {folder}")


def measure(folder: Path) -> None:
    from exactmem.checkpoints.architectures import import_checkpoint
    from exactmem.checks.attention import brief
    from exactmem.checks.margins import _judge, argmax_margins
    from exactmem.evaluate.softmax import run_balls

    model = import_checkpoint(folder / "model.safetensors", "gpt", heads=8)
    seqs = np.load(folder / "tokens.npy").tolist()
    f64 = np.load(folder / "logits64.npy")
    labels = [int(np.argmax(r[-1])) + 1 for r in f64]
    true = [
        float(r[-1][y - 1] - np.delete(r[-1], y - 1).max())
        for r, y in zip(f64, labels, strict=True)
    ]
    t = time.perf_counter()
    trace = run_balls(model, None, seqs, precision=64, positions="last")
    radii = [float(x.rad()) for o in trace.outputs for x in o[-1]]
    print(
        f"64 bits: median logit radius {statistics.median(radii):.3g}, "
        f"{sum(r == float('inf') for r in radii)} of {len(radii)} infinite "
        f"({time.perf_counter() - t:.0f} s)"
    )
    first = [_judge(o[-1:], [y - 1]) for o, y in zip(trace.outputs, labels, strict=True)]
    decided = [(low, i) for i, (s, low, _) in enumerate(first) if s == "certified"]
    if decided:
        low, i = min(decided)
        print(
            f"  certified at 64 bits: {len(decided)}/{len(seqs)}; smallest certified margin "
            f"≥ {brief(low, up=False)} at sequences[{i}] (true {true[i]:.4g}); true minimum "
            f"{min(true):.4g} at sequences[{int(np.argmin(true))}]"
        )
    t = time.perf_counter()
    results = argmax_margins(model, None, seqs, labels)
    worst = min(results, key=lambda r: r.margin)
    ratio = min(float(r.margin) / true[r.index] for r in results)
    print(
        f"tightened ({time.perf_counter() - t:.0f} s): precisions "
        f"{sorted({r.precision for r in results})}, {sum(r.tight for r in results)}/"
        f"{len(results)} within 1 %; smallest certified margin ≥ {brief(worst.margin, up=False)}"
        f" at sequences[{worst.index}] (true {true[worst.index]:.6g}); least ratio "
        f"certified/true {ratio:.6f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--write", action="store_true", help="write the checkpoint (needs torch)")
    args = p.parse_args()
    write(args.folder) if args.write else measure(args.folder)


if __name__ == "__main__":
    main()
