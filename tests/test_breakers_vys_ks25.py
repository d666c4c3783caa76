"""Every check of the vys and Kajitsuka–Sato checklists is seen to fail (issue 26, point 4):
each CheckSpec's breakers, run through :func:`exactmem.claims.selftest.run_breaker` on the
construction's example, refute the model with that check failing; the honest examples verify
and every check they emit is declared."""

from __future__ import annotations

import pytest

from exactmem.checks.mechanisms import ks25, vys
from exactmem.checks.registry import constructions
from exactmem.claims.selftest import run_breaker

NAMES = ("vys", *ks25.CHECKS)
MECHANISMS = {"vys": vys, **dict.fromkeys(ks25.CHECKS, ks25)}


def _dataset(breaker):
    if breaker.dataset is None:
        return None
    from exactmem.claims.proofs import GENERATORS

    params = dict(breaker.dataset)
    return GENERATORS[params.pop("generator")](params)


CASES = [
    pytest.param(name, spec, b, id=f"{name}:{spec.name}:{b.name}")
    for name in NAMES
    for spec in MECHANISMS[name].CHECKS[name]
    for b in spec.breakers
]


@pytest.mark.parametrize(("name", "spec", "breaker"), CASES)
def test_breaker_is_seen_to_fail(name, spec, breaker):
    construction = constructions()[name]
    options = None
    if breaker.dataset is not None:
        options = {**construction.example_options}
    result, cert = run_breaker(construction, breaker, dataset=_dataset(breaker), options=options)
    assert result.seen_to_fail, (result, cert)
    assert spec.matches(breaker.fails) or breaker.fails.startswith(spec.name)


@pytest.mark.parametrize("name", NAMES)
def test_every_check_has_a_spec_with_a_breaker(name):
    from exactmem.api import build
    from exactmem.checks.certify import certify

    construction = constructions()[name]
    # the mechanisms' specs and the declared bounds' (exactmem.checks.mechanisms.resources)
    specs = construction.checklist.checks
    assert all(spec.breakers for spec in specs)
    dataset = construction.example()
    model = build(dataset, name, **construction.example_options)
    # the example's build options stated as `verify --set` states them (Theorem F.1's budget)
    cert = certify(model, dataset, construction=name, options=construction.example_options)
    assert cert.verdict == "verified", cert
    undeclared = [c.name for c in cert.checks if not any(s.matches(c.name) for s in specs)]
    assert not undeclared
