"""Seeing every check fail: build an honest model, apply a breaker, certify, and ask whether the
check the breaker names is the one that fails (``exactmem selftest``).

This module builds (it calls a construction's untrusted builder): it sits above the trusted
core, beside the command line, and nothing trusted imports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exactmem.checklist import Breaker, Construction
from exactmem.data import Dataset
from exactmem.verify import Certificate

__all__ = ["BreakerResult", "run_breaker"]


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
    from exactmem.api import build
    from exactmem.certify import certify

    if dataset is None:
        if construction.example is None:
            raise LookupError(f"construction {construction.name!r} has no example dataset")
        dataset = construction.example()
    opts = dict(construction.example_options if options is None else options)
    if breaker.options is not None:
        model = build(dataset, construction.name, seed=seed, **{**opts, **breaker.options})
    else:
        assert breaker.model is not None
        model = breaker.model(build(dataset, construction.name, seed=seed, **opts), dataset)
    # the user's criterion a claim file states beside the options (softmax outputs within it)
    cert = certify(model, dataset, construction=construction.name, tolerance=opts.get("tolerance"))
    result = BreakerResult(
        construction.name,
        breaker.name,
        breaker.fails,
        cert.verdict,
        tuple(c.name for c in cert.failed),
    )
    return result, cert
