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
:mod:`exactmem.formula`, never run. Without ``--proofs``, ``check`` runs the claims shipped with
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

from exactmem.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_NOTHING_SELECTED,
    EXIT_REFUTED,
    EXIT_VERIFIED,
    InputError,
)
from exactmem.limits import generated_size_problem, open_regular

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

METRICS = (
    "width",
    "depth",
    "relu_layers",
    "dense_parameters",
    "nonzero_parameters",
    "max_bits",
    "total_bits",
)


def _build(construction: str, dataset, options: dict, progress: Callable | None = None):
    from exactmem.constructions import ks25, vys

    if construction == "vys":
        return vys.build(dataset, options, progress=progress)
    if construction == "mahdavi24":
        from exactmem.constructions import mahdavi24

        return mahdavi24.build(dataset, options, progress=progress)
    if construction == "dana25":
        from exactmem.constructions import dana25

        return dana25.build(dataset, options, progress=progress)
    if construction == "kim23":
        from exactmem.constructions import kim23

        return kim23.build(dataset, options, progress=progress)
    if construction == "ks24":
        from exactmem.constructions import ks24

        return ks24.build(dataset, options, progress=progress)
    if construction == "madden24":
        from exactmem.constructions import madden24

        return madden24.build(dataset, options, progress=progress)
    return ks25.build(dataset, options, construction, progress=progress)


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


# --------------------------------------------------------------------------- generators


# each generator takes the instance's parameters and a progress reporter (None: silent)


def _gen_random_points(p: dict, progress=None):
    from exactmem.data import random_points

    return random_points(
        p["N"],
        p["d"],
        p["C"],
        p.get("seed", 0),
        coord_bound=p.get("coord_bound", 1000),
        denominator=p.get("denominator", 1),
        progress=progress,
    )


def _gen_label_extremes(p: dict, progress=None):
    """Random points whose labels are all C (C = 2^c − 1 or 2^c exercises the label width)."""
    from dataclasses import replace

    ds = _gen_random_points(p, progress)
    return replace(ds, labels=(p["C"],) * ds.size)


def _gen_random_sequences(p: dict, progress=None):
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
        progress=progress,
    )


def _gen_lemma_b2_counterexample(p: dict, progress=None):
    """Three sequences whose restricted multisets are {a}, {b, b}, {a, b} (Lemma B.1 picks
    A = {a, b}); the first two share the last token e and differ in label."""
    from gmpy2 import mpq

    from exactmem.data import Dataset

    vocab = ((mpq(1), mpq(0)), (mpq(0), mpq(1)), (mpq(2), mpq(2)), (mpq(-1), mpq(3)))
    if p.get("task", "next-token") == "seq2seq":  # the same collision at the last position
        labels: tuple = ((1, 1, 1), (1, 1, 2), (1, 1, 1))
    else:
        labels = (1, 2, 1)
    return Dataset(
        "seq2seq" if p.get("task") == "seq2seq" else "next-token",
        labels,
        2,
        vocab=vocab,
        sequences=((0, 2, 3), (1, 1, 3), (0, 1, 3)),
        meta={"generator": "lemma_b2_counterexample"},
    )


def _gen_zen(p: dict, progress=None):
    from exactmem.sequences import zen_of_python

    return zen_of_python(p.get("n", 32), unit=p.get("unit", "char"), limit=p.get("limit"))


def _gen_attention(p: dict, progress=None):
    from exactmem.constructions.mahdavi24 import random_instance

    return random_instance(
        p["T"],
        p["n"],
        p["d"],
        p["C"],
        p.get("seed", 0),
        shared_context=p.get("shared_context", False),
        progress=progress,
    )


def _gen_associations(p: dict, progress=None):
    from exactmem.constructions.dana25 import random_associations

    return random_associations(p["vocab"], p["S"], p["T"], p.get("seed", 0), progress=progress)


