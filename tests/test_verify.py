"""Every check must be able to fail: feed it broken models and bad data (mutation tests)."""

from dataclasses import replace

import pytest
from support import certify_built

from exactmem.constructions import vys
from exactmem.core.model import MLP, Affine, Transformer
from exactmem.datasets.dataset import random_points


@pytest.fixture(scope="module")
def built():
    ds = random_points(60, 4, 9, seed=3)
    model, witness = vys.build(ds, {"seed": 1})
    return ds, model


def failed(cert):
    return {c.name for c in cert.failed}


def mutate_layer(model, layer_index, fn):
    mlp = model.sublayers[0]
    layers = list(mlp.layers)
    layers[layer_index] = fn(layers[layer_index])
    return replace(model, sublayers=(replace(mlp, layers=tuple(layers)),))


def unit_layer(mlp, name_part):
    return next(i for i, a in enumerate(mlp.layers) if any(name_part in n for n in a.names))


def set_entry(a: Affine, row, fn_row=None, bias=None, den=None):
    rows = list(a.rows)
    if fn_row:
        rows[row] = fn_row(rows[row])
    b = list(a.bias)
    if bias is not None:
        b[row] = bias(b[row])
    return Affine(a.in_dim, tuple(rows), tuple(b), den or a.denominator, a.names)


def test_correct_model_verifies(built):
    ds, model = built
    cert = certify_built(model, ds)
    assert cert.verdict == "verified"
    assert {c.name for c in cert.checks} >= {
        "labels",
        "memorizer.stage1.keys",
        "memorizer.stage2.groups",
        "memorizer.stage3.segments",
        "memorizer.stage3.match",
    }


def test_swapped_label_is_refuted(built):
    ds, model = built
    labels = list(ds.labels)
    j = next(j for j in range(1, len(labels)) if labels[j] != labels[0])
    labels[0], labels[j] = labels[j], labels[0]
    cert = certify_built(model, replace(ds, labels=tuple(labels)))
    assert "labels" in failed(cert)
    assert "points[0]" in next(c.detail for c in cert.checks if c.name == "labels")


def test_nudged_output_weight_is_refuted(built):
    ds, model = built
    last = len(model.sublayers[0].layers) - 1
    broken = mutate_layer(model, last, lambda a: set_entry(a, 0, bias=lambda b: b + 1))
    assert "labels" in failed(certify_built(broken, ds))


def test_flipped_packed_bit_is_refuted(built):
    """Flip one bit of the packed key constant u_1 (the first Stage II layer's U bias)."""
    ds, model = built
    mlp = model.sublayers[0]
    li = unit_layer(mlp, "s2.1.hi")
    row = mlp.layers[li].names.index("U")
    broken = mutate_layer(model, li, lambda a: set_entry(a, row, bias=lambda b: b ^ (1 << 3)))
    cert = certify_built(broken, ds)
    assert {"labels", "memorizer.stage3.segments"} & failed(cert)
    assert cert.verdict == "refuted"


def test_projection_collision_fails_stage1(built):
    """Zero the projection weights: every key collides."""
    ds, model = built
    mlp = model.sublayers[0]
    first = mlp.layers[0]
    rows = [tuple() if name == "t" else r for name, r in zip(first.names, first.rows, strict=True)]
    broken = mutate_layer(
        model, 0, lambda a: Affine(a.in_dim, tuple(rows), a.bias, a.denominator, a.names)
    )
    assert "memorizer.stage1.keys" in failed(certify_built(broken, ds))


def test_step_on_a_ramp_fails_stage2(built):
    """Halve one Stage II layer (denominator ×2): its step reads 1/2 for some points."""
    ds, model = built
    mlp = model.sublayers[0]
    li = unit_layer(mlp, "s2.2.hi")
    broken = mutate_layer(
        model, li, lambda a: Affine(a.in_dim, a.rows, a.bias, a.denominator * 2, a.names)
    )
    assert "memorizer.stage2.groups" in failed(certify_built(broken, ds))


def test_broken_match_fails_stage3_match(built):
    """Shift one slot's match gadget so it fires off by one."""
    ds, model = built
    mlp = model.sublayers[0]
    li = unit_layer(mlp, "s3.0.g1")
    row = mlp.layers[li].names.index("s3.0.g1")
    broken = mutate_layer(model, li, lambda a: set_entry(a, row, bias=lambda b: b + 2**40))
    assert "memorizer.stage3.match" in failed(certify_built(broken, ds))


def test_layout_lies_are_caught(built):
    """A model file whose layout metadata is wrong cannot pass the lane checks."""
    ds, model = built
    mlp = model.sublayers[0]
    lying = replace(
        model, sublayers=(replace(mlp, meta={**mlp.meta, "key_bits": mlp.meta["key_bits"] - 3}),)
    )
    assert failed(certify_built(lying, ds))


def test_point_model_must_be_tokenwise_and_fit(built):
    from exactmem.core.errors import InputError

    ds, model = built
    with pytest.raises(InputError, match="dimension"):
        certify_built(model, random_points(5, 3, 2))
    plain = Transformer(4, (MLP((Affine.from_dense([[1, 0, 0, 0]]),), residual=False),))
    cert = certify_built(plain, ds)
    assert failed(cert) == {"labels", "lower_bound.bit_count"}  # 5 parameters, 60 labels


