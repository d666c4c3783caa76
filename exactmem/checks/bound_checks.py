"""Resource and margin bounds judged as checks: a construction's declared bounds
(:attr:`exactmem.checks.checklist.Checklist.bounds`, ``NAME.bounds.<metric>``), the caller's own
(``exactmem.certify(..., bounds=...)``, ``bound.<metric>``) and a claim file's ``[bounds]`` and
``[tight]`` (``bound.<metric>``, ``tight.<metric>``).

A bound is a formula of the claim grammar (:mod:`exactmem.core.formula`, never Python) in the
dataset's figures; the measured value is counted from the weights (:class:`~exactmem.core.model.
Resources`) or is the smallest non-zero |pre-activation| the evaluation saw (``margin``, a lower
bound). The comparison is decided on Arb balls at rising precision (:mod:`exactmem.core.bounds`): a
float never decides, and a comparison still open at the precision limit is *undecided*.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

import sympy

from exactmem.checks.certificate import Check
from exactmem.checks.checklist import Unset, define_texts
from exactmem.core.model import Resources

__all__ = [
    "FIGURES",
    "Define",
    "bound_checks",
    "bound_names",
    "figure_names",
    "lcd_of",
    "with_lcd",
]

FIGURES = ("N", "d", "C", "r", "delta", "n", "omega", "lcd")
"""The dataset's figures a declared or user bound may name (``lcd``: the least common
denominator of the coordinates of the points or the vocabulary's tokens, counted only when a
formula names it)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def lcd_of(dataset) -> int:
    """The least common denominator of every coordinate of the dataset's points (``points``)
    or vocabulary tokens (sequences): what scales them to the integer lattice the memorizers'
    Stage I projection reads (Kajitsuka & Sato 2025, Lemma C.2)."""
    vectors = dataset.points if dataset.task == "points" else dataset.vocab
    return math.lcm(*{int(x.denominator) for v in vectors for x in v})


def with_lcd(names: dict, dataset, texts: Iterable) -> dict:
    """``names`` with ``lcd`` added when one of ``texts`` (formulas, or define pairs) names it
    (it reads every coordinate)."""
    if any("lcd" in _NAME.findall(u) for t in texts for u in define_texts(t)):
        names["lcd"] = sympy.Integer(lcd_of(dataset))
    return names


def figure_names(data: Mapping, dataset) -> dict[str, sympy.Expr]:
    """The values of :data:`FIGURES` for one run: ``data`` as a certificate records it (N, d,
    r², δ², n, vocabulary) and the dataset's number of classes. δ is 1 when fewer than two
    distinct inputs leave every separation valid, and absent when it was not measured."""
    names: dict[str, sympy.Expr] = {
        "N": sympy.Integer(dataset.size),
        "d": sympy.Integer(data["d"]),
        "C": sympy.Integer(dataset.num_classes),
        "r": sympy.sqrt(sympy.Rational(data["r2"])),
    }
    if "n" in data:
        names["n"] = sympy.Integer(data["n"])
    if "vocabulary" in data:
        names["omega"] = sympy.Integer(data["vocabulary"])
    delta2 = data.get("delta2")
    if delta2 is None:  # fewer than two distinct inputs: every δ is a valid separation
        names["delta"] = sympy.Integer(1)
    elif not str(delta2).startswith("not"):
        names["delta"] = sympy.sqrt(sympy.Rational(delta2))
    return names


Define = str | tuple[str, str] | Unset
"""A bound define: a formula; (formula, fallback) — the fallback, a bound for every value of
the options the formula names, is used when one of them is not given; or :class:`Unset`."""


def bound_names(
    names: Mapping[str, sympy.Expr],
    options: Mapping[str, object],
    declared_options: Iterable[str],
    defines: Mapping[str, Define],
    where: str,
    relaxed: dict[str, set[str]] | None = None,
    defaulted: dict[str, set[str]] | None = None,
) -> tuple[dict[str, sympy.Expr | None], dict[str, set[str]]]:
    """The values a bound formula may name — the dataset's figures (``names``; a figure not
    measured is None), each integer build option the user gave (``options``: the user's
    statement of what was built, never read from the model file) under its own key, and the
    ``defines`` evaluated in order — and, per name that cannot be evaluated because a declared
    option was not given, the options it needs. A define given as (formula, fallback) takes
    the fallback when the formula needs an option not given; ``relaxed`` then records, per
    name, the options whose absence made it a bound for all their values. An option named
    like a figure is not a variable (the figure wins)."""
    from exactmem.core.bounds import parse_formula

    known: dict[str, sympy.Expr | None] = {**dict.fromkeys(FIGURES), **names}
    missing: dict[str, set[str]] = {}
    relaxed = {} if relaxed is None else relaxed
    for key in declared_options:
        if key in known:
            continue
        value = options.get(key)
        if value is None:
            known[key], missing[key] = None, {key}
        elif type(value) is int:
            known[key] = sympy.Integer(value)
    defaulted = {} if defaulted is None else defaulted
    for key, define in defines.items():
        unset = isinstance(define, Unset)
        fallback: str | None
        if isinstance(define, Unset):
            text, fallback = define.given, define.otherwise
        elif isinstance(define, tuple):
            text, fallback = define
        else:
            text, fallback = define, None
        need = needs(text, missing)
        if need and fallback is not None:
            if unset:  # not given: not used by the build
                defaulted[key] = need | needs(fallback, defaulted)
                if needs(fallback, relaxed):
                    relaxed[key] = needs(fallback, relaxed)
            else:
                relaxed[key] = need | needs(fallback, relaxed)
            text, need = fallback, needs(fallback, missing)
        else:
            if needs(text, relaxed):
                relaxed[key] = needs(text, relaxed)
            if needs(text, defaulted):
                defaulted[key] = needs(text, defaulted)
        if need:
            known[key], missing[key] = None, need
        else:
            known[key] = parse_formula(text, known, f"{where}: define.{key}")
    return known, missing


