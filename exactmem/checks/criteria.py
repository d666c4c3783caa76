"""What a verdict is judged against (trusted): the criteria the user gave — the construction whose
checklist is demanded, the tolerance, the bounds and the build options, never read from the model
file — and the demanded checklist run on the core's one evaluation, each of its checks carrying
the paper, result and mechanism its :class:`~exactmem.checks.checklist.CheckSpec` declares."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gmpy2 import mpq

from exactmem.checks.certificate import (
    Check,
)
from exactmem.checks.checklist import (
    Checklist,
    Construction,
    Evidence,
    guarded,
)
from exactmem.core.errors import InputError
from exactmem.core.model import (
    Attention,
    Transformer,
)

__all__ = [
    "Criteria",
    "checklist_of",
    "hardmax_limit",
    "is_lower_bound",
    "limit_certified",
    "require_dim",
    "run_checklist",
    "with_spec",
]


def checklist_of(construction: str | Checklist | Construction | None) -> Checklist | None:
    """The checklist a caller demands: a registered construction's by name
    (:mod:`exactmem.checks.registry`), a :class:`~exactmem.checks.checklist.Construction`'s, or a
    :class:`~exactmem.checks.checklist.Checklist` given directly; None for none."""
    if construction is None:
        return None
    if isinstance(construction, Checklist):
        return construction
    if isinstance(construction, Construction):
        found = construction.checklist
        name = construction.name
    elif isinstance(construction, str):
        from exactmem.checks import registry

        try:
            found = registry.get(construction).checklist
        except KeyError as exc:
            raise InputError(f"--construction {exc.args[0]}") from None
        name = construction
    else:
        raise InputError(
            f"construction must be a name, a Construction or a Checklist, got "
            f"{type(construction).__name__}"
        )
    if found is None or found.run is None:
        raise InputError(f"--construction {name!r} registers no checklist to demand")
    return found


class StatedOptions(Mapping):
    """The build options the user states, read-only, recording which of them a check reads (a
    checklist reads ``Evidence.options``): every value is read through ``__getitem__`` —
    ``get``, ``items``, ``in``, ``dict(...)``, ``{**...}`` and ``==`` too — so an option no
    check reads is stated, not judged, and the certificate says so rather than list it among
    the criteria it was judged by. ``stated`` is the plain mapping, for the core's own use
    (recording, limits), which reads nothing on a check's behalf."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.stated: dict[str, Any] = dict(options)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        value = self.stated[key]  # (a key not stated is not read)
        self.read.add(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.stated)

    def __len__(self) -> int:
        return len(self.stated)

    def copy(self) -> dict[str, Any]:
        """A plain copy, whose later reads cannot be seen: every option counts as read."""
        self.read.update(self.stated)
        return dict(self.stated)

    def __repr__(self) -> str:
        return f"StatedOptions({self.stated!r})"


