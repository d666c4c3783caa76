"""The fast evaluator against the reference: identical outputs, lanes, statistics and streams.

The fast evaluator's acceptance: on every quick-tier claim instance and on hypothesis-generated
models whose values cross 2^63, both ways, through int64 rows, multi-limb class-shared lanes, class
refinement and the reference fallback.
"""

import dataclasses
import random

import numpy as np
import pytest
from gmpy2 import mpq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import both, certify_built, claim_instances, run_folded, same_folds, same_trace

from exactmem.checks.certificate import StepFold
from exactmem.claims.proofs import GENERATORS, _build
from exactmem.constructions import ks25, vys
from exactmem.core.model import MLP, Affine, PositionalEncoding, Probe, Transformer
from exactmem.datasets.dataset import random_points
from exactmem.datasets.sequences import random_sequences, with_positions
from exactmem.evaluate import fast, reference
from exactmem.evaluate.fast import limits, row_kernel, shared_runs

QUICK = claim_instances("quick")


@pytest.mark.parametrize(("claim", "inst"), QUICK, ids=[f"{c.name}[{i.label}]" for c, i in QUICK])
def test_fast_equals_reference_on_quick_claims(claim, inst):
    dataset = GENERATORS[inst.generator](inst.params)
    model, _ = _build(claim.construction, dataset, {**claim.options, **inst.options})
    if dataset.task == "points":
        both(model, dataset.points, [[i] for i in range(dataset.size)])
    else:
        ds = with_positions(dataset) if model.meta.get("position_aware") else dataset
        positions = "all" if ds.task == "seq2seq" else "last"
        both(model, ds.vocab, ds.sequences, positions=positions)
    a = certify_built(model, dataset, evaluator="reference")
    b = certify_built(model, dataset, evaluator="fast")
    assert [c.as_dict() for c in a.checks] == [c.as_dict() for c in b.checks]
    assert a.activation == b.activation
    assert a.verdict == b.verdict


MEMORIZERS = [(c, i) for c, i in QUICK if c.construction.startswith(("ks25", "vys"))]


@pytest.mark.parametrize(
    ("claim", "inst"), MEMORIZERS, ids=[f"{c.name}[{i.label}]" for c, i in MEMORIZERS]
)
def test_fast_equals_reference_row_by_row(claim, inst, monkeypatch):
    """The memorizers of the quick tier again, with Stage II row by row (the row kernel over
    every input per layer) instead of in key order, where key order is refused."""
    monkeypatch.setattr(limits, "SORTED_FROM", 1 << 62)
    test_fast_equals_reference_on_quick_claims(claim, inst)


@pytest.mark.parametrize(
    ("claim", "inst"), MEMORIZERS, ids=[f"{c.name}[{i.label}]" for c, i in MEMORIZERS]
)
def test_fast_equals_reference_layer_by_layer(claim, inst, monkeypatch):
    """The memorizers of the quick tier again, with no runs of shared layers: Stage III's peel
    in the per-layer kernel (in-place updates, views, difference tags), as at N ≥ 10⁶ where the
    packed integers are too long for runs (exactmem.evaluate.fast.shared_runs.RUN_LIMBS)."""
    monkeypatch.setattr(shared_runs, "RUN_LIMBS", -1)
    test_fast_equals_reference_on_quick_claims(claim, inst)


@pytest.fixture(params=["runs", "layer by layer"])
def runs(request, monkeypatch):
    """Both ways through runs of shared layers: in runs where they apply, and layer by layer."""
    if request.param != "runs":
        monkeypatch.setattr(shared_runs, "RUN_LIMBS", -1)
    return request.param


@pytest.mark.parametrize("gadget", ["keyed", "peel", "tent"])
def test_theorem_4_1_all_gadgets(gadget, runs):
    ds = random_sequences(400, 6, 3, 60, 7, seed=3)
    model, _ = ks25.build(ds, {"gadget": gadget})
    both(model, ds.vocab, ds.sequences, positions="last")


def test_keyed_memorizer_shares_the_packed_integers():
    """The keyed gadget runs without falling back: inputs stay in int64 rows."""
    ds = random_points(600, 4, 9, seed=4)
    model, _ = vys.build(ds, {"gadget": "keyed"})
    notes = []
    fast.run_points(model, ds.points, progress=notes.append)
    assert not [m for m in notes if "reference evaluator" in m]
    both(model, ds.points, [[i] for i in range(ds.size)])


