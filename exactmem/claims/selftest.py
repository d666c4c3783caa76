"""Seeing every check fail: build an honest model, apply a breaker, certify, and ask whether the
check the breaker names is the one that fails (``exactmem selftest``).

This module builds (it calls a construction's untrusted builder): it sits above the trusted
core, beside the command line, and nothing trusted imports it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from exactmem.checks.certificate import Certificate
from exactmem.checks.checklist import Breaker, CheckSpec, Construction
from exactmem.datasets.dataset import Dataset

__all__ = ["BreakerResult", "Row", "breaker_dataset", "build_with", "run_breaker", "selftest"]


@dataclass(frozen=True)
class BreakerResult:
    construction: str
    breaker: str
    fails: str
    verdict: str
    failed: tuple[str, ...]

    @property
    def seen_to_fail(self) -> bool:
        """The verdict is refuted and the named check is among the failed ones."""
        return self.verdict == "refuted" and any(_matches(self.fails, f) for f in self.failed)


def build_with(
    construction: Construction, dataset: Dataset, options: Mapping[str, Any], seed: int = 0
):
    """The honest model: a registered construction through :func:`exactmem.build` (its options
    parsed and bounded as ``build --set`` does), one not registered (a plugin under test)
    through its builder directly."""
    from exactmem.api import build
    from exactmem.checks import registry

    if registry.find(construction.name) is construction:
        return build(dataset, construction.name, seed=seed, **options)
    return construction.builder_function()(dataset, {**options, "seed": seed}, None)


def breaker_dataset(construction: Construction, breaker: Breaker) -> Dataset:
    """The dataset a breaker runs on: the one its ``dataset`` names — a claim generator's
    parameters, ``{"generator": "ks24", "N": 8, …}`` (:mod:`exactmem.claims.generators`) — else the
    construction's example."""
    if breaker.dataset is not None:
        from exactmem.claims.generators import GENERATORS

        params = dict(breaker.dataset)
        generator = params.pop("generator", None)
        if generator not in GENERATORS:
            raise LookupError(
                f"breaker {breaker.name!r} of {construction.name!r}: dataset names no known "
                f"generator ({generator!r}; known: {', '.join(GENERATORS)})"
            )
        return GENERATORS[generator](params)
    if construction.example is None:
        raise LookupError(f"construction {construction.name!r} has no example dataset")
    return construction.example()


def stated_options(construction: Construction, options: Mapping[str, Any]) -> dict[str, Any]:
    """The build options a run states as criteria (``verify --set``): those of ``options`` the
    construction declares (a seed or a claim's own keys are not criteria)."""
    return {k: v for k, v in options.items() if k in construction.options}


def _matches(fails: str, name: str) -> bool:
    if fails.endswith("."):
        return name.startswith(fails) or ("." + fails) in ("." + name)
    return name == fails or name.endswith("." + fails)


