"""Every check of the ks24 and kim23 checklists is seen to fail (issue 26 point 4): each
CheckSpec × Breaker, applied to the honest model built on the construction's example, gives
REFUTED with that check failing; the honest example verifies."""

import pytest

from exactmem.checks.certify import certify
from exactmem.checks.mechanisms import kim23 as kim23_mechanisms
from exactmem.checks.mechanisms import ks24 as ks24_mechanisms
from exactmem.checks.registry import get as registered
from exactmem.claims.selftest import run_breaker

TABLES = {"ks24": ks24_mechanisms, "kim23": kim23_mechanisms}
CASES = [
    (name, spec, breaker)
    for name, module in TABLES.items()
    for spec in module.CHECKS[name]
    for breaker in spec.breakers
]


@pytest.mark.parametrize(
    ("name", "spec", "breaker"), CASES, ids=[f"{n}:{b.name}" for n, _, b in CASES]
)
def test_each_breaker_is_seen_to_fail(name, spec, breaker):
    assert spec.matches(breaker.fails) or breaker.fails.startswith(spec.name)
    result, cert = run_breaker(registered(name), breaker)
    assert result.seen_to_fail, (result.verdict, result.failed)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_honest_example_verifies_and_every_check_has_a_spec(name):
    from exactmem.api import build

    module = TABLES[name]
    ds = module.EXAMPLES[name]()
    model = build(ds, name)
    cert = certify(model, ds, construction=name)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    # the mechanisms' specs and the declared bounds' (exactmem.checks.mechanisms.resources)
    specs = registered(name).checklist.checks
    for check in cert.checks:
        if check.name == "labels" or check.name.startswith("lower_bound."):
            continue  # the core's checks, not the checklist's
        assert any(s.matches(check.name) for s in specs), check.name
    assert all(spec.breakers for spec in specs)
