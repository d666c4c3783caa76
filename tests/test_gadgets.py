"""Bit extraction gadgets against Python's binary expansion."""

import random

import pytest
from gmpy2 import mpq

from exactmem.constructions.circuit import Circuit, const, var
from exactmem.constructions.gadgets import step, tent
from exactmem.core.model import Transformer
from exactmem.evaluate.reference import run_points

WIDTHS = [1, 2, 3, 31, 32, 33, 52, 53, 54, 63, 64, 65, 127, 200]


def peel_network(n):
    """G3: b_k = S_{2^{n−k}}(U), U ← U − 2^{n−k} b_k, one layer per bit."""
    circ = Circuit(["x"])
    U = var("x")
    bits = []
    for k in range(n):
        p = n - 1 - k
        units, b = step(f"b{k}", U, 2**p)
        carried = {f"c{j}": bj for j, bj in enumerate(bits)}
        circ.layer({"U": U, **units, **carried})
        bits = [var(f"c{j}") for j in range(len(bits))] + [b]
        U = var("U") - 2**p * b
    return Transformer(1, (circ.finish({f"bit{k}": b for k, b in enumerate(bits)}),))


def tent_network(n):
    """G1: the tent-map pair z = x/2^n, z' = z + 2^{−(n+1)}, read out b_k = ½ − 2^{n−k} D_k."""
    S = 2 ** (n + 1)
    circ = Circuit(["x"])
    z, z2 = 2 * var("x"), 2 * var("x") + 1
    bits = []
    for k in range(1, n + 1):
        a, z_next = tent(f"z{k}", z, S)
        b, z2_next = tent(f"w{k}", z2, S)
        carried = {f"c{j}": bj for j, bj in enumerate(bits)}
        circ.layer({**a, **b, **carried})
        bit = (2**k - (z2_next - z_next)) * mpq(1, 2 ** (k + 1))
        bits = [var(f"c{j}") for j in range(len(bits))] + [bit]
        z, z2 = z_next, z2_next
    return Transformer(1, (circ.finish({f"bit{k}": b for k, b in enumerate(bits)}),))


def bits_of(model, xs):
    trace = run_points(model, [(mpq(x),) for x in xs])
    return [[int(v) for v in out[0]] for out in trace.outputs]


def expected(x, n):
    return [int(ch) for ch in format(x, f"0{n}b")]


@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("build", [peel_network, tent_network], ids=["peel", "tent"])
def test_bit_extraction_matches_binary_expansion(build, n):
    rng = random.Random(n)
    alternating = int(("01" * n)[:n], 2)
    xs = {0, 1, 2**n - 1, 2 ** (n - 1), alternating, (2**n - 1) ^ alternating}
    xs |= {rng.randrange(2**n) for _ in range(8)}
    xs = sorted(xs)
    model = build(n)
    for x, got in zip(xs, bits_of(model, xs), strict=True):
        assert got == expected(x, n), (x, n)


def test_tent_readout_is_not_the_xor_of_neighbours():
    """The earlier wrong readout |D_k − 2D_{k−1}| returns [1, 1] for x = 2, n = 2 (T1)."""
    assert bits_of(tent_network(2), [2]) == [[1, 0]]


def test_step_is_exact_only_on_integers():
    circ = Circuit(["x"])
    units, s = step("s", var("x"), 5)
    circ.layer(units)
    model = Transformer(1, (circ.finish({"s": s}),))
    trace = run_points(model, [(mpq(4),), (mpq(5),), (mpq(9, 2),)])
    assert [o[0][0] for o in trace.outputs] == [0, 1, mpq(1, 2)]


def test_const_unit_and_zero_layer():
    circ = Circuit(["x"])
    circ.layer({"k": const(7)})
    model = Transformer(1, (circ.finish({"y": var("k") * 2}),))
    assert run_points(model, [(mpq(3),)]).outputs[0][0] == (mpq(14),)


def test_tent_pair_stays_on_one_branch():
    """T3: after k tent steps the scaled gap z'_k − z_k is exactly ±2^k, sign (−1)^{b_k}."""
    n = 12
    S = 2 ** (n + 1)
    circ = Circuit(["x"])
    z, z2 = 2 * var("x"), 2 * var("x") + 1
    for k in range(1, n + 1):
        a, z = tent(f"z{k}", z, S)
        b, z2 = tent(f"w{k}", z2, S)
        circ.layer({**a, **b})
        circ.probe(f"D{k}", z2 - z)
    model = Transformer(1, (circ.finish({"y": z}),))
    xs = [0, 1, 2**n - 1, 1234, 2**11, 0b101010101010]
    trace = run_points(model, [(mpq(x),) for x in xs])
    for k in range(1, n + 1):
        for x, D in zip(xs, trace.lane(f"D{k}")[:, 0], strict=True):
            assert D == (1 - 2 * expected(x, n)[k - 1]) * 2**k
