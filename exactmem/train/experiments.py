"""The papers' experiments at sizes that run in minutes on two cores, each trained model then
imported exactly and certified (:func:`exactmem.import_model`, :func:`exactmem.certify`), and
the exact construction for the same dataset beside the smallest model certified to memorize.

* ``dana`` — Dana, Pydi & Chevaleyre 2025: accuracy against the number of heads H and the head
  dimension d_h (attention-only, ``dana25``), random next-token associations;
* ``mahdavi`` — Mahdavi, Liao & Thrampoulidis 2024: memorization against H and the context
  length n (one attention layer, ``mahdavi24``), random vectors and labels;
* ``ks25`` — Kajitsuka & Sato 2025, Figure 3: the fewest blocks L that memorize N sequences,
  against N (their eq. (165) model, ``ks25``: ReLU blocks around uniform attention);
* ``madden`` — Madden, Fox & Thrampoulidis 2024: the fewest parameters (FNN width m) whose
  cross-entropy reaches the entropy bound of the next-token targets, against the number of
  contexts (their one-layer decoder, ``madden24``).

"Memorized" is decided by the certificate (every argmax label certified on Arb balls), never
by the float accuracy, which is recorded beside it. Seeded: ``torch.manual_seed``,
deterministic algorithms, one thread; the datasets come from the seeded generators of the
constructions' modules.
"""

from __future__ import annotations

import csv
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset
from exactmem.files.dataset_files import save_dataset
from exactmem.train import require_torch

__all__ = ["EXPERIMENTS", "Experiment", "TrainedRow", "run_experiment"]


@dataclass(frozen=True)
class Experiment:
    """One experiment: its datasets (key → Dataset), its grid of networks per dataset, the
    construction built for the same datasets, and how long to train."""

    name: str
    paper: str
    datasets: Callable[[bool, int], dict[str, Dataset]]
    grid: Callable[[bool], list[dict]]
    net: Callable[[Dataset, dict], object]
    inputs: Callable[[Dataset], object]
    construction: str
    construction_options: Callable[[Dataset], dict]
    steps: tuple[int, int]  # (quick, full)
    lr: float = 0.02


@dataclass
class TrainedRow:
    """One trained model's line of ``results.csv``."""

    experiment: str
    dataset: str
    examples: int
    config: str
    parameters: int  # the checkpoint's weights, as the papers count them
    ir_nonzero: int  # the imported model's non-zero parameters (exactmem.core.model.resources)
    steps: int
    final_loss: float
    torch_accuracy: float
    float64_accuracy: str
    certified: bool
    certified_examples: int
    refuted_examples: int
    smallest_margin: str
    checkpoint: str
    train_seconds: float
    certify_seconds: float
    entropy_gap: str = ""  # (loss − entropy bound) / bound, float, with next-token targets


# ---- datasets -------------------------------------------------------------------------------


def _relabel(ds: Dataset, classes: int, seed: int) -> Dataset:
    rng = random.Random(seed)
    labels = [rng.randint(1, classes) for _ in ds.sequences]
    return Dataset.from_tokens(
        [list(s) for s in ds.sequences],
        labels,
        vocab=[list(v) for v in ds.vocab],
        num_classes=classes,
    )


def _dana_data(quick: bool, seed: int) -> dict[str, Dataset]:
    from exactmem.constructions.dana25 import random_associations

    N, S, T0 = (8, 3, 24) if quick else (16, 4, 48)
    return {f"assoc_N{N}_S{S}_T{T0}": random_associations(N, S, T0, seed)}


def _mahdavi_data(quick: bool, seed: int) -> dict[str, Dataset]:
    from exactmem.constructions.mahdavi24 import random_instance

    T, d, C = (16, 6, 3) if quick else (32, 8, 4)
    ns = (2, 4) if quick else (2, 4, 6)
    return {f"vectors_T{T}_n{n}_d{d}": random_instance(T, n, d, C, seed + n) for n in ns}


def _madden_data(quick: bool, seed: int) -> dict[str, Dataset]:
    try:
        from exactmem.constructions.madden24 import random_contexts
    except ImportError:
        raise InputError("--experiment madden needs the madden24 construction") from None

    omega, S = 8, 4
    sizes = (8, 16) if quick else (16, 32, 64)
    return {f"contexts_n{n}_w{omega}_S{S}": random_contexts(n, S, omega, seed + n) for n in sizes}


