"""The memorizing MLP (Lemma C.1 / VYS Theorem 3.1): exact numbers and edge cases (T4–T10, T16)."""

import math
import random

import pytest
from support import memorize_keys, points_dataset

from exactmem.checks.memorizer import check_memorizer
from exactmem.constructions import vys
from exactmem.core.errors import InputError
from exactmem.core.model import resources
from exactmem.datasets.dataset import random_points
from exactmem.evaluate.reference import run_points

GADGETS = ["peel", "tent"]


def test_micro_example_a8_exact_numbers():
    """§A.8: keys (3, 8, 14, 21), labels (2, 1, 3, 1), C = 3, two groups of two."""
    model, w, outs, _ = memorize_keys([3, 8, 14, 21], [2, 1, 3, 1], C=3, group_size=2)
    assert (w.key_bits, w.label_bits, w.groups) == (5, 2, 2)
    assert w.packed_keys == (104, 469)
    assert w.packed_labels == (9, 13)
    assert w.thresholds == (14,)
    assert outs == [2, 1, 3, 1]


@pytest.mark.parametrize("gadget", GADGETS)
def test_micro_example_both_gadgets_and_invariants(gadget):
    model, w, outs, trace = memorize_keys(
        [3, 8, 14, 21], [2, 1, 3, 1], C=3, group_size=2, gadget=gadget
    )
    assert outs == [2, 1, 3, 1]
    checks = check_memorizer(trace, model.sublayers[0], dict(enumerate([2, 1, 3, 1])))
    assert all(c.passed for c in checks), [c.detail for c in checks if not c.passed]


@pytest.mark.parametrize("gadget", GADGETS)
@pytest.mark.parametrize("N", [1, 2, 3, 13, 31, 97])
def test_degenerate_and_prime_sizes(gadget, N):
    ds = random_points(N, 3, 7, seed=N)
    model, w = vys.build(ds, {"gadget": gadget, "seed": N})
    trace = run_points(model, ds.points)
    assert [o[0][0] for o in trace.outputs] == list(ds.labels)
    assert w.groups == math.ceil(N / w.group_size)


@pytest.mark.parametrize("gadget", GADGETS)
@pytest.mark.parametrize("K", [1, 2, 3, 4, 7])
def test_padding_never_matches_and_every_group_size_works(gadget, K):
    """N = 10 is not a multiple of K ≥ 3: the last group is padded with key 0 / label 0 (T5, T9)."""
    keys = [2, 3, 4, 5, 9, 10, 11, 40, 41, 63]  # consecutive keys exercise hat neighbours (T6)
    labels = [1, 2, 3, 4, 5, 6, 7, 1, 2, 3]
    model, w, outs, trace = memorize_keys(keys, labels, C=7, group_size=K, gadget=gadget)
    assert outs == labels
    checks = {
        c.name: c for c in check_memorizer(trace, model.sublayers[0], dict(enumerate(labels)))
    }
    # keys 1 apart violate Lemma C.1's Stage I (gap ≥ 2) though the integer gadgets still work
    assert not checks.pop("memorizer.stage1.keys").passed
    assert all(c.passed for c in checks.values())


@pytest.mark.parametrize("gadget", GADGETS)
def test_extra_points_map_to_zero(gadget):
    """Lemma C.1: zero-labelled extra points, including keys at group thresholds ± 1 (T6)."""
    keys = [4, 10, 16, 22, 28, 34]
    extra = [2, 3, 5, 9, 11, 15, 17, 35, 60, 64]
    model, w, outs, trace = memorize_keys(
        keys, [1, 2, 3, 1, 2, 3], C=3, extra=extra, group_size=2, gadget=gadget
    )
    assert outs == [1, 2, 3, 1, 2, 3] + [0] * len(extra)
    expected = dict(enumerate([1, 2, 3, 1, 2, 3] + [0] * len(extra)))
    checks = {c.name: c for c in check_memorizer(trace, model.sublayers[0], expected)}
    assert not checks.pop("memorizer.stage1.keys").passed  # thresholds ± 1 are only 1 apart
    assert all(c.passed for c in checks.values())


