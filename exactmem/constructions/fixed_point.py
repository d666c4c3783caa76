"""Fixed-point rounding of a construction's solved weights (untrusted builders).

A weight solved on Arb balls (an ill-conditioned system's midpoint) carries as many bits as the
solve's precision and an exponent no dataset figure bounds. Rounded to the nearest multiple of
2^−F and refused once its magnitude reaches 2^E, it is p/2^F with |p| < 2^{E+F}: in lowest terms
p'/2^{F'} (F' ≤ F, |p'| < 2^{E+F'}), so it costs at most (E + F') + F' + 1 ≤ E + 2F + 1 bits
(bitlen(|p'|) + ⌈log₂ 2^{F'}⌉ + 1, :func:`exactmem.core.exact.parameter_bits`) — a bound the
plugins declare in F and E. The absolute error is at most 2^−F−1 per weight, which suits
targets judged by an absolute tolerance (relative rounding, a fixed number of significant bits,
does not bound the bits: small weights get long denominators).

The options ``frac_bits`` (F) and ``int_bits`` (E) have this meaning in every construction that
takes them (madden24, dana25, mahdavi24).
"""

from __future__ import annotations

import math

from gmpy2 import mpq

from exactmem.core.errors import InputError

__all__ = ["round_fixed"]


def round_fixed(x: mpq, frac_bits: int, int_bits: int, what: str) -> mpq:
    """``x`` rounded to the nearest multiple of 2^−``frac_bits`` (ties up); InputError naming
    ``what`` and ``--set int_bits`` when the rounded magnitude reaches 2^``int_bits``."""
    one = 1 << frac_bits
    p = int(math.floor(mpq(x) * one + mpq(1, 2)))
    if abs(p) >> (frac_bits + int_bits):  # |p/2^F| ≥ 2^E
        size = abs(p).bit_length() - 1 - frac_bits
        raise InputError(
            f"{what} rounds to a magnitude of at least 2^{size}, beyond 2^{int_bits}: raise "
            f"--set int_bits (now {int_bits}, at most 4096)"
        )
    return mpq(p, one)
