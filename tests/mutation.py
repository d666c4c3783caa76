"""Single-weight mutants of the shipped constructions, judged three ways.

A mutant changes one entry of one weight matrix, bias, embedding or positional table (attention
query/key/value/output maps included; they have no biases) by +1, −1, ×2, 0 or a small random
integer on the numerator, keeping the layer's denominator. Each mutant is certified by both
evaluators (their certificates must be identical but for the evaluator's name and argv), and
its labels are judged by :mod:`oracle`, which shares no code with either: a verified mutant must
reproduce every label there, and a refuted labels check must be refuted there too. On exact
models the oracle's outputs must equal both evaluators' outputs; on softmax models its intervals
must meet the Arb enclosures.
"""

from __future__ import annotations

import functools
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction

import oracle
from gmpy2 import mpq

from exactmem.checks.certify import certificate_json, certify
from exactmem.constructions import dana25, kim23, ks25, mahdavi24, vys
from exactmem.core.errors import InconclusiveError
from exactmem.core.model import MLP, Affine, Attention, PositionalEncoding, Transformer
from exactmem.datasets.dataset import Dataset, random_points
from exactmem.datasets.sequences import random_sequences
from exactmem.evaluate import fast, reference
from exactmem.evaluate.softmax import ball_bounds, run_balls
from exactmem.files.dataset_files import save_dataset
from exactmem.files.model_files import save_model

MAPS = ("query", "key", "value", "output")
KS25 = "ks25-next-token"
OPERATIONS = ("+1", "-1", "x2", "0", "random")


@dataclass(frozen=True)
class Family:
    """A construction on a small dataset, and the user's criteria its labels are judged by."""

    name: str
    model: Transformer
    dataset: Dataset
    construction: str
    readout: str = "regression"
    tolerance: Fraction = Fraction(0)


def families() -> list[Family]:
    """Small instances of VYS, Theorem 4.1 (softmax and hardmax attention), Mahdavi (hardmax,
    softmax), Kim et al. (hardmax, next-token) and Dana (softmax)."""
    points = random_points(12, 3, 5, seed=1)
    seqs = random_sequences(12, 4, 2, 10, 4, seed=2)
    mahdavi = mahdavi24.random_instance(9, 3, 6, 4, seed=5)
    assoc = dana25.random_associations(10, 2, 12, seed=3)
    tokens = random_sequences(10, 3, 2, 6, 3, seed=4)
    return [
        Family("vys", vys.build(points, {"seed": 1})[0], points, "vys"),
        Family("ks25", ks25.build(seqs, {"seed": 1}, KS25)[0], seqs, KS25),
        Family(
            "ks25-hardmax",
            ks25.build(seqs, {"seed": 1, "attention": "hardmax"}, KS25)[0],
            seqs,
            KS25,
        ),
        Family("mahdavi-hardmax", mahdavi24.build(mahdavi, {"heads": 4})[0], mahdavi, "mahdavi24"),
        Family(
            "mahdavi-softmax",
            mahdavi24.build(mahdavi, {"heads": 4, "score": "softmax"})[0],
            mahdavi,
            "mahdavi24",
            tolerance=Fraction(1, 1000),
        ),
        Family("kim23", kim23.build(tokens, {"seed": 1})[0], tokens, "kim23"),
        Family(
            "dana",
            dana25.build(assoc, {"d": 2, "heads": 5})[0],
            assoc,
            "dana25",
            readout="classification",
        ),
    ]


# --------------------------------------------------------------------------- sites


@dataclass(frozen=True)
class Site:
    """Where a mutant changes the model: a path to an Affine or a positional table, and an
    entry (row, column) — column ``None`` is the bias."""

    kind: str  # embed | unembed | mlp | query | key | value | output | positional
    path: tuple
    row: int
    column: int | None


def _affines(model: Transformer) -> list[tuple[str, tuple, Affine]]:
    found = []
    if model.embed:
        found.append(("embed", ("embed",), model.embed))
    for si, sub in enumerate(model.sublayers):
        if isinstance(sub, MLP):
            found += [("mlp", ("mlp", si, li), a) for li, a in enumerate(sub.layers)]
        elif isinstance(sub, Attention):
            for hi, h in enumerate(sub.heads):
                found += [(m, ("head", si, hi, m), getattr(h, m)) for m in MAPS]
    if model.unembed:
        found.append(("unembed", ("unembed",), model.unembed))
    return found