def _ks_data(quick: bool, seed: int) -> dict[str, Dataset]:
    from exactmem.constructions.dana25 import random_associations

    V, n = 12, 8
    sizes = (20, 40) if quick else (25, 50, 75, 100)
    return {
        f"seqs_N{N}_n{n}": _relabel(random_associations(V, n, N, seed + N), 2, seed + N)
        for N in sizes
    }


# ---- grids and networks ---------------------------------------------------------------------


def _dana_grid(quick: bool) -> list[dict]:
    heads, dims = ((1, 2), (2,)) if quick else ((1, 2, 4), (1, 2, 4))
    return [{"d": 8, "heads": H, "head_dim": d_h} for H in heads for d_h in dims]


def _mahdavi_grid(quick: bool) -> list[dict]:
    heads = (1, 2) if quick else (1, 2, 4)
    return [{"heads": H, "head_dim": 4} for H in heads]


def _ks_grid(quick: bool) -> list[dict]:
    blocks = (1, 2) if quick else (1, 2, 4, 8)
    return [{"width": 2, "hidden": 8, "blocks": L} for L in blocks]


def _madden_grid(quick: bool) -> list[dict]:
    widths = (4, 16) if quick else (4, 8, 16, 32, 64)
    return [{"d": 8, "width": m} for m in widths]


def _madden_net(ds: Dataset, c: dict):
    from exactmem.train.nets import MaddenNet

    S = len(ds.sequences[0])
    return MaddenNet(len(ds.vocab), S, c["d"], c["width"], ds.num_classes)


def _dana_net(ds: Dataset, c: dict):
    from exactmem.train.nets import DanaNet

    S = len(ds.sequences[0])
    return DanaNet(len(ds.vocab), S, c["d"], c["heads"], c["head_dim"], ds.num_classes)


def _mahdavi_net(ds: Dataset, c: dict):
    from exactmem.train.nets import MahdaviNet

    return MahdaviNet(ds.dim, c["heads"], c["head_dim"], ds.num_classes)


def _ks_net(ds: Dataset, c: dict):
    from exactmem.train.nets import KSNet

    return KSNet(len(ds.vocab), c["width"], c["hidden"], c["blocks"], ds.num_classes)


def _ids(ds: Dataset):
    import torch

    return torch.tensor([list(s) for s in ds.sequences], dtype=torch.long)


def _vectors(ds: Dataset):
    import torch

    vocab = [[float(x) for x in v] for v in ds.vocab]
    return torch.tensor([[vocab[t] for t in s] for s in ds.sequences], dtype=torch.float32)


EXPERIMENTS: dict[str, Experiment] = {
    "dana": Experiment(
        "dana",
        "Dana, Pydi & Chevaleyre 2025: accuracy against heads and head dimension",
        _dana_data,
        _dana_grid,
        _dana_net,
        _ids,
        "dana25",
        lambda ds: {},
        (300, 600),
    ),
    "mahdavi": Experiment(
        "mahdavi",
        "Mahdavi, Liao & Thrampoulidis 2024: memorization against heads and context length",
        _mahdavi_data,
        _mahdavi_grid,
        _mahdavi_net,
        _vectors,
        "mahdavi24",
        lambda ds: {"readout": "classification"},
        (300, 600),
    ),
    "madden": Experiment(
        "madden",
        "Madden, Fox & Thrampoulidis 2024: the fewest parameters reaching the entropy bound",
        _madden_data,
        _madden_grid,
        _madden_net,
        _ids,
        "madden24",
        lambda ds: {},
        (300, 2000),
        lr=0.01,
    ),
    "ks25": Experiment(
        "ks25",
        "Kajitsuka & Sato 2025, Figure 3: the fewest blocks that memorize N sequences",
        _ks_data,
        _ks_grid,
        _ks_net,
        _ids,
        "ks25-next-token",
        lambda ds: {},
        (300, 2000),
        lr=0.01,
    ),
}


# ---- training and certifying ----------------------------------------------------------------


def _config_text(c: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in c.items())


def _fit(torch, net, x, y, labels, steps: int, lr: float) -> tuple[float, float]:
    """Full-batch Adam on the cross-entropy against ``y`` (class indices, or next-token
    distributions); the final loss and the float accuracy against ``labels``."""
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    loss = torch.tensor(0.0)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(net(x), y)
        acc = float((net(x).argmax(1) == labels).float().mean())
    return float(loss), acc


