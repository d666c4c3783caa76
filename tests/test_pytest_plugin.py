"""Claim files as tests in another project (issue 28 point 5): :mod:`exactmem.claims.testing` and
the
pytest plugin ``pytest --exactmem-proofs DIR`` (:mod:`exactmem.claims.pytest_plugin`), run with
pytester on a tiny claim folder: one claim verified, one refuted as it expects, one whose
verdict differs — that item, and only that one, fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactmem.claims.testing import assert_claims, check_claims
from exactmem.core.errors import InputError
from exactmem.runtime.jit import ENV, cache_dir

pytest_plugins = ["pytester"]

CLAIM = """paper = "a tiny claim of the plugin's tests"
statement = "Theorem 3.1's memorizer on two points, width at most {width}"
construction = "vys"
expect = "{expect}"
{refuted_by}

[bounds]
width = "{width}"

[[instance]]
generator = "random_points"
N = 2
d = 2
C = 3
seed = 2
"""

FULL = """
[[instance]]
tier = "full"
generator = "random_points"
N = 3
d = 2
C = 3
seed = 3
"""


ROOT = Path(__file__).resolve().parents[1]
KERNELS = str(cache_dir())  # before pytester moves HOME


@pytest.fixture
def pytester(pytester, monkeypatch):
    """pytest's pytester; its runs go to a child process (an in-process run would unload and
    re-import NumPy) with this checkout's exactmem first on the path."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv(ENV, KERNELS)  # pytester's HOME is new: the kernels' cache stays ours
    return pytester


def _run(pytester, *args: str):
    return pytester.runpytest_subprocess("-p", "exactmem.claims.pytest_plugin", *args)


def _claims(folder) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "verified.toml").write_text(
        CLAIM.format(width="12", expect="verified", refuted_by="") + FULL
    )
    (folder / "refuted_as_expected.toml").write_text(
        CLAIM.format(width="1", expect="refuted", refuted_by='refuted_by = ["bound.width"]')
    )
    (folder / "differs.toml").write_text(CLAIM.format(width="1", expect="verified", refuted_by=""))


def test_pytest_reports_each_claim_instance(pytester):
    _claims(pytester.path / "proofs")
    pytester.makepyfile(test_other="def test_own():\n    pass\n")
    result = _run(pytester, "--exactmem-proofs", "proofs",
                                "-rA", "-p", "no:cacheprovider")  # fmt: skip
    result.assert_outcomes(passed=3, failed=1, skipped=1)  # the project's own test runs too
    result.stdout.fnmatch_lines(
        [
            "*PASSED proofs/refuted_as_expected.toml::refuted_as_expected[[]N=2,d=2,C=3,seed=2[]]*",
            "*PASSED proofs/verified.toml::verified[[]N=2,d=2,C=3,seed=2[]]*",
            "*SKIPPED*full tier (--exactmem-tier full)*",
            "*FAILED proofs/differs.toml::differs[[]N=2,d=2,C=3,seed=2[]]*",
        ]
    )
    # the failure says what was expected, what was found and which check failed — no traceback
    result.stdout.fnmatch_lines(
        [
            "*differs.toml: differs[[]N=2,d=2,C=3,seed=2[]]: verdict refuted, expected verified",
            "*FAIL bound.width: width * > 1*",
        ]
    )
    assert "Traceback" not in result.stdout.str() and "def runtest" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_pytest_full_tier_and_selection(pytester):
    _claims(pytester.path / "proofs")
    result = _run(pytester, "--exactmem-proofs", "proofs",
                                "--exactmem-tier", "full", "-k", "verified and not refuted",
                                "-p", "no:cacheprovider")  # fmt: skip
    result.assert_outcomes(passed=2, deselected=2)


def test_pytest_bad_claim_file_is_a_collection_error(pytester):
    folder = pytester.path / "proofs"
    folder.mkdir()
    (folder / "bad.toml").write_text('paper = "p"\nstatement = "s"\nconstruction = "nope"\n')
    result = _run(pytester, "--exactmem-proofs", "proofs",
                                "-p", "no:cacheprovider")  # fmt: skip
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error stops the run
    result.stdout.fnmatch_lines(["*claim file*bad.toml: missing key*"])
    assert "Traceback" not in result.stdout.str()
    missing = _run(pytester, "--exactmem-proofs", "nowhere")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--exactmem-proofs *nowhere: not a directory*"])


def test_without_the_option_the_plugin_collects_nothing(pytester):
    _claims(pytester.path / "proofs")
    result = _run(pytester, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_check_claims_and_assert_claims(tmp_path):
    _claims(tmp_path)
    results = {r.claim: r for r in check_claims(tmp_path)}
    assert set(results) == {"verified", "refuted_as_expected", "differs"}
    assert results["verified"].ok and results["verified"].verdict == "verified"
    assert results["refuted_as_expected"].ok and results["refuted_as_expected"].verdict == "refuted"
    bad = results["differs"]
    assert not bad.ok and bad.expected == "verified" and bad.verdict == "refuted"
    assert [name for name, _ in bad.failed] == ["bound.width"]
    assert len(check_claims(tmp_path, tier="full", pattern="verified")) == 2
    with pytest.raises(AssertionError) as caught:
        assert_claims(tmp_path)
    text = str(caught.value)
    assert text.startswith("1 of 3 claim instances not as expected")
    assert "differs[N=2,d=2,C=3,seed=2]: verdict refuted, expected verified" in text
    assert "FAIL bound.width: width" in text
    assert len(assert_claims(tmp_path, pattern="verified")) == 1
    with pytest.raises(AssertionError, match="no claim instances selected"):
        assert_claims(tmp_path, pattern="nothing")
    with pytest.raises(InputError, match="not a directory"):
        check_claims(tmp_path / "nowhere")
    # an expected refutation by a check that passes is not as expected, and says so
    (tmp_path / "differs.toml").unlink()
    (tmp_path / "verified.toml").unlink()
    (tmp_path / "by_other.toml").write_text(
        CLAIM.format(width="12", expect="refuted", refuted_by='refuted_by = ["labels"]')
    )
    (other,) = [r for r in check_claims(tmp_path) if r.claim == "by_other"]
    assert not other.ok and "verdict verified, expected refuted by labels" in other.message