def sample_site(model: Transformer, rng: random.Random) -> Site:
    """Half the mutants in attention maps when the model has any (a map kind uniformly among
    query, key, value, output), the others a kind uniformly among the rest (MLP layers,
    embedding, unembedding, positional table); then a matrix of that kind weighted by its size,
    then an entry: half the time an existing non-zero one, otherwise any position (a zero
    becomes non-zero)."""
    by_kind: dict[str, list] = {}
    for kind, path, a in _affines(model):
        by_kind.setdefault(kind, []).append((path, a))
    tables = [(si, s) for si, s in enumerate(model.sublayers) if isinstance(s, PositionalEncoding)]
    if tables:
        by_kind["positional"] = tables
    groups = [
        [k for k in sorted(by_kind) if k in MAPS],
        [k for k in sorted(by_kind) if k not in MAPS],
    ]
    kind = rng.choice(rng.choice([g for g in groups if g]))
    if kind == "positional":
        si, table = rng.choice(tables)
        return Site(
            kind, ("positional", si), rng.randrange(len(table.table)), rng.randrange(table.width)
        )
    options = by_kind[kind]
    path, a = rng.choices(options, weights=[max(1, a.in_dim * a.out_dim) for _, a in options])[0]
    has_bias = kind not in MAPS
    nonzero = [(r, c) for r, row in enumerate(a.rows) for c, _ in row]
    if has_bias:
        nonzero += [(r, None) for r, b in enumerate(a.bias) if b]
    if nonzero and rng.random() < 0.5:
        return Site(kind, path, *rng.choice(nonzero))
    cells = a.out_dim * (a.in_dim + has_bias)
    cell = rng.randrange(cells)
    row, column = divmod(cell, a.in_dim + has_bias)
    return Site(kind, path, row, None if column == a.in_dim else column)


def mutate_value(value: int, operation: str, rng: random.Random) -> int:
    if operation == "+1":
        return value + 1
    if operation == "-1":
        return value - 1
    if operation == "x2":
        return 2 * value if value else 2
    if operation == "0":
        return 0 if value else rng.choice((-1, 1))
    return rng.choice([v for v in range(-3, 4) if v != value])


def _entry(a: Affine, site: Site) -> int:
    if site.column is None:
        return a.bias[site.row]
    return dict(a.rows[site.row]).get(site.column, 0)


def _with_entry(a: Affine, site: Site, value: int) -> Affine:
    if site.column is None:
        bias = list(a.bias)
        bias[site.row] = value
        return replace(a, bias=tuple(bias))
    row = dict(a.rows[site.row])
    row[site.column] = value
    rows = list(a.rows)
    rows[site.row] = tuple(sorted((c, v) for c, v in row.items() if v))
    return replace(a, rows=tuple(rows))


def apply(model: Transformer, site: Site, operation: str, rng: random.Random):
    """(mutant, old numerator, new numerator); the denominator is kept."""
    head, *rest = site.path
    if head == "positional":
        (si,) = rest
        pe = model.sublayers[si]
        old_q = pe.table[site.row][site.column]
        old = int(old_q.numerator)
        new = mutate_value(old, operation, rng)
        table = [list(r) for r in pe.table]
        table[site.row][site.column] = mpq(new, int(old_q.denominator))
        sub = replace(pe, table=tuple(tuple(r) for r in table))
        return _with_sublayer(model, si, sub), old, new
    a = {path: a for _, path, a in _affines(model)}[site.path]
    old = _entry(a, site)
    new = mutate_value(old, operation, rng)
    b = _with_entry(a, site, new)
    if head == "embed":
        return replace(model, embed=b), old, new
    if head == "unembed":
        return replace(model, unembed=b), old, new
    if head == "mlp":
        si, li = rest
        mlp = model.sublayers[si]
        layers = list(mlp.layers)
        layers[li] = b
        return _with_sublayer(model, si, replace(mlp, layers=tuple(layers))), old, new
    si, hi, name = rest
    att = model.sublayers[si]
    heads = list(att.heads)
    heads[hi] = replace(heads[hi], **{name: b})
    return _with_sublayer(model, si, replace(att, heads=tuple(heads))), old, new


def _with_sublayer(model: Transformer, si: int, sub) -> Transformer:
    subs = list(model.sublayers)
    subs[si] = sub
    return replace(model, sublayers=tuple(subs))


# --------------------------------------------------------------------------- judging


def criteria(family: Family) -> dict:
    """The user's criteria as ``certify`` keywords: the construction's checklist, and the
    tolerance of real-valued outputs."""
    given: dict = {"construction": family.construction}
    if family.tolerance:
        given["tolerance"] = mpq(family.tolerance.numerator, family.tolerance.denominator)
    return given


