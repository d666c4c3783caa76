"""Import + certify one 64-token sequence of a GPT-2-shaped model, against its parameter count
(issue 29 point 8): wall time, CPU time and peak memory of the whole process.

    python benchmarks/gpt2_scale.py [--shapes 1e5,1e6,3e6,1e7] [--length 64] [--timeout 600]
    python benchmarks/gpt2_scale.py --shapes gpt2-small   # 124 M parameters: see docs/benchmarks.md

Each shape is written as a Hugging Face ``save_pretrained`` folder would be —
``model.safetensors`` (``GPT2LMHeadModel`` names, Conv1D ``[in, out]`` layout, tied head, float32
random weights with GPT-2's initialisation: N(0, 0.02), residual projections scaled by
1/√(2L)) and ``config.json`` (``gelu_new``) — with NumPy alone, so no PyTorch is needed. Then one
fresh process per shape, run under ``/usr/bin/time -v`` (whole process: interpreter, imports,
reading the checkpoint, certifying), does what a user does:

* ``import_checkpoint(folder)`` — read config.json and every weight exactly;
* ``certify`` one random sequence of ``--length`` tokens, labelled with the float64 argmax at
  its last position (a next-token label): Arb balls with the precision raised until the margin
  is within 1 %, the float64 column beside.

Printed per shape: parameters, wall and CPU seconds (import, certify, whole process), peak RSS
(``Maximum resident set size``), the precision reached, the certified margin, and the load
average (``/proc/loadavg``) before and after — the machine is shared, so wall time is only
comparable at equal load. A shape whose process exceeds ``--timeout`` seconds is reported as
such (that is the finding, not an error).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# name → (layers, d, heads, vocabulary, positions)
SHAPES = {
    "1e5": (2, 64, 4, 512, 64),
    "1e6": (4, 128, 8, 2048, 64),
    "3e6": (6, 192, 12, 4096, 64),
    "1e7": (8, 320, 5, 8192, 64),
    "3e7": (12, 512, 8, 16384, 128),
    "gpt2-small": (12, 768, 12, 50257, 1024),
}


def write_gpt2(folder: Path, shape: tuple[int, int, int, int, int], seed: int) -> int:
    """A GPT-2 ``save_pretrained`` folder of random float32 weights; returns the parameters."""
    from safetensors.numpy import save_file

    L, d, H, V, S = shape
    rng = np.random.default_rng(seed)

    def normal(*size, std=0.02):
        return (std * rng.standard_normal(size)).astype(np.float32)

    t = {"transformer.wte.weight": normal(V, d), "transformer.wpe.weight": normal(S, d, std=0.01)}
    for i in range(L):
        at = f"transformer.h.{i}"
        for ln in ("ln_1", "ln_2"):
            t[f"{at}.{ln}.weight"] = np.ones(d, np.float32)
            t[f"{at}.{ln}.bias"] = np.zeros(d, np.float32)
        proj = 0.02 / math.sqrt(2 * L)  # GPT-2's scaled initialisation of residual projections
        maps = (
            ("attn.c_attn", d, 3 * d, 0.02),
            ("attn.c_proj", d, d, proj),
            ("mlp.c_fc", d, 4 * d, 0.02),
            ("mlp.c_proj", 4 * d, d, proj),
        )
        for name, n_in, n_out, std in maps:
            t[f"{at}.{name}.weight"] = normal(n_in, n_out, std=std)  # Conv1D: [in, out]
            t[f"{at}.{name}.bias"] = np.zeros(n_out, np.float32)
    t["transformer.ln_f.weight"] = np.ones(d, np.float32)
    t["transformer.ln_f.bias"] = np.zeros(d, np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-05,
        "n_embd": d,
        "n_head": H,
        "n_layer": L,
        "n_positions": S,
        "n_inner": None,
        "vocab_size": V,
        "tie_word_embeddings": True,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return sum(v.size for v in t.values())


def run_stage(folder: Path, length: int, seed: int) -> dict:
    """In this process: import the folder and certify one sequence (the child's work)."""
    import resource

    from exactmem.checkpoints.architectures import import_checkpoint
    from exactmem.checks.certify import certify
    from exactmem.datasets.dataset import Dataset
    from exactmem.evaluate.floats import float_logits

    t0 = time.perf_counter()
    model = import_checkpoint(folder, None)
    t1 = time.perf_counter()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    V = model.input_dim
    seq = np.random.default_rng(seed + 1).integers(0, V, (1, length)).tolist()
    label = int(np.argmax(float_logits(model, None, seq)[0])) + 1
    data = Dataset.from_tokens(seq, [label], vocab=[[t] for t in range(V)], num_classes=V)
    cert = certify(model, data, per_layer=False)
    t2 = time.perf_counter()
    fig = cert.checks[0].figures
    return {
        "verdict": cert.verdict,
        "import_s": round(t1 - t0, 1),
        "import_cpu_s": round(cpu1, 1),
        "certify_s": round(t2 - t1, 1),
        "certify_cpu_s": round(resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu1, 1),
        "precision": fig.get("precision"),
        "margin": fig.get("margins", {}).get("smallest"),
        "float_margin": fig.get("float", {}).get("smallest_margin"),
    }


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(name: str, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="exactmem-gpt2-") as tmp:
        folder = Path(tmp) / name
        params = write_gpt2(folder, SHAPES[name], args.seed)
        row: dict = {"shape": name, "parameters": params, "load_before": _load()}
        cmd = [sys.executable, __file__, "--stage", str(folder), "--length", str(args.length)]
        start = time.perf_counter()
        try:
            done = subprocess.run(
                ["/usr/bin/time", "-v", *cmd],
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
        except subprocess.TimeoutExpired:
            row.update(outcome=f"not finished within {args.timeout} s", load_after=_load())
            return row
        row["wall_s"] = round(time.perf_counter() - start, 1)
        row["load_after"] = _load()
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
        cpu = re.findall(r"(User|System) time \(seconds\): ([\d.]+)", done.stderr)
        row["peak_rss_mb"] = round(int(rss.group(1)) / 1024) if rss else None
        row["cpu_s"] = round(sum(float(v) for _, v in cpu), 1)
        if done.returncode != 0:
            said = done.stderr.split("\tCommand being timed")[0].strip().splitlines()
            row["outcome"] = f"exit {done.returncode}: {said[-1:]}"
            return row
        row.update(json.loads(done.stdout.strip().splitlines()[-1]))
        return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="1e5,1e6,3e6,1e7", help=f"of {', '.join(SHAPES)}")
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stage", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.stage:
        print(json.dumps(run_stage(Path(args.stage), args.length, args.seed)))
        return
    for name in args.shapes.split(","):
        print(json.dumps(measure(name, args)), flush=True)


if __name__ == "__main__":
    main()