def test_peel_falls_back_and_agrees(runs):
    """peel multiplies the key by 2^P next to the packed integer: the classes split to one
    per row, the engine hands the sub-layer to the reference, the values are the same."""
    ds = random_points(600, 4, 9, seed=5)
    model, _ = vys.build(ds, {"gadget": "peel"})
    notes = []
    fast.run_points(model, ds.points, progress=notes.append)
    assert [m for m in notes if "reference evaluator" in m]
    both(model, ds.points, [[i] for i in range(ds.size)])


# --------------------------------------------------------------------------- random models

entries = st.one_of(
    st.just(0),
    st.just(0),
    st.integers(-3, 3),
    st.integers(-(2**70), 2**70),
    st.builds(lambda e, s: s * 2**e, st.integers(0, 200), st.sampled_from([1, -1])),
)


@st.composite
def sparse_mlps(draw):
    """Sparse layers mixing small and huge weights and biases, rational denominators and
    probes: units read small row lanes, huge constant lanes, or both (class refinement)."""
    width = draw(st.integers(1, 3))
    depth = draw(st.integers(2, 5))
    residual = draw(st.booleans())
    layers, probes, w = [], [], width
    for i in range(depth):
        out = width if i == depth - 1 else draw(st.integers(1, 5))
        rows = []
        for _ in range(out):
            row = tuple((c, v) for c in range(w) if (v := draw(entries)))
            rows.append(row)
        bias = tuple(draw(entries) for _ in range(out))
        den = draw(st.sampled_from([1, 1, 1, 2, 6, 2**64]))
        layers.append(Affine(w, tuple(rows), bias, den))
        if i < depth - 1 and draw(st.booleans()):
            terms = tuple((c, draw(st.integers(-3, 3)) or 1) for c in range(out))
            probes.append(Probe(f"p{i}", i, terms))
        w = out
    return MLP(tuple(layers), residual=residual, probes=tuple(probes)), width


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_agrees_on_random_models(data):
    mlp, width = data.draw(sparse_mlps())
    values = st.one_of(
        st.integers(-50, 50),
        st.integers(-(2**66), 2**66),
        st.fractions(min_value=-30, max_value=30, max_denominator=4),
    )
    pool = data.draw(st.lists(st.tuples(*[values] * width), min_size=1, max_size=8))
    # repeated values make classes that stay together, distinct ones make classes split
    rng = random.Random(data.draw(st.integers(0, 99)))
    pts = [tuple(mpq(x) for x in rng.choice(pool)) for _ in range(rng.randint(1, 40))]
    model = Transformer(width, (mlp,))
    both(model, pts, [[i] for i in range(len(pts))])


def test_values_crossing_2_63_in_rows_and_shared_lanes():
    """A row lane near 2^61 (int64), a shared lane of 2^200 read by a row unit's neighbour,
    and a sum that crosses 2^63 — every path meets the reference."""
    big = 2**200
    layers = (
        Affine(1, (((0, 1),), (), ((0, 2**40),)), (0, big, 2**61), 1),
        Affine(3, (((0, 1), (1, 1)), ((2, 4),), ((1, 1), (2, -(2**3)))), (0, -(2**63), 1), 1),
        Affine(3, (((0, 1), (1, 1), (2, 1)),), (5,), 1),
    )
    probes = (Probe("s", 0, ((1, 1), (2, 1))), Probe("r", 1, ((1, 1),)))
    model = Transformer(1, (MLP(layers, residual=False, probes=probes),))
    pts = [(mpq(v),) for v in (0, 1, 2**20, -5, 2**21 - 1, 3)]
    trace = both(model, pts, [[i] for i in range(len(pts))])
    assert max(abs(o[0][0]) for o in trace.outputs) > 2**63


