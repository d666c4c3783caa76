"""Exact scalars: parsing, bit lengths, and the hex codec for big integers.

Every number that can decide a verdict is a Python ``int`` or a ``gmpy2.mpq``. Floats are
accepted on input only by explicit opt-in, and then converted exactly (a binary float *is* a
dyadic rational).
"""

from __future__ import annotations

import math
from fractions import Fraction

from gmpy2 import mpq

from exactmem.errors import InputError

__all__ = [
    "Rational",
    "bitlen",
    "ceil_log2",
    "from_hex",
    "parameter_bits",
    "parse_rational",
    "to_hex",
]

Rational = mpq


def bitlen(x: int) -> int:
    """Number of bits of |x| (0 for 0)."""
    return int(x).bit_length() if x >= 0 else (-int(x)).bit_length()


def ceil_log2(q: int) -> int:
    """⌈log₂ q⌉ for a positive integer q (0 for q = 1)."""
    if q < 1:
        raise ValueError(f"ceil_log2 needs a positive integer, got {q}")
    return (int(q) - 1).bit_length()


def parameter_bits(value: mpq) -> int:
    """Bits of one parameter p/q in lowest terms: bitlen(|p|) + ⌈log₂ q⌉ + 1.

    The erratum list of the Kajitsuka–Sato digest (item 17) notes that the paper defines bit
    complexity only for fixed-point numbers. This is the fixed-point reading: a sign bit, the
    integer bits of the numerator, and ⌈log₂ q⌉ fractional bits (exact for dyadic q = 2^k).
    Zero costs one bit.
    """
    value = mpq(value)
    return bitlen(int(value.numerator)) + ceil_log2(int(value.denominator)) + 1


def to_hex(x: int) -> str:
    """Hex text of an integer (``"0x1f"``, ``"-0x1f"``); CPython refuses str() of huge ints."""
    return hex(int(x))


def from_hex(text: object, where: str) -> int:
    """Parse the hex text written by :func:`to_hex`; ``where`` names the field for errors."""
    if not isinstance(text, str):
        raise InputError(f"{where}: expected a hex string like '0x1f', got {type(text).__name__}")
    body = text[1:] if text.startswith("-") else text
    if not body.startswith("0x") or len(body) < 3:
        raise InputError(f"{where}: expected a hex string like '0x1f', got {text[:40]!r}")
    try:
        return int(text, 16)
    except ValueError:
        raise InputError(f"{where}: malformed hex integer {text[:40]!r}") from None


def parse_rational(value: object, where: str, *, allow_floats: bool = False) -> mpq:
    """Parse an exact rational from a dataset entry.

    Accepted: JSON integers, and strings ``"-3"``, ``"1/2"``, ``"0.25"``, ``"1e-3"`` (decimal
    strings are exact decimals). JSON floats are rejected unless ``allow_floats``; then the
    binary float is converted exactly. NaN and infinities are always rejected.
    """
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, got a boolean")
    if isinstance(value, int):
        return mpq(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"{where}: {value!r} is not a finite number")
        if not allow_floats:
            raise InputError(
                f"{where}: float {value!r} is not exact; write it as a string such as "
                f"'{Fraction(value).limit_denominator(10**6)}' or opt in to exact dyadic "
                "conversion (--allow-floats)"
            )
        return mpq(Fraction(value))
    if isinstance(value, str):
        text = value.strip()
        if text.lower().lstrip("+-") in {"nan", "inf", "infinity"}:
            raise InputError(f"{where}: {value!r} is not a finite number")
        try:
            return mpq(Fraction(text))
        except (ValueError, ZeroDivisionError):
            raise InputError(f"{where}: {value[:40]!r} is not an exact rational") from None
    raise InputError(f"{where}: expected a number or a string, got {type(value).__name__}")


def format_rational(value: mpq) -> str:
    """Exact text of a rational: ``"3"``, ``"-1/2"``; big parts in hex to avoid the digit limit."""
    value = mpq(value)
    p, q = int(value.numerator), int(value.denominator)
    part = (lambda x: str(x)) if max(bitlen(p), bitlen(q)) < 10_000 else to_hex
    return part(p) if q == 1 else f"{part(p)}/{part(q)}"
