"""Pictures (`exactmem plot`): the field's bounds against exactmem's builds, and a certificate.

``plot bounds`` draws parameters and depth against N on log-log axes: the rows of the
comparison table (:mod:`exactmem.reports.field`) evaluated on a grid of N, beside the resources of
exactmem's own constructions built on random data at a few N. ``plot certificate`` draws the
per-layer statistics a certificate file records: each ReLU layer's sign margin (its smallest
non-zero |pre-activation|), the share of its pre-activations that are exactly 0, and its width.

Pictures decide nothing: values are converted to floats for drawing only, after the exact
evaluation or certification that produced them. matplotlib is an optional dependency (the
``plot`` extra) and is imported inside the functions that draw; the format (PNG, SVG or PDF)
follows the output's extension.
"""

from __future__ import annotations

import io
import math
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from exactmem.core.errors import InputError
from exactmem.core.wording import plural

__all__ = [
    "FORMATS",
    "CertificateView",
    "LayerRow",
    "figure_format",
    "fitted_constants",
    "measured_builds",
    "overlapping",
    "plot_bounds",
    "plot_certificate",
    "read_certificate",
    "theory_curves",
]

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
CERTIFICATE_BYTES = 64 * 2**20  # a certificate with per-layer statistics is a few hundred kB
MAX_LAYERS = 10**6
MEASURE_N_LIMIT = 10**5  # builds beyond this take minutes; `bounds --measure` is the tool there
GRID_POINTS = 48

# The rows whose formula is d + (the depth of Lemma C.1 on N points): with width 12 or 14 the
# depth order is the parameter order less d, so the row minus d is its depth curve.
DEPTH_ROWS = ("vys22-upper", "ks25-thm4.1")

# What plot bounds builds: construction name, marker, and the dataset it is built for.
MEASURED = ("vys", "ks25-next-token")


def figure_format(path: str | os.PathLike, option: str = "--out") -> str:
    """The matplotlib format of an output path, from its extension (exit 2 on any other)."""
    suffix = Path(os.fspath(path)).suffix.lower()
    if suffix not in FORMATS:
        raise InputError(
            f"{option} {os.fspath(path)}: unknown picture format {suffix or '(no extension)'!r}; "
            f"expected one of {', '.join(FORMATS)}"
        )
    return FORMATS[suffix]