@pytest.mark.parametrize("gadget", GADGETS)
@pytest.mark.parametrize("rho, K", [(53, 1), (21, 3), (16, 4), (13, 5), (11, 6)])
def test_packed_widths_cross_word_boundaries(gadget, rho, K):
    """K·ρ = 53, 63, 64, 65, 66 bits (T10): no evaluator may lose a bit there."""
    rng = random.Random(rho)
    keys = sorted(rng.sample(range(2, 2**rho), 2 * K - 1) + [2**rho - 1])
    labels = [rng.randint(1, 5) for _ in keys]
    model, w, outs, _ = memorize_keys(keys, labels, C=5, group_size=K, gadget=gadget)
    assert w.key_bits == rho and w.group_size * w.key_bits == K * rho
    assert outs == labels


@pytest.mark.parametrize("C", [1, 2, 3, 4, 7, 8, 127, 128])
def test_label_width_at_powers_of_two(C):
    """Labels C = 2^c − 1 and C = 2^c need c = bitlen(C) bits (T7); all labels equal too."""
    model, w, outs, _ = memorize_keys([2, 5, 9, 14, 20], [C] * 5, C=C, group_size=2)
    assert w.label_bits == C.bit_length()
    assert outs == [C] * 5


def test_rational_points_are_scaled_exactly():
    ds = points_dataset(
        [("1/3", "2/7"), ("-1/3", "0"), ("5/6", "-2/7"), ("0", "1/7")], [1, 2, 3, 1]
    )
    model, w = vys.build(ds, {})
    assert w.projection.scale == 42
    assert [o[0][0] for o in run_points(model, ds.points).outputs] == [1, 2, 3, 1]


def test_duplicate_points_with_equal_labels_merge_but_conflicts_are_rejected():
    ok = points_dataset([(1, 2), (3, 4), (1, 2)], [5, 6, 5])
    model, w = vys.build(ok, {})
    assert [o[0][0] for o in run_points(model, ok.points).outputs] == [5, 6, 5]
    bad = points_dataset([(1, 2), (3, 4), (1, 2)], [5, 6, 7])
    with pytest.raises(InputError, match=r"points\[0\] and points\[2\]"):
        vys.build(bad, {})


def test_projection_collision_is_resampled():
    """A direction bound of 1 makes collisions likely; the construction must resample (T8)."""
    ds = random_points(30, 2, 3, seed=5, coord_bound=3)
    model, w = vys.build(ds, {"direction_bound": 1000})
    keys = [w.projection.key(p) for p in ds.points]
    assert len(set(keys)) == 30
    with pytest.raises(InputError, match="no injective projection"):
        vys.build(ds, {"direction_bound": 0})


def test_group_size_minimises_depth_and_reports_paper_size():
    ds = random_points(2000, 8, 100, seed=9)
    model, w = vys.build(ds, {})
    depth = resources(model).depth
    for K in (w.group_size - 1, w.group_size + 1):
        other, _ = vys.build(ds, {"group_size": K})
        assert resources(other).depth >= depth
    assert w.paper_group_size == math.ceil(math.sqrt(2000 / math.log2(2000)))
    assert resources(model).width <= 12


def test_rejects_bad_options():
    ds = random_points(5, 2, 3)
    with pytest.raises(InputError, match="gadget"):
        vys.build(ds, {"gadget": "abacus"})
    with pytest.raises(InputError, match="task 'points'"):
        from dataclasses import replace

        vys.build(replace(ds, task="next-token"), {})


def test_injected_collision_is_resampled():
    """T8: the first direction makes two points collide; the second draw is used."""
    from gmpy2 import mpq

    class Scripted:
        def __init__(self, values):
            self.values = list(values)

        def randint(self, lo, hi):
            return self.values.pop(0)

    pts = [(mpq(1), mpq(0)), (mpq(0), mpq(1)), (mpq(2), mpq(2))]
    proj = vys.integer_projection(pts, Scripted([1, 1, 1, 3]))
    assert proj.direction == (1, 3)
    assert len({proj.key(p) for p in pts}) == 3