def stated(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options as a plain dict, without reading them on a check's behalf."""
    return dict(options.stated) if isinstance(options, StatedOptions) else dict(options)


def judged_options(criteria: Criteria, texts: Iterable[str]) -> list[str]:
    """The stated options some check read or some bound formula or define names (``texts``:
    their formulas, fallbacks included — a name in a formula may decide it)."""
    options = criteria.options
    read = options.read if isinstance(options, StatedOptions) else set(options)
    named = {k for k in options if any(re.search(rf"\b{re.escape(k)}\b", t) for t in texts)}
    return sorted(k for k in options if k in read or k in named)


@dataclass(frozen=True)
class Criteria:
    """What the user asked the verdict to mean: printed in every certificate.

    ``construction``: whose full checklist is demanded (None: the construction-independent
    checks only), a registered construction's name — or give the ``checklist`` itself.
    ``tolerance``: how far a regression output may be from its label (None: exactly).
    ``bounds``: the user's own resource bounds (claim-file formulas by metric). ``options``:
    the build options the user states the model was built with (``verify --set``), checked
    against the construction's declared options and parsed as ``build --set`` parses them;
    the declared bounds that name them are judged with these values. Nothing here is read from
    the model file."""

    construction: str | None = None
    tolerance: mpq | None = None
    max_precision: int | None = None  # Arb bits before a softmax label is inconclusive
    checklist: Checklist | None = None
    bounds: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.checklist is None and self.construction is not None:
            object.__setattr__(self, "checklist", checklist_of(self.construction))
        if self.checklist is not None and self.construction is None:
            object.__setattr__(self, "construction", self.checklist.name)
        if self.tolerance is not None and mpq(self.tolerance) < 0:
            raise InputError(f"--tolerance {self.tolerance}: must be ≥ 0")
        mp = self.max_precision
        if mp is not None and (isinstance(mp, bool) or not isinstance(mp, int) or mp < 64):
            raise InputError(f"--max-precision {mp!r}: must be an integer ≥ 64 (bits)")
        if not isinstance(self.bounds, Mapping):
            raise InputError("bounds: expected a mapping of metric to formula")
        from exactmem.checks.checklist import BOUND_METRICS

        for metric, text in self.bounds.items():
            if metric not in BOUND_METRICS:
                raise InputError(
                    f"bounds: unknown metric {metric!r}; known: {', '.join(BOUND_METRICS)}"
                )
            if not isinstance(text, str):
                raise InputError(f"bounds.{metric}: expected a formula string")
        parsed = _user_options(self.construction, self.options)
        object.__setattr__(self, "options", StatedOptions(parsed))


def _user_options(construction: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked against ``construction``'s declared ``--set`` options and parsed by
    the same parsers (:func:`exactmem.checks.registry.parse_options`): a value given as text is
    parsed, any other (an int, a bool) as its text — one form whatever the caller."""
    if not isinstance(options, Mapping):
        raise InputError("options: expected a mapping of option to value")
    if not options:
        return {}
    if construction is None:
        raise InputError("--set: build options are criteria of a construction; give --construction")
    from exactmem.checks.build_options import parse_options

    items = []
    for key, value in options.items():
        if not isinstance(key, str):
            raise InputError(f"options: expected option names, got {type(key).__name__}")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str | int) or type(value).__name__ == "mpq":
            text = str(value)
        else:
            raise InputError(f"--set {key}: expected a number, a word or true/false")
        items.append(f"{key}={text}")
    return parse_options(construction, items)


def require_dim(model: Transformer, dim: int, what: str) -> None:
    if dim != model.input_dim:
        raise InputError(
            f"the model takes inputs of dimension {model.input_dim}, the dataset's {what} have "
            f"{dim}"
        )


def hardmax_limit(model: Transformer) -> Transformer:
    """The model with every softmax attention read as hardmax (the λ → ∞ limit): exactly
    evaluable. A checklist that ``evaluates`` the ``hardmax-limit`` must itself certify that
    the softmax model's values equal the limit's; without that check the limit proves
    nothing."""
    subs = tuple(
        replace(s, score="hardmax") if isinstance(s, Attention) and s.score == "softmax" else s
        for s in model.sublayers
    )
    return replace(model, sublayers=subs)


def run_checklist(criteria: Criteria, evidence: Evidence) -> list[Check]:
    """The demanded checklist's checks on the core's one evaluation, each carrying the paper,
    result and mechanism its :class:`~exactmem.checks.checklist.CheckSpec` declares."""
    checklist = criteria.checklist
    assert checklist is not None and checklist.run is not None
    run = checklist.run
    if evidence.trace is None and checklist.evaluates != "balls":
        what = "model" if checklist.evaluates == "exact" else "hardmax limit"
        checks = [
            Check(
                f"{checklist.name}.structure",
                False,
                f"the model does not have the structure the {checklist.name} checklist reads "
                f"(its {what} is not exactly evaluable on this dataset: unequal softmax "
                "scores, a GELU or a layer norm)",
            )
        ]
    else:
        checks = guarded(checklist.name, lambda: list(run(evidence)))
    return [with_spec(checklist, c) for c in checks]


def limit_certified(criteria: Criteria, checks: list[Check]) -> bool:
    """Whether the checklist certified the model equal to its hardmax limit: its
    ``limit_check`` passed and no structure check failed."""
    checklist = criteria.checklist
    if checklist is None or checklist.limit_check is None:
        return False
    return any(c.name == checklist.limit_check and c.passed for c in checks) and not any(
        c.name.endswith(".structure") and not c.passed for c in checks
    )


def is_lower_bound(check: Check) -> bool:
    return check.name.startswith("lower_bound.")


def with_spec(checklist: Checklist, check: Check) -> Check:
    spec = checklist.spec(check.name)
    if spec is None or check.paper is not None:
        return check
    return replace(check, paper=spec.paper, result=spec.result, mechanism=spec.mechanism)
