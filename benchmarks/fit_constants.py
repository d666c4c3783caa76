"""Fit the constants of the claims' tight bounds: the smallest c with measured ≤ c·shape.

    python benchmarks/fit_constants.py [--proofs DIR] [-k NAME] [--headroom 0.1] [--rows] [--write]

A claim's ``[tight]`` formulas read ``CONSTANT*(SHAPE)`` (or a plain integer, for a resource
that does not grow). For every claim in SWEEPS this script builds the construction — builds
only: resources are counted from the weights, nothing is verified — on a sweep of sizes of the
claim's generator (several N and shapes), and for each metric

* fits c = max measured/SHAPE over the sweep and the claim's own instances (which ``check``
  runs, so they must pass),
* states c·(1 + headroom) rounded up to two significant digits (at most 25 % above c; less
  than ``--headroom`` where the quick tier would otherwise miss a growth by a third; a plain
  integer, a resource that does not grow, is stated as its largest measured value),
* checks the stated constant on held-out sizes outside the sweep: "held-out" is the worst
  measured/(stated·SHAPE) there (≤ 1: the bound holds where it was not fitted),
* and reports "catch": the least stated·SHAPE/measured over the claim's quick-tier instances,
  the factor by which a resource must grow before ``check --tier quick`` fails (< 4/3: a
  regression growing it by a third fails),
* and whether the claim file states that constant ("in claim").

Ratios are floats: this script only proposes constants; ``check`` decides every bound exactly.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import sympy

sys.path.insert(0, str(Path(__file__).parent))
from common import table_header  # noqa: E402

from exactmem.claims.proofs import (  # noqa: E402
    Claim,
    Instance,
    build_instance,
    find_proofs_dir,
    formula_names,
    instance_figures,
    load_claims,
)
from exactmem.core.bounds import parse_formula  # noqa: E402
from exactmem.core.model import resources  # noqa: E402

MAX_HEADROOM = 0.25
CATCH = Fraction(4, 3)  # a regression growing a resource by this factor must fail


@dataclass(frozen=True)
class Sweep:
    """Sizes of a claim's generator: ``fit`` determines c, ``held_out`` (outside the fit's
    range of N or shapes) checks it. Each size is merged over the claim's first instance; an
    ``options`` key overrides construction options."""

    fit: list[dict]
    held_out: list[dict] = field(default_factory=list)


def _grid(ns, shapes, key: str = "N") -> list[dict]:
    return [{key: n, **shape} for shape in shapes for n in ns]


_SEQ = [
    {"n": 8, "d": 4, "vocab": 60},
    {"n": 5, "d": 2, "vocab": 50},
    {"n": 16, "d": 8, "vocab": 500},
]
SWEEPS: dict[str, Sweep] = {
    "ks25_theorem_4_1": Sweep(
        _grid([30, 60, 120, 250, 500], _SEQ),
        _grid([2000, 5000], [{"n": 8, "d": 4, "vocab": 60}, {"n": 12, "d": 6, "vocab": 300}]),
    ),
    "ks25_lemma_b2_union": Sweep(  # Theorem 4.1 with the union-bound weights of Lemma B.2
        _grid([30, 60, 120, 250, 500], _SEQ),
        _grid([2000, 5000], [{"n": 8, "d": 4, "vocab": 60}, {"n": 12, "d": 6, "vocab": 300}]),
    ),
    "ks25_seq2seq": Sweep(
        _grid(
            [20, 40, 80, 160, 320], [{"n": 6, "d": 3, "vocab": 40}, {"n": 5, "d": 2, "vocab": 25}]
        ),
        _grid([1000, 2000], [{"n": 6, "d": 3, "vocab": 40}, {"n": 8, "d": 8, "vocab": 500}]),
    ),
    "ks25_deep_sets": Sweep(
        _grid(
            [30, 60, 120, 250, 500], [{"n": 5, "d": 3, "vocab": 30}, {"n": 8, "d": 4, "vocab": 60}]
        ),
        _grid([2000, 5000], [{"n": 5, "d": 3, "vocab": 30}, {"n": 8, "d": 8, "vocab": 500}]),
    ),
    "ks25_token_ids": Sweep(
        _grid([30, 60, 120, 250, 500], [{"n": 6, "vocab": 100}, {"n": 4, "vocab": 30}]),
        _grid([2000, 5000], [{"n": 6, "vocab": 100}, {"n": 8, "vocab": 1000}]),
    ),
    "ks25_bit_budget": Sweep(
        [{"N": N, "options": {"bit_budget": B}} for B in (4, 8, 16) for N in (60, 120, 250, 500)],
        [{"N": N, "options": {"bit_budget": B}} for B in (8, 32) for N in (2000, 4000)],
    ),
    "dana25": Sweep(
        [
            {"vocab": v, "S": S, "T": H * dh + d, "options": {"d": d, "head_dim": dh, "heads": H}}
            for d, dh, H, v, S in [
                (2, 2, 20, 10, 2),
                (2, 1, 30, 12, 3),
                (4, 2, 10, 8, 5),
                (6, 3, 8, 20, 2),
                (4, 4, 6, 30, 3),
                (3, 3, 5, 20, 2),
                (10, 5, 20, 50, 2),
            ]
        ],
        [
            {"vocab": v, "S": S, "T": H * dh + d, "options": {"d": d, "head_dim": dh, "heads": H}}
            for d, dh, H, v, S in [(8, 4, 12, 60, 4), (12, 6, 16, 80, 3), (16, 8, 8, 40, 2)]
        ],
    ),
    "mahdavi24": Sweep(
        [
            {
                "T": H * (min(n, dh) - 1) + 1,
                "n": n,
                "d": d,
                "C": C,
                "options": {"heads": H, "head_dim": dh, **extra},
            }
            for H, n, d, C, dh in [
                (2, 4, 8, 3, 8),
                (3, 5, 12, 5, 12),
                (2, 6, 12, 4, 4),
                (3, 4, 10, 6, 3),
                (4, 6, 16, 5, 6),
            ]
            for extra in ({}, {"score": "softmax", "readout": "classification"})
        ],
        [
            {
                "T": H * (min(n, dh) - 1) + 1,
                "n": n,
                "d": d,
                "C": C,
                "options": {"heads": H, "head_dim": dh},
            }
            for H, n, d, C, dh in [(6, 6, 16, 5, 16), (4, 8, 16, 5, 5), (4, 6, 24, 5, 24)]
        ],
    ),
    "mahdavi24_tightness": Sweep(
        [
            {"T": H * (n - 1) + 1, "n": n, "d": d, "C": 5, "options": {"heads": H, "head_dim": d}}
            for H, n, d in [(2, 4, 8), (3, 5, 12), (4, 6, 16), (3, 4, 10)]
        ],
        [
            {"T": H * (n - 1) + 1, "n": n, "d": d, "C": 5, "options": {"heads": H, "head_dim": d}}
            for H, n, d in [(5, 6, 16), (4, 8, 24)]
        ],
    ),
    "ks25_zen_of_python": Sweep(
        _grid([100, 200, 400, 600], [{"n": 28}, {"n": 40}], key="limit"),
        _grid([800], [{"n": 64}, {"n": 96}], key="limit"),
    ),
    "ks25_theorem_4_3": Sweep(
        _grid([20, 40, 80, 160, 320], [{"n": 4, "d": 3}, {"n": 3, "d": 2}, {"n": 6, "d": 4}]),
        _grid([1000, 2000], [{"n": 4, "d": 3}, {"n": 8, "d": 8}]),
    ),
    "vys_theorem_3_1": Sweep(
        _grid([30, 60, 120, 250, 500], [{"d": 8, "C": 100}, {"d": 2, "C": 3}, {"d": 4, "C": 10}]),
        _grid([2000, 5000], [{"d": 8, "C": 100}, {"d": 6, "C": 30}]),
    ),
    "vys_tent_gadget": Sweep(
        _grid([30, 60, 120, 250, 500], [{"d": 8, "C": 100}, {"d": 2, "C": 3}, {"d": 4, "C": 10}]),
        _grid([2000, 5000], [{"d": 8, "C": 100}, {"d": 6, "C": 30}]),
    ),
}


# --------------------------------------------------------------------------- measuring


@dataclass
class Row:
    group: str  # fit | held-out | claim
    label: str
    measured: dict
    names: dict
    quick: bool = False  # a quick-tier instance of the claim: what `check` runs by default


def measure(claim: Claim, size: dict, group: str, quick: bool = False) -> Row:
    """Build one size (merged over the claim's first instance) and evaluate its figures."""
    base = claim.instances[0]
    params = {**base.params, **{k: v for k, v in size.items() if k != "options"}}
    overrides = {**base.options, **size.get("options", {})}
    inst = Instance(base.tier, base.generator, params, overrides)
    dataset, options, model = build_instance(claim, inst)
    names = formula_names(claim, instance_figures(dataset, model), dataset, options)
    label = " ".join(f"{k}={v}" for k, v in {**params, **size.get("options", {})}.items())
    return Row(group, label, resources(model).as_dict(), names, quick)


_SCALED = re.compile(r"\s*(\d+(?:\.\d+)?(?:/\d+)?)\s*\*\s*\((.*)\)\s*", re.DOTALL)


def split(text: str) -> tuple[Fraction, str]:
    """``CONSTANT*(SHAPE)`` → (CONSTANT, SHAPE); a formula without that form is its own shape
    with constant 1 (a plain integer: a resource that does not grow)."""
    match = _SCALED.fullmatch(text)
    if match:
        return Fraction(match.group(1)), match.group(2)
    return Fraction(1), text


def value(shape: str, names: dict, where: str) -> float:
    return float(sympy.N(parse_formula(shape, names, where), 30))


def short_ceiling(x: Fraction, digits: int = 2) -> Fraction:
    """The least number of ``digits`` significant digits ≥ x."""
    if x <= 0:
        return Fraction(0)
    step = Fraction(10) ** (math.floor(math.log10(x)) + 1 - digits)
    return math.ceil(x / step) * step


def written(c: Fraction) -> str:
    if c.denominator == 1:
        return str(c.numerator)
    return format(float(c), "g")


def fit(claim: Claim, rows: list[Row], headroom: float) -> list[tuple]:
    """Per metric: (claim, metric, shape, c, stated, held-out, catch, in claim)."""
    out = []
    for metric, text in claim.tight.items():
        constant, shape = split(text)
        ratios: dict[str, list[float]] = {"fit": [], "held-out": [], "claim": [], "quick": []}
        for row in rows:
            v = value(shape, row.names, f"{claim.name}: tight.{metric}")
            ratio = row.measured[metric] / v
            ratios[row.group].append(ratio)
            if row.quick:
                ratios["quick"].append(ratio)
        c = max(ratios["fit"] + ratios["claim"])  # the claim's own instances must pass too
        if text.strip().isdigit():  # a resource that does not grow: its largest value, exactly
            shape = str(max(r.measured[metric] for r in rows if r.group != "held-out"))
            c, stated = 1.0, Fraction(1)
            worst = max((r.measured[metric] / int(shape) for r in rows), default=float("nan"))
            catch = min(int(shape) / r.measured[metric] for r in rows if r.quick)
            ok = "yes" if text.strip() == shape else f"no ({text})"
            out.append((claim.name, metric, shape, c, stated, worst, catch, ok))
            continue
        best = max(ratios["quick"])  # the quick instance nearest its bound
        # the shortest constant with the most headroom (≤ --headroom, ≥ 2 %) such that the
        # quick tier catches a growth by a third, with 2 % to spare
        candidates = [
            short_ceiling(Fraction(c) * Fraction(100 + room, 100), digits)
            for room in range(round(headroom * 100), min(2, round(headroom * 100)) - 1, -1)
            for digits in (2, 3)
        ]
        fits = [x for x in candidates if x <= c * (1 + MAX_HEADROOM)]
        good = [x for x in fits if float(x) / best < float(CATCH) * 0.98]
        stated = (good or fits or candidates)[0]
        worst = max((r / float(stated) for r in ratios["held-out"]), default=float("nan"))
        catch = float(stated) / best
        ok = "yes" if stated == constant and text != shape else f"no ({written(constant)})"
        out.append((claim.name, metric, shape, c, stated, worst, catch, ok))
    return out


def write_constants(claim: Claim, fitted: list[tuple]) -> None:
    """Rewrite ``metric = "OLD"`` in the claim's ``[tight]`` table as ``STATED*(SHAPE)``."""
    text = claim.path.read_text(encoding="utf-8")
    start = text.index("\n[tight]")
    head, table = text[:start], text[start:]
    for _, metric, shape, _, stated, *_ in fitted:
        new = shape if claim.tight[metric].strip().isdigit() else f"{written(stated)}*({shape})"
        old_line = f'{metric} = "{claim.tight[metric]}"'
        table = table.replace(old_line, f'{metric} = "{new}"', 1)
    claim.path.write_text(head + table, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proofs", default=None, help="claim folder (default: the shipped claims)")
    ap.add_argument("-k", dest="pattern", default=None, help="claims whose name contains this")
    ap.add_argument("--headroom", type=float, default=0.1, help="fraction above c, ≤ 0.25")
    ap.add_argument("--rows", action="store_true", help="also print every measured ratio")
    ap.add_argument(
        "--write",
        action="store_true",
        help="write the stated constants into the claim files' [tight] tables",
    )
    args = ap.parse_args()
    if not 0 <= args.headroom <= MAX_HEADROOM:
        ap.error(f"--headroom must be in [0, {MAX_HEADROOM}]")
    claims = load_claims(find_proofs_dir(args.proofs))
    selected = [c for c in claims if c.name in SWEEPS and c.tight]
    if args.pattern:
        selected = [c for c in selected if args.pattern in c.name]
    results = []
    for claim in selected:
        sweep = SWEEPS[claim.name]
        rows = [measure(claim, s, "fit") for s in sweep.fit]
        rows += [measure(claim, s, "held-out") for s in sweep.held_out]
        rows += [
            measure(claim, {**i.params, "options": i.options}, "claim", i.tier == "quick")
            for i in claim.instances
        ]
        if args.rows:
            for metric, text in claim.tight.items():
                _, shape = split(text)
                for row in rows:
                    v = value(shape, row.names, metric)
                    print(
                        f"{claim.name} {metric} {row.group:8} {row.label:40} "
                        f"{row.measured[metric]:>8} / {v:10.2f} = {row.measured[metric] / v:.4f}"
                    )
        fitted = fit(claim, rows, args.headroom)
        if args.write:
            write_constants(claim, fitted)
        results += fitted
    table_header(
        ("claim", "metric", "shape", "fitted c", "stated", "held-out", "catch", "in claim")
    )
    for name, metric, shape, c, stated, worst, catch, ok in results:
        print(
            f"| {name} | {metric} | `{shape}` | {c:.4g} | {written(stated)} | "
            f"{worst:.3f} | {catch:.3f} | {ok} |"
        )
    bad = [r for r in results if r[5] > 1 or not r[6] < float(CATCH) or r[7] != "yes"]
    if bad:
        print(f"\n{len(bad)} of {len(results)} tight bounds need attention", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