def test_label_check_on_numerator_arrays():
    """Outputs compared with labels as numerators over one denominator: the count of wrong
    outputs, the first ones named with their exact value, both task shapes."""
    import numpy as np
    from gmpy2 import mpq

    from exactmem.checks.labels import label_check
    from exactmem.evaluate.records import Outputs

    labels = tuple(range(1, 11))
    numerators = np.array([2 * y for y in labels] + [7], dtype=object)  # over 2; row 10: 7/2
    index = np.array([[0, r] for r in list(range(10))], np.int64)

    def _check(outputs, labels, seq2seq):
        got, den = outputs.first_lane()
        if not seq2seq:
            got = got[:, -1:]
        return label_check(got, den, labels, None, "seq2seq" if seq2seq else "sequences")

    ok = _check(Outputs([numerators], 2, index), labels, seq2seq=False)
    assert ok.passed and ok.detail == "all 10 labels reproduced exactly"
    index[:8, 1] = 10  # eight sequences read 7/2 at the last position
    bad = _check(Outputs([numerators], 2, index), labels, seq2seq=False)
    assert not bad.passed
    assert bad.detail.startswith("8 of 10 wrong — sequences[0]: output 7/2, expected 1;")
    assert bad.detail.endswith("(and 3 more)")
    seq = _check(Outputs([numerators], 2, index[:2]), ((1, 1), (1, 2)), seq2seq=True)
    assert seq.detail.startswith("2 of 4 wrong — sequences[0][1]: output 7/2, expected 1;")
    assert mpq(7, 2) == Outputs([numerators], 2, index)[0][1][0]


def test_match_indicator_off_0_1_fails_stage3_match_naming_it(built):
    """Halve the layer that computes slot 0's match indicator: the point it matches reads 1/2,
    which the match fold keeps and the check names."""
    ds, model = built
    mlp = model.sublayers[0]
    li = unit_layer(mlp, "s3.0.m")
    broken = mutate_layer(
        model, li, lambda a: Affine(a.in_dim, a.rows, a.bias, a.denominator * 2, a.names)
    )
    check = next(c for c in certify_built(broken, ds).checks if c.name == "memorizer.stage3.match")
    assert not check.passed
    assert "match[0] = 1/2" in check.detail


def test_match_fold_equals_the_stored_lanes():
    """A MatchFold fed lanes in any order (compiled pass for NumPy integers, NumPy otherwise)
    holds what the lanes say: matches counted, the least matching slot, the least slot off
    {0, 1} and its value for the first offending rows."""
    import random

    import numpy as np
    from gmpy2 import mpq

    from exactmem.checks.certificate import MAX_EXAMPLES, MatchFold

    rng = random.Random(5)
    for trial in range(12):
        rows, K, den = rng.randint(1, 40), rng.randint(1, 9), rng.choice([1, 3])
        lanes = [[rng.choice([0, 0, 0, den, den, 2, -den]) for _ in range(rows)] for _ in range(K)]
        order = list(range(K))
        rng.shuffle(order)
        fold = MatchFold("m.", K)
        for k in order:
            kind = object if trial % 3 == 0 else (np.int8 if trial % 3 == 1 else np.int64)
            fold(f"m.match[{k}]", np.array(lanes[k], dtype=kind), den)
        assert fold.seen == set(range(K))
        for r in range(rows):
            column = [lanes[k][r] for k in range(K)]
            ones = [k for k, v in enumerate(column) if v == den]
            off = [k for k, v in enumerate(column) if v not in (0, den)]
            assert fold.hits[r] == len(ones)
            assert fold.slot[r] == (ones[0] if ones else -1)
            assert fold.off[r] == (off[0] if off else -1)
        wrong = [r for r in range(rows) if fold.off[r] >= 0][: MAX_EXAMPLES + 1]
        assert sorted(fold.off_values) == wrong
        for r in wrong:
            k = int(fold.off[r])
            assert fold.off_values[r] == (k, mpq(lanes[k][r], den))


def test_missing_match_lanes_fail_stage3_match(built):
    """A fold that did not see every match lane (an evaluator that skipped one) fails."""
    from exactmem.checks.certificate import step_folds
    from exactmem.checks.memorizer import check_memorizer
    from exactmem.evaluate import reference

    ds, model = built
    folds = step_folds(model)
    trace = reference.run(model, ds.points, [[i] for i in range(ds.size)], folds=folds)
    mlp = model.sublayers[0]
    expected = dict(enumerate(ds.labels))
    ok = {c.name: c for c in check_memorizer(trace, mlp, expected)}
    assert ok["memorizer.stage3.match"].passed
    trace.folds["memorizer.match"].seen.discard(0)
    checks = {c.name: c for c in check_memorizer(trace, mlp, expected)}
    assert not checks["memorizer.stage3.match"].passed
    assert "match lanes were computed" in checks["memorizer.stage3.match"].detail


def test_step_lanes_out_of_order_are_judged_not_crashed(built):
    """A model whose step probes come as step[2] before step[1] (found by the loader fuzz: it
    crashed the fold that reads them as they come) is judged from the stored lanes, alike by
    both evaluators."""
    ds, model = built
    mlp = model.sublayers[0]
    names = {p.name: p for p in mlp.probes}
    if "step[2]" not in names:
        pytest.skip("the memorizer has fewer than three groups")
    swapped = tuple(
        replace(p, name={"step[1]": "step[2]", "step[2]": "step[1]"}.get(p.name, p.name))
        for p in mlp.probes
    )
    lying = replace(model, sublayers=(replace(mlp, probes=swapped), *model.sublayers[1:]))
    fast = certify_built(lying, ds, evaluator="fast")
    reference = certify_built(lying, ds, evaluator="reference")
    assert [(c.name, c.passed, c.detail) for c in fast.checks] == [
        (c.name, c.passed, c.detail) for c in reference.checks
    ]
    assert "labels" not in {c.name for c in fast.failed}  # the outputs are untouched