def test_probes_made_in_the_layers_pass(monkeypatch):
    """Probes of a layer's own row units are computed in its kernel pass (as int8); a probe
    whose values leave [−128, 127] and one that reads a lane kept from the layer before are
    computed apart — all equal to the reference, also on many rows (the threaded kernel)."""
    layers = (
        Affine(1, (((0, 1),), ((0, 1),), ((0, 1),)), (1, 0, -3), 1),
        Affine(3, (((0, 1),), ((1, 1),), ((2, 1),)), (-1, -1, 0), 1),
        Affine(3, (((0, 1), (1, 1)),), (0,), 2),
    )
    probes = (
        Probe("step", 0, ((0, 1), (1, -1))),  # σ(t + 1) − σ(t) ∈ {0, 1}: in the pass
        Probe("wide", 0, ((1, 40), (2, 1))),  # up to 40·t: flagged, computed apart
        Probe("down", 1, ((0, -1), (1, 1))),  # σ(σ(t) − 1) − σ(σ(t + 1) − 1) ∈ {−1, 0}
        Probe("kept", 1, ((2, 1),)),  # σ(t − 3), the lane of layer 0 (an alias)
    )
    model = Transformer(1, (MLP(layers, residual=False, probes=probes),))
    made = []
    take = fast._Engine.take_probe

    def spy(self, i, terms):
        made.append(i in self._fused)
        return take(self, i, terms)

    monkeypatch.setattr(fast._Engine, "take_probe", spy)
    for n in (7, 3 * fast.PARALLEL_ROWS):
        pts = [(mpq(v * 13 % 97 - 20),) for v in range(n)]
        both(model, pts, [[i] for i in range(n)])
        assert made == [True, False, True, False]
        made.clear()


@pytest.mark.parametrize("jobs", [1, 2])
def test_step_lanes_folded_in_their_layers_pass(monkeypatch, jobs):
    """Stage II: a step pair that the next layer reads only through the step (it refines its
    classes on the probe) is not stored, and the step lane is folded in the pass that computes
    it — the fold's state, the outputs and the statistics equal the reference's, also with a
    broken step (a ramp)."""
    if jobs > 1:
        monkeypatch.setattr(limits, "PARALLEL_ROWS", 64)
    monkeypatch.setattr(fast._Engine, "_sorted_plan", lambda self, *args: None)  # row by row
    ds = random_sequences(800, 16, 8, 1000, 16, seed=0)  # the benchmark's shape
    model, _ = ks25.build(ds, {})
    calls = []
    monkeypatch.setattr(
        fast._Engine, "_fold_args", _spy(fast._Engine._fold_args, lambda r: calls.append(r[2]))
    )
    elided = []
    monkeypatch.setattr(
        fast._Engine, "_elidable", _spy(fast._Engine._elidable, lambda r: elided.append(len(r)))
    )
    ref, ref_folds = run_folded(reference, model, ds)
    got, got_folds = run_folded(fast, model, ds, jobs=jobs)
    same_trace(ref, got)
    same_folds(ref_folds, got_folds)
    steps = sum(f.seen for f in got_folds if isinstance(f, StepFold))
    # every step lane folded in its pass but f2's step[1] (its layer reads the attention
    # output, over a denominator 6: folded apart); the step pairs of the layers whose next
    # layer reads them only through the step are not stored (here 133 units)
    assert sum(c is not None for c in calls) == steps - 1
    assert sum(elided) > 0

    # the second unit of a step pair one further off: the step takes the value 2 (a ramp)
    at = next(i for i, sub in enumerate(model.sublayers) if isinstance(sub, MLP))
    mlp = model.sublayers[at]
    probe = next(p for p in mlp.probes if p.name.endswith("step[3]"))
    layer = mlp.layers[probe.layer]
    bias = list(layer.bias)
    bias[probe.terms[1][0]] -= layer.denominator
    layers = list(mlp.layers)
    layers[probe.layer] = dataclasses.replace(layer, bias=tuple(bias))
    sublayers = list(model.sublayers)
    sublayers[at] = dataclasses.replace(mlp, layers=tuple(layers))
    broken = dataclasses.replace(model, sublayers=tuple(sublayers))
    ref, ref_folds = run_folded(reference, broken, ds)
    got, got_folds = run_folded(fast, broken, ds, jobs=jobs)
    same_trace(ref, got)
    same_folds(ref_folds, got_folds)
    assert got_folds[0].ramp_values  # the ramp was seen, with its exact values


def _with_layer(model, at, probe_name, change):
    """``model`` with the layer of probe ``probe_name`` of sub-layer ``at`` changed."""
    mlp = model.sublayers[at]
    probe = next(p for p in mlp.probes if p.name == probe_name)
    layers = list(mlp.layers)
    layers[probe.layer] = change(layers[probe.layer], probe)
    sublayers = list(model.sublayers)
    sublayers[at] = dataclasses.replace(mlp, layers=tuple(layers))
    return dataclasses.replace(model, sublayers=tuple(sublayers))