def run_breaker(
    construction: Construction,
    breaker: Breaker,
    dataset: Dataset | None = None,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> tuple[BreakerResult, Certificate]:
    """Build ``construction``'s honest model on ``dataset`` (default: its example) with
    ``options`` (default: its example options), break it, and certify it under its checklist."""
    from exactmem.checks.certify import certify

    if dataset is None:
        dataset = breaker_dataset(construction, breaker)
    opts = dict(construction.example_options if options is None else options)
    if breaker.options is not None:
        model = build_with(construction, dataset, {**opts, **breaker.options}, seed)
    else:
        assert breaker.model is not None
        model = breaker.model(build_with(construction, dataset, opts, seed), dataset)
    # the user's criteria a claim file states: the tolerance beside the options (softmax outputs
    # within it), and the honest build's options (a breaker's own options are the bug)
    cert = certify(
        model,
        dataset,
        construction=construction.checklist or construction.name,
        tolerance=opts.get("tolerance"),
        options=stated_options(construction, opts),
    )
    result = BreakerResult(
        construction.name,
        breaker.name,
        breaker.fails,
        cert.verdict,
        tuple(c.name for c in cert.failed),
    )
    return result, cert


@dataclass(frozen=True)
class Row:
    """One line of ``exactmem selftest``: the honest example, a check × breaker, or a declared
    check without a breaker. ``ok``: the honest example verified, or the breaker was seen to
    make its check fail."""

    construction: str
    check: str
    paper: str
    breaker: str
    verdict: str
    failed: tuple[str, ...]
    ok: bool
    seconds: float
    note: str = ""

    def as_dict(self) -> dict:
        return {
            "construction": self.construction,
            "check": self.check,
            "paper": self.paper,
            "breaker": self.breaker,
            "verdict": self.verdict,
            "failed": list(self.failed),
            "seen_to_fail" if self.breaker != "(honest example)" else "verified": self.ok,
            "seconds": round(self.seconds, 3),
            **({"note": self.note} if self.note else {}),
        }


def _paper(spec: CheckSpec) -> str:
    return f"{spec.paper}, {spec.result}"


def selftest(
    construction: Construction,
    tell: Callable[[str], None] | None = None,
) -> list[Row]:
    """The honest example (it must verify) and every declared check × breaker of
    ``construction`` (each must refute the model with that check failing); a declared check
    without a breaker, a construction without an example or without declared checks are rows
    that fail."""
    from exactmem.checks.certify import certify

    name = construction.name
    checklist = construction.checklist
    if checklist is None:
        return [Row(name, "-", construction.paper, "-", "-", (), False, 0.0, "no checklist")]
    rows: list[Row] = []
    start = time.perf_counter()
    try:
        dataset = construction.example() if construction.example is not None else None
    except Exception as exc:  # a plugin's example that fails is a failing row, not a crash
        dataset = None
        rows.append(Row(name, "(example)", construction.paper, "-", "-", (), False, 0.0, f"{exc}"))
    if dataset is None and not rows:
        rows.append(
            Row(
                name,
                "(example)",
                construction.paper,
                "-",
                "-",
                (),
                False,
                0.0,
                "no example dataset registered (Construction.example)",
            )
        )
    if dataset is not None:
        if tell:
            tell(f"{name}: the honest example")
        model = build_with(construction, dataset, construction.example_options)
        cert = certify(
            model,
            dataset,
            construction=checklist,
            tolerance=construction.example_options.get("tolerance"),
            options=stated_options(construction, construction.example_options),
        )
        rows.append(
            Row(
                name,
                "(all)",
                construction.paper,
                "(honest example)",
                cert.verdict,
                tuple(c.name for c in cert.failed),
                cert.verdict == "verified",
                time.perf_counter() - start,
            )
        )
    if not checklist.checks:
        rows.append(
            Row(name, "-", construction.paper, "-", "-", (), False, 0.0, "no checks declared")
        )
    for spec in checklist.checks:
        if not spec.breakers:
            rows.append(
                Row(name, spec.name, _paper(spec), "(none)", "-", (), False, 0.0, "no breaker")
            )
            continue
        for breaker in spec.breakers:
            if tell:
                tell(f"{name}: {spec.name} × {breaker.name}")
            start = time.perf_counter()
            try:
                options = None if breaker.dataset is None else construction.example_options
                if breaker.dataset is None and dataset is None:
                    raise LookupError("no example dataset")
                result, _ = run_breaker(
                    construction,
                    breaker,
                    dataset=dataset if breaker.dataset is None else None,
                    options=options,
                )
            except LookupError as exc:
                rows.append(
                    Row(name, spec.name, _paper(spec), breaker.name, "-", (), False, 0.0, str(exc))
                )
                continue
            rows.append(
                Row(
                    name,
                    spec.name,
                    _paper(spec),
                    breaker.name,
                    result.verdict,
                    result.failed,
                    result.seen_to_fail,
                    time.perf_counter() - start,
                )
            )
    return rows
