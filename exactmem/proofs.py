"""The proof regression: claim files in ``proofs/`` and the ``check`` command.

A claim file names a paper and the statement it checks, a construction with its options,
dataset instances (generator, sizes, seed, tier), the expected verdict (``verified``, or
``refuted`` for an erratum, with the checks that must fail), and bounds on the measured
resources as formulas with explicit constants. ``check`` builds, verifies and bounds every
selected instance and fails when any verdict differs from the expected one.
"""

from __future__ import annotations

import json
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from exactmem.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_NOTHING_SELECTED,
    EXIT_REFUTED,
    EXIT_VERIFIED,
    InputError,
)

__all__ = ["Claim", "Instance", "load_claims", "run_check", "run_instance"]

METRICS = (
    "width",
    "depth",
    "relu_layers",
    "dense_parameters",
    "nonzero_parameters",
    "max_bits",
    "total_bits",
)
KS25_OPTIONS = {
    "gadget",
    "sequence_weights",
    "paper_direction",
    "attention",
    "position_aware",
    "bit_budget",
}
CONSTRUCTION_OPTIONS = {
    "vys": {"gadget", "group_size", "direction_bound", "bit_widths"},
    "ks25-next-token": KS25_OPTIONS,
    "ks25-seq2seq": KS25_OPTIONS,
    "ks25-deep-sets": KS25_OPTIONS,
    "ks25-bit-budget": KS25_OPTIONS,
    "ks25-token-ids": KS25_OPTIONS - {"position_aware"},
    "mahdavi24": {
        "heads",
        "score",
        "readout",
        "temperature",
        "readout_solve",
        "tolerance",
        "over_capacity",
        "head_dim",
    },
    "dana25": {"d", "head_dim", "heads", "scale", "precision"},
}


def _build(construction: str, dataset, options: dict):
    from exactmem.constructions import ks25, vys

    if construction == "vys":
        return vys.build(dataset, options)
    if construction == "mahdavi24":
        from exactmem.constructions import mahdavi24

        return mahdavi24.build(dataset, options)
    if construction == "dana25":
        from exactmem.constructions import dana25

        return dana25.build(dataset, options)
    return ks25.build(dataset, options, construction)


@dataclass(frozen=True)
class Instance:
    tier: str
    generator: str
    params: dict
    options: dict = field(default_factory=dict)  # overrides of the claim's options

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params.items())


@dataclass(frozen=True)
class Claim:
    name: str
    path: Path
    paper: str
    statement: str
    construction: str
    options: dict
    expect: str
    refuted_by: tuple[str, ...]
    instances: tuple[Instance, ...]
    defines: dict = field(default_factory=dict)
    bounds: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- generators


def _gen_random_points(p: dict):
    from exactmem.data import random_points

    return random_points(
        p["N"],
        p["d"],
        p["C"],
        p.get("seed", 0),
        coord_bound=p.get("coord_bound", 1000),
        denominator=p.get("denominator", 1),
    )


def _gen_label_extremes(p: dict):
    """Random points whose labels are all C (C = 2^c − 1 or 2^c exercises the label width)."""
    from dataclasses import replace

    ds = _gen_random_points(p)
    return replace(ds, labels=(p["C"],) * ds.size)


def _gen_random_sequences(p: dict):
    from exactmem.sequences import random_sequences

    return random_sequences(
        p["N"],
        p["n"],
        p["d"],
        p.get("vocab", 1),
        p["C"],
        p.get("seed", 0),
        family=p.get("family", "random"),
        coord_bound=p.get("coord_bound", 1000),
        task=p.get("task", "next-token"),
        labels_by=p.get("labels_by", "key"),
    )


def _gen_lemma_b2_counterexample(p: dict):
    """Three sequences whose restricted multisets are {a}, {b, b}, {a, b} (Lemma B.1 picks
    A = {a, b}); the first two share the last token e and differ in label."""
    from gmpy2 import mpq

    from exactmem.data import Dataset

    vocab = ((mpq(1), mpq(0)), (mpq(0), mpq(1)), (mpq(2), mpq(2)), (mpq(-1), mpq(3)))
    return Dataset(
        "next-token",
        (1, 2, 1),
        2,
        vocab=vocab,
        sequences=((0, 2, 3), (1, 1, 3), (0, 1, 3)),
        meta={"generator": "lemma_b2_counterexample"},
    )


def _gen_zen(p: dict):
    from exactmem.sequences import zen_of_python

    return zen_of_python(p.get("n", 32), unit=p.get("unit", "char"), limit=p.get("limit"))


def _gen_attention(p: dict):
    from exactmem.constructions.mahdavi24 import random_instance

    return random_instance(
        p["T"],
        p["n"],
        p["d"],
        p["C"],
        p.get("seed", 0),
        shared_context=p.get("shared_context", False),
    )


def _gen_associations(p: dict):
    from exactmem.constructions.dana25 import random_associations

    return random_associations(p["vocab"], p["S"], p["T"], p.get("seed", 0))


