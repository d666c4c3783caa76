"""Stage III of Lemma C.1 read per class (exactmem.checks.memorizer._class_tables): when the segment
lanes are class-shared, the checks test each class once and compare classes by id; they decide
exactly as the row-by-row reading, on a verified model and on a tampered trace."""

import numpy as np
import pytest

from exactmem.constructions import ks25
from exactmem.datasets.sequences import random_sequences


@pytest.fixture(scope="module")
def memorizer_calls():
    """The check_memorizer calls of a Theorem 4.1 certification (fast evaluator: the Stage III
    lanes are class-shared)."""
    from exactmem.checks import memorizer as verify
    from exactmem.checks.certify import certify

    ds = random_sequences(3000, 16, 8, 1000, 16, seed=2)
    model, _ = ks25.build(ds, {"seed": 0})
    calls = []
    real = verify.check_memorizer

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    verify.check_memorizer = spy
    try:
        assert certify(model, ds, construction="ks25-next-token").verdict == "verified"
    finally:
        verify.check_memorizer = real
    return calls


def _both_paths(monkeypatch, args, kwargs):
    from exactmem.checks import memorizer as verify

    by_class = verify.check_memorizer(*args, **kwargs)
    monkeypatch.setattr(verify, "_class_tables", lambda *a: None)
    by_row = verify.check_memorizer(*args, **kwargs)
    monkeypatch.undo()
    return by_class, by_row


def test_stage3_by_class_decides_as_row_by_row(memorizer_calls, monkeypatch):
    from exactmem.checks import memorizer as verify

    used = []
    real = verify._class_tables
    monkeypatch.setattr(verify, "_class_tables", lambda *a: used.append(real(*a)) or used[-1])
    for args, kwargs in memorizer_calls:
        verify.check_memorizer(*args, **kwargs)
    monkeypatch.undo()
    assert any(t is not None for t in used)  # the class path ran
    for args, kwargs in memorizer_calls:
        by_class, by_row = _both_paths(monkeypatch, args, kwargs)
        assert by_class == by_row and all(c.passed for c in by_class)


@pytest.mark.parametrize("lane", ["key", "label"])
def test_stage3_by_class_fails_on_a_tampered_segment(memorizer_calls, monkeypatch, lane):
    """One class's segment changed in the trace: both paths fail Stage III the same way."""
    from exactmem.checks import memorizer as verify
    from exactmem.core.exact_arrays import Gathered

    args, kwargs = next(
        (a, k)
        for a, k in memorizer_calls
        if verify._class_tables(a[0], f"{a[1].label}.", 2) is not None
    )
    trace = args[0]
    name = f"{args[1].label}.{lane}[1]"
    numerators, den, rows = trace.lane_raw(name)
    assert isinstance(numerators, Gathered)
    table = numerators.table.astype(np.int64)
    table[numerators.index[0]] += 1  # the first row's class (its group's reference)
    trace._lanes[name] = (Gathered(table, numerators.index), den, rows)
    try:
        by_class, by_row = _both_paths(monkeypatch, args, kwargs)
    finally:
        trace._lanes[name] = (numerators, den, rows)
    assert by_class == by_row
    assert not all(c.passed for c in by_class)
