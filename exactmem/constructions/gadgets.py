"""ReLU gadgets as fragments of a :class:`~exactmem.constructions.circuit.Circuit` layer.

Each function returns the units (name → pre-activation) it needs in one layer, and the
expression that reads its value off those units in the next layer. All gadgets are exact on
the integer domain stated (Vardi, Yehudai & Shamir 2022, §3; Kajitsuka & Sato 2025,
Lemmas G.2–G.5, reconstructed).
"""

from __future__ import annotations

from exactmem.constructions.circuit import Lin, var

__all__ = ["and_bit", "carry", "interval_match", "interval_match_finish", "step", "tent"]

Units = dict[str, Lin]


def carry(name: str, value: Lin) -> tuple[Units, Lin]:
    """σ(v) = v for v ≥ 0: carries a non-negative value to the next layer."""
    return {name: value}, var(name)


def step(prefix: str, x: Lin, a: int) -> tuple[Units, Lin]:
    """S_a(x) = σ(x − a + 1) − σ(x − a) = [x ≥ a] for integer x (two units).

    With a = 2^p and 0 ≤ x < 2^{p+1} this is bit p of x (the integer bit-peel, G3).
    """
    hi, lo = f"{prefix}.hi", f"{prefix}.lo"
    return {hi: x - a + 1, lo: x - a}, var(hi) - var(lo)


def interval_match(prefix: str, d: Lin, size: int) -> Units:
    """First layer of [0 ≤ d < size] for integer d: g₁ = σ(−d), g₂ = σ(d − size + 1).

    Read off by :func:`interval_match_finish` in the next layer: σ(1 − g₁ − g₂) is 1 on
    0 ≤ d ≤ size − 1 and 0 for every other integer d (a two-layer hat, cf. Lemma G.5).
    """
    return {f"{prefix}.g1": -d, f"{prefix}.g2": d - size + 1}


def interval_match_finish(prefix: str) -> Lin:
    return 1 - var(f"{prefix}.g1") - var(f"{prefix}.g2")


def and_bit(bit: Lin, flag: Lin) -> Lin:
    """σ(b + m − 1) = b·m for b, m ∈ {0, 1}: gates a label bit by the match indicator."""
    return bit + flag - 1


def tent(prefix: str, z: Lin, scale: int) -> tuple[Units, Lin]:
    """Telgarsky's tent map on z ∈ [0, scale] in integer units: φ(z) = σ(2z) − σ(4z − 2·scale).

    The outer ReLU of ψ(z) = σ(σ(2z) − σ(4z − 2)) is dropped because the tent is non-negative,
    so one layer per application suffices (Vardi et al., Lemma A.7 / KS25 Lemma G.4).
    """
    a, b = f"{prefix}.a", f"{prefix}.b"
    return {a: 2 * z, b: 4 * z - 2 * scale}, var(a) - var(b)
