"""The proof regression: claim files in ``proofs/`` and the ``check`` command.

A claim file names a paper and the statement it checks, a construction with its options,
dataset instances (generator, sizes, seed, tier), the expected verdict (``verified``, or
``refuted`` for an erratum, with the checks that must fail), and bounds on the measured
resources as formulas with explicit constants: ``[bounds]`` with the paper's constants, and
``[tight]`` with the constants our runs need (fitted by ``benchmarks/fit_constants.py`` with at
most 25 % headroom), so that a regression growing a resource by a third fails. ``check``
builds, verifies and bounds every selected instance and fails when any verdict differs from the
expected one.

A claim file is untrusted input: every field is checked as data (types, known keys, value
ranges; an error names the file and the key path), and formulas are read by the grammar of
:mod:`exactmem.core.formula`, never run. Without ``--proofs``, ``check`` runs the claims shipped
with
the package, never a ``proofs/`` folder of the current directory.
"""

from __future__ import annotations

import json
import re
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from exactmem.checks.checklist import BOUND_METRICS
from exactmem.claims.generators import GENERATOR_PARAMS, GENERATORS, REQUIRED_PARAMS, generated_size
from exactmem.core.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_NOTHING_SELECTED,
    EXIT_REFUTED,
    EXIT_VERIFIED,
    InconclusiveError,
    InputError,
)
from exactmem.core.limits import generated_size_problem, open_regular

__all__ = [
    "Claim",
    "Instance",
    "build_instance",
    "find_proofs_dir",
    "formula_names",
    "instance_figures",
    "load_claim",
    "load_claims",
    "run_check",
    "run_instance",
    "shipped_proofs_dir",
]

METRICS = BOUND_METRICS  # the resources counted from the weights, and the margin


def _build(construction: str, dataset, options: dict, progress: Callable | None = None):
    """(model, None): the registered construction's builder (:mod:`exactmem.checks.registry`) on
    ``dataset`` (the pair of earlier releases, whose second item was the builder's witness)."""
    from exactmem.api import _construct

    return _construct(dataset, construction, options, progress), None


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
    tight: dict = field(default_factory=dict)  # metric → formula with the fitted constant


# --------------------------------------------------------------------------- claim files


MAX_CLAIM_BYTES = 64 * 1024  # a claim file is a few kB; the cap bounds TOML parsing
MAX_DEFINES = 32
MAX_PARAMETER = 10**9  # seeds of a generator
# sizes, as `generate` bounds them (a claim asking for d = 10⁹ would run until memory runs out)
SIZE_LIMITS = {
    "N": 10**8,
    "T": 10**8,
    "n": 10**4,
    "d": 10**4,
    "vocab": 10**8,
    "S": 10**4,
    "C": 10**9,
    "limit": 10**8,
    "coord_bound": 10**9,
}
VARIABLES = ("N", "d", "C", "r", "delta", "n", "omega", "B")  # the values a formula may use
CLAIM_KEYS: dict[str, type] = {
    "name": str,
    "paper": str,
    "statement": str,
    "construction": str,
    "expect": str,
    "refuted_by": list,
    "options": dict,
    "define": dict,
    "bounds": dict,
    "tight": dict,
    "instance": list,
}
REQUIRED_KEYS = ("paper", "statement", "construction", "expect", "instance")
_KIND_NAMES = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "an array",
    dict: "a table",
}
_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,100}", re.ASCII)  # printed in reports: no escapes
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def _is(value, kind: type) -> bool:
    """``isinstance`` without TOML's booleans passing as integers."""
    if kind is int:
        return type(value) is int
    return isinstance(value, kind)


def _typed(value, kind: type, where: str):
    if not _is(value, kind):
        raise InputError(f"{where}: must be {_KIND_NAMES[kind]}, got {_toml_kind(value)}")
    return value