def _gen_ks24(p: dict, progress=None):
    from exactmem.constructions.ks24 import random_instance

    return random_instance(
        p["N"], p["n"], p["d"], p["vocab"], p["C"], p.get("seed", 0), repeats=p.get("repeats", 0)
    )


def _gen_contexts(p: dict, progress=None):
    from exactmem.constructions.madden24 import random_contexts

    return random_contexts(
        p["N"], p["n"], p["vocab"], p.get("seed", 0), targets=p.get("targets", True)
    )


GENERATORS: dict[str, Callable] = {
    "ks24": _gen_ks24,
    "contexts": _gen_contexts,
    "attention": _gen_attention,
    "associations": _gen_associations,
    "random_points": _gen_random_points,
    "label_extremes": _gen_label_extremes,
    "random_sequences": _gen_random_sequences,
    "lemma_b2_counterexample": _gen_lemma_b2_counterexample,
    "zen": _gen_zen,
}


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
_POINTS = {"N": int, "d": int, "C": int, "seed": int, "coord_bound": int, "denominator": int}
GENERATOR_PARAMS: dict[str, dict[str, type | tuple[str, ...]]] = {
    "random_points": _POINTS,
    "label_extremes": _POINTS,
    "random_sequences": {
        "N": int,
        "n": int,
        "d": int,
        "C": int,
        "vocab": int,
        "seed": int,
        "coord_bound": int,
        "family": ("random", "permuted", "same_multiset", "near_delta", "distinct"),
        "task": ("next-token", "seq2seq"),
        "labels_by": ("key", "multiset"),
    },
    "lemma_b2_counterexample": {"seed": int, "task": ("next-token", "seq2seq")},  # fixed data
    "zen": {"n": int, "unit": ("char", "word"), "limit": int, "seed": int},
    "attention": {"T": int, "n": int, "d": int, "C": int, "seed": int, "shared_context": bool},
    "associations": {"vocab": int, "S": int, "T": int, "seed": int},
    "ks24": {"N": int, "n": int, "d": int, "vocab": int, "C": int, "seed": int, "repeats": int},
    "contexts": {"N": int, "n": int, "vocab": int, "seed": int, "targets": bool},
}
REQUIRED_PARAMS = {
    "random_points": ("N", "d", "C"),
    "label_extremes": ("N", "d", "C"),
    "random_sequences": ("N", "n", "d", "C"),
    "lemma_b2_counterexample": (),
    "zen": (),
    "attention": ("T", "n", "d", "C"),
    "associations": ("vocab", "S", "T"),
    "ks24": ("N", "n", "d", "vocab", "C"),
    "contexts": ("N", "n", "vocab"),
}
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
    from exactmem.cli import OPTIONS

    known = OPTIONS[construction]
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
    if problem := generated_size_problem(**_generated_size(gen, inst)):
        raise InputError(f"{where}: {problem}")
    return Instance(tier, gen, inst, overrides)


def _generated_size(gen: str, p: dict) -> dict[str, int]:
    """The token indices and rational coordinates generator ``gen`` makes for parameters
    ``p`` (:func:`exactmem.limits.generated_size_problem` bounds them)."""
    N, n, d = p.get("N", p.get("T", 0)), p.get("n", 1), p.get("d", 1)
    vocab = p.get("vocab", 1)
    if gen in ("random_points", "label_extremes"):
        return {"coordinates": N * d}
    if gen == "attention":  # n context vectors and the query, each in Q^d
        return {"coordinates": N * (n + 1) * d}
    if gen == "associations":
        return {"tokens": N * p.get("S", 1), "coordinates": vocab}
    if gen == "contexts":
        return {"tokens": N * n, "coordinates": vocab}
    if gen in ("random_sequences", "ks24"):
        return {"tokens": 2 * N * n, "coordinates": vocab * d}  # seq2seq: a label per token
    if gen == "zen":
        return {"tokens": p.get("limit", 0) * n}
    return {}