def test_stage_two_in_key_order(monkeypatch):
    """Stage II decided by the sorted keys (no pass over the inputs per layer): the outputs,
    statistics and folds equal the reference's; a step off {0, 1} (a ramp) or a threshold
    below the one before (a rise) is refused there and found row by row."""
    monkeypatch.setattr(limits, "SORTED_FROM", 0)  # from the first row on
    ds = random_sequences(800, 16, 8, 1000, 16, seed=0)
    model, _ = ks25.build(ds, {})
    layers = []  # the fold claiming each step decided in key order
    monkeypatch.setattr(
        fast._Engine,
        "_sorted_rows",
        _spy2(fast._Engine._sorted_rows, lambda steps: layers.append(steps[4][0].prefix)),
    )
    real_run = fast._Engine.step_run

    def step_run(self, *args):  # a run of step layers: each of its layers in key order too
        got = real_run(self, *args)
        if got is not None:
            layers.extend([self._sorted.fold.prefix] * len(got))
        return got

    monkeypatch.setattr(fast._Engine, "step_run", step_run)
    ref, ref_folds = run_folded(reference, model, ds)
    got, got_folds = run_folded(fast, model, ds)
    same_trace(ref, got)
    same_folds(ref_folds, got_folds)
    # phi's steps all in key order but its first (Stage I's layer); f2's accumulator of
    # labels is still small at N = 800, its units read the steps' rows: row by row there
    phi = next(f for f in got_folds if f.key == "phi.")
    assert layers.count("phi.") == phi.seen - 1 > 50

    at = next(i for i, sub in enumerate(model.sublayers) if isinstance(sub, MLP))

    def ramp(layer, probe):  # the step's second unit one further off: the step takes 2
        bias = list(layer.bias)
        bias[probe.terms[1][0]] -= layer.denominator
        return dataclasses.replace(layer, bias=tuple(bias))

    def back(layer, probe):  # the threshold far below the one before: a 1 after a 0
        bias = list(layer.bias)
        for c, _ in probe.terms:
            bias[c] += 10**6 * layer.denominator
        return dataclasses.replace(layer, bias=tuple(bias))

    for change, wrong in ((ramp, "ramp"), (back, "rise")):
        broken = _with_layer(model, at, "step[9]", change)
        layers.clear()
        ref, ref_folds = run_folded(reference, broken, ds)
        got, got_folds = run_folded(fast, broken, ds)
        same_trace(ref, got)
        same_folds(ref_folds, got_folds)
        assert (getattr(got_folds[0], wrong) == 9).any()
        assert layers  # the layers before and after still in key order


@pytest.mark.parametrize(
    "xs", [list(range(1, 11)), [1, 1, 3, 3, 5, 8, 10, 10, 10], [9, 1, 5, 4, 4, 10, 2, 1, 3, 7]]
)
def test_stage_two_in_key_order_by_hand(monkeypatch, xs):
    """A hand-made Stage II (key x, an accumulator far beyond int64 that adds W·step, thresholds
    leaving one-row and empty classes at either end): in key order, equal to the reference."""
    monkeypatch.setattr(limits, "SORTED_FROM", 0)
    big = 2**70
    thresholds = [4, 9, -2, 1, 13]  # steps x ≥ 5, x ≥ 10, every x, x ≥ 2, none
    layers = []
    for j, t in enumerate(thresholds):
        rows = [((0, 1),), () if j == 0 else ((1, 1), (2, big + j), (3, -big - j))]
        rows += [((0, 1),), ((0, 1),)]
        layers.append(Affine(4 if j else 1, tuple(rows), (0, 5 if j == 0 else 0, -t, -t - 1)))
    layers.append(Affine(4, (((1, 1), (2, 7), (3, -7)),), (0,)))
    probes = tuple(Probe(f"step[{j + 1}]", j, ((2, 1), (3, -1))) for j in range(len(thresholds)))
    model = Transformer(1, (MLP(tuple(layers), residual=False, probes=probes, label="m"),))
    decided = []
    monkeypatch.setattr(
        fast._Engine,
        "_sorted_rows",
        _spy2(fast._Engine._sorted_rows, lambda steps: decided.append(steps[3])),
    )
    pts = [(mpq(x),) for x in xs]
    both(model, pts, [[i] for i in range(len(pts))])
    assert len(decided) == len(thresholds)  # for 1..10: one-row classes at both ends