def entropy_bound(ds: Dataset) -> float | None:
    """The least mean cross-entropy any model reaches on next-token targets: the mean entropy
    of the targets (float, nats); None without targets."""
    import math

    targets = getattr(ds, "targets", ())
    if not targets:
        return None
    total = 0.0
    for row in targets:
        total -= sum(float(p) * math.log(float(p)) for p in row if p)
    return total / len(targets)


def certify_checkpoint(path: Path, arch: str, ds: Dataset) -> dict:
    """Import ``path`` exactly and certify its argmax labels on ``ds``: the labels check's
    figures (certified and refuted counts; the smallest certified margin rounded down, only
    when every label is certified; the float64 accuracy). A model the exact evaluator runs
    (``ks25``) has exact margins: its failing labels are counted from its exact outputs."""
    import numpy as np
    from gmpy2 import mpq

    from exactmem.api import import_model
    from exactmem.checks.attention import brief
    from exactmem.checks.certify import certify
    from exactmem.core.model import resources
    from exactmem.evaluate.floats import float_logits

    model = import_model(path, arch)
    cert = certify(model, ds)
    labels = next((c for c in cert.checks if c.name == "labels"), None)
    fig = labels.figures if labels is not None else {}
    passed = labels is not None and labels.passed
    margin = (fig.get("margins") or {}).get("smallest")
    if margin is None and fig.get("min_margin"):  # the exact evaluator: the margin itself
        margin = brief(mpq(fig["min_margin"]), up=False)
    if "float" in fig:
        accuracy = fig["float"]["accuracy"]
        certified_n, refuted_n = int(fig["certified"]), int(fig["refuted"])
    else:  # exactly evaluated: all labels certified, or the check names the failures
        flogits = float_logits(model, ds.vocab, ds.sequences)
        correct = sum(
            bool(row[y - 1] > max(np.delete(row, y - 1)))
            for row, y in zip(flogits, ds.labels, strict=True)
        )
        accuracy = f"{correct}/{len(ds.labels)}"
        certified_n, refuted_n = ds.size, 0
        if not passed:  # count the labels the exact outputs refute
            from exactmem.api import run

            leads = [
                min((out[-1][y - 1] - v for c, v in enumerate(out[-1]) if c != y - 1), default=1)
                for out, y in zip(run(model, ds), ds.labels, strict=True)
            ]
            certified_n = sum(1 for lead in leads if lead > 0)
            refuted_n = len(leads) - certified_n
    from exactmem.checkpoints.safetensors_io import read_safetensors

    tensors, _ = read_safetensors(path)
    res = resources(model)
    return {
        "parameters": sum(t.size for t in tensors.values()),
        "ir_nonzero": res.nonzero_parameters,
        "certified": cert.verdict == "verified" and passed,
        "certified_examples": certified_n,
        "refuted_examples": refuted_n,
        "smallest_margin": (margin or "") if passed else "",
        "float64_accuracy": accuracy,
    }


def _seed_torch(torch, seed: int) -> None:
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)


