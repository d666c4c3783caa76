"""Runs of class-shared layers (exactmem.evaluate.fast.shared_runs, run_kernel) against the
reference: values, lanes and per-layer statistics; the plan's layout; refusal and fallback."""

import random

import pytest
from gmpy2 import mpq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import both

from exactmem.constructions import ks25
from exactmem.core.model import MLP, Affine, Probe, Transformer
from exactmem.datasets.sequences import random_sequences
from exactmem.evaluate import fast
from exactmem.evaluate.fast import kernels, limits, shared_runs


def _spy_runs(monkeypatch) -> list:
    """Record what every shared_run call returned (None: no run)."""
    seen = []
    real = fast._Engine.shared_run

    def spy(self, *args):
        got = real(self, *args)
        seen.append(got)
        return got

    monkeypatch.setattr(fast._Engine, "shared_run", spy)
    return seen


def _refusals(monkeypatch) -> list:
    """Record the kernel's answers (False: a value outgrew its registers)."""
    answers = []
    kernel = kernels.run_kernel()
    real = kernel.run

    def spy(*args):
        ok = real(*args)
        answers.append(ok)
        return ok

    monkeypatch.setattr(kernel, "run", spy)
    return answers


def test_stage_three_goes_in_runs(monkeypatch):
    """Theorem 4.1's Stage III peels in runs of shared layers: same trace as the reference."""
    seen = _spy_runs(monkeypatch)
    ds = random_sequences(300, 6, 4, 40, 4, seed=5)
    model, _ = ks25.build(ds, {})
    both(model, ds.vocab, ds.sequences, positions="last")
    runs = [r for r in seen if r is not None]
    assert runs and sum(len(r) for r in runs) >= 20
    assert all(len(r) >= shared_runs.MIN_LAYERS for r in runs)


def test_a_refused_run_goes_layer_by_layer(monkeypatch):
    """Registers too short for the values: the kernel refuses, nothing is changed, and the same
    layers go through the per-layer path — the trace is still the reference's."""
    answers = _refusals(monkeypatch)
    monkeypatch.setattr(shared_runs, "register_limbs", lambda p, inputs: 1)
    ds = random_sequences(120, 5, 4, 30, 3, seed=2)
    model, _ = ks25.build(ds, {})
    both(model, ds.vocab, ds.sequences, positions="last")
    assert False in answers  # (runs whose values all fit one limb still go through)