def _spy2(method, record):
    def wrapped(self, a, steps, out):
        record(steps)
        return method(self, a, steps, out)

    return wrapped


@settings(max_examples=300, deadline=None)
@given(
    xs=st.lists(st.integers(-50, 50), min_size=1, max_size=40),
    w=st.integers(1, 4),
    b=st.integers(-120, 120),
)
def test_unit_statistics_from_sorted_keys(xs, w, b):
    """Binary search on sorted keys gives the row kernel's statistics of σ(w·x + b)."""
    from exactmem.evaluate.fast.sorted_steps import unit_stats

    z = [w * x + b for x in xs]
    nonzero = [abs(v) for v in z if v]
    positive = [v for v in z if v > 0]
    want = (
        z.count(0),
        sum(v < 0 for v in z),
        min(nonzero) if nonzero else None,
        min(positive) if positive else None,
        max(map(abs, z)),
    )
    assert unit_stats(np.array(sorted(xs), np.int64), w, b) == want


@settings(max_examples=300, deadline=None)
@given(
    xs=st.lists(st.integers(-20, 20), min_size=1, max_size=30),
    units=st.lists(st.tuples(st.integers(1, 3), st.integers(-40, 40)), min_size=1, max_size=3),
    coefs=st.lists(st.integers(-2, 2), min_size=3, max_size=3),
)
def test_step_boundary_from_sorted_keys(xs, units, coefs):
    """A sum of ramps is recognised as a 0-then-1 step along the sorted keys exactly when it
    is one, with its first position of 1."""
    from exactmem.evaluate.fast.sorted_steps import step_boundary

    xs = sorted(xs)
    coefs = coefs[: len(units)]
    values = [
        sum(c * max(w * x + b, 0) for c, (w, b) in zip(coefs, units, strict=True)) for x in xs
    ]
    ones = [i for i, v in enumerate(values) if v == 1]
    is_step = (
        set(values) <= {0, 1} and all(v == 1 for v in values[ones[0] :])
        if ones
        else (set(values) <= {0})
    )
    got = step_boundary(np.array(xs, np.int64), units, coefs)
    assert got == ((ones[0] if ones else len(xs)) if is_step else None)
    # the usual pair σ(x − t) − σ(x − t − 1) always is one
    assert step_boundary(np.array(xs, np.int64), [(1, -3), (1, -4)], [1, -1]) == sum(
        x < 4 for x in xs
    )


def test_class_runs_in_key_order():
    from exactmem.evaluate.fast.sorted_steps import class_ranges

    lo, hi = class_ranges(np.array([2, 2, 0, 0, 0, 1]), 3)
    assert lo.tolist() == [2, 5, 0] and hi.tolist() == [5, 6, 2]
    assert class_ranges(np.array([0, 1, 0]), 2) is None  # class 0 in two runs
    assert class_ranges(np.array([0, 0]), 2) is None  # class 1 has no rows


def _spy(method, record):
    def wrapped(self, *args):
        result = method(self, *args)
        record(result)
        return result

    return wrapped


def test_unstored_units_are_made_when_read(monkeypatch):
    """A wrong guess costs time, never values: with every probed unit left unstored, whatever
    reads one (a row unit, an alias, a refinement on another functional, the outputs) makes
    its rows from the recipe first."""
    ds = random_points(300, 3, 5, seed=8)
    model, _ = vys.build(ds, {"gadget": "keyed"})

    def everything(self, a, nxt, plans, row_units, fused):
        return {c for terms in fused for c, _ in terms if c in row_units}

    monkeypatch.setattr(fast._Engine, "_elidable", everything)
    made = []
    monkeypatch.setattr(fast._Engine, "_rows_of", _spy(fast._Engine._rows_of, made.append))
    both(model, ds.points, [[i] for i in range(ds.size)])
    layers = (
        Affine(1, (((0, 1),), ((0, 1),)), (1, 0), 1),
        Affine(2, (((0, 1),), ((1, 2),), ((0, 1), (1, -1))), (0, 0, -1), 1),
        Affine(3, (((0, 1), (1, 1), (2, 1)),), (0,), 1),
    )
    probes = (Probe("step", 0, ((0, 1), (1, -1))),)
    tiny = Transformer(1, (MLP(layers, residual=False, probes=probes),))
    pts = [(mpq(v % 11 - 5),) for v in range(40)]
    both(tiny, pts, [[i] for i in range(40)])  # read by row units and an alias


