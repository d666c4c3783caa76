"""Runs of Stage II step layers in key order (exactmem.evaluate.fast.step_kernel) against the
reference: outputs, statistics, lanes and folds; where they end and how they hand on."""

import pytest
from gmpy2 import mpq
from support import run_folded, same_folds, same_trace

from exactmem.checks.certificate import StepFold
from exactmem.constructions import ks25
from exactmem.core.model import MLP, Affine, Probe, Transformer
from exactmem.datasets.sequences import random_sequences
from exactmem.evaluate import fast, reference
from exactmem.evaluate.fast import limits


def _spy_steps(monkeypatch) -> list:
    seen = []
    real = fast._Engine.step_run

    def spy(self, *args):
        got = real(self, *args)
        if got is not None:
            seen.append(len(got))
        return got

    monkeypatch.setattr(fast._Engine, "step_run", spy)
    return seen


@pytest.mark.parametrize(("N", "seed"), [(300, 1), (800, 0), (2000, 4)])
def test_stage_two_in_step_runs(monkeypatch, N, seed):
    """Key order from the first row: Stage II's layers go in runs, with folds as they come;
    the trace and the folds equal the reference's."""
    monkeypatch.setattr(limits, "SORTED_FROM", 0)
    seen = _spy_steps(monkeypatch)
    ds = random_sequences(N, 16, 8, 1000, 16, seed=seed)
    model, _ = ks25.build(ds, {})
    ref, ref_folds = run_folded(reference, model, ds)
    got, got_folds = run_folded(fast, model, ds)
    same_trace(ref, got)
    same_folds(ref_folds, got_folds)
    assert sum(seen) >= 20


def _hand_stage_two(thresholds, start, big=2**70, W=2**65, w=1000):
    """Stage II by hand: key x; acc += (big + j)·step (λ > 0); every other layer acc2 −= W·step
    (λ < 0: clipped to 0 where acc2 < W), carried unchanged (σ(x) = x) in the layers between;
    steps [x ≥ t + 1] of σ(w·(x − t)) − σ(w·(x − t) − 1), folded as they come. acc2 starts at
    (41 − x)·W + ``start`` (one class per key, its classes' values all differ), so with start 7
    or −5 its least |z| (7, or 5 of a clipped −5) is the layer's least — with even keys from 22
    and odd thresholds the steps' units are 0 or ≥ w − 1, and the key's least value is 22 — and
    belongs to a class anywhere in the order. The last layer reads everything."""
    layers = []
    for j, t in enumerate(thresholds):
        if j == 0:
            rows = [((0, 1),), (), ((0, w),), ((0, w),), ((0, -W),)]
            bias = (0, 5, -w * t, -w * t - 1, 41 * W + start)
        else:
            second = ((4, 1), (2, -W), (3, W)) if j % 2 == 0 else ((4, 1),)
            rows = [((0, 1),), ((1, 1), (2, big + j), (3, -big - j)), ((0, w),), ((0, w),), second]
            bias = (0, 0, -w * t, -w * t - 1, 0)
        layers.append(Affine(1 if j == 0 else 5, tuple(rows), bias))
    layers.append(Affine(5, (((1, 1), (4, 3), (2, 7), (3, -7)),), (0,)))
    probes = tuple(Probe(f"step[{j + 1}]", j, ((2, 1), (3, -1))) for j in range(len(thresholds)))
    return Transformer(1, (MLP(tuple(layers), residual=False, probes=probes, label="m"),))


@pytest.mark.parametrize("start", [7, -5])
@pytest.mark.parametrize(
    "xs", [list(range(1, 11)), [1, 1, 3, 3, 5, 8, 10, 10, 10], [9, 1, 5, 4, 4, 10, 2, 1, 3, 7]]
)
def test_hand_made_stage_two_in_step_runs(monkeypatch, xs, start):
    """Negative pre-activations (clipped packed integers), a lane updated in place carried by
    σ(x) = x in the next layer, equal and empty steps: trace and fold as the reference's."""
    monkeypatch.setattr(limits, "SORTED_FROM", 0)
    seen = _spy_steps(monkeypatch)
    thresholds = [2 * t + 21 for t in (-2, 1, 1, 3, 4, 6, 6, 8, 9, 13)]
    model = _hand_stage_two(thresholds, start)
    pts = [(mpq(2 * x + 20),) for x in xs]
    seqs = [[i] for i in range(len(pts))]
    folds = {}
    traces = {}
    for module in (reference, fast):
        folds[module] = [StepFold("m.", len(thresholds))]
        traces[module] = module.run(model, pts, seqs, folds=folds[module])
    same_trace(traces[reference], traces[fast])
    same_folds(folds[reference], folds[fast])
    assert seen and sum(seen) >= len(thresholds) - 3


def _summaries_checked(monkeypatch) -> list:
    """After every step run, each packed integer it updated must be summarized exactly by its
    lane: the greatest value (bound), the rows at 0, the least positive value — the kernel keeps
    the classes below the boundary as a summary per slot instead of rescanning them."""
    checked = []
    real = fast._Engine.step_run

    def spy(self, *args):
        got = real(self, *args)
        if got is None:
            return got
        updated = {slot for slot, _, _ in self._last_step_plan[1]}
        for lane in self.lanes:
            if lane.shared and lane.slot in updated:
                values = [int(v) for v in self.shared_values(lane.slot)]
                counts = [int(k) for k in self.counts]
                positive = [v for v in values if v > 0]
                assert lane.bound == max(values)
                assert lane.zeros == sum(k for v, k in zip(values, counts, strict=True) if v == 0)
                assert lane.min_pos == (min(positive) if positive else None)
                checked.append(len(values))
        return got

    real_plan = fast._Engine._step_plan

    def plan_spy(self, *args):
        got = real_plan(self, *args)
        self._last_step_plan = got
        return got

    monkeypatch.setattr(fast._Engine, "step_run", spy)
    monkeypatch.setattr(fast._Engine, "_step_plan", plan_spy)
    return checked


@pytest.mark.parametrize("start", [7, -30 * 2**65])
def test_step_runs_summarize_the_packed_integers(monkeypatch, start):
    """The lanes a step run hands on (bound, zeros, least positive) equal their values', over
    Theorem 4.1 and the hand-made Stage II (with start −30·W, acc2 is 0 on the keys from 42 up:
    classes at 0 that fall below the boundary)."""
    monkeypatch.setattr(limits, "SORTED_FROM", 0)
    checked = _summaries_checked(monkeypatch)
    ds = random_sequences(800, 16, 8, 1000, 16, seed=start % 3)
    model, _ = ks25.build(ds, {})
    run_folded(fast, model, ds)
    thresholds = [2 * t + 21 for t in (-2, 1, 1, 3, 4, 6, 6, 8, 9, 13)]
    pts = [(mpq(2 * x + 20),) for x in [9, 1, 5, 4, 4, 10, 2, 1, 3, 7, 12, 15]]
    folds = [StepFold("m.", len(thresholds))]
    fast.run(_hand_stage_two(thresholds, start), pts, [[i] for i in range(len(pts))], folds=folds)
    assert len(checked) >= 4 and max(checked) >= 20