def needs(text: str, missing: Mapping[str, set[str]]) -> set[str]:
    """The options not given that formula ``text`` needs (directly or through a define)."""
    out: set[str] = set()
    for word in _NAME.findall(text):
        out |= missing.get(word, set())
    return out


def _undecided_without(name: str, text: str, need: set[str]) -> Check:
    keys = sorted(need)
    give = " ".join(f"--set {k}=VALUE" for k in keys)
    what = "option" if len(keys) == 1 else "options"
    return Check(
        name,
        False,
        f"undecided: {text} needs the build {what} {', '.join(keys)}, not given; give "
        f"{give} (the value the model was built with) to decide it",
        {"measured": None, "needs": keys},
        undecided=True,
    )


def _margin(activation: Mapping) -> sympy.Rational | None:
    text = activation.get("min_nonzero_preactivation")
    return None if text is None else sympy.Rational(text)


def bound_checks(
    table: Mapping[str, str],
    names: Mapping[str, sympy.Expr],
    res: Resources,
    activation: Mapping,
    *,
    prefix: str,
    where: str,
    ratio: bool = False,
    options: Mapping[str, object] | None = None,
    declared_options: Iterable[str] = (),
    defines: Mapping[str, Define] | None = None,
) -> list[Check]:
    """One check ``<prefix>.<metric>`` per entry of ``table`` (metric → formula): ok when the
    measured value is within the bound, FAIL when it is decided outside, undecided when the
    balls cannot tell at the precision limit. ``where`` starts a formula's error message;
    ``ratio`` adds measured / bound (shown, never deciding: how close a run is to a fitted
    constant). A formula may name the build options the user gave (``options``, among the
    construction's ``declared_options``) and the ``defines`` (:func:`bound_names`); one that
    needs an option not given is undecided, naming the ``--set`` that would decide it —
    never passed."""
    from exactmem.core.bounds import decide_ge, decide_le, evaluate_ball, parse_formula

    measured = res.as_dict()
    relaxed: dict[str, set[str]] = {}
    defaulted: dict[str, set[str]] = {}
    known, missing = bound_names(
        names, options or {}, declared_options, defines or {}, where, relaxed, defaulted
    )
    checks = []
    for metric, text in table.items():
        name = f"{prefix}.{metric}"
        need = needs(text, missing)
        if need:
            checks.append(_undecided_without(name, text, need))
            continue
        expr = parse_formula(text, known, f"{where}.{metric}")
        if expr is None:  # a figure this run has not measured (δ of too many tokens)
            checks.append(
                Check(
                    name,
                    False,
                    f"undecided: {text} names a figure not measured on this dataset",
                    {"measured": None},
                    undecided=True,
                )
            )
            continue
        if metric == "margin":
            value = _margin(activation)
            if value is None:
                checks.append(
                    Check(
                        name,
                        False,
                        f"no non-zero pre-activation to bound below by {text}",
                        {"measured": None},
                    )
                )
                continue
            # value ≥ expr ⇔ 0 ≥ expr − value: decided on balls, the value exact
            result = decide_ge(0, expr - value)
            shown = str(value)
            sign = "<" if result.holds is False else "≥"
            ball = evaluate_ball(expr, 128)
            bound = "undecided" if ball is None else ball.str(10, radius=False)
        else:
            shown = measured[metric]
            result = decide_le(shown, expr)
            sign = ">" if result.holds is False else "≤"
            bound = str(expr) if expr.is_Integer else result.bound  # "11", not "11.00000000"
        detail = f"{metric} {shown} {sign} {bound}  ({text})"
        loose = sorted(needs(text, relaxed))
        if loose:  # judged by the fallback: a bound for every value of the options not given
            detail += f"; for every {', '.join(loose)} (--set bounds the one built)"
        unused = sorted(needs(text, defaulted))
        if unused:  # judged by the bound of a build that did not use them
            detail += f"; as built without {', '.join(unused)} (--set it if the model used it)"
        figures: dict = {"measured": shown, "bound": bound}
        if ratio and metric != "margin":
            ball = evaluate_ball(expr, 64)
            if ball is not None and ball > 0:
                figures["ratio"] = f"{int(shown) / float(ball.mid()):.3f}"
                detail += f"; measured/tight {figures['ratio']}"
        if result.holds is None:
            checks.append(
                Check(name, False, f"undecided at maximum precision: {detail}", figures, True)
            )
        else:
            checks.append(Check(name, result.holds, detail, figures))
    return checks
