"""Exact scalars: parsing, bit lengths, and the hex codec for big integers.

Every number that can decide a verdict is a Python ``int`` or a ``gmpy2.mpq``. Floats are
accepted on input only by explicit opt-in, and then converted exactly (a binary float *is* a
dyadic rational).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from gmpy2 import mpq, mpz

from exactmem.core import limits
from exactmem.core.errors import InputError

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

    Kajitsuka & Sato 2025 define bit complexity only for fixed-point numbers. This is the
    fixed-point reading: a sign bit, the integer bits of the numerator, and ⌈log₂ q⌉ fractional
    bits (exact for dyadic q = 2^k).
    Zero costs one bit.
    """
    value = mpq(value)
    return bitlen(int(value.numerator)) + ceil_log2(int(value.denominator)) + 1


def to_hex(x: int) -> str:
    """Hex text of an integer (``"0x1f"``, ``"-0x1f"``); CPython refuses str() of huge ints."""
    return hex(int(x))


# ASCII only, no underscores or inner spaces: Python's int() and Fraction() accept "1_000",
# fullwidth "１/２" and Arabic-Indic "١٢"; a number in a file is checked before it is converted.
_HEX = re.compile(r"(-?)0x([0-9a-fA-F]+)")
_FRACTION = re.compile(r"([+-]?)([0-9]+)/([0-9]+)")
_DECIMAL = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]+))?")
_SPACE = " \t\r\n"


def _digits(count: int, where: str, text: str) -> None:
    cap = limits.current().max_digits
    if count > cap:
        raise InputError(
            f"{where}: {count} digits, more than the limit of {cap} per number (--max-digits); "
            f"starts {text[:20]!r}"
        )


def _malformed(text: str, where: str, expected: str) -> InputError:
    if not text.isascii():
        why = " (it contains non-ASCII characters: only the ASCII digits 0-9 are numbers)"
    elif "_" in text:
        why = " (it contains an underscore: write the digits without separators)"
    else:
        why = ""
    return InputError(f"{where}: {text[:40]!r} is not {expected}{why}")


def from_hex(text: object, where: str) -> int:
    """Parse the hex text written by :func:`to_hex` (``"0x1f"``, ``"-0x1f"``: ASCII hex digits,
    at most ``max_digits`` of them); ``where`` names the field for errors."""
    if not isinstance(text, str):
        raise InputError(f"{where}: expected a hex string like '0x1f', got {type(text).__name__}")
    match = _HEX.fullmatch(text)
    if match is None:
        raise _malformed(text, where, "a hex string like '0x1f' or '-0x1f'")
    _digits(len(match[2]), where, text)
    value = int(match[2], 16)
    return -value if match[1] else value


def _parse_text(value: str, where: str) -> mpq:
    """``"-3"``, ``"1/2"``, ``"0.25"``, ``"1e-3"`` exactly, ASCII only, within the limits."""
    text = value.strip(_SPACE)
    if text.lower().lstrip("+-") in {"nan", "inf", "infinity"}:
        raise InputError(f"{where}: {value!r} is not a finite number")
    expected = "an exact rational such as '-3', '1/2', '0.25' or '1e-3'"
    if match := _FRACTION.fullmatch(text):
        sign, p, q = match.groups()
        _digits(len(p) + len(q), where, text)
        den = mpz(q)
        if den == 0:
            raise InputError(f"{where}: {text[:40]!r} has denominator 0")
        num = mpz(p)
        return mpq(-num if sign == "-" else num, den)
    match = _DECIMAL.fullmatch(text)
    if match is None or not (match[2] or match[3]):
        raise _malformed(value, where, expected)
    sign, whole, frac, esign, exp = match[1], match[2], match[3] or "", match[4], match[5]
    _digits(len(whole) + len(frac), where, text)
    e = 0
    if exp is not None:
        cap = limits.current().max_exponent
        exp = exp.lstrip("0")
        if len(exp) > len(str(cap)) or int(exp or "0") > cap:
            raise InputError(
                f"{where}: exponent {esign}{exp[:20]} in {text[:40]!r} exceeds the limit of "
                f"±{cap} (--max-exponent)"
            )
        e = -int(exp or "0") if esign == "-" else int(exp or "0")
    num = mpz(whole + frac)
    if sign == "-":
        num = -num
    shift = e - len(frac)
    return mpq(num * mpz(10) ** shift) if shift >= 0 else mpq(num, mpz(10) ** -shift)


def parse_rational(value: object, where: str, *, allow_floats: bool = False) -> mpq:
    """Parse an exact rational from a dataset entry.

    Accepted: JSON integers, and strings ``"-3"``, ``"1/2"``, ``"0.25"``, ``"1e-3"`` (decimal
    strings are exact decimals) in ASCII digits, within the digit and exponent limits
    (:mod:`exactmem.core.limits`). JSON floats are rejected unless ``allow_floats``; then the
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
        return _parse_text(value, where)
    raise InputError(f"{where}: expected a number or a string, got {type(value).__name__}")


def format_rational(value: mpq) -> str:
    """Exact text of a rational: ``"3"``, ``"-1/2"``; big parts in hex to avoid the digit limit."""
    value = mpq(value)
    p, q = int(value.numerator), int(value.denominator)
    part = (lambda x: str(x)) if max(bitlen(p), bitlen(q)) < 10_000 else to_hex
    return part(p) if q == 1 else f"{part(p)}/{part(q)}"
