"""Every check can fail: one targeted mutation per check that the other suites exercise only
indirectly (ks25.phi_values, ks25.token_ids, ks25.witness_set, deepsets.set_ids,
dana.feature_rank, dana.capacity, memorizer.stage3.segments)."""

from dataclasses import replace

import pytest
from support import certify_built

from exactmem.constructions import dana25, ks25, vys
from exactmem.core.model import MLP, Affine, Attention
from exactmem.datasets.dataset import random_points
from exactmem.datasets.sequences import random_sequences


def failed(model, ds):
    return {c.name for c in certify_built(model, ds).failed}


def with_final_rows(mlp: MLP, change) -> MLP:
    """Rewrite F1's final layer (lanes phi, tid, seq) with ``change(rows, bias, den)``."""
    last = mlp.layers[-1]
    rows, bias, den = change(list(last.rows), list(last.bias), last.denominator)
    final = Affine(last.in_dim, tuple(rows), tuple(bias), den, last.names)
    return replace(mlp, layers=mlp.layers[:-1] + (final,))


@pytest.fixture(scope="module")
def ks():
    ds = random_sequences(120, 4, 3, 25, 4, seed=21)
    model, _ = ks25.build(ds, {"attention": "hardmax"})
    return ds, model


def mutate_f1(model, change):
    return replace(
        model, sublayers=(with_final_rows(model.sublayers[0], change),) + model.sublayers[1:]
    )


def test_phi_values_fail_on_half_integers(ks):
    ds, model = ks

    def half(rows, bias, den):  # φ̃ + 1/2, the other lanes unchanged
        rows = [tuple((c, 2 * w) for c, w in r) for r in rows]
        bias = [2 * b for b in bias]
        bias[0] += den
        return rows, bias, 2 * den

    assert "ks25.phi_values" in failed(mutate_f1(model, half), ds)


def test_token_ids_fail_when_collapsed(ks):
    ds, model = ks

    def collapse(rows, bias, den):
        rows[1], bias[1] = (), 0
        return rows, bias, den

    assert "ks25.token_ids" in failed(mutate_f1(model, collapse), ds)


def test_witness_set_fails_when_phi_vanishes(ks):
    ds, model = ks

    def zero(rows, bias, den):
        rows[0], bias[0] = (), 0
        return rows, bias, den

    names = failed(mutate_f1(model, zero), ds)
    assert {"ks25.witness_set", "ks25.sequence_sums"} <= names


def test_deep_sets_ids_fail_when_phi_vanishes():
    ds = random_sequences(80, 4, 2, 15, 4, seed=22, labels_by="multiset")
    model, _ = ks25.build(ds, {}, "ks25-deep-sets")

    def zero(rows, bias, den):
        rows[0], bias[0] = (), 0
        return rows, bias, den

    assert "deepsets.set_ids" in failed(mutate_f1(model, zero), ds)


def test_dana_feature_rank_fails_with_a_duplicated_head():
    ds = dana25.random_associations(8, 2, 12, seed=23)
    model, _ = dana25.build(ds, {"d": 2, "heads": 5})
    att = model.sublayers[1]
    heads = (att.heads[0], att.heads[0]) + att.heads[2:]  # two heads compute equal features
    broken = replace(model, sublayers=(model.sublayers[0], Attention(heads, att.score, att.label)))
    assert "dana.feature_rank" in failed(broken, ds)


def test_dana_capacity_fails_beyond_the_heads():
    small = dana25.random_associations(8, 2, 12, seed=24)
    model, _ = dana25.build(small, {"d": 2, "heads": 5})
    more = dana25.random_associations(8, 2, 13, seed=24)
    assert "dana.capacity" in failed(model, more)


def test_stage3_segments_fail_on_a_wrong_peel():
    """Subtract half the peeled bit's weight from U: the state after slot 0 is no longer U with
    its top segment removed."""
    ds = random_points(40, 3, 9, seed=25)
    model, _ = vys.build(ds, {"group_size": 3, "gadget": "peel"})  # the peeled state is read
    mlp = model.sublayers[0]
    li = next(i for i, a in enumerate(mlp.layers) if "s3.0.u0.hi" in a.names)
    prev = mlp.layers[li].names
    hi, lo = prev.index("s3.0.u0.hi"), prev.index("s3.0.u0.lo")
    layer = mlp.layers[li + 1]
    row = layer.names.index("U")
    rows = list(layer.rows)
    rows[row] = tuple((c, w // 2 if c in (hi, lo) else w) for c, w in rows[row])
    layers = list(mlp.layers)
    layers[li + 1] = Affine(layer.in_dim, tuple(rows), layer.bias, layer.denominator, layer.names)
    broken = replace(model, sublayers=(replace(mlp, layers=tuple(layers)),))
    assert "memorizer.stage3.segments" in failed(broken, ds)