def _matplotlib():
    """The non-interactive pieces of matplotlib, or a clear error naming the extra."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise InputError(
            "plot needs matplotlib, which is not installed: pip install 'exactmem[plot]' "
            "(or pip install 'matplotlib>=3.8,<4')"
        ) from None
    return matplotlib, Figure, FuncFormatter


def _save(fig, out: str | os.PathLike, fmt: str) -> int:
    """Write the figure atomically, without the creation date (so that the same inputs give
    the same picture, and a committed one changes only when the picture does); returns its
    size in bytes."""
    matplotlib, _, _ = _matplotlib()
    from exactmem.core.outputs import write_atomic

    metadata = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "exactmem", "svg.fonttype": "path"}):
        fig.savefig(buf, format=fmt, metadata=metadata[fmt], dpi=110, bbox_inches="tight")
    data = buf.getvalue()
    write_atomic(out, data, "--out")
    return len(data)


# --------------------------------------------------------------------------- plot bounds


@dataclass(frozen=True)
class Curve:
    """One line of a picture: ``ys[i]`` at ``xs[i]`` (floats, for drawing only)."""

    key: str
    label: str
    kind: str  # "upper" | "lower" | "measured"
    xs: tuple[float, ...]
    ys: tuple[float, ...]


def grid(N_min: int, N_max: int, points: int = GRID_POINTS) -> list[int]:
    """Integers from ``N_min`` to ``N_max``, evenly spaced on a log axis."""
    if N_max <= N_min:
        return [N_min]
    ratio = math.log(N_max / N_min) / (points - 1)
    return sorted({round(N_min * math.exp(k * ratio)) for k in range(points)} | {N_max})


def _legend(row: dict) -> str:
    return f"{row['work'].replace('Kajitsuka & Sato 2025, ', 'K&S 2025, ')}: {row['order']}"


def theory_curves(sizes: dict, Ns: Sequence[int]) -> tuple[list[Curve], list[Curve], list[str]]:
    """The table's parameter rows and the depth curves of :data:`DEPTH_ROWS` at every N of
    ``Ns`` (the other sizes from ``sizes``); and what was left out, and why."""
    from exactmem.reports.field import evaluate_rows

    values: dict[str, list[tuple[int, float]]] = {}
    rows: dict[str, dict] = {}
    reasons: dict[str, str] = {}
    for N in Ns:
        for row in evaluate_rows({**sizes, "N": N}):
            rows.setdefault(row["key"], row)
            if row["quantity"] != "parameters":
                reasons[row["key"]] = f"{row['key']} ({row['quantity']}, not parameters)"
            elif row["value"] is None:
                reasons.setdefault(row["key"], f"{row['key']} ({row['status']})")
            else:
                values.setdefault(row["key"], []).append((N, float(row["value"])))
    params, depth = [], []
    for key, points in values.items():
        row = rows[key]
        xs, ys = zip(*points, strict=True)
        params.append(Curve(key, _legend(row), row["kind"], xs, ys))
        if key in DEPTH_ROWS and row["formula"].startswith("d + "):
            label = f"{_legend(row)}: its Lemma C.1 depth, the row less d (dash-dot)"
            depth.append(Curve(key, label, "upper", xs, tuple(y - sizes["d"] for y in ys)))
    left_out = [reasons[k] for k in rows if k in reasons and k not in values]
    left_out += [reasons[k] + " on part of the range" for k in values if k in reasons]
    return params, depth, left_out


def measured_builds(sizes: dict, Ns: Sequence[int], seed: int = 0) -> list[dict]:
    """Build :data:`MEASURED` on random data at every N of ``Ns`` (the other sizes from
    ``sizes``) and read their resources off the built models. Builds only: certifying them
    is ``exactmem bounds --measure`` or ``exactmem verify``."""
    from exactmem.constructions import ks25, vys
    from exactmem.core.model import resources
    from exactmem.datasets.dataset import random_points
    from exactmem.datasets.sequences import random_sequences

    n, d, omega, C = (sizes[k] for k in ("n", "d", "omega", "C"))
    out = []
    for N in Ns:
        for name in MEASURED:
            if name == "vys":
                model, _ = vys.build(random_points(N, d, C, seed), {"seed": seed})
            else:
                ds = random_sequences(N, n, d, omega, C, seed)
                model, _ = ks25.build(ds, {"seed": seed}, name)
            out.append({"construction": name, "N": N, **resources(model).as_dict()})
    return out


# The table row whose formula each measured construction builds to: the fitted constant is the
# factor by which that row, drawn with its hidden constants set to 1, must grow to cover them.
FITTED_ROWS = {"vys": "vys22-upper", "ks25-next-token": "ks25-thm4.1"}
OVERLAP = 0.03  # curves closer than this in log₁₀ at every N are drawn on top of each other
MARKERS = "v^<>DphP*Xd8H"  # for the rows: never "o" or "s", the builds' markers
MARK_EVERY = 6


def overlapping(curves: Sequence[Curve], tolerance: float = OVERLAP) -> list[list[Curve]]:
    """The curves in groups that look like one line on log axes: every curve of a group lies
    within ``tolerance`` in log₁₀ of another of it at every N (Vardi et al.'s Ω(√N) and Theorem
    4.2's; Madden et al.'s ωN and N(ω − 1)). Groups keep the curves' order; a curve drawn
    alone is a group of one."""

    def close(a: Curve, b: Curve) -> bool:
        return a.xs == b.xs and all(
            y > 0 and z > 0 and abs(math.log10(y / z)) < tolerance
            for y, z in zip(a.ys, b.ys, strict=True)
        )

    groups: list[list[Curve]] = []
    for curve in curves:
        joined = [g for g in groups if any(close(curve, c) for c in g)]
        merged = [c for g in joined for c in g] + [curve]
        groups = [g for g in groups if g not in joined] + [merged]
    order = {c.key: k for k, c in enumerate(curves)}
    return sorted(
        (sorted(g, key=lambda c: order[c.key]) for g in groups), key=lambda g: order[g[0].key]
    )


def fitted_constants(sizes: dict, builds: list[dict]) -> dict[str, dict]:
    """Per construction of :data:`FITTED_ROWS` that was built: its row's key and the smallest
    constant c with built ≤ c·row at every build, for the parameters (the row's value) and the
    depth (the row less d, Lemma C.1's depth order). These are the hidden constants the builds
    need, measured on these sizes only; floats, for drawing (``check`` decides bounds exactly)."""
    from exactmem.reports.field import evaluate_rows

    out: dict[str, dict] = {}
    for b in builds:
        key = FITTED_ROWS.get(b["construction"])
        if key is None:
            continue
        row = next(r for r in evaluate_rows({**sizes, "N": b["N"]}) if r["key"] == key)
        if row["value"] is None:
            continue
        value = float(row["value"])
        fit = out.setdefault(b["construction"], {"row": key, "parameters": 0.0, "depth": 0.0})
        fit["parameters"] = max(fit["parameters"], b["dense_parameters"] / value)
        fit["depth"] = max(fit["depth"], b["depth"] / (value - sizes["d"]))
    return out


def _constant(c: float) -> str:
    return f"{c:.2g}" if c < 10 else f"{c:.0f}"


def _draw_rows(ax, curves: list[Curve], colors: dict, style: dict[str, str]) -> list[str]:
    """Draw every row so that each stays visible where rows coincide: each row has its own
    marker; rows that overlap are drawn in alternating dashes of their colours, their markers
    staggered, and named together at the right end. Returns the notes of the groups."""
    notes = []
    for group in overlapping(curves):
        k = len(group)
        for j, curve in enumerate(group):
            marker = MARKERS[list(colors).index(curve.key) % len(MARKERS)]
            every = (j * MARK_EVERY // k, MARK_EVERY)
            line = style[curve.kind] if k == 1 else (j * 5.0, (5.0, 5.0 * (k - 1)))
            ax.plot(
                curve.xs,
                curve.ys,
                linestyle=line,
                color=colors[curve.key],
                lw=1.8 if k > 1 else 1.6,
                marker=marker,
                ms=5,
                markevery=every,
                label=curve.label + (f" (striped: one of {k} rows that coincide)" if k > 1 else ""),
            )
        if k > 1:
            works = [c.label.split(": ")[0] for c in group]
            orders = [c.label.split(": ")[-1] for c in group]
            if len(set(works)) == 1:
                note = f"{works[0]}: {' ≡ '.join(orders)}"
            else:
                note = " ≡ ".join(f"{w} {o}" for w, o in zip(works, orders, strict=True))
            ax.annotate(  # a short tag under the right end; the legend names the rows
                f"{k} rows ≡",
                (group[0].xs[-1], group[0].ys[-1]),
                xytext=(-2, -6),
                textcoords="offset points",
                ha="right",
                va="top",
                fontsize=8,
                color="0.15",
            )
            notes.append(note)
    return notes


def _measured_curves(builds: list[dict], quantity: str) -> list[Curve]:
    curves = []
    for name in MEASURED:
        points = [(b["N"], float(b[quantity])) for b in builds if b["construction"] == name]
        if points:
            xs, ys = zip(*points, strict=True)
            label = f"exactmem {name}, built on random data (markers)"
            curves.append(Curve(name, label, "measured", xs, ys))
    return curves


def plot_bounds(
    out: str | os.PathLike,
    *,
    N_min: int = 10,
    N_max: int = 10**6,
    n: int = 16,
    d: int = 8,
    omega: int = 1000,
    C: int = 10,
    measure_Ns: Sequence[int] = (100, 300, 1000, 3000, 10000),
    seed: int = 0,
) -> str:
    """Draw parameters and depth against N to ``out``; returns a one-line summary."""
    from exactmem.core.outputs import check_output

    fmt = figure_format(out)
    check_output(out, "--out")
    _, Figure, _ = _matplotlib()
    for name, value in (("N-min", N_min), ("n", n), ("d", d), ("vocab", omega), ("C", C)):
        if value < 1:
            raise InputError(f"--{name} must be ≥ 1, got {value}")
    if n < 2:
        raise InputError("--n must be ≥ 2 (several rows divide by n − 1)")
    if N_max < max(N_min, 2):
        raise InputError(f"--N-max {N_max}: must be ≥ 2 and ≥ --N-min {N_min}")
    if N_max > 10**15:
        raise InputError(f"--N-max {N_max}: at most 10¹⁵")
    bad = [N for N in measure_Ns if not 2 <= N <= MEASURE_N_LIMIT]
    if bad:
        raise InputError(
            f"--measure-N {bad[0]}: each N must lie in 2..{MEASURE_N_LIMIT} (builds beyond "
            "take minutes; `exactmem bounds --measure` reports single sizes)"
        )
    sizes = {"n": n, "d": d, "omega": omega, "C": C}
    params, depth, left_out = theory_curves(sizes, grid(N_min, N_max))
    builds = measured_builds(sizes, sorted(set(measure_Ns)), seed)

    fig = Figure(figsize=(13.5, 5.6), layout="constrained")
    ax_p, ax_d = fig.subplots(1, 2, width_ratios=(1.25, 1))
    colors = dict(zip((c.key for c in params), _colors(len(params)), strict=True))
    _draw_rows(ax_p, params, colors, {"upper": "-", "lower": "--"})
    _draw_rows(ax_d, depth, colors, {"upper": "-.", "lower": "-."})
    fits = fitted_constants(sizes, builds)
    for ax, curves, quantity in ((ax_p, params, "parameters"), (ax_d, depth, "depth")):
        for name, fit in fits.items():
            row = next((c for c in curves if c.key == fit["row"]), None)
            if row is None:
                continue
            c = fit[quantity]
            ax.plot(
                row.xs,
                [y * c for y in row.ys],
                linestyle=(0, (1, 2)),
                color=colors[row.key],
                lw=1.3,
                label=f"{row.label.split(': ')[0]} × {_constant(c)}: the constant the "
                f"{name} builds need (dotted)",
            )
    for ax, quantity in ((ax_p, "dense_parameters"), (ax_d, "depth")):
        for curve, marker in zip(_measured_curves(builds, quantity), "os", strict=False):
            ax.plot(
                curve.xs,
                curve.ys,
                marker + ":",
                color="black",
                ms=7,
                mfc="white",
                mew=1.6,
                label=curve.label,
                zorder=5,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N (points or sequences)")
        ax.grid(True, which="major", alpha=0.3)
    ax_p.set_ylabel("parameters")
    ax_p.set_title("parameters: upper bounds (solid), lower (dashed), built (open markers)")
    ax_d.set_ylabel("depth (layers)")
    ax_d.set_title("depth: Lemma C.1's order beside exactmem's builds")
    handles, labels = ax_p.get_legend_handles_labels()
    more = ax_d.get_legend_handles_labels()
    for handle, label in zip(*more, strict=True):
        if label not in labels:
            handles.append(handle)
            labels.append(label)
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    need = "; ".join(
        f"{name} needs c = {_constant(f['parameters'])} (parameters), {_constant(f['depth'])} "
        "(depth)"
        for name, f in fits.items()
    )
    caption = (
        "Order-only rows (Õ, O, Ω) are drawn with every hidden constant set to 1: compare "
        "slopes, not heights."
        + (
            f" Dotted: a row times the constant c its construction's builds need ({need})."
            if fits
            else ""
        )
    )
    fig.suptitle(
        f"Memorization bounds against N (n = {n}, d = {d}, ω = {omega}, C = {C}, r = δ = 1, "
        "log base 2)\n" + "\n".join(textwrap.wrap(caption, 150)),
        fontsize=10,
    )
    size = _save(fig, out, fmt)
    skipped = f"; left out: {'; '.join(left_out)}" if left_out else ""
    at = ", ".join(str(N) for N in sorted(set(measure_Ns)))
    built = f"{len(builds)} builds at N = {at}" if builds else "no builds"
    return (
        f"wrote {os.fspath(out)} ({fmt}, {size} bytes): {len(params)} table rows on "
        f"{N_min}..{N_max}, {built}{skipped}"
    )


def _colors(count: int, start: int = 0) -> list:
    _matplotlib()
    from matplotlib import colormaps

    palette = colormaps["tab20"]  # 20 colours in pairs: the strong ones first, then the pale
    return [palette((start + 2 * k) % 20 if k < 10 else (2 * k + 1) % 20) for k in range(count)]


# --------------------------------------------------------------------------- plot certificate


@dataclass(frozen=True)
class LayerRow:
    """One ReLU layer of a certificate's ``activation.layers``: ``margin`` is the exact text of
    its smallest non-zero |pre-activation|, None when every pre-activation is exactly 0."""

    sublayer: int
    layer: int
    units: int
    inputs: int
    zeros: int
    margin: str | None
    log10_margin: float | None


@dataclass(frozen=True)
class CertificateView:
    """The fields of a certificate file that ``plot certificate`` draws, validated."""

    verdict: str
    checklist: str
    items: int
    checks_passed: int
    checks: int
    layers: tuple[LayerRow, ...]


def _get(obj: object, key: str, kind: type | tuple, where: str):
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")
    if key not in obj:
        raise InputError(f"{where}.{key}: missing")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InputError(f"{where}.{key}: wrong type {type(value).__name__}")
    return value


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}: expected a non-negative integer, got {str(value)[:40]!r}")
    return value


def _log10_rational(text: object, where: str) -> float:
    """log₁₀ of a positive rational written by ``format_rational`` ("3", "1/2", big parts in
    hex), computed on the exact integers (a float of the value could overflow)."""
    if not isinstance(text, str) or len(text) > 100_000:
        raise InputError(f"{where}: expected a rational such as '1/2' (at most 100000 characters)")
    parts = text.split("/")
    if len(parts) > 2:
        raise InputError(f"{where}: malformed rational {text[:40]!r}")
    try:
        nums = [int(p, 16) if p.lower().startswith("0x") else int(p, 10) for p in parts]
    except ValueError:
        raise InputError(f"{where}: malformed rational {text[:40]!r}") from None
    if any(k <= 0 for k in nums):
        raise InputError(f"{where}: a margin is a positive rational, got {text[:40]!r}")
    return math.log10(nums[0]) - (math.log10(nums[1]) if len(nums) == 2 else 0.0)


def read_certificate(path: str | os.PathLike) -> CertificateView:
    """Read a certificate file (format ``exactmem.certificate/2``) and validate the fields a
    picture uses: its hash, the verdict, the criteria, the checks and the per-layer activation
    statistics. Every failure is an :class:`InputError` naming the field."""
    from exactmem.files.model_files import read_certificate_file

    where = os.fspath(path)
    cert = read_certificate_file(path, CERTIFICATE_BYTES)  # size, format and hash
    here = f"{where}: certificate"
    verdict = _get(cert, "verdict", str, here)
    criteria = _get(_get(cert, "subject", dict, here), "criteria", dict, f"{here}.subject")
    checklist = _get(criteria, "checklist", str, f"{here}.subject.criteria")
    items = _count(_get(_get(cert, "data", dict, here), "N", int, f"{here}.data"), f"{here}.data.N")
    checks = _get(cert, "checks", list, here)
    passed = 0
    for i, check in enumerate(checks):
        _get(check, "name", str, f"{here}.checks[{i}]")
        passed += _get(check, "passed", bool, f"{here}.checks[{i}]")
    activation = _get(cert, "activation", dict, here)
    if "layers" not in activation:
        raise InputError(
            f"{here}.activation.layers: missing (the certificate was written without per-layer "
            "statistics; `exactmem verify --certificate` writes them)"
        )
    raw = _get(activation, "layers", list, f"{here}.activation")
    if not raw:
        raise InputError(f"{here}.activation.layers: empty (no ReLU layers: nothing to draw)")
    if len(raw) > MAX_LAYERS:
        raise InputError(f"{here}.activation.layers: more than {MAX_LAYERS} layers")
    relu = _count(
        _get(activation, "relu_layers", int, f"{here}.activation"),
        f"{here}.activation.relu_layers",
    )
    if relu != len(raw):
        raise InputError(
            f"{here}.activation.relu_layers: {relu}, but activation.layers lists {len(raw)}"
        )
    layers = []
    for i, entry in enumerate(raw):
        at = f"{here}.activation.layers[{i}]"
        if not isinstance(entry, list) or len(entry) != 6:
            raise InputError(
                f"{at}: expected [sublayer, layer, units, inputs, zeros, margin or null]"
            )
        sub, layer, units, inputs, zeros = (
            _count(v, f"{at}[{k}]") for k, v in enumerate(entry[:5])
        )
        if zeros > units * inputs:
            raise InputError(f"{at}[4]: {zeros} zeros among {units}·{inputs} pre-activations")
        margin = None if entry[5] is None else _log10_rational(entry[5], f"{at}[5]")
        layers.append(LayerRow(sub, layer, units, inputs, zeros, entry[5], margin))
    return CertificateView(verdict, checklist, items, passed, len(checks), tuple(layers))


def plot_certificate(cert_path: str | os.PathLike, out: str | os.PathLike) -> str:
    """Draw a certificate's per-layer margins and activation statistics to ``out``; returns a
    one-line summary."""
    from exactmem.core.outputs import check_output

    fmt = figure_format(out)
    check_output(out, "--out", [cert_path])
    _, Figure, FuncFormatter = _matplotlib()
    view = read_certificate(cert_path)
    layers = view.layers

    fig = Figure(figsize=(12, 7.8), layout="constrained")
    ax_m, ax_z, ax_u = fig.subplots(3, 1, sharex=True, height_ratios=(1.3, 1, 0.8))
    subs = sorted({r.sublayer for r in layers})
    colors = dict(zip(subs, _colors(len(subs)), strict=True))
    for sub in subs:
        idx = [k for k, r in enumerate(layers) if r.sublayer == sub]
        with_margin = [k for k in idx if layers[k].log10_margin is not None]
        ax_m.plot(
            with_margin,
            [layers[k].log10_margin for k in with_margin],
            "o",
            ms=3.5,
            color=colors[sub],
            label=f"sub-layer {sub} ({plural(len(idx), 'ReLU layer')})",
        )
        ax_z.bar(
            idx,
            [
                100 * r.zeros / (r.units * r.inputs) if r.units * r.inputs else 0
                for r in (layers[k] for k in idx)
            ],
            width=1.0,
            color=colors[sub],
        )
        ax_u.bar(idx, [layers[k].units for k in idx], width=1.0, color=colors[sub])
    margins = [r.log10_margin for r in layers if r.log10_margin is not None]
    if margins:
        low = min(margins)
        ax_m.axhline(low, color="crimson", lw=1, ls="--", label="smallest margin")
        span = max(margins) - low
        ax_m.set_ylim(low - max(0.25, 0.1 * span), max(margins) + max(0.25, 0.1 * span))
    distinct = {
        r.log10_margin: r.margin
        for r in layers
        if r.margin is not None and r.log10_margin is not None
    }
    if len(distinct) <= 8 and all(len(t) <= 12 for t in distinct.values()):
        # few margins: tick each at its exact value
        ax_m.set_yticks(sorted(distinct), [distinct[v] for v in sorted(distinct)])
    else:
        ax_m.yaxis.set_major_formatter(FuncFormatter(_power_of_ten))
    ax_m.set_ylabel("sign margin\n(smallest non-zero |pre-activation|)")
    ax_m.legend(fontsize=8, loc="best", framealpha=0.9)
    empty = sum(r.log10_margin is None for r in layers)
    ax_m.set_title(
        "exact sign margin of every ReLU layer (log scale)"
        + (f"; {empty} layers have no non-zero pre-activation" if empty else "")
    )
    ax_z.set_ylabel("pre-activations\nexactly 0 (%)")
    ax_z.set_title("share of each layer's pre-activations on the ReLU kink (exactly 0)")
    ax_u.set_ylabel("width (units)")
    ax_u.yaxis.get_major_locator().set_params(integer=True)
    ax_u.set_xlabel("ReLU layer (in evaluation order)")
    for ax in (ax_m, ax_z, ax_u):
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_xlim(-1, len(layers))
    fig.suptitle(
        f"certificate {Path(os.fspath(cert_path)).name}: {view.verdict.upper()}, "
        f"{view.checks_passed} of {view.checks} checks passed, N = {view.items}\n"
        f"criteria: {view.checklist}",
        fontsize=11,
    )
    size = _save(fig, out, fmt)
    measured = [r for r in layers if r.log10_margin is not None]
    smallest = min(measured, key=lambda r: r.log10_margin or 0.0) if measured else None
    return (
        f"wrote {os.fspath(out)} ({fmt}, {size} bytes): {plural(len(layers), 'ReLU layer')} of a "
        f"{view.verdict} certificate"
        + (f", smallest sign margin {smallest.margin}" if smallest else "")
    )


def _power_of_ten(value: float, _pos: int) -> str:
    """Tick text of a log₁₀ value: 10^k as an exact power where k is an integer."""
    if abs(value - round(value)) < 1e-9:
        return f"$10^{{{int(round(value))}}}$"
    return f"$10^{{{value:.2g}}}$"
