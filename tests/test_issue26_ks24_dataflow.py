"""Issue 26 (points 2 and 4): a hostile reviewer's false VERIFIED in ks24's checklist, as tests.

The reviewer's files (``tests/data/issue26_ks24/``, made by their ``mk_ks24_bypass.py`` and
``mk_ks24_dead.py`` against exactmem at the time):

* ``ks24_bypass.json`` on ``ks24_ctx.json``: labels that depend on the context, a threshold on
  lane 0, which the head reads and writes alone and the argmax read-out reads directly — around
  the FFN, whose only unit reaches both logits with the same weight (it cancels in every
  margin). ``ks24.dataflow`` took lane 0 for a lane "the head does not write";
* ``ks24_bypass_knocked.json``: the same with W₂ = 0;
* ``ks24_dead.json`` on ``ks24_tok.json``: labels that are a function of each token, read from a
  token lane no head writes; the FFN adds ε·ReLU(id) to it. The knock-out test was skipped for
  an argmax read-out.

and from the third hostile review (their ``mk_ks24_const.py``, ``mk_ks24_deep.py``,
``mk_ks24_tie.py``): ``ks24_const.json``, ``ks24_deep.json`` on ``ks24_tok.json`` and
``ks24_tie.json`` on ``ks24_tok3.json``, FFNs that a constant replaces on the data (below).

Each must be REFUTED with ``ks24.dataflow`` failing
(:func:`exactmem.checks.measures.ks24._dataflow`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from gmpy2 import mpq

import exactmem
from exactmem.checks.certify import certify
from exactmem.checks.measures.ks24 import (
    MAX_SHIFT_LABELS,
    _cancels,
    shift_interval_fits,
    shift_separates,
)
from exactmem.commands.main import main
from exactmem.core.model import MLP, Affine
from exactmem.datasets.dataset import Dataset

DATA = Path(__file__).resolve().parent / "data" / "issue26_ks24"


def _dataflow(cert):
    (flow,) = [c for c in cert.checks if c.name == "ks24.dataflow"]
    return flow


def _verify(model: str, data: str) -> int:
    return main(["verify", str(DATA / model), "--data", str(DATA / data), "--construction",
                 "ks24", "--quiet"])  # fmt: skip


@pytest.mark.parametrize(
    ("model", "data", "why"),
    [
        ("ks24_bypass.json", "ks24_ctx.json", "around the FFN's units"),
        ("ks24_bypass_knocked.json", "ks24_ctx.json", "around the FFN's units"),
        ("ks24_dead.json", "ks24_tok.json", "dead on the data"),
    ],
)
def test_the_reviewers_models_are_refuted_by_the_dataflow_check(model, data, why):
    m, ds = exactmem.load_model(DATA / model), exactmem.load_dataset(DATA / data)
    cert = certify(m, ds, construction="ks24")
    assert cert.verdict == "refuted"
    assert "labels" not in [c.name for c in cert.failed]  # the labels come out: only the flow tells
    flow = _dataflow(cert)
    assert not flow.passed and why in flow.detail, flow.detail
    assert _verify(model, data) == 1


def test_the_bypass_unit_is_seen_to_cancel_in_every_margin():
    """The bypass's FFN unit reaches both logits with weight 1: it decides no margin."""
    m = exactmem.load_model(DATA / "ks24_bypass.json")
    cert = certify(m, exactmem.load_dataset(DATA / "ks24_ctx.json"), construction="ks24")
    flow = _dataflow(cert)
    assert "cancels in every margin" in flow.detail
    assert flow.figures["id_units_read"] == 1 and flow.figures["id_units_deciding"] == 0
    assert flow.figures["head_lanes"] == 1


def _three_lanes(ds: Dataset) -> Dataset:
    """ks24_tok.json with a third coordinate, lane 2 = the label b (lane 1 = 0)."""
    vocab = tuple((z[0], mpq(0), z[1]) for z in ds.vocab)
    return replace(ds, vocab=vocab)


