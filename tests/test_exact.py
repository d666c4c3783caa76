import pytest
from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.core.exact import bitlen, from_hex, parameter_bits, parse_rational, to_hex


@pytest.mark.parametrize(
    "raw, value",
    [
        (3, mpq(3)),
        ("-3", mpq(-3)),
        ("1/2", mpq(1, 2)),
        ("0.25", mpq(1, 4)),
        ("1e-3", mpq(1, 1000)),
        (" -7/14 ", mpq(-1, 2)),
    ],
)
def test_parse_rational_exact(raw, value):
    assert parse_rational(raw, "x") == value


@pytest.mark.parametrize("raw", [float("nan"), float("inf"), "nan", "-inf", "Infinity"])
def test_parse_rejects_non_finite_even_with_floats_allowed(raw):
    with pytest.raises(InputError, match="finite"):
        parse_rational(raw, "vocab[3][1]", allow_floats=True)


def test_floats_rejected_unless_opted_in_then_exact_dyadic():
    with pytest.raises(InputError, match=r"vocab\[0\]\[2\].*not exact"):
        parse_rational(0.1, "vocab[0][2]")
    assert parse_rational(0.1, "x", allow_floats=True) == mpq(3602879701896397, 2**55)


@pytest.mark.parametrize("raw", ["abc", "1/0", True, None, [1]])
def test_parse_rejects_garbage_naming_field(raw):
    with pytest.raises(InputError, match=r"points\[7\]\[0\]"):
        parse_rational(raw, "points[7][0]")


@pytest.mark.parametrize("x", [0, 1, -1, 2**64 + 3, -(2**20000) + 17], ids=range(5))
def test_hex_round_trip(x):
    assert from_hex(to_hex(x), "w") == x


@pytest.mark.parametrize("bad", ["12", "0x", "0xzz", 12, "--0x1"])
def test_hex_rejects_malformed(bad):
    with pytest.raises(InputError, match="w"):
        from_hex(bad, "w")


def test_parameter_bits_fixed_point_reading():
    assert parameter_bits(mpq(0)) == 1
    assert parameter_bits(mpq(5)) == 4  # sign + 3 bits
    assert parameter_bits(mpq(-5, 8)) == 3 + 3 + 1  # dyadic: 3 fractional bits
    assert parameter_bits(mpq(1, 3)) == 1 + 2 + 1
    assert bitlen(-8) == 4