GENERATORS: dict[str, Callable] = {
    "attention": _gen_attention,
    "associations": _gen_associations,
    "random_points": _gen_random_points,
    "label_extremes": _gen_label_extremes,
    "random_sequences": _gen_random_sequences,
    "lemma_b2_counterexample": _gen_lemma_b2_counterexample,
    "zen": _gen_zen,
}


# --------------------------------------------------------------------------- claim files


def _require(obj: dict, key: str, kind: type, where: str):
    if key not in obj:
        raise InputError(f"{where}: missing key '{key}'")
    if not isinstance(obj[key], kind):
        raise InputError(f"{where}: '{key}' must be a {kind.__name__}")
    return obj[key]


def load_claim(path: Path) -> Claim:
    where = f"claim file {path}"
    try:
        obj = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{where}: cannot read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML ({exc})") from None
    construction = _require(obj, "construction", str, where)
    if construction not in CONSTRUCTION_OPTIONS:
        raise InputError(f"{where}: unknown construction {construction!r}")
    options = obj.get("options", {})
    unknown = set(options) - CONSTRUCTION_OPTIONS[construction]
    if unknown:
        raise InputError(f"{where}: unknown options {', '.join(sorted(unknown))}")
    expect = _require(obj, "expect", str, where)
    if expect not in ("verified", "refuted"):
        raise InputError(f"{where}: expect must be 'verified' or 'refuted'")
    refuted_by = tuple(obj.get("refuted_by", ()))
    if expect == "refuted" and not refuted_by:
        raise InputError(f"{where}: an expected refutation must name the checks in refuted_by")
    instances = []
    for i, inst in enumerate(_require(obj, "instance", list, where)):
        iw = f"{where}: instance[{i}]"
        inst = dict(inst)
        tier = inst.pop("tier", "quick")
        if tier not in ("quick", "full"):
            raise InputError(f"{iw}: tier must be 'quick' or 'full'")
        gen = inst.pop("generator", None)
        if gen not in GENERATORS:
            raise InputError(f"{iw}: generator must be one of {', '.join(GENERATORS)}")
        overrides = inst.pop("options", {})
        if not isinstance(overrides, dict) or set(overrides) - CONSTRUCTION_OPTIONS[construction]:
            raise InputError(f"{iw}: options must be a table of known options")
        instances.append(Instance(tier, gen, inst, overrides))
    bounds = obj.get("bounds", {})
    for key in bounds:
        if key not in METRICS:
            raise InputError(f"{where}: bound on unknown metric {key!r}; known: {METRICS}")
    return Claim(
        name=obj.get("name", path.stem),
        path=path,
        paper=_require(obj, "paper", str, where),
        statement=_require(obj, "statement", str, where),
        construction=construction,
        options=options,
        expect=expect,
        refuted_by=refuted_by,
        instances=tuple(instances),
        defines=obj.get("define", {}),
        bounds=bounds,
    )


def find_proofs_dir(given: str | None) -> Path:
    if given:
        path = Path(given)
        if not path.is_dir():
            raise InputError(f"--proofs {given}: not a directory")
        return path
    here = Path(__file__).resolve().parent
    for candidate in (Path.cwd() / "proofs", here / "proofs", here.parent / "proofs"):
        if candidate.is_dir():
            return candidate
    raise InputError("no proofs/ directory here; run from the repository or pass --proofs DIR")


def load_claims(directory: Path) -> list[Claim]:
    return [load_claim(p) for p in sorted(directory.glob("*.toml"))]


# --------------------------------------------------------------------------- running


def _bound_checks(claim: Claim, cert, dataset, options: dict) -> list:
    import sympy

    from exactmem.bounds import decide_le, parse_formula
    from exactmem.verify import Check

    data = cert.data
    names: dict = {
        "N": sympy.Integer(dataset.size),
        "d": sympy.Integer(data["d"]),
        "C": sympy.Integer(dataset.num_classes),
        "r": sympy.sqrt(sympy.Rational(data["r2"])),
    }
    if "n" in data:
        names["n"] = sympy.Integer(data["n"])
    if "vocabulary" in data:
        names["omega"] = sympy.Integer(data["vocabulary"])
    if options.get("bit_budget"):
        names["B"] = sympy.Integer(options["bit_budget"])
    delta2 = data.get("delta2")
    if delta2 is None:  # fewer than two distinct inputs: every δ is a valid separation
        names["delta"] = sympy.Integer(1)
    elif not delta2.startswith("not"):
        names["delta"] = sympy.sqrt(sympy.Rational(delta2))
    where = f"claim file {claim.path}"
    for key, text in claim.defines.items():
        names[key] = parse_formula(text, names, f"{where}: define.{key}")
    checks = []
    measured = cert.resources.as_dict()
    for metric, text in claim.bounds.items():
        expr = parse_formula(text, names, f"{where}: bounds.{metric}")
        result = decide_le(measured[metric], expr)
        detail = f"{metric} {measured[metric]} ≤ {result.bound}  ({text})"
        if result.holds is None:
            detail = f"undecided at maximum precision: {detail}"
        check = Check(
            f"bound.{metric}",
            result.holds is True,
            detail,
            {"measured": measured[metric], "bound": result.bound},
        )
        checks.append((check, result.holds is None))
    return checks