def test_a_cancelling_unit_beside_token_lanes_is_refuted():
    """The cut passes (the read-out reads token lanes only, and the FFN's unit through lane 1)
    but the unit reaches both logits equally: refuted by the cancellation alone."""
    base = exactmem.load_model(DATA / "ks24_dead.json")
    ds = _three_lanes(exactmem.load_dataset(DATA / "ks24_tok.json"))
    att, _ = base.sublayers
    head = att.heads[0]
    widen = lambda a: Affine(3, a.rows, a.bias, a.denominator)  # noqa: E731
    output = Affine(1, (((0, 1),), (), ()), (0, 0, 0))
    att = replace(att, heads=(replace(head, query=widen(head.query), key=widen(head.key),
                                      value=widen(head.value), output=output),))  # fmt: skip
    first = Affine(3, (((0, 1),),), (0,))
    w2 = Affine(1, ((), ((0, 1),), ()), (0, 0, 0), 1000)
    # logits 3/2 − z₂ + lane1 and z₂ − 3/2 + lane1: lane 1 (the FFN's) cancels in the margin
    unembed = Affine(3, (((1, 2), (2, -2)), ((1, 2), (2, 2))), (3, -3), 2)
    model = replace(base, input_dim=3, sublayers=(att, MLP((first, w2), residual=True)),
                    unembed=unembed)  # fmt: skip
    cert = certify(model, ds, construction="ks24")
    assert cert.verdict == "refuted"
    assert "labels" not in [c.name for c in cert.failed]
    flow = _dataflow(cert)
    assert not flow.passed and "cancels in every margin" in flow.detail, flow.detail
    assert "around" not in flow.detail  # the cut itself passes
    assert _cancels(model, model.sublayers[1], 0)
    # the same unit read with opposite signs decides: it does not cancel
    turned = replace(model, unembed=Affine(3, (((1, -2), (2, -2)), ((1, 2), (2, 2))), (3, -3), 2))
    assert not _cancels(turned, turned.sublayers[1], 0)


def test_a_label_readout_unit_of_zero_weight_cancels():
    model = exactmem.load_model(DATA / "ks24_dead.json")
    ffn = model.sublayers[1]
    one = replace(model, unembed=Affine(2, (((0, 1),),), (0,)))  # reads lane 0, W₂ writes lane 1
    assert _cancels(one, ffn, 0)
    assert not _cancels(replace(model, unembed=Affine(2, (((1, 1),),), (0,))), ffn, 0)


def test_the_knock_out_is_judged_at_the_users_tolerance():
    """Labels read within a tolerance: ks24_dead.json's FFN (ε·ReLU(id) onto the token lane 1)
    under a one-output read-out lane 1 + 1/100. Knocked out, the outputs b + 1/100 are not the
    labels exactly but are within the tolerance 1/10 — the FFN is dead as the labels are judged."""
    base = exactmem.load_model(DATA / "ks24_dead.json")
    ds = exactmem.load_dataset(DATA / "ks24_tok.json")
    model = replace(base, unembed=Affine(2, (((1, 100),),), (1,), 100))
    cert = certify(model, ds, construction="ks24", tolerance=mpq(1, 10))
    assert cert.verdict == "refuted"
    assert "labels" not in [c.name for c in cert.failed]
    flow = _dataflow(cert)
    assert not flow.passed and "dead on the data" in flow.detail, flow.detail


# ------------------------------------------------ the third hostile review: a constant FFN
#
# The reviewer's files (their mk_ks24_const.py, mk_ks24_deep.py, mk_ks24_tie.py): labels that
# are a function of each token, read from a token lane no head writes, beside an FFN that adds
# (on the data) a constant to that lane — the read-out's threshold shifted to match:
# * ks24_const.json on ks24_tok.json: units ReLU(id + 100) + ReLU(−id + 100) = 200 exactly;
# * ks24_deep.json on ks24_tok.json: the construction's form, ramps then an exact step that is
#   1 at every token (ks24.requantization passes);
# * ks24_tie.json on ks24_tok3.json: the FFN adds ReLU(id)/1000 > 0, varying, but any positive
#   constant gives every label; with W₂ = 0 the logits tie.
# Zeroing W₂ missed a label in each, so the knock-out passed them; no constant may.


@pytest.mark.parametrize(
    ("model", "data"),
    [
        ("ks24_const.json", "ks24_tok.json"),
        ("ks24_deep.json", "ks24_tok.json"),
        ("ks24_tie.json", "ks24_tok3.json"),
    ],
)
def test_an_ffn_a_constant_replaces_is_refuted(model, data):
    m, ds = exactmem.load_model(DATA / model), exactmem.load_dataset(DATA / data)
    cert = certify(m, ds, construction="ks24")
    assert cert.verdict == "refuted"
    assert [c.name for c in cert.failed] == ["ks24.dataflow"]  # the labels come out
    flow = _dataflow(cert)
    assert "a constant replaces the FFN" in flow.detail, flow.detail
    assert "around" not in flow.detail  # the cut and the cancellation pass: the shift decides
    assert _verify(model, data) == 1


