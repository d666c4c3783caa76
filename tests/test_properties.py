"""Property tests: random datasets always memorized; the evaluator agrees with plain mpq."""

from gmpy2 import mpq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import certify_built

from exactmem.constructions import vys
from exactmem.core.model import MLP, Affine, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.evaluate.reference import run_points

coords = st.fractions(min_value=-20, max_value=20, max_denominator=6)


@st.composite
def datasets(draw):
    d = draw(st.integers(1, 4))
    pts = draw(st.lists(st.tuples(*[coords] * d), min_size=1, max_size=25, unique=True))
    C = draw(st.integers(1, 40))
    labels = draw(st.lists(st.integers(1, C), min_size=len(pts), max_size=len(pts)))
    points = tuple(tuple(mpq(x) for x in p) for p in pts)
    return Dataset(task="points", labels=tuple(labels), num_classes=C, points=points)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ds=datasets(),
    gadget=st.sampled_from(["peel", "tent"]),
    seed=st.integers(0, 5),
    group=st.one_of(st.none(), st.integers(1, 6)),
)
def test_every_random_dataset_is_certified(ds, gadget, seed, group):
    options = {"gadget": gadget, "seed": seed}
    if group:
        options["group_size"] = group
    model, _ = vys.build(ds, options)
    cert = certify_built(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]


def naive(model, x):
    """A second, deliberately naive evaluator: per-point mpq arithmetic."""
    v = list(x)
    for sub in model.sublayers:
        h = v
        for i, a in enumerate(sub.layers):
            z = [
                sum((mpq(c, a.denominator) * h[j] for j, c in row), mpq(b, a.denominator))
                for row, b in zip(a.rows, a.bias, strict=True)
            ]
            h = z if i == len(sub.layers) - 1 else [max(t, mpq(0)) for t in z]
        v = [p + q for p, q in zip(v, h, strict=True)] if sub.residual else h
    return v


big = st.integers(-(2**70), 2**70)


@st.composite
def mlps(draw):
    width = draw(st.integers(1, 4))
    depth = draw(st.integers(1, 4))
    residual = draw(st.booleans())
    layers, w = [], width
    for i in range(depth):
        out = width if (i == depth - 1) else draw(st.integers(1, 4))
        matrix = draw(st.lists(st.lists(big, min_size=w, max_size=w), min_size=out, max_size=out))
        bias = draw(st.lists(big, min_size=out, max_size=out))
        den = draw(st.sampled_from([1, 2, 3, 2**64, 7**30]))
        layers.append(Affine.from_dense(matrix, bias, den))
        w = out
    return MLP(tuple(layers), residual=residual), width


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_reference_agrees_with_naive_mpq(data):
    mlp, width = data.draw(mlps())
    xs = data.draw(
        st.lists(st.tuples(*[st.fractions(max_denominator=10**6)] * width), min_size=1, max_size=5)
    )
    pts = [tuple(mpq(x) for x in p) for p in xs]
    model = Transformer(width, (mlp,))
    got = [list(o[0]) for o in run_points(model, pts).outputs]
    assert got == [naive(model, p) for p in pts]
