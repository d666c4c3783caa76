"""The r1 review's false VERIFIED verdicts, as tests (reproducers in the r1-review branch's
repro/): each model below is refuted (exit 1), and by the check that names what is wrong.

* F1 — kim23's memorizer left as dead code beside a lookup of 3N ReLU bump units on lane S
  that produces the labels (``kim23.dataflow.memorizer``);
* F3 — a model in ks24's form whose FFN is dead (W₂ = 0) and whose read-out fits the labels
  from token lanes the head does not write (``ks24.dataflow``);
* M1 — an honest madden24 model (token ids, a GELU FFN) verified as kim23: its hardmax limit is
  not exactly evaluable, and the structure check refutes instead of the run ending
  inconclusive (exit 4).
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import pytest

import exactmem
from exactmem.checks.certify import certify
from exactmem.commands.main import main
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer


def _generate(tmp_path, name: str, *args: str):
    path = tmp_path / f"{name}.json"
    assert main(["generate", *args, "--out", str(path), "--quiet"]) == 0
    return path


def _verify(model_path, data_path, construction: str) -> int:
    return main(
        ["verify", str(model_path), "--data", str(data_path), "--quiet", "--construction",
         construction]
    )  # fmt: skip


def _failed(cert) -> set[str]:
    return {c.name for c in cert.failed}


# --------------------------------------------------------------------------- F1 kim23


def _parallel_lookup(model: Transformer, ds) -> Transformer:
    """The memorizer kept, and beside it f(S) = Σ_i y_i·tri((S − S_i)/δ) from 3 ReLU units per
    sequence on lane S (δ half the least gap between the S values), carried through the
    memorizer's layers; the output reads only that carrier."""
    mem = model.sublayers[-1]
    assert isinstance(mem, MLP)
    prefix = replace(model, sublayers=model.sublayers[:-1])
    S_lane = model.embed.names.index("S")
    S = [Fraction(o[-1][S_lane]) for o in exactmem.run(prefix, ds, positions="last")]
    labels = [int(y) for y in ds.labels]
    values = sorted(set(S))
    delta = min((b - a for a, b in zip(values, values[1:], strict=False)), default=Fraction(1)) / 2
    first = mem.layers[0]
    den = math.lcm(first.denominator, *(x.denominator for x in S), delta.denominator)
    k = den // first.denominator
    bumps = [((S_lane, den),) for _ in S for _ in range(3)]
    bias = [int(-den * (s - off)) for s in S for off in (delta, 0, -delta)]
    first = Affine(
        first.in_dim,
        tuple(tuple((c, v * k) for c, v in row) for row in first.rows) + tuple(bumps),
        tuple(b * k for b in first.bias) + tuple(bias),
        den,
        first.names + tuple(f"bump{i}" for i in range(len(bumps))) if first.names else (),
    )
    second = mem.layers[1]
    coef = [
        (first.out_dim - len(bumps) + 3 * i + j, Fraction(y * c) / delta)
        for i, y in enumerate(labels)
        for j, c in enumerate((1, -2, 1))
    ]
    den1 = math.lcm(second.denominator, *(c.denominator for _, c in coef))
    k1 = den1 // second.denominator
    second = Affine(
        second.in_dim + len(bumps),
        tuple(tuple((c, v * k1) for c, v in row) for row in second.rows)
        + (tuple((u, int(c * den1)) for u, c in coef if c),),
        tuple(b * k1 for b in second.bias) + (0,),
        den1,
        (*second.names, "carry") if second.names else (),
    )
    layers = [first, second]
    for layer in mem.layers[2:-1]:
        carry = ((layer.in_dim, layer.denominator),)
        layers.append(
            Affine(
                layer.in_dim + 1,
                (*layer.rows, carry),
                (*layer.bias, 0),
                layer.denominator,
                (*layer.names, "carry") if layer.names else (),
            )
        )
    last = mem.layers[-1]
    layers.append(
        Affine(
            last.in_dim + 1,
            (((last.in_dim, last.denominator),), *last.rows[1:]),
            (0, *last.bias[1:]),
            last.denominator,
            last.names,
        )
    )
    bad_mem = replace(mem, layers=tuple(layers))
    return replace(model, sublayers=(*model.sublayers[:-1], bad_mem))


def test_f1_kim23_memorizer_as_dead_code_beside_a_lookup_is_refuted(tmp_path):
    data = _generate(
        tmp_path, "nt", "next-token", "--N", "6", "--n", "3", "--d", "3", "--C", "4",
        "--vocab", "12",
    )  # fmt: skip
    honest = tmp_path / "kim23.json"
    assert main(["build", "--construction", "kim23", "--data", str(data), "--out", str(honest),
                 "--quiet"]) == 0  # fmt: skip
    ds = exactmem.load_dataset(data)
    bad = _parallel_lookup(exactmem.load_model(honest), ds)
    # the lookup produces the labels: without the checks, the model passes
    assert [int(o[-1][0]) for o in exactmem.run(bad, ds, positions="last")] == [
        int(y) for y in ds.labels
    ]
    cert = certify(bad, ds, construction="kim23")
    assert cert.verdict == "refuted"
    assert "kim23.dataflow.memorizer" in _failed(cert)
    assert "labels" not in _failed(cert)  # the labels come out: only the dataflow tells
    path = tmp_path / "kim23_parallel.json"
    exactmem.save_model(bad, path)
    assert _verify(path, data, "kim23") == 1


