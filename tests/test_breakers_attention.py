"""Every check of the attention checklists (mahdavi24, dana25, madden24) and of the
construction-independent lower bounds is seen to fail: each declared breaker, applied to the
honest model of the construction's small example, refutes it with *that* check failing
(``exactmem.claims.selftest.run_breaker``), and each honest example verifies."""

from __future__ import annotations

import random

import pytest
from gmpy2 import mpq

from exactmem.api import build
from exactmem.checks import registry
from exactmem.checks.certify import certify
from exactmem.checks.mechanisms import lower_bounds
from exactmem.claims.selftest import run_breaker
from exactmem.core.model import Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import random_sequences

NAMES = ("mahdavi24", "dana25", "madden24")

CASES = [
    pytest.param(name, spec.name, b.name, id=f"{name}:{spec.name}:{b.name}")
    for name in NAMES
    for spec in registry.get(name).checklist.checks
    for b in spec.breakers
]


def _honest(name: str):
    c = registry.get(name)
    ds = c.example()
    model = build(ds, name, **c.example_options)
    return (
        c,
        ds,
        certify(model, ds, construction=name, tolerance=c.example_options.get("tolerance")),
    )


@pytest.mark.parametrize("name", NAMES)
def test_the_honest_example_verifies_and_every_check_is_declared(name):
    c, ds, cert = _honest(name)
    assert cert.verdict == "verified", [x.detail for x in cert.failed]
    declared = [s.name for s in c.checklist.checks]
    for check in cert.checks:
        if check.name == "labels" or check.name.startswith("lower_bound."):
            continue  # the core's checks, and the lower bounds' (below)
        assert c.checklist.spec(check.name) is not None, check.name
    # every declared check but the structure (which only a broken model emits) runs here
    emitted = {x.name for x in cert.checks}
    assert {s for s in declared if not s.endswith(".structure")} <= emitted
    assert all(s.breakers and s.paper and s.result and s.mechanism for s in c.checklist.checks)


@pytest.mark.parametrize(("name", "check", "breaker"), CASES)
def test_every_breaker_refutes_with_its_check(name, check, breaker):
    c = registry.get(name)
    spec = c.checklist.spec(check)
    b = next(x for x in spec.breakers if x.name == breaker)
    result, cert = run_breaker(c, b)
    assert result.seen_to_fail, (result.verdict, result.failed)
    assert cert.verdict == "refuted"


def _distinct_seq2seq(N: int = 300, n: int = 3) -> Dataset:
    """Seq-to-seq data whose nN tokens are pairwise distinct (Theorem 4.3's hypothesis)."""
    rng = random.Random(0)
    vocab = tuple((mpq(i + 1),) for i in range(N * n))
    seqs = tuple(tuple(range(i * n, i * n + n)) for i in range(N))
    labels = tuple(tuple(rng.randint(1, 2) for _ in range(n)) for _ in range(N))
    return Dataset("seq2seq", labels, 2, vocab=vocab, sequences=seqs)


LOWER = [
    pytest.param(spec.name, b.name, id=f"{spec.name}:{b.name}")
    for spec in lower_bounds.CHECKS
    for b in spec.breakers
]


@pytest.mark.parametrize(("check", "breaker"), LOWER)
def test_every_lower_bound_is_seen_to_fail_on_a_crafted_model(check, breaker):
    spec = next(s for s in lower_bounds.CHECKS if s.name == check)
    b = next(x for x in spec.breakers if x.name == breaker)
    assert b.fails == check and b.model is not None
    if check == "lower_bound.theorem_4_2":
        # Theorem 4.2 is demanded by the Kajitsuka–Sato checklists: their honest model first
        ds = random_sequences(20, 3, 2, 8, 2, seed=1)
        honest = build(ds, "ks25-next-token")
        assert certify(honest, ds, construction="ks25-next-token").verdict == "verified"
        cert = certify(b.model(honest, ds), ds, construction="ks25-next-token")
    else:
        ds = _distinct_seq2seq()
        cert = certify(b.model(Transformer(1, ()), ds), ds)
    failed = {c.name: c for c in cert.failed}
    assert cert.verdict == "refuted" and check in failed, [c.name for c in cert.checks]
    if check == "lower_bound.theorem_4_3":  # the failed bound says so (it used to print ≥)
        assert "W = 2 < √(nN" in failed[check].detail