def outcome(model: Transformer, dataset: Dataset, evaluator: str, **criteria) -> tuple:
    """("certificate", verdict, JSON without evaluator and argv) or ("error", type, message)."""
    try:
        cert = certify(model, dataset, evaluator=evaluator, **criteria)
    except Exception as e:  # compared across evaluators, whatever it is
        return ("error", type(e).__name__, str(e))
    doc = certificate_json(cert)
    doc["subject"] = {k: v for k, v in doc["subject"].items() if k not in ("evaluator", "argv")}
    return ("certificate", cert.verdict, doc)


def difference(a, b, path: str = "") -> str:
    """Where two JSON-like values first differ, with both values there."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key) != b.get(key):
                return difference(a.get(key), b.get(key), f"{path}.{key}")
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return difference(x, y, f"{path}[{i}]")
        extra = a[len(b) :] or b[len(a) :]
        return f"{path}: lengths {len(a)} vs {len(b)}, extra {str(extra)[:300]!r}"
    return f"{path or '.'}: {str(a)[:300]!r} vs {str(b)[:300]!r}"


def _fraction(x) -> Fraction:
    return Fraction(int(x.numerator), int(x.denominator))


def exact_outputs(module, model: Transformer, ds: Dataset):
    """The judged output columns from one evaluator, or None where it is inconclusive."""
    try:
        if ds.task == "points":
            trace = module.run(model, ds.points, [[i] for i in range(ds.size)])
        else:
            trace = module.run(model, ds.vocab, ds.sequences, positions="last")
    except InconclusiveError:
        return None
    return [tuple(_fraction(v) for v in out[-1]) for out in trace.outputs]


def output_problems(model: Transformer, ds: Dataset, judged: oracle.Judgement) -> list[str]:
    """Where the oracle's outputs contradict an evaluator's: exact values must be equal, and an
    interval must meet the Arb enclosure of the same output."""
    problems = []
    for module in (reference, fast):
        got = exact_outputs(module, model, ds)
        if got is None:
            continue
        for i, (a, b) in enumerate(zip(got, judged.outputs, strict=True)):
            if a != b:  # Fractions compare equal only to equal exact values
                problems.append(f"{module.__name__}: output {i} is {a}, the oracle's {b}")
    scores = {s.score for s in model.sublayers if isinstance(s, Attention)}
    if "softmax" in scores and "hardmax" not in scores and ds.task != "points":
        balls = run_balls(model, ds.vocab, ds.sequences, precision=256, positions="last")
        for i, (out, mine) in enumerate(zip(balls.outputs, judged.outputs, strict=True)):
            for j, (ball, value) in enumerate(zip(out[-1], mine, strict=True)):
                lo, hi = ball_bounds(ball)
                olo, ohi = oracle.bounds(value)
                if hi < olo or ohi < lo:
                    problems.append(f"Arb: output {i}[{j}] ⊂ [{lo}, {hi}], oracle [{olo}, {ohi}]")
    return problems


EXIT_CODES = {"verified": 0, "refuted": 1, "InconclusiveError": 4}


def expected_exit(out: tuple) -> int | None:
    """The exit code ``verify`` must give for one certify outcome (None: not predicted)."""
    return EXIT_CODES.get(out[1])


def _environment() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


@functools.cache
def _verify_flags() -> str:
    command = [sys.executable, "-m", "exactmem", "verify", "--help"]
    return subprocess.run(command, capture_output=True, text=True, env=_environment()).stdout


def cli_exit_codes(family: Family, mutant: Transformer, folder) -> dict[str, int]:
    """Exit codes of ``python -m exactmem verify`` on the saved mutant, per evaluator, with the
    family's criteria as flags where this version's ``verify`` takes them."""
    save_model(mutant, folder / "model.json")
    save_dataset(family.dataset, folder / "data.json")
    flags = []
    if "--construction" in _verify_flags():
        flags += ["--construction", family.construction]
    if "--tolerance" in _verify_flags() and family.tolerance:
        flags += ["--tolerance", str(family.tolerance)]
    codes = {}
    for evaluator in ("fast", "reference"):
        command = [sys.executable, "-m", "exactmem", "verify", str(folder / "model.json")]
        command += ["--data", str(folder / "data.json"), "--evaluator", evaluator]
        command += ["--quiet", "--jobs", "1", *flags]
        done = subprocess.run(command, capture_output=True, env=_environment(), timeout=600)
        codes[evaluator] = done.returncode
    return codes


@dataclass
class Tally:
    """Counts of one campaign over one family."""

    family: str
    mutants: int = 0
    verified: int = 0
    refuted: int = 0
    inconclusive: int = 0
    errors: int = 0
    evaluator_disagreements: int = 0
    oracle_disagreements: int = 0
    oracle_undecided: int = 0
    kinds: Counter = field(default_factory=Counter)
    exits: Counter = field(default_factory=Counter)  # CLI exit code → mutants
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


def judge_mutant(
    family: Family, mutant: Transformer, tally: Tally, what: str, cli_folder=None
) -> None:
    """Certify with both evaluators, compare, and hold the verdict against the oracle; with
    ``cli_folder`` also run ``verify`` on the saved mutant and compare the exit codes."""
    given = criteria(family)
    fast_out = outcome(mutant, family.dataset, "fast", **given)
    ref_out = outcome(mutant, family.dataset, "reference", **given)
    if fast_out != ref_out:
        tally.evaluator_disagreements += 1
        tally.failures.append(
            f"{what}: fast {fast_out[:2]} ≠ reference {ref_out[:2]} at "
            + difference(fast_out, ref_out)
        )
    if cli_folder is not None:
        codes = cli_exit_codes(family, mutant, cli_folder)
        tally.exits[codes["reference"]] += 1
        if len(set(codes.values())) != 1 or codes["reference"] != expected_exit(ref_out):
            tally.evaluator_disagreements += 1
            tally.failures.append(f"{what}: exit codes {codes}, certify gave {ref_out[:2]}")
    if ref_out[0] == "error":
        if ref_out[1] == "InconclusiveError":
            tally.inconclusive += 1
        else:
            tally.errors += 1
            tally.failures.append(f"{what}: {ref_out[1]}: {ref_out[2]}")
        return
    verdict, doc = ref_out[1], ref_out[2]
    tally.verified += verdict == "verified"
    tally.refuted += verdict == "refuted"
    labels = next(c for c in doc["checks"] if c["name"] == "labels")
    tolerance = family.tolerance
    stated = labels.get("tolerance") or doc["subject"].get("criteria", {}).get("tolerance")
    if stated is not None and Fraction(stated) != tolerance:
        tally.oracle_disagreements += 1
        tally.failures.append(f"{what}: the certificate states tolerance {stated}")
    try:
        judged = oracle.judge(mutant, family.dataset, readout=family.readout, tolerance=tolerance)
    except oracle.Undecided:
        tally.oracle_undecided += 1
        if verdict == "verified":  # a verified mutant must be confirmed, not left open
            tally.oracle_disagreements += 1
            tally.failures.append(f"{what}: verified, the oracle cannot decide")
        return
    problems = output_problems(mutant, family.dataset, judged)
    if verdict == "verified" and not judged.verified:
        problems.append(f"verified, but the oracle's labels are {judged.labels}")
    if labels["passed"] and judged.refuted:
        problems.append("labels check passed, the oracle refutes a label")
    if not labels["passed"] and not judged.refuted:
        if judged.verified:
            problems.append("labels check failed, the oracle reproduces every label")
        else:
            tally.oracle_undecided += 1
    if problems:
        tally.oracle_disagreements += 1
        tally.failures.append(f"{what}: " + "; ".join(problems))


def campaign(
    family: Family,
    count: int,
    seed: int,
    progress: Callable[[str], None] | None = None,
    *,
    cli: int = 0,
    folder=None,
) -> Tally:
    """``count`` seeded single-weight mutants of one family; the first ``cli`` of them also
    through ``verify`` in a subprocess (files written to ``folder``)."""
    rng = random.Random(f"{family.name}/{seed}")
    tally = Tally(family.name)
    start = time.perf_counter()
    for k in range(count):
        site = sample_site(family.model, rng)
        operation = rng.choice(OPERATIONS)
        try:
            mutant, old, new = apply(family.model, site, operation, rng)
        except ValueError as e:  # a shape the IR refuses: not a model, not a mutant
            tally.failures.append(f"{site}: {e}")
            tally.errors += 1
            continue
        tally.mutants += 1
        tally.kinds[site.kind] += 1
        what = f"{family.name} #{k} {site} {old}→{new}"
        judge_mutant(family, mutant, tally, what, folder if k < cli else None)
        if progress and (k + 1) % 50 == 0:
            progress(f"{family.name}: {k + 1}/{count}")
    tally.seconds = time.perf_counter() - start
    return tally
