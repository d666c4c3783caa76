"""The pytest plugin: ``pytest --exactmem-proofs proofs/`` runs a folder of claim files as tests,
one test item per claim instance, passed when its verdict is the one the claim expects
(docs/ci.md).

Registered under the ``pytest11`` entry point when exactmem is installed, so any project that
depends on exactmem has the option; without it the plugin does nothing. It imports nothing of
exactmem until a claim folder is collected, and every item runs through
:mod:`exactmem.claims.testing` — the code of ``exactmem check``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from exactmem.claims.proofs import Claim, Instance
    from exactmem.claims.testing import ClaimResult


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("exactmem", "exactmem claim files (proof regression)")
    group.addoption(
        "--exactmem-proofs",
        action="append",
        default=[],
        metavar="DIR",
        help="collect every instance of the claim files (*.toml) in DIR as a test item "
        "(repeatable); passed when the verdict is the one the claim expects",
    )
    group.addoption(
        "--exactmem-tier",
        choices=("quick", "full"),
        default="quick",
        help="the claim instances to run: quick (default) or full (adds the large ones; "
        "the others are reported as skipped)",
    )
    group.addoption(
        "--exactmem-evaluator",
        choices=("fast", "reference"),
        default="fast",
        help="the exact evaluator of the claim instances (both compute the same values)",
    )


def _folders(config: pytest.Config) -> list[Path]:
    base = config.invocation_params.dir
    return [(base / d).resolve() for d in config.getoption("exactmem_proofs") or []]


def pytest_configure(config: pytest.Config) -> None:
    """Each claim folder is collected even when the run's paths (``testpaths``, the command
    line) do not contain it."""
    folders = _folders(config)
    if not folders:
        return
    for folder in folders:
        if not folder.is_dir():
            raise pytest.UsageError(f"--exactmem-proofs {folder}: not a directory")
    base = config.invocation_params.dir
    covered = [(base / str(a).split("::")[0]).resolve() for a in config.args]
    for folder in folders:
        if not any(folder == c or c in folder.parents for c in covered):
            config.args.append(str(folder))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".toml":
        return None
    if file_path.resolve().parent not in _folders(parent.config):
        return None
    return ClaimFile.from_parent(parent, path=file_path)


class ClaimMismatch(AssertionError):
    """A claim instance whose verdict is not the expected one."""


class ClaimFile(pytest.File):
    """A claim file: one :class:`ClaimItem` per instance."""

    def collect(self):
        from exactmem.claims.proofs import load_claim
        from exactmem.claims.testing import instance_ids
        from exactmem.core.errors import InputError

        tier = self.config.getoption("exactmem_tier")
        try:
            claim = load_claim(self.path)
        except InputError as exc:
            raise self.CollectError(str(exc)) from None
        for inst, ident in instance_ids(claim):
            item = ClaimItem.from_parent(self, name=ident, claim=claim, instance=inst)
            if tier == "quick" and inst.tier == "full":
                item.add_marker(pytest.mark.skip(reason="full tier (--exactmem-tier full)"))
            yield item


class ClaimItem(pytest.Item):
    """One claim instance: build, certify, bound, compare with the claim's verdict."""

    def __init__(self, *, claim: Claim, instance: Instance, **kwargs) -> None:
        super().__init__(**kwargs)
        self.claim = claim
        self.instance = instance
        self.result: ClaimResult | None = None

    def runtest(self) -> None:
        from exactmem.claims.testing import run_claim

        result = run_claim(
            self.claim, self.instance, evaluator=self.config.getoption("exactmem_evaluator")
        )
        self.result = result
        self.user_properties += [
            ("expected", result.expected),
            ("verdict", result.verdict),
            ("seconds", result.seconds),
        ]
        if not result.ok:
            raise ClaimMismatch(result.message)

    def repr_failure(self, excinfo, style=None):
        from exactmem.core.errors import ExactmemError

        if isinstance(excinfo.value, ClaimMismatch | ExactmemError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, 0, f"claim {self.name}"