def _toml_kind(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for kind, text in _KIND_NAMES.items():
        if kind is not bool and isinstance(value, kind):
            return text
    return f"a {type(value).__name__}"


def _read_toml(path: Path, where: str) -> dict:
    try:
        with open_regular(path, where) as handle:  # a FIFO named *.toml would block the open
            raw = handle.read(MAX_CLAIM_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_CLAIM_BYTES:
        raise InputError(f"{where}: larger than {MAX_CLAIM_BYTES} bytes")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML ({exc})") from None
    except (ValueError, RecursionError) as exc:  # a huge integer literal, deep nesting
        raise InputError(f"{where}: not valid TOML ({type(exc).__name__})") from None


def _claim_options(construction: str, options: dict, where: str) -> dict:
    """Options of a claim or instance, checked by the parsers of ``build --set``; the TOML type
    must be the parsed type (``heads = "3"`` is refused: a string where an integer belongs)."""
    from exactmem.checks.build_options import options_of

    known = options_of(construction)
    out = {}
    for key, value in options.items():
        at = f"{where}.{key}"
        if key not in known:
            raise InputError(
                f"{at}: unknown option for {construction!r}; known: {', '.join(known)}"
            )
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif type(value) is int or isinstance(value, str):
            text = str(value)
        else:
            raise InputError(f"{at}: must be a string, integer or boolean, got {_toml_kind(value)}")
        try:
            parsed = known[key][1](key, text)
        except InputError as exc:
            reason = str(exc).split(": ", 1)[-1]
            raise InputError(f"{at} = {value!r}: {reason}") from None
        if type(parsed) is not type(value):
            raise InputError(f"{at}: must be {_toml_kind(parsed)}, got {_toml_kind(value)}")
        out[key] = parsed
    return out


def _instance(obj, construction: str, where: str) -> Instance:
    inst = dict(_typed(obj, dict, where))
    tier = _typed(inst.pop("tier", "quick"), str, f"{where}.tier")
    if tier not in ("quick", "full"):
        raise InputError(f"{where}.tier: must be 'quick' or 'full', got {tier!r}")
    if "generator" not in inst:
        raise InputError(f"{where}: missing key 'generator'")
    gen = _typed(inst.pop("generator"), str, f"{where}.generator")
    if gen not in GENERATORS:
        raise InputError(f"{where}.generator: must be one of {', '.join(GENERATORS)}")
    overrides = _typed(inst.pop("options", {}), dict, f"{where}.options")
    overrides = _claim_options(construction, overrides, f"{where}.options")
    known = GENERATOR_PARAMS[gen]
    for key, value in inst.items():
        at = f"{where}.{key}"
        if key not in known:
            listed = ", ".join(["tier", "generator", "options", *known])
            raise InputError(f"{at}: unknown key for generator {gen!r}; known: {listed}")
        kind = known[key]
        if isinstance(kind, tuple):
            if not isinstance(value, str) or value not in kind:
                raise InputError(f"{at}: must be one of {', '.join(kind)}, got {value!r}")
        elif kind is int:
            _typed(value, int, at)
            least = 0 if key == "seed" else 1
            most = SIZE_LIMITS.get(key, MAX_PARAMETER)
            if not least <= value <= most:
                raise InputError(f"{at}: must be an integer in [{least}, {most}]")
        else:
            _typed(value, kind, at)
    for key in REQUIRED_PARAMS[gen]:
        if key not in inst:
            raise InputError(f"{where}: missing key {key!r} (generator {gen!r})")
    # each size is bounded above; what they make together is bounded as `generate` bounds it
    if problem := generated_size_problem(**generated_size(gen, inst)):
        raise InputError(f"{where}: {problem}")
    return Instance(tier, gen, inst, overrides)


def _formulas(table: dict, where: str, known: list[str], *, defines: bool) -> dict:
    """``define``, ``bounds`` or ``tight``: formula strings, checked against the grammar now
    (the values of the variables come with each instance)."""
    from exactmem.core.formula import RESERVED, check_formula

    out = {}
    for key, text in table.items():
        at = f"{where}.{key}"
        if defines:
            if not _IDENTIFIER.fullmatch(key):
                raise InputError(f"{at}: a define's name must be an ASCII identifier")
            if key in RESERVED or key in VARIABLES:
                raise InputError(f"{at}: {key!r} is a variable, function or constant")
        elif key not in METRICS:
            raise InputError(f"{at}: bound on unknown metric {key!r}; known: {', '.join(METRICS)}")
        _typed(text, str, at)
        check_formula(text, known, at)
        if defines:
            known.append(key)
        out[key] = text
    return out


def load_claim(path: Path) -> Claim:
    """One claim file, every field checked as data (types, known keys, formulas by the grammar
    of :mod:`exactmem.core.formula`); an :class:`InputError` names the file and the key path."""
    where = f"claim file {path}"
    obj = _read_toml(path, where)
    for key, value in obj.items():
        if key not in CLAIM_KEYS:
            raise InputError(f"{where}: unknown key {key!r}; known: {', '.join(CLAIM_KEYS)}")
        _typed(value, CLAIM_KEYS[key], f"{where}: {key}")
    for key in REQUIRED_KEYS:
        if key not in obj:
            raise InputError(f"{where}: missing key {key!r}")
    name = obj.get("name", path.stem)
    if "name" in obj and not _NAME.fullmatch(name):
        raise InputError(f"{where}: name: must be letters, digits, '_', '.', '+' or '-' (≤ 100)")
    construction = obj["construction"]
    from exactmem.checks import registry  # the registered constructions, plugins included

    if construction not in registry.names():
        raise InputError(
            f"{where}: construction: unknown {construction!r}; known: {', '.join(registry.names())}"
        )
    options = _claim_options(construction, obj.get("options", {}), f"{where}: options")
    expect = obj["expect"]
    if expect not in ("verified", "refuted"):
        raise InputError(f"{where}: expect: must be 'verified' or 'refuted', got {expect!r}")
    refuted_by = obj.get("refuted_by", [])
    for i, check in enumerate(refuted_by):
        _typed(check, str, f"{where}: refuted_by[{i}]")
    if expect == "refuted" and not refuted_by:
        raise InputError(f"{where}: an expected refutation must name the checks in refuted_by")
    instances = tuple(
        _instance(inst, construction, f"{where}: instance[{i}]")
        for i, inst in enumerate(obj["instance"])
    )
    if not instances:
        raise InputError(f"{where}: instance: no instances")
    defines = obj.get("define", {})
    if len(defines) > MAX_DEFINES:
        raise InputError(f"{where}: define: more than {MAX_DEFINES} defines")
    from exactmem.checks.build_options import options_of

    # the construction's options, as the instance sets them (option_heads, …), beside the
    # dataset's figures: Dana's bounds are in H, d_h and the model's width d
    known = list(VARIABLES) + [f"option_{key}" for key in options_of(construction)]
    defines = _formulas(defines, f"{where}: define", known, defines=True)
    bounds = _formulas(obj.get("bounds", {}), f"{where}: bounds", known, defines=False)
    tight = _formulas(obj.get("tight", {}), f"{where}: tight", known, defines=False)
    return Claim(
        name=name,
        path=path,
        paper=obj["paper"],
        statement=obj["statement"],
        construction=construction,
        options=options,
        expect=expect,
        refuted_by=tuple(refuted_by),
        instances=instances,
        defines=defines,
        bounds=bounds,
        tight=tight,
    )


def shipped_proofs_dir() -> Path:
    """The claim files shipped with the running package: ``exactmem/claims/shipped/`` of an
    installed wheel (setuptools maps the source tree's ``proofs/`` there), else ``proofs/`` of the
    source tree this package was imported from (an editable install, or a checkout on
    ``sys.path``). Never the current directory: a checkout someone else wrote is not trusted."""
    package = Path(__file__).resolve().parent
    installed = package / "shipped"
    if installed.is_dir():
        return installed
    checkout = package.parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "proofs").is_dir():
        return checkout / "proofs"
    raise InputError(f"no claim files shipped with the package at {package}; pass --proofs DIR")


def find_proofs_dir(given: str | None) -> Path:
    """``--proofs DIR`` when given, else the claims shipped with the package."""
    if given:
        path = Path(given)
        if not path.is_dir():
            raise InputError(f"--proofs {given}: not a directory")
        return path
    return shipped_proofs_dir()


def load_claims(directory: Path) -> list[Claim]:
    return [load_claim(p) for p in sorted(directory.glob("*.toml"))]


# --------------------------------------------------------------------------- running


def formula_names(claim: Claim, data: dict, dataset, options: dict) -> dict:
    """The values a claim's formulas may name, for one instance: the dataset's figures (``data``
    as a certificate records them, :func:`exactmem.checks.bound_checks.figure_names`), the integer
    options as ``option_<key>``, and the claim's defines, each evaluated in order."""
    import sympy

    from exactmem.checks.bound_checks import figure_names
    from exactmem.core.bounds import parse_formula

    names: dict = figure_names(data, dataset)
    if options.get("bit_budget"):
        names["B"] = sympy.Integer(options["bit_budget"])
    for key, value in options.items():  # the claim's integer options (Dana's heads, head_dim, d)
        if type(value) is int:
            names[f"option_{key}"] = sympy.Integer(value)
    where = f"claim file {claim.path}"
    for key, text in claim.defines.items():
        names[key] = parse_formula(text, names, f"{where}: define.{key}")
    return names


def build_instance(claim: Claim, inst: Instance, progress: Callable | None = None) -> tuple:
    """(dataset, options, model) of one instance, with the limits ``build --set`` has;
    ``progress`` hears the generator and the construction."""
    from exactmem.checks.build_options import check_option_limits

    dataset = GENERATORS[inst.generator](inst.params, progress)
    options = {**claim.options, **inst.options, "seed": inst.params.get("seed", 0)}
    try:  # the limits `build --set` has: a claim cannot ask for a group larger than its data
        check_option_limits(options, dataset)
    except InputError as exc:
        raise InputError(f"claim file {claim.path}: instance {inst.label}: {exc}") from None
    model, _ = _build(claim.construction, dataset, options, progress)
    return dataset, options, model


def instance_figures(dataset, model) -> dict:
    """The dataset's figures as ``certify`` records them (N, n, d, C, r², δ², vocabulary),
    without evaluating the model: what fitting the tight constants needs from a build alone.
    ``check`` reads them from the certificate."""
    from exactmem.core.exact import format_rational
    from exactmem.datasets.dataset import squared_radius, squared_separation
    from exactmem.datasets.sequences import view, with_positions

    if dataset.task == "points":
        vectors = dataset.points
        data = {"N": dataset.size, "C": dataset.num_classes, "d": dataset.dim}
    else:
        if not model.token_inputs and model.input_dim == dataset.dim + 1:
            dataset = with_positions(dataset)  # a position-aware model reads (x, k)
        sv = view(dataset, by_index=model.token_inputs)
        vectors = [dataset.vocab[t] for t in sv.tokens]
        data = {
            "N": dataset.size,
            "n": len(dataset.sequences[0]),
            "d": dataset.dim,
            "C": dataset.num_classes,
            "vocabulary": len(dataset.vocab),
        }
    data["r2"] = format_rational(squared_radius(vectors))
    delta2 = squared_separation(vectors)
    data["delta2"] = None if delta2 is None else format_rational(delta2)
    return data


def _bound_checks(claim: Claim, cert, dataset, options: dict) -> list:
    """``bound.<metric>`` (the paper's constants) and ``tight.<metric>`` (the fitted constants)
    for the measured resources of ``cert`` (:func:`exactmem.checks.bound_checks.bound_checks`):
    pairs
    (check, undecided)."""
    from exactmem.checks.bound_checks import bound_checks

    names = formula_names(claim, cert.data, dataset, options)
    where = f"claim file {claim.path}"
    activation = getattr(cert, "activation", {})  # the margin's; the resources need none
    checks = bound_checks(
        claim.bounds, names, cert.resources, activation, prefix="bound", where=f"{where}: bounds"
    ) + bound_checks(
        claim.tight,
        names,
        cert.resources,
        activation,
        prefix="tight",
        where=f"{where}: tight",
        ratio=True,
    )
    return [(c, c.undecided) for c in checks]


def _stated(construction: str, options: dict) -> dict:
    """The instance's build options as the criteria ``verify --set`` would state (those the
    construction declares; the seed is not one)."""
    from exactmem.checks import registry
    from exactmem.claims.selftest import stated_options

    return stated_options(registry.get(construction), options)


def run_instance(
    claim: Claim,
    inst: Instance,
    progress: Callable[[str], None] | None,
    jobs: int = 1,
    evaluator: str = "fast",
) -> dict:
    """Build, verify and bound one instance; returns its JSON record."""
    from exactmem.checks.certify import certificate_json, certify

    start = time.perf_counter()
    dataset, options, model = build_instance(claim, inst, progress)
    # the claim is the user's criterion: its construction's full checklist, and the tolerance
    # it states (a construction option the build also aims for), never the model's meta
    cert = certify(
        model,
        dataset,
        construction=claim.construction,
        tolerance=options.get("tolerance"),
        options=_stated(claim.construction, options),
        progress=progress,
        per_layer=False,
        jobs=jobs,
        evaluator=evaluator,
    )
    cert.checks.extend(c for c, _ in _bound_checks(claim, cert, dataset, options))
    failed = [c.name for c in cert.failed]
    verdict = cert.verdict  # refuted if any check failed, else inconclusive if any undecided
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
    from exactmem.checks.certificate import library_versions
    from exactmem.runtime.progress import tell

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
            tell(progress, "", phase="claim instances", done=n - 1, total=len(selected), outer=True)
        try:
            record = run_instance(claim, inst, progress, jobs, evaluator)
        except InconclusiveError as exc:  # undecided outside any check: still a table row
            record = _undecided_record(claim, inst, exc)
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


def _undecided_record(claim: Claim, inst: Instance, exc: InconclusiveError) -> dict:
    """The record of an instance that ended undecided before any certificate (a build that
    could not decide its own constants)."""
    return {
        "verdict": "inconclusive",
        "checks": [{"name": "instance", "passed": False, "undecided": True, "detail": str(exc)}],
        "resources": {},
        "data": {},
        "tier": inst.tier,
        "generator": inst.generator,
        "params": {**inst.params, **inst.options},
        "expected": claim.expect,
        "ok": False,
        "seconds": 0.0,
    }


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
        res = {
            k: r["resources"].get(k, "-")
            for k in ("width", "depth", "nonzero_parameters", "max_bits")
        }
        rows.append(
            (
                r["claim"],
                " ".join(f"{k}={v}" for k, v in r["params"].items()) or "(fixed dataset)",
                r["expected"],
                r["verdict"],
                "ok" if r["ok"] else "MISMATCH",
                str(r["data"].get("N", "-")),
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
            failed = [c for c in r["checks"] if not c["passed"]]  # failed and undecided
            print(
                f"\n{r['claim']} ({' '.join(f'{k}={v}' for k, v in r['params'].items())}): "
                f"{r['verdict']}, expected {r['expected']}"
            )
            for c in failed:
                mark = "undecided" if c.get("undecided") else "FAIL"
                print(f"  {mark} {c['name']}: {c['detail']}")
    total = len(results)
    bad = sum(1 for r in results if not r["ok"])
    print(f"\n{total - bad} of {total} claim instances as expected")