# --------------------------------------------------------------------------- F3 ks24


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction]:
    """One exact solution of rows·x = rhs (Gauss–Jordan; free variables 0)."""
    A = [[*r, b] for r, b in zip(rows, rhs, strict=True)]
    cols, r, pivots = len(A[0]) - 1, 0, []
    for c in range(cols):
        p = next((i for i in range(r, len(A)) if A[i][c] != 0), None)
        if p is None:
            continue
        A[r], A[p] = A[p], A[r]
        A[r] = [v / A[r][c] for v in A[r]]
        for i in range(len(A)):
            if i != r and A[i][c] != 0:
                f = A[i][c]
                A[i] = [a - f * b for a, b in zip(A[i], A[r], strict=True)]
        pivots.append(c)
        r += 1
    x = [Fraction(0)] * cols
    for i, c in enumerate(pivots):
        x[c] = A[i][-1]
    for row, b in zip(rows, rhs, strict=True):
        assert sum(a * s for a, s in zip(row, x, strict=False)) == b, "no exact fit"
    return x


def _dead_ffn_model(ds) -> Transformer:
    """ks24's form — a rank-one Boltzmann head writing lane d−1, a residual FFN reading it —
    with W₂ = 0, and a read-out that fits the labels from the token lanes 0..d−2 alone."""
    d = ds.dim
    X = [[Fraction(x) for x in ds.vocab[t]] for seq in ds.sequences for t in seq]
    y = [Fraction(v) for lab in ds.labels for v in lab]
    fit = _solve([[*x[: d - 1], Fraction(1)] for x in X], y)
    den = math.lcm(*(s.denominator for s in fit))
    unembed = Affine(
        d, (tuple((c, int(fit[c] * den)) for c in range(d - 1) if fit[c]),), (int(fit[-1] * den),),
        den,
    )  # fmt: skip

    def one(coeffs: list[int]) -> Affine:
        return Affine(d, (tuple((c, v) for c, v in enumerate(coeffs) if v),), (0,))

    key = [1] + [0] * (d - 1)
    output = Affine(1, tuple(((0, 1),) if i == d - 1 else () for i in range(d)), (0,) * d)
    head = AttentionHead(query=one([2 * v for v in key]), key=one(key), value=one(key),
                         output=output)  # fmt: skip
    att = Attention(heads=(head,), score="softmax", label="boltzmann")
    ffn = MLP(
        layers=(one([0] * (d - 1) + [1]), Affine(1, tuple(() for _ in range(d)), (0,) * d)),
        residual=True,
        label="ffn",
    )
    return Transformer(input_dim=d, sublayers=(att, ffn), unembed=unembed)


def test_f3_ks24_dead_ffn_beside_a_token_readout_is_refuted(tmp_path):
    data = _generate(tmp_path, "s2s", "seq2seq", "--N", "2", "--n", "4", "--d", "8", "--C", "4")
    ds = exactmem.load_dataset(data)
    bad = _dead_ffn_model(ds)
    # the read-out alone gives the labels: attention and FFN are decoration
    bare = replace(bad, sublayers=())
    assert [[int(v[0]) for v in o] for o in exactmem.run(bare, ds)] == [list(y) for y in ds.labels]
    cert = certify(bad, ds, construction="ks24")
    assert cert.verdict == "refuted"
    assert "ks24.dataflow" in _failed(cert)
    path = tmp_path / "ks24_dead_ffn.json"
    exactmem.save_model(bad, path)
    assert _verify(path, data, "ks24") == 1


def test_f3_ks24_ffn_dead_on_the_data_is_refuted(tmp_path):
    """The variant with W₂ ≠ 0 on the lane the read-out reads, from a unit that is 0 on every
    token (bias −10⁹): the weights reach the output, the values never do — the knock-out of
    the FFN's hidden units (W₂ = 0) still gives every label."""
    data = _generate(tmp_path, "s2s", "seq2seq", "--N", "2", "--n", "4", "--d", "8", "--C", "4")
    ds = exactmem.load_dataset(data)
    att, _ = _dead_ffn_model(ds).sublayers
    d = ds.dim
    first = Affine(d, (((d - 1, 1),),), (-(10**9),))
    w2 = Affine(1, tuple(((0, 1),) if i == 0 else () for i in range(d)), (0,) * d)
    bad = replace(
        _dead_ffn_model(ds), sublayers=(att, MLP((first, w2), residual=True, label="ffn"))
    )
    cert = certify(bad, ds, construction="ks24")
    assert cert.verdict == "refuted"
    (flow,) = [c for c in cert.failed if c.name == "ks24.dataflow"]
    assert "dead on the data" in flow.detail


@pytest.mark.parametrize("form", ["requantized", "residual"])
def test_f3_honest_ks24_models_pass_the_dataflow_check(tmp_path, form):
    data = _generate(tmp_path, "s2s", "seq2seq", "--N", "4", "--n", "3", "--d", "3", "--C", "3")
    model = tmp_path / f"{form}.json"
    assert main(["build", "--construction", "ks24", "--data", str(data), "--set", f"ffn={form}",
                 "--out", str(model), "--quiet"]) == 0  # fmt: skip
    cert = certify(exactmem.load_model(model), exactmem.load_dataset(data), construction="ks24")
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    (flow,) = [c for c in cert.checks if c.name == "ks24.dataflow"]
    assert flow.passed and flow.figures["id_units_read"] > 0


# --------------------------------------------------------------------------- M1


def test_m1_madden24_model_as_kim23_is_refuted_not_inconclusive(tmp_path):
    data = _generate(
        tmp_path, "ctx", "contexts", "--N", "6", "--n", "3", "--C", "3", "--vocab", "5"
    )
    model = tmp_path / "madden24.json"
    assert main(["build", "--construction", "madden24", "--data", str(data), "--out",
                 str(model), "--quiet"]) == 0  # fmt: skip
    assert _verify(model, data, "kim23") == 1
    cert = certify(exactmem.load_model(model), exactmem.load_dataset(data), construction="kim23")
    assert cert.verdict == "refuted"
    assert "kim23.structure" in _failed(cert)