def _formulas(table: dict, where: str, known: list[str], *, defines: bool) -> dict:
    """``define``, ``bounds`` or ``tight``: formula strings, checked against the grammar now
    (the values of the variables come with each instance)."""
    from exactmem.formula import RESERVED, check_formula

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
    of :mod:`exactmem.formula`); an :class:`InputError` names the file and the key path."""
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
    from exactmem.cli import OPTIONS  # the options of `build --set`, one table for both

    if construction not in OPTIONS:
        raise InputError(
            f"{where}: construction: unknown {construction!r}; known: {', '.join(OPTIONS)}"
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
    from exactmem.cli import OPTIONS

    # the construction's options, as the instance sets them (option_heads, …), beside the
    # dataset's figures: Dana's bounds are in H, d_h and the model's width d
    known = list(VARIABLES) + [f"option_{key}" for key in OPTIONS[construction]]
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
    """The claim files shipped with the running package: ``exactmem/proofs/`` of an installed
    wheel (setuptools maps the package ``exactmem.proofs`` there), else ``proofs/`` of the
    source tree this package was imported from (an editable install, or a checkout on
    ``sys.path``). Never the current directory: a checkout someone else wrote is not trusted."""
    package = Path(__file__).resolve().parent
    installed = package / "proofs"
    if installed.is_dir():
        return installed
    checkout = package.parent
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
    as a certificate records them), the integer options as ``option_<key>``, and the claim's
    defines, each evaluated in order."""
    import sympy

    from exactmem.bounds import parse_formula

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
    for key, value in options.items():  # the claim's integer options (Dana's heads, head_dim, d)
        if type(value) is int:
            names[f"option_{key}"] = sympy.Integer(value)
    delta2 = data.get("delta2")
    if delta2 is None:  # fewer than two distinct inputs: every δ is a valid separation
        names["delta"] = sympy.Integer(1)
    elif not delta2.startswith("not"):
        names["delta"] = sympy.sqrt(sympy.Rational(delta2))
    where = f"claim file {claim.path}"
    for key, text in claim.defines.items():
        names[key] = parse_formula(text, names, f"{where}: define.{key}")
    return names


def build_instance(claim: Claim, inst: Instance, progress: Callable | None = None) -> tuple:
    """(dataset, options, model) of one instance, with the limits ``build --set`` has;
    ``progress`` hears the generator and the construction."""
    from exactmem.cli import check_option_limits

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
    from exactmem.data import squared_radius, squared_separation
    from exactmem.exact import format_rational
    from exactmem.sequences import view, with_positions

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
    for the measured resources of ``cert``: pairs (check, undecided)."""
    from exactmem.bounds import decide_le, evaluate_ball, parse_formula
    from exactmem.verify import Check

    names = formula_names(claim, cert.data, dataset, options)
    where = f"claim file {claim.path}"
    checks = []
    measured = cert.resources.as_dict()
    for prefix, key, table in (("bound", "bounds", claim.bounds), ("tight", "tight", claim.tight)):
        for metric, text in table.items():
            expr = parse_formula(text, names, f"{where}: {key}.{metric}")
            value = measured[metric]
            result = decide_le(value, expr)
            sign = ">" if result.holds is False else "≤"
            detail = f"{metric} {value} {sign} {result.bound}  ({text})"
            values = {"measured": value, "bound": result.bound}
            if prefix == "tight":
                # shown, never decides: how close the run is to its fitted constant
                ball = evaluate_ball(expr, 64)
                if ball is not None and ball > 0:
                    values["ratio"] = f"{value / float(ball.mid()):.3f}"
                    detail += f"; measured/tight {values['ratio']}"
            if result.holds is None:
                detail = f"undecided at maximum precision: {detail}"
            check = Check(f"{prefix}.{metric}", result.holds is True, detail, values)
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
    dataset, options, model = build_instance(claim, inst, progress)
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
    if undecided and all(name.startswith(("bound.", "tight.")) for name in failed):
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
    from exactmem.progress import tell

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