# --------------------------------------------------------------------------- kernels


def test_refine_splits_exactly():
    cls = np.array([0, 0, 0, 1, 1, 0, 1, 0], np.int64)
    sigs = np.array([[5, 5, 7, 1, 1, 7, 2, 9]], np.int64)
    new = cls.copy()
    parent, every, moved = row_kernel.refine(new, sigs, 2)
    # class 0: first signature 5; then 7 (child 2), 9 (child 4); class 1: 1, then 2 (child 3)
    assert list(new) == [0, 0, 2, 1, 1, 2, 3, 4]
    assert list(parent) == [0, 1, 0]
    assert every[:, 0].tolist() == [5, 1, 7, 2, 9]
    assert moved.tolist() == [2, 1, 1]


@pytest.mark.parametrize("k", [1, 2])
def test_refine_many_signatures_in_one_class(k):
    rng = np.random.default_rng(0)
    sigs = rng.integers(-5, 5, (k, 5000)).astype(np.int64)
    cls = rng.integers(0, 3, 5000).astype(np.int64)
    new = cls.copy()
    parent, every, moved = row_kernel.refine(new, sigs, 3)
    key = {(int(c), *map(int, sig)) for c, sig in zip(cls, sigs.T, strict=True)}
    assert len(set(new.tolist())) == len(key)
    for r in range(5000):
        c = new[r]
        assert (every[c] == sigs[:, r]).all()
        assert (c if c < 3 else parent[c - 3]) == cls[r]
    assert moved.tolist() == np.bincount(new, minlength=len(every))[3:].tolist()


def test_multi_limb_units_against_python_integers():
    """The shared-lane kernel on random huge values, coefficients and signatures."""
    rng = random.Random(7)
    for _ in range(30):
        nclass = rng.randint(1, 6)
        lanes = [
            [rng.randint(0, 2 ** rng.randint(0, 400)) for _ in range(nclass)] for _ in range(3)
        ]
        coeffs = [
            rng.choice([0, 1, -1, rng.randint(-(2**90), 2**90), -(2 ** rng.randint(0, 300))])
            for _ in range(3)
        ]
        bias = rng.randint(-(2**500), 2**500)
        lam = rng.randint(-(2**100), 2**100)
        sig = [rng.randint(-(2**61), 2**61) for _ in range(nclass)]
        eng = fast._Engine([np.zeros(nclass, dtype=object)], 1, nclass)
        eng.cls = np.arange(nclass, dtype=np.int64)
        eng.nclass = nclass
        eng.counts = np.ones(nclass, np.int64)
        slots = []
        for values in lanes:
            s = eng._halloc(3)
            eng._store(s, np.array(values, dtype=object))
            slots.append(s)
            eng.lanes.append(fast._Lane(True, s, max(values), True, 0, None))
        unit = tuple((c + 1, w) for c, w in enumerate(coeffs) if w)
        a = Affine(4, (unit,), (bias,), 1)
        plans = [("mixed", (0, lam))]
        out = [None]
        bound = abs(bias) + sum(abs(w) * max(lanes[c - 1]) for c, w in unit) + abs(lam) * 2**61
        sig_arr = np.array([[s] for s in sig], np.int64)
        eng._shared_layer(a, False, plans, [bound], [0], sig_arr, out)
        got = list(eng.shared_values(out[0].slot))
        want = [
            bias + sum(w * lanes[c - 1][k] for c, w in unit) + lam * sig[k] for k in range(nclass)
        ]
        assert got == want


