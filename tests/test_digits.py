"""Balanced 30-bit digits (exactmem.evaluate.fast.digits): the weights' form in the limb kernels."""

from hypothesis import given, settings
from hypothesis import strategies as st

from exactmem.evaluate.fast import digits as dg


def test_balanced_digits():
    for w in (0, 1, -1, 2**838 - 1, -(2**838) + 1, 2**29, -(2**29), 3**400, -(7**300)):
        offs, digits = dg._sparse(w)
        assert sum(d << (30 * i) for i, d in zip(offs, digits, strict=True)) == w
        assert all(-(2**29) <= d < 2**29 for d in digits)
    assert len(dg._sparse(2**838 - 1)[0]) == 2


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.integers(-(2**20000), 2**20000),
        st.builds(
            # a limb of 2^29 carries 1 up through a run of limbs 2^29 − 1
            lambda runs, sign: (
                sign * (sum((2**29 - 1) << (30 * i) for i in range(1, runs)) + 2**29)
            ),
            st.integers(65, 120),  # past 64 limbs: the linear-time path
            st.sampled_from([1, -1]),
        ),
        st.builds(lambda e, sign: sign * (2**29 << (30 * e)), st.integers(64, 300), st.just(-1)),
    )
)
def test_balanced_digits_of_long_integers(w):
    """Long integers take a linear-time path (bytes, then a carry-lookahead scan): the same
    digits as the digit loop — balanced digits in [−2^29, 2^29) are unique."""
    dg._SPARSE.clear()
    assert list(zip(*dg._sparse(w), strict=True)) == _digit_loop(w)


def _digit_loop(w: int) -> list[tuple[int, int]]:
    digits, m, i = [], w, 0
    while m:
        d = m & dg.MASK
        d -= (1 << 30) if d >= 1 << 29 else 0
        if d:
            digits.append((i, d))
        m = (m - d) >> 30
        i += 1
    return digits


def test_short_paths_give_the_digit_loops_digits():
    """Single digits and powers of two take shortcuts: the digits are the loop's."""
    values = [s * v for s in (1, -1) for k in range(300) for v in (2**k, 2**k - 1, 2**k + 1)]
    values += list(range(-(2**12), 2**12)) + [2**29 - 1, -(2**29), 2**29, -(2**29) - 1]
    for w in values:
        assert list(zip(*dg._sparse(w), strict=True)) == _digit_loop(w), w


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**400 - 1), min_size=1, max_size=6), st.integers(0, 3))
def test_limb_rows_are_the_limbs(values, spare):
    """All rows at once from their bytes = each value's limbs one by one (the top limbs 0)."""
    k = max(-(-v.bit_length() // 30) for v in values) + spare + 1
    rows = dg._limb_rows(values, k)
    assert rows.shape == (len(values), k)
    for v, row in zip(values, rows.tolist(), strict=True):
        assert row == [(v >> (30 * i)) & (2**30 - 1) for i in range(k)]
        assert dg._int_of(rows[values.index(v)]) == v


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 9), st.sampled_from([1, -1, 2, -2, 3, 2**70, -(2**70)])),
        min_size=1,
        max_size=6,
        unique_by=lambda t: t[0],
    )
)
def test_paired_terms_sum_to_the_row(terms):
    """w·(x − y) pairs and single terms: the same linear form, each lane once, positive first."""
    got = dg._paired(terms)
    lanes = [c for c, _, _ in got] + [p for _, p, _ in got if p >= 0]
    assert sorted(lanes) == sorted(c for c, _ in terms)
    form = {}
    for c, p, w in got:
        form[c] = form.get(c, 0) + w
        if p >= 0:
            assert w > 0
            form[p] = form.get(p, 0) - w
    assert form == dict(terms)
    pairs = [(c, p) for c, p, _ in got if p >= 0]
    opposite = {w for _, w in terms} & {-w for _, w in terms}
    assert pairs or not opposite  # a pair is found whenever one exists


# ------------------------------------------------------------ joining and splitting limbs


def _value(limbs) -> int:
    return sum(int(x) << (30 * i) for i, x in enumerate(limbs))


_INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        # the engine's form: limbs in [0, 2^30), the top one signed
        st.builds(
            lambda body, top: [*body, top],
            st.lists(st.integers(0, dg.MASK), max_size=80),
            st.integers(-(2**40), 2**40),
        ),
        st.lists(_INT64, min_size=1, max_size=80),  # any int64 limbs
    )
)
def test_joining_limbs_is_the_sum_they_stand_for(limbs):
    """``_int_of`` joins limbs in one conversion past 16 limbs (the shift-and-add loop was
    quadratic: 66 s for a 1 KB model of 880 layers), for normalized limbs and any int64 ones."""
    import numpy as np

    assert dg._int_of(np.array(limbs, np.int64)) == _value(limbs)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**3000), 2**3000), st.integers(0, 3))
def test_splitting_into_limbs_is_linear_and_exact(v, spare):
    """``_signed_limbs``: the engine's normalized form of v (top limb signed) in k limbs;
    ``_magnitude_limbs``: the limbs of |v| up to its top one."""
    k = -(-(abs(v).bit_length() + 1) // 30) + 1 + spare
    limbs = dg._signed_limbs(v, k)
    assert len(limbs) == k and _value(limbs) == v
    assert all(0 <= x <= dg.MASK for x in limbs[:-1])
    mags = dg._magnitude_limbs(abs(v))
    assert _value(mags) == abs(v) and (not mags or mags[-1] != 0)
    assert all(0 <= x <= dg.MASK for x in mags)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(2**300), 2**300),
    st.lists(st.tuples(st.integers(-(2**300), 2**300), st.integers(0, 2**300)), max_size=6),
)
def test_reach_bounds_every_affine_value(bias, terms):
    """``_reach``: exact while short, a power of two above it otherwise — never below."""
    exact = abs(bias) + sum(abs(w) * x for w, x in terms)
    got = dg._reach(bias, terms)
    assert got >= exact
    if got.bit_length() <= 120:
        assert got == exact