def test_the_deep_constant_passes_the_requantization():
    """The step is exactly 1 at every token: only the shift test sees it is a constant."""
    m = exactmem.load_model(DATA / "ks24_deep.json")
    cert = certify(m, exactmem.load_dataset(DATA / "ks24_tok.json"), construction="ks24")
    (steps,) = [c for c in cert.checks if c.name == "ks24.requantization"]
    assert steps.passed


def _q(rows):
    return [[mpq(x) for x in row] for row in rows]


def test_a_shift_of_the_logits_is_decided_by_the_cycles_of_the_labels():
    # two positions per label 0, 1, 2 of three classes; L(y, c) = max over y's positions of
    # B[c] − B[y]: L(0, 1) = 1, L(1, 2) = 1, L(2, 0) = −3, the others ≤ −3. Every cycle sums
    # below 0 (0→1→2→0: −1): feasible
    feasible = _q([[0, 1, -5], [0, 0, -5], [-5, 0, 1], [-5, -1, 0], [-3, -5, 0], [-4, -5, -1]])
    targets = [0, 0, 1, 1, 2, 2]
    assert shift_separates(feasible, targets) is True
    s = [mpq(0), mpq(-7, 5), mpq(-14, 5)]  # s[y] − s[c] > L(y, c) for every pair
    for b, y in zip(feasible, targets, strict=True):
        assert all(b[y] + s[y] > b[c] + s[c] for c in range(3) if c != y)
    # the same with L(2, 0) = −2: the 3-cycle 0→1→2→0 sums to exactly 0 — strict, infeasible,
    # though no 2-cycle decides it (Floyd–Warshall does)
    infeasible = [*feasible[:4], _q([[-2, -5, 0]])[0], feasible[5]]
    assert shift_separates(infeasible, targets) is False
    # a 2-cycle: s₀ − s₁ > 1 for position 0 (label 0), s₁ − s₀ > 2 for position 1 (label 1)
    assert shift_separates(_q([[0, 1, 0], [2, 0, 0]]), [0, 1]) is False
    # the honest argmax form: B the same vector everywhere, two labels — no shift at once
    assert shift_separates(_q([[1, 2, 3]] * 3), [0, 1, 1]) is False
    assert shift_separates(_q([[1, 2, 3]] * 3), [1, 1, 1]) is True  # one label: s at it


def test_a_shift_past_the_label_limit_is_left_undecided():
    k = MAX_SHIFT_LABELS + 1
    bare = [[mpq(1 if c == y else 0) for c in range(k)] for y in range(k)]  # every L = −1
    assert shift_separates(bare, list(range(k))) is None
    bare[0][1] = mpq(5)  # L(0, 1) + L(1, 0) = 5 − 1 ≥ 0: a 2-cycle still decides
    assert shift_separates(bare, list(range(k))) is False


def test_a_constant_added_to_one_output_is_within_twice_the_tolerance():
    r = [mpq(1), mpq(6, 5), mpq(9, 10)]
    assert shift_interval_fits(r, mpq(3, 20))  # spread 3/10 = 2·(3/20): s = 21/20
    assert not shift_interval_fits(r, mpq(1, 10))
    assert not shift_interval_fits(r, mpq(0)) and shift_interval_fits([mpq(2)] * 3, mpq(0))


def test_the_shift_decision_agrees_with_a_search_over_a_grid():
    """Small integer logits (entries in [−2, 2], labels among 3 of 4 classes): when the strict
    constraints are feasible, every cycle sums to ≤ −1, so s[y] − s[c] ≥ L(y, c) + 1/3 is solved
    by shortest-path potentials — multiples of 1/3 within [−15, 15] (s₀ = 0; the never-target
    class 3 as low as needed). The search over that grid must agree with the decision."""
    import random
    from fractions import Fraction

    rng = random.Random(26)
    grid = [Fraction(i, 3) for i in range(-45, 46)]
    for _ in range(40):
        positions = rng.randint(2, 5)
        targets = [rng.randrange(3) for _ in range(positions)]
        bare = [[mpq(rng.randint(-2, 2)) for _ in range(4)] for _ in range(positions)]
        found = any(
            all(
                b[y] + s[y] > b[c] + s[c]
                for b, y in zip(bare, targets, strict=True)
                for c in range(4)
                if c != y
            )
            for s1 in grid
            for s2 in grid
            for s in [(0, s1, s2, -100)]
        )
        assert shift_separates(bare, targets) is found, (bare, targets)