def test_in_place_update_above_a_short_value_ignores_stale_limbs():
    """Blocks are reused without clearing: an in-place x + 2^30 on x = 0 (no limbs in use)
    whose block still holds an old value's limbs must not pick them up (hypothesis found
    2^30 + 6)."""
    nclass = 3
    eng = fast._Engine([np.zeros(nclass, dtype=object)], 1, nclass)
    eng.cls = np.arange(nclass, dtype=np.int64)
    eng.nclass = nclass
    eng.counts = np.ones(nclass, np.int64)
    s = eng._halloc(3)
    eng._store(s, np.zeros(nclass, dtype=object))
    eng.store.block(s)[:, :2] = 6  # an old value's limbs, above the 0 limbs in use
    assert eng.CL[s, :nclass].tolist() == [0] * nclass
    eng.lanes.append(fast._Lane(True, s, 0, True, nclass, None))
    a = Affine(2, (((1, 1),),), (2**30,), 1)
    out = [None]
    eng._shared_layer(a, True, [("shared", None)], [2**30], [0], None, out)
    assert out[0].slot == s  # written in place
    assert list(eng.shared_values(s)) == [2**30] * nclass


@pytest.mark.parametrize("p", [0, 1, 29, 30, 61, 62, 63, 90, 241])
def test_peel_shortcuts_against_the_reference(p, monkeypatch, runs):
    """The multi-limb shortcuts on a bit-peel around 2^p: difference tags (σ(L + b₁) − σ(L + b₂)
    read without its operands where both are non-zero, and read in full where one was
    clipped), an in-place update whose lane other units read first, balanced digits of
    2^p − 1 and compaction — values, lanes and statistics as the reference's."""
    made = []
    real_tag = fast._Engine._tag

    def tag(self, *args):
        real_tag(self, *args)
        made.append(len(self.tags))

    monkeypatch.setattr(fast._Engine, "_tag", tag)
    P = 2**p
    layers = (
        # U = 2^p + x − 4 for x = 0..7 straddles 2^p: one class per x, U shared (mixed unit)
        Affine(1, (((0, 1),), ((0, 1),)), (P - 4, 0), 1),
        # the step pair on U, U and x kept
        Affine(2, (((0, 1),), ((0, 1),), ((0, 1),), ((1, 1),)), (-P + 1, -P, 0, 0), 1),
        # U − 2^p·(s1 − s2): in place, after two other readers of U with the same linear part
        Affine(
            4,
            (
                ((2, 1), (0, -P), (1, P)),
                ((2, 1), (0, -P), (1, P)),
                ((2, 1), (1, 1)),
                ((0, 2), (1, -2)),
                ((3, 1),),
            ),
            (0, -P + 3, 0, 1, 0),
            1,
        ),
        Affine(5, (((1, 1), (0, -1), (2, 3)), ((3, 1), (4, 2 * P - 1))), (7, -1), 1),
    )
    probes = (Probe("step", 1, ((0, 1), (1, -1))), Probe("peeled", 2, ((0, 1), (1, -1))))
    model = Transformer(1, (MLP(layers, residual=False, probes=probes),))
    pts = [(mpq(x),) for x in (0, 1, 2, 3, 4, 5, 6, 7, 3, 5, 4)]
    both(model, pts, [[i] for i in range(len(pts))])
    if p >= 63 and runs != "runs":  # beyond int64 the pair is a shared lane pair, tagged
        assert any(made)  # (by the per-layer kernel: the run kernel needs no tags)


