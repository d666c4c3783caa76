"""Every check of every registered checklist is seen to fail (issue 26.4): each declared
CheckSpec × Breaker, run through :func:`exactmem.claims.selftest.run_breaker` on the construction's
example, refutes the model with that check failing — the same runs as ``exactmem selftest``.
The cases are read from the registry, so a construction's checks (built-in or plugin) are
picked up as they are declared. Breakers of constructions evaluated on Arb balls take seconds
each: they are in the slow tier (``-m slow``), the others in the default suite."""

from __future__ import annotations

import pytest

from exactmem.checks import registry
from exactmem.claims.selftest import breaker_dataset, run_breaker

# checklists judged on Arb balls: their breakers cost seconds each
SLOW = {"balls"}


def _cases():
    for construction in registry.constructions().values():
        checklist = construction.checklist
        if checklist is None:
            continue
        marks = [pytest.mark.slow] if checklist.evaluates in SLOW else []
        for spec in checklist.checks:
            for breaker in spec.breakers:
                yield pytest.param(
                    construction.name,
                    spec,
                    breaker,
                    id=f"{construction.name}:{spec.name}:{breaker.name}",
                    marks=marks,
                )


@pytest.mark.parametrize(("name", "spec", "breaker"), list(_cases()))
def test_breaker_is_seen_to_fail(name, spec, breaker):
    construction = registry.get(name)
    if breaker.dataset is None and construction.example is None:
        pytest.skip(f"{name} registers no example dataset yet (Construction.example)")
    dataset = breaker_dataset(construction, breaker)
    result, cert = run_breaker(construction, breaker, dataset=dataset)
    assert result.seen_to_fail, (result, cert)
    assert spec.matches(breaker.fails) or breaker.fails.startswith(spec.name)


@pytest.mark.parametrize("name", registry.names())
def test_every_declared_check_with_a_breaker_it_can_have(name):
    """Every declared check names its paper and result; each has a breaker, except a declared
    margin bound (no generic breaker shrinks a margin)."""
    checklist = registry.get(name).checklist
    assert checklist is not None
    for spec in checklist.checks:
        assert spec.paper and spec.result and spec.mechanism, spec.name
        if not spec.name.endswith(".bounds.margin"):
            assert spec.breakers, f"{spec.name} has no breaker"


@pytest.mark.parametrize("name", registry.names())
def test_the_honest_example_verifies_and_every_check_of_its_checklist_is_declared(name):
    """The checks a checklist adds to the construction-independent ones (labels, lower bounds)
    each have a CheckSpec, so that each has its paper, result and breakers."""
    from exactmem.checks.certify import certify
    from exactmem.claims.selftest import build_with

    construction = registry.get(name)
    if construction.example is None:
        pytest.skip(f"{name} registers no example dataset yet (Construction.example)")
    checklist = construction.checklist
    assert checklist is not None
    dataset = construction.example()
    model = build_with(construction, dataset, construction.example_options)
    # the user's criteria an example states: the tolerance beside its options (softmax outputs
    # within it), and the options themselves as `verify --set` states them
    tolerance = construction.example_options.get("tolerance")
    options = construction.example_options
    cert = certify(model, dataset, construction=checklist, tolerance=tolerance, options=options)
    assert cert.verdict == "verified", cert
    independent = {c.name for c in certify(model, dataset, tolerance=tolerance).checks}
    added = [c.name for c in cert.checks if c.name not in independent]
    assert added, "the checklist adds no check"
    assert not [n for n in added if checklist.spec(n) is None], "undeclared checks"
    assert all(c.paper for c in cert.checks if c.name in added)