def _peel(P: int, rng: random.Random, depth: int, probe_at: int | None = None):
    """Shared lanes from a mixed first layer (σ(P + w·x), σ(P), σ(P//3 + x): one class per x),
    then ``depth`` layers of aliases and units over the shared lanes with huge and small
    coefficients, step pairs (w·a − w·b), equal linear parts with other biases, negative and
    zero pre-activations; the row lane x carried along by aliases."""
    w0 = rng.choice([1, 3, 2**70])
    layers = [Affine(1, (((0, w0),), (), ((0, 1),), ((0, 1),)), (P, P, P // 3, 0), 1)]
    width, shared = 4, [True, True, True, False]
    for _ in range(depth):
        rows, bias, kinds = [], [], []
        part = None
        for _ in range(rng.randint(2, 6)):
            lanes = [c for c in range(width) if shared[c]]
            pick = rng.random()
            if pick < 0.25 or not lanes:
                c = rng.randrange(width)
                rows.append(((c, 1),))
                bias.append(0)
                kinds.append(shared[c])
                continue
            if pick < 0.45 and part is not None:  # the last unit's linear part, another bias
                rows.append(part)
                bias.append(rng.choice([0, 1, -1, -P, P // 2, rng.randint(-9, 9)]))
                kinds.append(True)
                continue
            a = rng.choice(lanes)
            w = rng.choice([1, 2, 3, 2**30, 2**61, 2**64 - 1, -(2**29), P, 3**300, -(7**90)])
            terms = [(a, 1)]
            others = [c for c in lanes if c != a]
            if len(others) >= 2 and rng.random() < 0.6:
                b, c = rng.sample(others, 2)
                terms += [(b, -w), (c, w)]
            elif others:
                terms.append((rng.choice(others), rng.choice([-1, 2, -w])))
            part = tuple(sorted(terms))
            rows.append(part)
            bias.append(rng.choice([0, 1, -1, -3, -P, -(P // 2), P // 3, rng.randint(-9, 9)]))
            kinds.append(True)
        layers.append(Affine(width, tuple(rows), tuple(bias), 1))
        width, shared = len(rows), kinds
    layers.append(Affine(width, (tuple((c, c + 1) for c in range(width)),), (5,), 1))
    probes = ()
    if probe_at is not None:
        probes = (Probe("seen", probe_at, ((0, 1),)),)
    return Transformer(1, (MLP(tuple(layers), residual=False, probes=probes),))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    p=st.sampled_from([62, 64, 90, 150, 300]),
    depth=st.integers(2, 6),
    xs=st.lists(st.integers(0, 7), min_size=1, max_size=20),
)
def test_random_runs_against_the_reference(seed, p, depth, xs):
    model = _peel(2**p, random.Random(seed), depth)
    pts = [(mpq(x),) for x in xs]
    both(model, pts, [[i] for i in range(len(pts))])


def test_random_runs_are_taken(monkeypatch):
    """The generated models do go through runs (not only through the per-layer path)."""
    seen = _spy_runs(monkeypatch)
    for seed in range(10):
        model = _peel(2**90, random.Random(seed), 5)
        pts = [(mpq(x),) for x in (0, 1, 2, 3, 3, 7)]
        both(model, pts, [[i] for i in range(len(pts))])
    assert sum(r is not None for r in seen) >= 5


def test_plan_of_a_run():
    """Aliases carry values without registers, equal linear parts sit side by side, registers
    are reused once no position carries their value; the shared values that probes and row
    units read are stored as computed."""
    big = 2**80
    layers = (
        # lanes: 0 shared, 1 shared, 2 row
        Affine(3, (((0, 1), (1, big)), ((2, 1),), ((0, 1), (1, big)), ((1, 1),)), (0, 0, -1, 0), 1),
        Affine(4, (((0, 1), (2, -1)), ((3, 2),), ((1, 1),)), (0, 1, 0), 1),
        Affine(3, (((0, 1),), ((2, 1),)), (0, 0), 1),
        Affine(2, (((0, 1), (1, 1)),), (0,), 1),
    )
    p = shared_runs.plan(layers, 0, 3, lambda li: (), [True, True, False], [True, True, True])
    assert (p.start, p.stop, p.layers) == (0, 3, 3)
    out_reg, same, tptr, treg, treg2, *_ = p.arrays
    assert p.layer_units == [0, 2, 4, 4]
    assert list(same) == [False, True, False, False]  # layer 0's units share x0 + big·x1
    assert p.origins == [[("in", 2), ("in", 1)], [("in", 2)], [("unit", 2), ("in", 2)]]
    assert [v for v, _ in p.loads] == [0, 1]  # the row lane is never loaded
    assert p.final == [("unit", 2), ("in", 2)]
    # the pair of layer 1 (unit 2) is one difference term: its registers, units 0 and 1
    assert (list(treg[tptr[2] : tptr[3]]), list(treg2[tptr[2] : tptr[3]])) == (
        [out_reg[0]],
        [out_reg[1]],
    )
    # input 0's register is free after layer 0 and taken by unit 2; none is read while taken
    assert out_reg[2] == dict(p.loads)[0] and p.registers == 5
    # a probe of layer 1 reading its output position 0 (unit 2): stored as computed (a tap)
    probed = shared_runs.plan(
        layers,
        0,
        3,
        lambda li: [((0, 1),)] if li == 1 else (),
        [True, True, False],
        [True] * 3,
    )
    assert (probed.start, probed.stop, probed.taps) == (0, 3, [2])
    assert probed.positions[2] == [("unit", 2), ("unit", 3), ("in", 2)]
    # a unit reading the row lane beside a shared unit: a row unit of the run, after the
    # kernel; the shared value it reads (unit 0) is stored as computed
    with_row = (
        layers[0],
        Affine(4, (((1, 1), (0, 1)), ((3, 2),)), (0, 0), 1),  # σ(x2 + unit 0); σ(2·x1)
        Affine(2, (((0, 1),), ((1, 3),)), (0, 1), 1),  # the row unit carried along
        layers[3],
    )
    p = shared_runs.plan(with_row, 0, 3, lambda li: (), [True, True, False], [True] * 3)
    assert p.rows == [[], [(0, ((1, 1), (0, 1)), 0, 0)], []]
    assert p.positions[1] == [("unit", 0), ("in", 2), ("unit", 1), ("in", 1)]
    assert p.taps == [0] and p.final == [("row", 0), ("unit", 3)]
    assert p.origins[2] == [("row", 0)]
    # row units alone: the per-layer path's
    row_read = (layers[0], Affine(4, (((1, 1), (0, 1)),), (0,), 1), layers[2])
    kinds = [True, True, False]
    assert shared_runs.plan(row_read, 0, 2, lambda li: (), kinds, [True] * 3) is None


@pytest.mark.parametrize("probe_at", [1, 2, 3])
def test_runs_end_at_probes(probe_at):
    model = _peel(2**90, random.Random(probe_at), 5, probe_at=probe_at)
    pts = [(mpq(x),) for x in (0, 1, 5, 5, 2)]
    both(model, pts, [[i] for i in range(len(pts))])


def test_many_digits_carry_in_time(monkeypatch):
    """A coefficient of twenty digits 2^29 − 1 times twenty limbs 2^30 − 1: twenty products
    of nearly 2^59 land on one limb, so the kernel must carry between them (int64 would wrap)."""
    seen = _spy_runs(monkeypatch)
    w = sum((2**29 - 1) << (30 * i) for i in range(20))
    ones = 2**600 - 1
    layers = (
        Affine(1, ((), ((0, 1),)), (ones, 0), 1),  # a shared constant, the row lane
        Affine(2, (((0, w),), ((0, -w),), ((1, 1),)), (0, 7, 0), 1),
        Affine(3, (((0, 1), (1, 1)), ((0, 1),), ((2, 1),)), (-1, -w, 0), 1),
        Affine(3, (((0, 1), (1, 1), (2, 1)),), (0,), 1),
    )
    model = Transformer(1, (MLP(layers, residual=False),))
    pts = [(mpq(x),) for x in (0, 1, 2)]
    both(model, pts, [[i] for i in range(len(pts))])
    assert any(r is not None for r in seen)


def test_run_lanes_bound_their_largest_value(monkeypatch):
    """A run's lanes carry the largest value over all classes as their bound: here 2^100 + 5
    beside 5, so the last layer, which reads the lane beside a row lane, keeps it out of int64
    (a bound from the smallest value would send it through the int64 row kernel)."""
    seen = _spy_runs(monkeypatch)
    layers = (
        Affine(1, (((0, 2**100),), ((0, 1),)), (5, 0), 1),  # one class per x
        Affine(2, (((0, 1),), ((1, 1),)), (1, 0), 1),
        Affine(2, (((0, 1),), ((1, 1),)), (-1, 0), 1),
        Affine(2, (((0, 3), (1, 1)),), (0,), 1),
    )
    model = Transformer(1, (MLP(layers, residual=False),))
    pts = [(mpq(x),) for x in (0, 1, 1, 0)]
    both(model, pts, [[i] for i in range(len(pts))])
    assert any(r is not None for r in seen)


def test_shared_units_of_a_mixed_layer_in_the_run_kernel(monkeypatch):
    """A layer with row units as well (Stage III's read-outs of the slot's key and label), out
    of a run, has its shared units computed by the run kernel as a one-layer program: same
    trace."""
    monkeypatch.setattr(shared_runs, "ROW_UNITS", False)
    taken = []
    real = fast._Engine._shared_units

    def spy(self, *args):
        got = real(self, *args)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(fast._Engine, "_shared_units", spy)
    ds = random_sequences(300, 6, 4, 40, 4, seed=6)
    model, _ = ks25.build(ds, {})
    both(model, ds.vocab, ds.sequences, positions="last")
    assert sum(taken) >= 5


def test_runs_in_parallel_parts(monkeypatch):
    """Classes in parts on two threads (threshold lowered): the parts' statistics merged give
    the reference's trace."""
    monkeypatch.setattr(limits, "PARALLEL_CLASSES", 4)
    kernel = kernels.run_kernel()
    parts = []
    real = kernel.shared_run

    def spy(*args):
        parts.append(args[34])  # chunks (after the program and nclass)
        return real(*args)

    monkeypatch.setattr(kernel, "shared_run", spy)
    ds = random_sequences(300, 6, 4, 40, 4, seed=5)
    model, _ = ks25.build(ds, {})
    for jobs in (1, 2):
        both(model, ds.vocab, ds.sequences, positions="last", jobs=jobs)
    pts = [(mpq(x),) for x in range(8)] * 2  # eight classes: two parts
    for seed in range(12):
        both(_peel(2**90, random.Random(seed), 5), pts, [[i] for i in range(len(pts))], jobs=2)
    assert parts and max(parts) > 1


def test_a_bias_above_a_negative_linear_part():
    """K − z with K's digit above the limbs of −z (found in review): the linear part's signed
    top limb must be carried up to the bias, or the value keeps an unnormalized limb and looks a
    limb longer than it is — the least non-zero |z| was K − 1 for K − 3, in runs and in the
    one-layer programs alike."""
    K = 2**150
    layers = (
        Affine(1, (((0, 1),),), (2**70,), 1),  # a shared lane, one class per x
        Affine(1, (((0, 1),),), (-(2**70),), 1),  # z = x, shared
        Affine(1, (((0, -1),), ((0, 1),)), (K, K - 2), 1),  # K − z: K's digit at limb 5
        Affine(2, (((0, 1), (1, 1)),), (0,), 1),
    )
    model = Transformer(1, (MLP(layers, residual=False),))
    pts = [(mpq(x),) for x in (1, 2, 3)]
    both(model, pts, [[i] for i in range(len(pts))])


def test_a_step_pair_of_one_linear_part_is_its_bias_difference(monkeypatch):
    """x − y of two units of one layer with the same linear part z is b_x − b_y while both are
    positive (Stage III's hi − lo): the kernel takes it from the plan without reading limbs.
    Where one is clipped to 0 it is not; and two units of different layers with equal rows read
    different positions — their difference is not a constant."""
    seen = _spy_runs(monkeypatch)
    P = 2**100
    layers = (
        Affine(1, (((0, 1),), ((0, 3),), ((0, 1),)), (P, P, 0), 1),  # shared: x + P, 3x + P
        # z = 5x + 3P: hi = z − 3P + 2^64 − 9, lo = σ(z − 3P − 10) (0 for x ≤ 2): hi − lo is
        # 2^64 + 1 (three limbs) where lo > 0; u = x + P + 5; x carried
        Affine(
            3,
            (((0, 1),), ((1, 1), (0, 2)), ((1, 1), (0, 2)), ((2, 1),)),
            (5, -3 * P + 2**64 - 9, -3 * P - 10, 0),
            1,
        ),
        # y = u + 2: row ((0, 1),) as u's, reading another value; u, hi, lo, x carried
        Affine(4, (((0, 1),), ((0, 1),), ((1, 1),), ((2, 1),), ((3, 1),)), (2, 0, 0, 0, 0), 1),
        Affine(
            5,
            (((0, 1), (1, -1)), ((2, 2**70), (3, -(2**70))), ((2, -5), (3, 5)), ((4, 1),)),
            (0, 0, 3 * 2**70, 0),
            1,
        ),
        Affine(4, (((0, 1), (1, 1), (2, 1), (3, 1)),), (0,), 1),
    )
    plan = shared_runs.plan(layers, 1, 4, lambda li: (), [True, True, False], [True] * 3)
    treg2, ta = plan.arrays[4], plan.arrays[11]
    paired = [t for t in range(len(treg2)) if treg2[t] >= 0]
    # y − u is not a constant; hi − lo and lo − hi are
    assert [ta[t] >= 0 for t in paired] == [False, True, True]
    model = Transformer(1, (MLP(layers, residual=False),))
    pts = [(mpq(x),) for x in (-5, 0, 1, 2, 3, 7, 2**40)]
    both(model, pts, [[i] for i in range(len(pts))])
    assert any(r is not None and len(r) == 3 for r in seen), seen


def _with_rows(rng: random.Random, big_row: bool = False, P: int = 2**90):
    """Row units inside a run: layer 0 makes the shared lanes x + P and 3x + P (classes by x)
    and the row lanes s = x + 3 and x; then row units read x, s, other row units and a shared
    unit of the run (stored as computed), beside shared units, with probes of row and shared
    values in the middle. ``big_row``: a row unit reads x + P (not int64 — the run is refused
    after the kernel and its layers go one by one)."""
    a, b, c = rng.choice([1, -2, 3]), rng.choice([1, 5, -1]), rng.randint(-9, 9)
    layers = (
        Affine(1, (((0, 1),), ((0, 1),), ((0, 3),), ((0, 1),)), (P, 3, P, 0), 1),
        # x, s, r1 = σ(a·x + b·s + c), U = σ(x + P − (3x + P) + 2^70), t = σ(2x + 20)
        Affine(
            4,
            (
                ((3, 1),),
                ((1, 1),),
                ((3, a), (0, b)) if big_row else ((3, a), (1, b)),
                ((0, 1), (2, -1)),
                ((2, 1), (0, -1)),
            ),
            (0, 0, c, 2**70, 20),
            1,
        ),
        # x, t, r2 = σ(r1 − x + 4), r3 = σ(x + 3t − 7), U' = σ(U + 2^80 − 1)
        Affine(
            5,
            (((0, 1),), ((4, 1),), ((2, 1), (0, -1)), ((0, 1), (4, 3)), ((3, 1),)),
            (0, 0, 4, -7, 2**80 - 1),
            1,
        ),
        # r2, r3, t carried; σ(2U' − t)
        Affine(5, (((2, 1),), ((3, 1),), ((1, 1),), ((4, 2), (1, -1))), (0, 0, 0, 0), 1),
        Affine(4, (((0, 1), (1, 1), (2, 1), (3, 1)),), (0,), 1),
    )
    probes = (
        Probe("r1", 1, ((2, 1),)),
        Probe("t", 1, ((4, 1),)),
        Probe("r2r3", 2, ((2, 1), (3, -1))),
        Probe("last", 3, ((3, 1), (0, 2))),
    )
    return Transformer(1, (MLP(layers, residual=False, probes=probes),))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), xs=st.lists(st.integers(-9, 9), min_size=1, max_size=16))
def test_row_units_inside_runs(seed, xs):
    """Row units and probes inside a run: values, statistics and probes as the reference's."""
    model = _with_rows(random.Random(seed))
    pts = [(mpq(x),) for x in xs]
    both(model, pts, [[i] for i in range(len(pts))])


def test_row_units_are_taken_in_runs_or_refuse_them(monkeypatch):
    """The run takes the row units (its statistics cover their layers); a row unit reading a
    shared value beyond int64 refuses the run after the kernel: the same trace either way."""
    seen = _spy_runs(monkeypatch)
    pts = [(mpq(x),) for x in (-3, 0, 1, 1, 4, 9)]
    both(_with_rows(random.Random(1)), pts, [[i] for i in range(len(pts))])
    assert [len(r) for r in seen if r is not None] == [3]
    seen.clear()
    both(_with_rows(random.Random(1), big_row=True), pts, [[i] for i in range(len(pts))])
    assert not any(r is not None for r in seen)


def _slots_accounted(monkeypatch) -> list:
    """After every run: each row slot and each shared slot is free exactly once or held (by a
    lane, a recipe's inputs, or a view's base) — a run neither leaks slots nor frees one in use."""
    checked = []
    real = fast._Engine.shared_run

    def spy(self, *args):
        got = real(self, *args)
        if got is None:
            return got
        held_rows = {x.slot for x in self.lanes if not x.shared and x.slot >= 0} | self._held
        assert len(self.free) == len(set(self.free))
        assert not held_rows & set(self.free)
        assert held_rows | set(self.free) == set(range(self.R.shape[0]))
        held = {x.slot for x in self.lanes if x.shared}
        held |= {self.views[s][0] for s in held if s in self.views}
        assert len(self.hfree) == len(set(self.hfree))
        assert not held & set(self.hfree)
        assert held | set(self.hfree) == set(range(self.store.slots))
        checked.append(len(got))
        return got

    monkeypatch.setattr(fast._Engine, "shared_run", spy)
    return checked


def test_runs_account_for_every_slot(monkeypatch):
    checked = _slots_accounted(monkeypatch)
    pts = [(mpq(x),) for x in (-3, 0, 1, 1, 4, 9)]
    both(_with_rows(random.Random(1)), pts, [[i] for i in range(len(pts))])
    ds = random_sequences(300, 6, 4, 40, 4, seed=5)
    model, _ = ks25.build(ds, {})
    both(model, ds.vocab, ds.sequences, positions="last")
    assert len(checked) >= 3


def _chain_with_a_wide_row(weight: int, P: int = 2**90):
    """Twenty layers of shared units over x + P and 3x + P, the row lane x carried; at the
    third, a row unit x + weight·(a shared lane of about 2^90): beyond int64 by its weight
    (known from the structure) or by its values (known after the kernel)."""
    layers = [Affine(1, (((0, 1),), ((0, 1),), ((0, 3),)), (0, P, P), 1)]
    for i in range(20):
        rows, bias = [((0, 1),), ((1, 1), (2, 1)), ((1, 2),)], [0, -P, -P + i]
        if i == 2:
            rows.append(((0, 1), (1, weight)))
            bias.append(0)
        layers.append(Affine(len(layers[-1].rows), tuple(rows), tuple(bias), 1))
    width = len(layers[-1].rows)
    layers.append(Affine(width, (tuple((c, 1) for c in range(width)),), (0,), 1))
    return Transformer(1, (MLP(tuple(layers), residual=False),))


@pytest.mark.parametrize("weight", [2**63, 1])
def test_a_wide_row_unit_ends_a_run_there(monkeypatch, weight):
    """A row unit beyond int64 ends the run before its layer, which goes the per-layer way;
    runs go on after it (with weight 1 the run is planned through it, refused after the kernel,
    and run again up to it)."""
    runs = {}  # start → layers (a refused run's shorter one is seen twice: inside and out)
    real = fast._Engine.shared_run

    def spy(self, layers, start, *args):
        got = real(self, layers, start, *args)
        if got is not None:
            runs[start] = len(got)
        return got

    monkeypatch.setattr(fast._Engine, "shared_run", spy)
    kernel_runs = _refusals(monkeypatch)
    pts = [(mpq(x),) for x in (0, 1, 2, 5, 5)]
    both(_chain_with_a_wide_row(weight), pts, [[i] for i in range(len(pts))])
    assert runs == {1: 2, 4: 17}  # every layer but the wide row's
    # a weight beyond int64 is seen in the plan: no kernel pass is wasted on it
    assert len(kernel_runs) == (2 if weight >= 2**62 else 3)