def run_instance(
    claim: Claim,
    inst: Instance,
    progress: Callable[[str], None] | None,
    jobs: int = 1,
    evaluator: str = "fast",
) -> dict:
    """Build, verify and bound one instance; returns its JSON record."""
    from exactmem.certify import certificate_json, certify

    start = time.perf_counter()
    dataset = GENERATORS[inst.generator](inst.params)
    options = {**claim.options, **inst.options, "seed": inst.params.get("seed", 0)}
    model, _ = _build(claim.construction, dataset, options)
    # the claim is the user's criterion: its construction's full checklist, and the tolerance
    # it states (a construction option the build also aims for), never the model's meta
    cert = certify(
        model,
        dataset,
        construction=claim.construction,
        tolerance=options.get("tolerance"),
        progress=progress,
        per_layer=False,
        jobs=jobs,
        evaluator=evaluator,
    )
    bound_checks = _bound_checks(claim, cert, dataset, options)
    cert.checks.extend(c for c, _ in bound_checks)
    undecided = any(u for _, u in bound_checks)
    failed = [c.name for c in cert.failed]
    if undecided and all(name.startswith("bound.") for name in failed):
        verdict = "inconclusive"
    else:
        verdict = cert.verdict
    if claim.expect == "verified":
        ok = verdict == "verified"
    else:
        ok = verdict == "refuted" and all(name in failed for name in claim.refuted_by)
    record = certificate_json(cert)
    record.update(
        {
            "tier": inst.tier,
            "generator": inst.generator,
            "params": {**inst.params, **inst.options},
            "verdict": verdict,
            "expected": claim.expect,
            "ok": ok,
            "seconds": round(time.perf_counter() - start, 3),
        }
    )
    return record


def run_check(
    *,
    args=None,
    pattern: str | None,
    tier: str,
    as_json: bool,
    proofs_dir: str | None = None,
    progress: Callable | None = None,
    jobs: int = 1,
    evaluator: str = "fast",
) -> int:
    """``python -m exactmem check``: returns the exit code."""
    from exactmem.certify import library_versions

    directory = find_proofs_dir(proofs_dir)
    claims = [c for c in load_claims(directory) if not pattern or pattern in c.name]
    tiers = ("quick",) if tier == "quick" else ("quick", "full")
    selected = [(c, i) for c in claims for i in c.instances if i.tier in tiers]
    if not selected:
        print(f"no claim instances selected (pattern {pattern!r}, tier {tier})", file=sys.stderr)
        return EXIT_NOTHING_SELECTED
    results = []
    for n, (claim, inst) in enumerate(selected, 1):
        if progress:
            progress(f"[{n}/{len(selected)}] {claim.name}: {inst.label}", force=True)
        record = run_instance(claim, inst, progress, jobs, evaluator)
        record["claim"] = claim.name
        results.append(record)
        if progress:
            mark = "ok" if record["ok"] else "MISMATCH"
            progress(
                f"    {record['verdict']} (expected {claim.expect}) {mark} "
                f"in {record['seconds']:.1f}s",
                force=True,
            )
    mismatches = [r for r in results if not r["ok"]]
    inconclusive = [r for r in mismatches if r["verdict"] == "inconclusive"]
    if not mismatches:
        code = EXIT_VERIFIED
    elif len(inconclusive) == len(mismatches):
        code = EXIT_INCONCLUSIVE
    else:
        code = EXIT_REFUTED
    if args is not None:
        args.pending_exit = code
    if as_json:
        info = {
            c.name: {"paper": c.paper, "statement": c.statement, "file": str(c.path)}
            for c in claims
        }
        json.dump(
            {
                "claims": info,
                "instances": results,
                "versions": library_versions(),
                "summary": {"instances": len(results), "mismatches": len(mismatches)},
            },
            sys.stdout,
            indent=1,
        )
        print()
    else:
        _print_table(results)
    return code


def _print_table(results: list[dict]) -> None:
    header = (
        "claim",
        "instance",
        "expected",
        "verdict",
        "",
        "N",
        "width",
        "depth",
        "non-zero",
        "max bits",
        "s",
    )
    rows = []
    for r in results:
        res = r["resources"]
        rows.append(
            (
                r["claim"],
                " ".join(f"{k}={v}" for k, v in r["params"].items()) or "(fixed dataset)",
                r["expected"],
                r["verdict"],
                "ok" if r["ok"] else "MISMATCH",
                str(r["data"]["N"]),
                str(res["width"]),
                str(res["depth"]),
                str(res["nonzero_parameters"]),
                str(res["max_bits"]),
                f"{r['seconds']:.1f}",
            )
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    for row in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for r in results:
        if not r["ok"]:
            failed = [c for c in r["checks"] if not c["passed"]]
            print(
                f"\n{r['claim']} ({' '.join(f'{k}={v}' for k, v in r['params'].items())}): "
                f"{r['verdict']}, expected {r['expected']}"
            )
            for c in failed:
                print(f"  FAIL {c['name']}: {c['detail']}")
    total = len(results)
    bad = sum(1 for r in results if not r["ok"])
    print(f"\n{total - bad} of {total} claim instances as expected")
