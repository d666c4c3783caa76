"""The softmax rounds of the kim23 contextual mapping (``--set attention=softmax``): our
reconstruction of the softmax version of Kim, Kim & Mozafari 2023's 2n attention layers.

Softmax of unequal scores is transcendental, so the max-read layer returns
m̃ = M_r + ε with |ε| ≤ (n − 1)·R·e^{−λ} (scores λ·a_k, integer keys ≥ 1 apart, R the range of
the values). At the temperature λ = bitlen(4(n − 1)R), e^{λ} > 2^{λ} > 4(n − 1)R, so
|ε| < 1/4, and everything downstream is re-quantized to exact values:

* the max-read writes m̃ to the lane m only (never to S, which must stay exact);
* the reset FFN's margin step g = σ(4(a − m̃) + 3) − σ(4(a − m̃) + 2) is exactly [a = M_r]
  for |ε| ≤ 1/4 (a = M_r: both units active, difference 1; a ≤ M_r − 1: both ≤ 0); the
  product v = a·g = σ(a − B(1 − g)) − σ(−a − B(1 − g)) (|a| ≤ B) is M_r at the maximisers and
  0 elsewhere, exact; m̃ − (σ(m̃) − σ(−m̃)) = 0;
* the count layer (a zero query map: exactly uniform) averages β_r·e + α_r·v and adds
  n·mean = β_r·c_r + α_r·c_r·M_r to S. As c_r ≥ 1, (c_r, c_r·M_r)_r determines (M_r, c_r)_r,
  so the functional is drawn on those vectors, as in the hardmax version.

The verifier certifies the re-quantization on the evaluated network
(exactmem.checks.measures.kim23).
"""

from __future__ import annotations

from exactmem.core.model import MLP, Affine, Attention, AttentionHead

__all__ = ["SOFT_LANES", "count_soft", "max_read_soft", "reset_soft", "temperature_for"]

SOFT_LANES = ("t", "a", "m", "e", "S", "one", "v")
T_, A_, M_, E_, S_, ONE, V_ = range(7)
W = len(SOFT_LANES)


def temperature_for(n: int, value_range: int) -> int:
    """The least λ of the form bitlen(4(n − 1)R): e^{λ} > 2^{λ} > 4(n − 1)R, so the
    max-read error (n − 1)·R·e^{−λ} is below 1/4 (integers only, no float decides it)."""
    return max(1, (4 * max(n - 1, 1) * max(value_range, 1)).bit_length())


def _affine(rows: dict[int, tuple], in_dim: int, out_dim: int, bias=None, names=()) -> Affine:
    return Affine(
        in_dim,
        tuple(tuple(sorted(rows.get(i, ()))) for i in range(out_dim)),
        tuple(bias or (0,) * out_dim),
        1,
        tuple(names),
    )


def max_read_soft(temperature: int, r: int) -> Attention:
    """Softmax over the scores λ·a_k: m += m̃ ≈ M_r (S is not touched)."""
    head = AttentionHead(
        _affine({0: ((ONE, temperature),)}, W, 1),
        _affine({0: ((A_, 1),)}, W, 1),
        _affine({0: ((A_, 1),)}, W, 1),
        _affine({M_: ((0, 1),)}, 1, W),
    )
    return Attention((head,), "softmax", f"max{r}")


def reset_soft(L: int, bound: int, r: int) -> MLP:
    """The margin step g, the exact product v = a·g, and the resets (residual, two hidden
    layers): a −= L·g, e ← g, v ← a·g, m ← 0."""
    B = bound
    h1 = _affine(
        {
            0: ((A_, 4), (M_, -4)),  # g+ = σ(4(a − m) + 3)
            1: ((A_, 4), (M_, -4)),  # g− = σ(4(a − m) + 2)
            2: ((A_, 1),),  # σ(a)
            3: ((A_, -1),),  # σ(−a)
            4: ((M_, 1),),  # σ(m)
            5: ((M_, -1),),  # σ(−m)
            6: ((E_, 1),),  # σ(e) = e ≥ 0
            7: ((V_, 1),),  # σ(v)
            8: ((V_, -1),),  # σ(−v)
        },
        W,
        9,
        (3, 2, 0, 0, 0, 0, 0, 0, 0),
        ("g+", "g-", "a+", "a-", "m+", "m-", "e+", "v+", "v-"),
    )
    h2 = _affine(
        {
            0: ((0, 1), (1, -1)),  # g
            1: ((2, 1), (3, -1), (0, B), (1, -B)),  # σ(a − B(1 − g))
            2: ((2, -1), (3, 1), (0, B), (1, -B)),  # σ(−a − B(1 − g))
            3: ((4, 1),),
            4: ((5, 1),),
            5: ((6, 1),),
            6: ((7, 1),),
            7: ((8, 1),),
        },
        9,
        8,
        (0, -B, -B, 0, 0, 0, 0, 0),
        ("g", "ag+", "ag-", "m+", "m-", "e+", "v+", "v-"),
    )
    out = _affine(
        {
            A_: ((0, -L),),
            M_: ((3, -1), (4, 1)),
            E_: ((0, 1), (5, -1)),
            V_: ((1, 1), (2, -1), (6, -1), (7, 1)),
        },
        8,
        W,
    )
    return MLP((h1, h2, out), True, label=f"reset{r}")


def count_soft(alpha: int, beta: int, n: int, r: int) -> Attention:
    """A zero query map (weights exactly 1/n): S += n·mean(β_r·e + α_r·v) = β_r·c_r +
    α_r·c_r·M_r."""
    zero = Affine(W, ((),), (0,))
    value = _affine({0: tuple((lane, k) for lane, k in ((E_, beta), (V_, alpha)) if k)}, W, 1)
    out = _affine({S_: ((0, n),)}, 1, W)
    return Attention((AttentionHead(zero, zero, value, out),), "softmax", f"count{r}")