def train_rows(
    exp: Experiment, out: Path, *, quick: bool, seed: int, say: Callable[[str], None]
) -> Iterator[TrainedRow]:
    """Train and certify every network of ``exp``'s grid on each of its datasets, writing the
    datasets and checkpoints under ``out``."""
    torch = require_torch()
    from safetensors.numpy import save_file

    (out / "datasets").mkdir(parents=True, exist_ok=True)
    (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    steps = exp.steps[0] if quick else exp.steps[1]
    for key, ds in exp.datasets(quick, seed).items():
        save_dataset(ds, out / "datasets" / f"{key}.json")
        x = exp.inputs(ds)
        labels = torch.tensor([label - 1 for label in ds.labels], dtype=torch.long)
        bound = entropy_bound(ds)
        y = labels
        if bound is not None:
            y = torch.tensor([[float(p) for p in row] for row in ds.targets])
        for i, config in enumerate(exp.grid(quick)):
            _seed_torch(torch, seed * 1000 + i)
            net = exp.net(ds, config)
            started = time.perf_counter()
            loss, acc = _fit(torch, net, x, y, labels, steps, exp.lr)
            trained = time.perf_counter() - started
            name = f"{key}__" + "_".join(f"{k}{v}" for k, v in config.items())
            path = out / "checkpoints" / f"{name}.safetensors"
            save_file(net.tensors(), str(path))
            started = time.perf_counter()
            got = certify_checkpoint(path, net.arch, ds)
            certified = time.perf_counter() - started
            row = TrainedRow(
                exp.name,
                key,
                ds.size,
                _config_text(config),
                got["parameters"],
                got["ir_nonzero"],
                steps,
                round(loss, 6),
                round(acc, 4),
                got["float64_accuracy"],
                got["certified"],
                got["certified_examples"],
                got["refuted_examples"],
                got["smallest_margin"],
                str(path.relative_to(out)),
                round(trained, 2),
                round(certified, 2),
                "" if not bound else f"{(loss - bound) / bound:.3g}",
            )
            say(
                f"{exp.name} {key} {row.config}: {row.parameters} parameters, torch accuracy "
                f"{acc:.3f}, float64 {row.float64_accuracy}, "
                + ("CERTIFIED" if row.certified else "not certified")
                + (f", smallest margin ≥ {row.smallest_margin}" if row.smallest_margin else "")
            )
            yield row


def constructed_rows(exp: Experiment, datasets: dict[str, Dataset], trained: list[TrainedRow]):
    """For each dataset: the construction's parameters beside the smallest trained model that
    is certified to memorize it (None when none is)."""
    from exactmem.api import build
    from exactmem.core.model import resources

    rows = []
    for key, ds in datasets.items():
        try:
            res = resources(build(ds, exp.construction, **exp.construction_options(ds)))
            built = (res.dense_parameters, res.nonzero_parameters, res.max_bits, "")
        except InputError as e:
            built = (None, None, None, str(e)[:120])
        mine = [r for r in trained if r.dataset == key]
        ok = [r for r in mine if r.certified]
        best = min(ok, key=lambda r: r.parameters) if ok else None
        full = [r for r in mine if r.float64_accuracy and _is_full(r.float64_accuracy)]
        rows.append(
            {
                "experiment": exp.name,
                "dataset": key,
                "examples": ds.size,
                "construction": exp.construction,
                "constructed_parameters": built[0],
                "constructed_nonzero": built[1],
                "constructed_max_bits": built[2],
                "construction_note": built[3],
                "smallest_certified_trained": None if best is None else best.parameters,
                "smallest_certified_config": "" if best is None else best.config,
                "float_100_percent": len(full),
                "float_100_percent_certified": sum(r.certified for r in full),
                "smallest_margin_of_those": _smallest([r.smallest_margin for r in full]),
                "smallest_at_entropy_bound": _at_bound(mine),
            }
        )
    return rows


def _at_bound(rows: list[TrainedRow]) -> int | None:
    """The fewest parameters whose float loss is within 1 % of the entropy bound (Madden et
    al.'s criterion; float, not a certificate)."""
    near = [r.parameters for r in rows if r.entropy_gap and float(r.entropy_gap) < 0.01]
    return min(near) if near else None


def _is_full(accuracy: str) -> bool:
    a, _, b = accuracy.partition("/")
    return a == b and a != ""


def _smallest(margins: list[str]) -> str:
    vals = [m for m in margins if m]
    return min(vals, key=float) if vals else ""


def _write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    import io

    from exactmem.core.outputs import write_atomic

    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, text.getvalue().encode())  # whole or absent, also when interrupted


def run_experiment(
    name: str, out: str | Path, *, quick: bool = False, seed: int = 0, say=lambda s: None
) -> tuple[list[TrainedRow], list[dict]]:
    """Run experiment ``name`` into directory ``out``: ``datasets/*.json``,
    ``checkpoints/*.safetensors``, ``results.csv`` (one line per trained model) and
    ``constructed.csv`` (the construction beside the smallest certified trained model)."""
    if name not in EXPERIMENTS:
        raise InputError(f"--experiment {name!r} is unknown; available: {', '.join(EXPERIMENTS)}")
    exp = EXPERIMENTS[name]
    out = Path(out)
    trained = list(train_rows(exp, out, quick=quick, seed=seed, say=say))
    rows = [asdict(r) for r in trained]
    _write_csv(out / "results.csv", rows)
    side = constructed_rows(exp, exp.datasets(quick, seed), trained)
    _write_csv(out / "constructed.csv", side)
    return trained, side
