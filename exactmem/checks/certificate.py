"""Checks and the certificate: verdicts computed only from the evaluated network.

A construction is untrusted; the verifier reads the model's outputs and its named lanes from
the :class:`~exactmem.evaluate.records.Trace` and the labels from the dataset, never what
the construction says it built. The layout numbers it needs to read lanes (group size, bit
widths) come from the model file; if they are wrong, checks fail — they can never turn a wrong
model into a verified one, because the output check stands on its own.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from gmpy2 import mpq

from exactmem.checks.folds import (
    MAX_EXAMPLES,
    MatchFold,
    StepFold,
    step_folds,
)
from exactmem.core.exact import format_rational
from exactmem.core.model import Resources
from exactmem.core.version import __version__
from exactmem.evaluate.records import LayerStat

__all__ = [
    "Certificate",
    "ChecklistStructureError",
    "MatchFold",
    "StepFold",
    "Check",
    "VERDICTS",
    "activation_summary",
    "check_outputs",
    "outputs_verdict",
    "step_folds",
    "undecided_check",
    "verdict_of",
]


class ChecklistStructureError(Exception):
    """The model lacks a part that a demanded checklist reads (a lane, a layout, a stage): the
    checklist is refuted, never skipped."""


VERDICTS = ("verified", "refuted", "inconclusive")


@dataclass(frozen=True)
class Check:
    """One verdict-bearing check. ``figures`` holds measured values (exact, as text).

    A check is in one of three states: ok (``passed``), FAIL (neither ``passed`` nor
    ``undecided``), or undecided (``undecided``: exact arithmetic and Arb balls at the
    precision limit could not decide it; ``passed`` is then False). ``paper``, ``result`` and
    ``mechanism`` are what the checklist declares the check tests
    (:class:`~exactmem.checks.checklist.CheckSpec`), when it declares them."""

    name: str
    passed: bool
    detail: str
    figures: dict = field(default_factory=dict)
    undecided: bool = False
    paper: str | None = None
    result: str | None = None
    mechanism: str | None = None

    def __post_init__(self) -> None:
        if self.undecided and self.passed:
            raise ValueError(f"check {self.name!r}: passed and undecided at once")

    @property
    def failed(self) -> bool:
        """Decided, and not passed."""
        return not self.passed and not self.undecided

    @property
    def status(self) -> str:
        """``ok``, ``FAIL`` or ``undecided``."""
        return "ok" if self.passed else "undecided" if self.undecided else "FAIL"

    def as_dict(self) -> dict:
        out = {"name": self.name, "passed": self.passed, "detail": self.detail, **self.figures}
        if self.undecided:
            out["undecided"] = True
        for key in ("paper", "result", "mechanism"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def undecided_check(name: str, detail: str, figures: dict | None = None) -> Check:
    """A check that exact arithmetic and Arb balls could not decide."""
    return Check(name, False, detail, figures or {}, undecided=True)


def verdict_of(checks: Iterable[Check]) -> str:
    """Precedence: ``refuted`` if any check failed, whatever else is undecided; else
    ``inconclusive`` if any check is undecided; else ``verified``."""
    checks = list(checks)
    if any(c.failed for c in checks):
        return "refuted"
    if any(c.undecided for c in checks):
        return "inconclusive"
    return "verified"


@dataclass
class Certificate:
    """Everything a verification established; written by :mod:`exactmem.files.model_files`."""

    checks: list[Check]
    resources: Resources
    activation: dict
    subject: dict = field(default_factory=dict)  # dataset/model hashes, construction, options
    data: dict = field(default_factory=dict)  # measured dataset figures (r², δ², N, …)

    @property
    def verdict(self) -> str:
        """``refuted`` if any check failed; else ``inconclusive`` if any is undecided; else
        ``verified`` (:func:`verdict_of`)."""
        return verdict_of(self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.failed]

    @property
    def undecided(self) -> list[Check]:
        return [c for c in self.checks if c.undecided]

    def to_json(self) -> dict:
        """The certificate as the JSON object ``verify --json`` prints and a certificate file
        holds (under ``"certificate"``): verdict, subject (hashes and criteria), data,
        resources, checks, activation."""
        return {
            "verdict": self.verdict,
            "subject": self.subject,
            "data": self.data,
            "resources": self.resources.as_dict(),
            "checks": [c.as_dict() for c in self.checks],
            "activation": self.activation,
        }

    def __repr__(self) -> str:
        """The verdict, the criteria it was judged by, every failed and undecided check."""
        failed, undecided = self.failed, self.undecided
        if failed or undecided:
            parts = [f"{len(failed)} of {len(self.checks)} checks failed"] if failed else []
            if undecided:
                parts.append(f"{len(undecided)} undecided")
            head = ", ".join(parts)
        else:
            head = f"all {len(self.checks)} checks passed"
        lines = [f"<Certificate {self.verdict.upper()}: " + head]
        criteria = self.subject.get("criteria")
        if isinstance(criteria, dict):
            tolerance = criteria.get("tolerance")
            lines.append(
                f" criteria: {criteria.get('checklist')}; readout {criteria.get('readout')}, "
                + ("exact" if tolerance is None else f"within {tolerance}")
                + f"; inputs: {criteria.get('inputs')}"
            )
        lines += [f" FAIL {c.name}: {c.detail}" for c in failed]
        lines += [f" undecided {c.name}: {c.detail}" for c in undecided]
        return "\n".join(lines) + ">"


def _examples(bad: list[str], total: int | None = None) -> str:
    total = len(bad) if total is None else total
    more = f" (and {total - MAX_EXAMPLES} more)" if total > MAX_EXAMPLES else ""
    return "; ".join(bad[:MAX_EXAMPLES]) + more


def check_outputs(name: str, outputs: Iterable[tuple[str, mpq, int]], what: str = "label") -> Check:
    """Every (where, output, expected) pair must agree exactly."""
    bad, count = [], 0
    for where, got, expected in outputs:
        count += 1
        if got != expected:
            bad.append(f"{where}: output {format_rational(got)}, expected {expected}")
    return outputs_verdict(name, bad, len(bad), count, what)


def outputs_verdict(name: str, bad: list[str], wrong: int, count: int, what="label") -> Check:
    """The check of ``count`` outputs of which ``wrong`` disagree (``bad``: the first ones)."""
    if wrong:
        return Check(name, False, f"{wrong} of {count} wrong — " + _examples(bad, wrong))
    return Check(name, True, f"all {count} {what}s reproduced exactly", {"count": count})


# --------------------------------------------------------------------------- Lemma C.1


# --------------------------------------------------------------------------- margins


def activation_summary(stats: list[LayerStat], *, per_layer: bool = True) -> dict:
    """Sign margins of the ReLU layers: smallest non-zero |pre-activation| and exact zeros."""
    margins = [s.min_nonzero for s in stats if s.min_nonzero is not None]
    text = {m: format_rational(m) for m in set(margins)}  # a few values over many layers
    text[None] = None
    summary = {
        "relu_layers": len(stats),
        "min_nonzero_preactivation": format_rational(min(margins)) if margins else None,
        "zero_preactivations": int(sum(s.zeros for s in stats)),
        "preactivations": int(sum(s.units * s.inputs for s in stats)),
    }
    if per_layer:
        summary["layers"] = [
            [
                s.sublayer,
                s.layer,
                s.units,
                s.inputs,
                s.zeros,
                text[s.min_nonzero],
            ]
            for s in stats
        ]
    return summary


def library_versions() -> dict:
    import gmpy2
    import numpy

    return {
        "exactmem": __version__,
        "python": platform.python_version(),
        "gmpy2": gmpy2.version(),
        "numpy": numpy.__version__,
        "mpmath": _version("mpmath", "mpmath"),
        "python-flint": _version("flint", "python-flint"),
    }


def _version(module: str, distribution: str) -> str | None:
    """A library's version without importing it for that (mpmath and flint cost a tenth of a
    second, and a verification may need neither): the loaded module's, else the installed
    distribution's."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return loaded.__version__
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:  # pragma: no cover - a declared dependency
        return None
