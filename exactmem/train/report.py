"""The tables and the picture of docs/constructed-and-trained.md, read back from the CSV files
that ``exactmem train`` writes (``results.csv``, ``constructed.csv``). Plain CSV and
matplotlib: no PyTorch needed to draw or print what was trained."""

from __future__ import annotations

import csv
import os
from pathlib import Path

from exactmem.core.errors import InputError

__all__ = ["plot_results", "read_rows", "side_by_side_table", "trained_table"]


def read_rows(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of one CSV file ``exactmem train`` wrote."""
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None


def _folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "results.csv").exists())


def _number(text: str) -> str:
    return f"{int(text):,}".replace(",", " ") if text else "—"


def side_by_side_table(root: str | os.PathLike) -> str:
    """Markdown: per dataset, the construction's parameters beside the smallest trained model
    certified to memorize it, and how many models float calls 100 % accurate are certified."""
    lines = [
        "| experiment | dataset | examples | construction: parameters dense (non-zero) "
        "| smallest certified trained: weights | float 100 % → certified "
        "| their smallest margin | fewest weights at the entropy bound (float) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for folder in _folders(Path(root)):
        for r in read_rows(folder / "constructed.csv"):
            built = (
                f"{r['construction']}: {_number(r['constructed_parameters'])} "
                f"({_number(r['constructed_nonzero'])})"
                if r["constructed_parameters"]
                else f"{r['construction']}: not built"
            )
            best = (
                f"{_number(r['smallest_certified_trained'])} ({r['smallest_certified_config']})"
                if r["smallest_certified_trained"]
                else "none"
            )
            lines.append(
                f"| {r['experiment']} | {r['dataset']} | {r['examples']} | {built} | {best} "
                f"| {r['float_100_percent_certified']} of {r['float_100_percent']} "
                f"| {r['smallest_margin_of_those'] or '—'} "
                f"| {_number(r.get('smallest_at_entropy_bound') or '')} |"
            )
    return "\n".join(lines)


def trained_table(root: str | os.PathLike, experiment: str) -> str:
    """Markdown: every trained model of ``experiment`` — its size, float accuracies and
    certificate."""
    lines = [
        "| dataset | model | weights | float64 accuracy | certified | smallest margin |",
        "|---|---|---|---|---|---|",
    ]
    for r in read_rows(Path(root) / experiment / "results.csv"):
        cert = "yes" if r["certified"] == "True" else f"no ({r['refuted_examples']} refuted)"
        lines.append(
            f"| {r['dataset']} | {r['config']} | {_number(r['parameters'])} "
            f"| {r['float64_accuracy']} | {cert} | {r['smallest_margin'] or '—'} |"
        )
    return "\n".join(lines)


def plot_results(root: str | os.PathLike, out: str | os.PathLike) -> str:
    """Two panels: every trained model's weights against the fraction of its examples whose
    label is certified (filled: all of them), and per dataset the construction's non-zero
    parameters against the smallest certified trained model's weights. Returns what was
    drawn."""
    from exactmem.reports.plot import _colors, _matplotlib, _save, figure_format

    fmt = figure_format(out)
    _, Figure, _ = _matplotlib()
    fig = Figure(figsize=(10, 4.2))
    left, right = fig.subplots(1, 2)
    folders = _folders(Path(root))
    colors = _colors(max(1, len(folders)))
    pairs = 0
    for color, folder in zip(colors, folders, strict=False):
        rows = read_rows(folder / "results.csv")
        name = folder.name
        for certified in (True, False):
            pick = [r for r in rows if (r["certified"] == "True") == certified]
            if not pick:
                continue
            xs = [int(r["parameters"]) for r in pick]
            ys = [
                max(0, int(r["certified_examples"])) / int(r["examples"])
                if int(r["certified_examples"]) >= 0
                else 0.0
                for r in pick
            ]
            left.scatter(
                xs,
                ys,
                color=color,
                facecolors=color if certified else "none",
                label=f"{name} (certified)" if certified else f"{name} (not)",
                s=28,
            )
        for r in read_rows(folder / "constructed.csv"):
            if r["constructed_nonzero"] and r["smallest_certified_trained"]:
                pairs += 1
                right.scatter(
                    int(r["constructed_nonzero"]),
                    int(r["smallest_certified_trained"]),
                    color=color,
                    label=name,
                    s=28,
                )
    left.set_xscale("log")
    from matplotlib.ticker import NullFormatter

    left.xaxis.set_minor_formatter(NullFormatter())  # the minor labels of a short log axis overlap
    left.set_xlabel("trained weights (checkpoint)")
    left.set_ylabel("examples certified (fraction)")
    left.set_title("trained models, certified exactly")
    left.legend(fontsize=7)
    right.set_xscale("log")
    right.set_yscale("log")
    lo, hi = right.get_xlim()
    lo2, hi2 = right.get_ylim()
    span = (min(lo, lo2), max(hi, hi2))
    right.plot(span, span, color="grey", linestyle=":", linewidth=1, label="equal")
    right.set_xlabel("construction's non-zero parameters")
    right.set_ylabel("smallest certified trained model (weights)")
    right.set_title("same dataset: constructed vs trained")
    handles, labels = right.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    right.legend(unique.values(), unique.keys(), fontsize=7)
    size = _save(fig, out, fmt)
    return f"wrote {out} ({fmt}, {size} bytes): {len(folders)} experiments, {pairs} datasets paired"