@pytest.mark.parametrize("seed", range(40))
def test_random_peels_against_the_reference(seed, runs):
    """Random layers of units that share a linear part over huge group-shared values, with
    biases near 0 and near ±2^q — anchors positive, zero and negative, views positive and
    clipped, views read directly, as pairs and by probes — against the reference."""
    rng = random.Random(seed)
    p = rng.choice([64, 90, 150, 300])
    P = 2**p

    def bias() -> int:
        q = rng.randint(0, p + 1)
        return rng.choice([0, 1, -1, 2**q, -(2**q), -(2**q) + 1, 2**q - 3, rng.randint(-9, 9)])

    layers = [Affine(1, (((0, rng.choice([1, 3, 2**70])),),) * 3, (P - 4, P // 3, 7), 1)]
    width, probes = 3, []
    for li in range(rng.randint(2, 4)):
        w = 2 ** rng.randint(0, p)
        part = ((0, 1), (1, w), (2, -w))
        rows = [part] * rng.randint(2, 4) + [((1, 1),), ((2, 1), (0, -1)), ((0, 1),)]
        layers.append(Affine(width, tuple(rows), tuple(bias() for _ in rows), 1))
        width = len(rows)
        # the next layer reads lanes 0, 1, 2: the in-place candidate and two of its group
        order = [len(rows) - 1, 0, 1] + list(range(2, len(rows) - 1))
        layers.append(Affine(width, tuple(((c, 1),) for c in order), (0,) * width, 1))
        if rng.random() < 0.5:
            probes.append(Probe(f"p{li}", len(layers) - 1, ((1, 1), (2, -1))))
    layers.append(Affine(width, (((0, 1), (1, 2), (2, -3)),), (5,), 1))
    model = Transformer(1, (MLP(tuple(layers), residual=False, probes=tuple(probes)),))
    pts = [(mpq(x),) for x in [rng.randint(0, 7) for _ in range(rng.randint(3, 25))]]
    both(model, pts, [[i] for i in range(len(pts))])


def test_used_tokens_as_numpy_unique():
    """Token rows by a table of the ids present (small ids) or by sorting: np.unique's answer."""
    rng = np.random.default_rng(3)
    for flat in (
        rng.integers(0, 50, 1000),
        rng.integers(0, 2**40, 100),  # ids far beyond their count: sorted
        np.array([7, 7, 7]),
        np.zeros(0, np.int64),
    ):
        got = reference._used_tokens(flat)
        want = np.unique(flat, return_inverse=True)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_step_fold_names_ramps_and_rises():
    """Stage II read as the lanes arrive: a value off {0, 1} and a rise are both caught."""
    from exactmem.checks.certificate import StepFold

    fold = StepFold("m.", 3)
    numerators = [[1, 2, 0, 2], [0, 2, 0, 0], [2, 0, 0, 8]]  # over 2: step[1] of row 0 is ½
    for j, values in enumerate(numerators, 1):
        fold(f"m.step[{j}]", np.array(values, np.int64), 2)
    assert fold.seen == 3
    assert fold.ramp.tolist() == [1, 0, 0, 3]
    assert fold.ramp_values == {0: mpq(1, 2), 3: mpq(4)}
    assert fold.rise.tolist() == [3, 0, 0, 0]  # reported as the ramp: that comes first
    fold2 = StepFold("", 3)
    for j, values in enumerate([[1, 0], [0, 0], [1, 0]], 1):
        fold2(f"step[{j}]", np.array(values, np.int8), 1)
    assert fold2.rise.tolist() == [3, 0] and fold2.ones.tolist() == [2, 0]
    with pytest.raises(AssertionError):
        fold2("step[5]", np.zeros(2, np.int8), 1)


def test_evaluator_option(tmp_path, capsys):
    from exactmem.commands.main import main

    data, model = tmp_path / "d.json", tmp_path / "m.json"
    main(["generate", "points", "--N", "80", "--d", "3", "--C", "5", "--out", str(data)])
    main(["build", "--construction", "vys", "--data", str(data), "--out", str(model), "--quiet"])
    for name in ("fast", "reference"):
        assert (
            main(["verify", str(model), "--data", str(data), "--quiet", "--evaluator", name]) == 0
        )
    with pytest.raises(SystemExit) as exc:
        main(["verify", str(model), "--data", str(data), "--evaluator", "float"])
    assert exc.value.code == 2
    assert main(["check", "-k", "vys_theorem_3_1", "--quiet", "--evaluator", "reference"]) == 0


def test_parallel_kernels_give_the_same_trace(monkeypatch):
    """Row and class chunks on two threads (thresholds lowered so a small instance uses them):
    the same values and statistics as the reference, whatever the thread count."""
    monkeypatch.setattr(limits, "PARALLEL_ROWS", 64)
    monkeypatch.setattr(limits, "PARALLEL_CLASSES", 4)
    ds = random_sequences(500, 6, 3, 60, 7, seed=11)
    model, _ = ks25.build(ds, {})
    want = reference.run(model, ds.vocab, ds.sequences, positions="last")
    for jobs in (1, 2):
        same_trace(want, fast.run(model, ds.vocab, ds.sequences, positions="last", jobs=jobs))


def test_zero_columns_over_a_denominator_beyond_int64():
    """Token mixing whose every numerator is 0 over 2^70 (found in review): the gcd of the
    numerators is 0, the values are 0 over 1 — the denominator is not divided in int64."""
    t = mpq(1, 2**70)
    both(Transformer(1, (PositionalEncoding(((t,),)),)), [(-t,)], [[0]])
