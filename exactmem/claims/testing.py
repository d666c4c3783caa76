"""Claim files as tests in your own repository: the proof regression of ``exactmem check``,
one result per claim instance, for a test suite or a CI job.

Two ways (docs/ci.md):

* the pytest plugin (:mod:`exactmem.claims.pytest_plugin`, registered under ``pytest11`` when
  exactmem is installed): ``pytest --exactmem-proofs proofs/`` collects every instance of every
  claim file in ``proofs/`` as a test item, passed when its verdict is the one the claim
  expects;
* from Python: :func:`check_claims` returns a :class:`ClaimResult` per instance, and
  :func:`assert_claims` raises an ``AssertionError`` naming every instance whose verdict
  differs::

      from exactmem.claims.testing import assert_claims

      def test_my_proofs():
          assert_claims("proofs")

A claim file is untrusted input, parsed as data (:mod:`exactmem.claims.proofs`); each instance is
built, certified under the claim's construction and judged against its bounds exactly as
``exactmem check --proofs DIR`` does — the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exactmem.claims.proofs import Claim, Instance

__all__ = [
    "ClaimResult",
    "assert_claims",
    "check_claims",
    "claim_instances",
    "instance_ids",
    "run_claim",
]

TIERS = ("quick", "full")


@dataclass(frozen=True)
class ClaimResult:
    """One claim instance's outcome. ``ok``: its verdict is the expected one (for an expected
    refutation: refuted, by every check the claim names in ``refuted_by``). ``failed``: the
    (name, detail) of every failed check. ``record``: the instance's JSON record, as ``check
    --json`` prints it (the certificate's content plus the claim's fields)."""

    claim: str
    path: Path
    instance: str
    tier: str
    expected: str
    verdict: str
    ok: bool
    refuted_by: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    record: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def id(self) -> str:
        """``claim[instance]``: how a report names the instance."""
        return f"{self.claim}[{self.instance}]"

    @property
    def message(self) -> str:
        """One paragraph: what was expected, what was found, and every failed check."""
        head = f"{self.path.name}: {self.id}: verdict {self.verdict}, expected {self.expected}"
        if self.expected == "refuted" and self.refuted_by:
            head += f" by {', '.join(self.refuted_by)}"
            names = {name for name, _ in self.failed}
            missing = [c for c in self.refuted_by if c not in names]
            if self.verdict == "refuted" and missing:
                head += f" ({', '.join(missing)} passed)"
        if self.ok:
            head += " — as expected"
        lines = [head] + [f"  FAIL {name}: {detail}" for name, detail in self.failed]
        return "\n".join(lines)


def _label(inst: Instance) -> str:
    return inst.label.replace(" ", ",") if inst.params else "fixed dataset"


def claim_instances(
    folder: str | Path, *, tier: str = "quick", pattern: str | None = None
) -> Iterator[tuple[Claim, Instance, str]]:
    """Every (claim, instance, id) of the claim files (``*.toml``) in ``folder`` whose tier is
    selected (``quick``; ``full`` adds the large ones) and whose claim name contains
    ``pattern`` (:func:`instance_ids`).

    Raises:
        InputError: a folder that is not one, or a claim file that is not valid (the message
            names the file and the key).
    """
    from exactmem.claims.proofs import load_claims
    from exactmem.core.errors import InputError

    if tier not in TIERS:
        raise InputError(f"tier {tier!r}: expected one of {', '.join(TIERS)}")
    directory = Path(folder)
    if not directory.is_dir():
        raise InputError(f"claim folder {folder}: not a directory")
    tiers = TIERS[: TIERS.index(tier) + 1]
    for claim in load_claims(directory):
        if pattern and pattern not in claim.name:
            continue
        for inst, ident in instance_ids(claim):
            if inst.tier in tiers:
                yield claim, inst, ident


def instance_ids(claim: Claim) -> list[tuple[Instance, str]]:
    """Each instance of ``claim`` with its id, ``name[N=2,d=2,C=3,seed=2]``: its parameters
    (``#2``, ``#3``, … after two instances with equal parameters and other options)."""
    out: list[tuple[Instance, str]] = []
    seen: set[str] = set()
    for inst in claim.instances:
        ident, k = f"{claim.name}[{_label(inst)}]", 2
        while ident in seen:
            ident, k = f"{claim.name}[{_label(inst)}#{k}]", k + 1
        seen.add(ident)
        out.append((inst, ident))
    return out


def run_claim(
    claim: Claim,
    inst: Instance,
    *,
    evaluator: str = "fast",
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> ClaimResult:
    """Build, certify and bound one claim instance (:func:`exactmem.claims.proofs.run_instance`, as
    ``exactmem check`` does) and compare its verdict with the claim's."""
    from exactmem.claims.proofs import run_instance

    record = run_instance(claim, inst, progress, jobs, evaluator)
    return ClaimResult(
        claim=claim.name,
        path=claim.path,
        instance=_label(inst),
        tier=inst.tier,
        expected=claim.expect,
        verdict=record["verdict"],
        ok=bool(record["ok"]),
        refuted_by=tuple(claim.refuted_by),
        failed=tuple((c["name"], c["detail"]) for c in record["checks"] if not c["passed"]),
        seconds=record["seconds"],
        record=record,
    )


def check_claims(
    folder: str | Path,
    *,
    tier: str = "quick",
    pattern: str | None = None,
    evaluator: str = "fast",
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[ClaimResult]:
    """Run every selected instance of the claim files in ``folder``: one :class:`ClaimResult`
    each, in the order of the files and of their instances. Nothing is raised for a verdict
    that differs (see :func:`assert_claims`); bad input raises
    :class:`~exactmem.core.errors.InputError`."""
    return [
        run_claim(claim, inst, evaluator=evaluator, jobs=jobs, progress=progress)
        for claim, inst, _ in claim_instances(folder, tier=tier, pattern=pattern)
    ]


def assert_claims(
    folder: str | Path,
    *,
    tier: str = "quick",
    pattern: str | None = None,
    evaluator: str = "fast",
    jobs: int = 1,
) -> list[ClaimResult]:
    """:func:`check_claims`, raising an ``AssertionError`` that names every instance whose
    verdict is not the expected one, with its failed checks; also when nothing is selected (a
    regression that runs no claim proves nothing). Returns the results when all are as
    expected."""
    results = check_claims(folder, tier=tier, pattern=pattern, evaluator=evaluator, jobs=jobs)
    if not results:
        raise AssertionError(
            f"no claim instances selected in {folder} (tier {tier}, pattern {pattern!r})"
        )
    bad = [r for r in results if not r.ok]
    if bad:
        raise AssertionError(
            f"{len(bad)} of {len(results)} claim instances not as expected:\n\n"
            + "\n\n".join(r.message for r in bad)
        )
    return results
