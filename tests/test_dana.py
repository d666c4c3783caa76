"""Dana, Pydi & Chevaleyre 2025: exactly H heads, the + d from the skip connection, the paper's
parameter count, and a checklist that refutes broken models."""

from dataclasses import replace

import pytest
from gmpy2 import mpq
from support import certify_built

from exactmem.constructions import dana25
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Affine, Attention, resources
from exactmem.datasets.dataset import Dataset

# (N, S, d, d_h, H): T₀ = H·d_h + d associations, d = 2 (Corollary 1) and wider, d_h < d and = d
GRID = [
    (10, 2, 2, 1, 8),
    (10, 2, 2, 2, 1),
    (12, 3, 2, 2, 12),
    (8, 5, 4, 2, 10),
    (10, 3, 3, 3, 4),
    (20, 2, 6, 3, 8),
]


def built(N, S, d, d_h, H, T=None, seed=None):
    T = H * d_h + d if T is None else T
    ds = dana25.random_associations(N, S, T, seed=T if seed is None else seed)
    model, _ = dana25.build(ds, {"d": d, "head_dim": d_h, "heads": H})
    return ds, model


def checks_of(model, ds):
    cert = certify_built(model, ds)
    return cert, {c.name: c for c in cert.checks}


@pytest.mark.parametrize("N, S, d, d_h, H", GRID)
def test_h_heads_memorize_h_dh_plus_d(N, S, d, d_h, H):
    ds, model = built(N, S, d, d_h, H)
    att = model.sublayers[1]
    assert len(att.heads) == H
    assert {h.value.out_dim for h in att.heads} == {d_h}
    cert, checks = checks_of(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    assert checks["dana.feature_rank"].figures["associations"] == H * d_h + d
    assert checks["dana.capacity"].figures == {"capacity": H * d_h + d, "heads": H, "skip_dim": d}
    assert mpq(checks["labels"].figures["min_margin_lower_bound"]) > 0


@pytest.mark.parametrize("N, S, d, d_h, H", GRID)
def test_dense_parameters_are_the_rank_one_count(N, S, d, d_h, H):
    """Remark 2's d(S + 2N + 2(d_h + 1)H), plus the d + N biases of the embedding and the
    unembedding that the IR counts as dense parameters (all zero); within Theorem 1's
    d(S + 2N + 4 d_h H) plus the same biases."""
    ds, model = built(N, S, d, d_h, H)
    paper = dana25.paper_parameters(d, d_h, H, S, N)
    dense = resources(model).dense_parameters
    assert dense == paper["rank_one_qk"] + d + N
    assert dense <= paper["theorem_1"] + d + N
    assert model.embed.bias == (0,) * d and model.unembed.bias == (0,) * N


def test_wide_features_and_fewer_associations_than_features():
    """T₀ < H·d_h + d: the rank is certified through the Gram matrix; T₀ < d too."""
    for N, S, d, d_h, H, T in [(10, 2, 4, 3, 3, 11), (10, 2, 6, 2, 1, 3)]:
        ds, model = built(N, S, d, d_h, H, T=T, seed=1)
        cert, checks = checks_of(model, ds)
        assert cert.verdict == "verified", [c.detail for c in cert.failed]
        # the capacity counts rank W_O^h W_V^h: with fewer associations than H·d_h + d the
        # solved W_O need not have full rank, so the measured count lies between T and it
        assert T <= checks["dana.capacity"].figures["capacity"] <= H * d_h + d


@pytest.fixture(scope="module")
def small():
    return built(10, 2, 2, 2, 5)  # T₀ = 12 = 5·2 + 2


def _with_heads(model, heads):
    pos, att = model.sublayers
    return replace(model, sublayers=(pos, Attention(tuple(heads), att.score, att.label)))


def test_one_head_removed_is_refuted(small):
    ds, model = small
    broken = _with_heads(model, model.sublayers[1].heads[1:])
    failed = {c.name for c in certify_built(broken, ds).failed}
    assert {"dana.capacity", "dana.feature_rank"} <= failed


def test_a_zeroed_value_map_is_refuted(small):
    ds, model = small
    heads = list(model.sublayers[1].heads)
    v = heads[2].value
    heads[2] = replace(heads[2], value=Affine(v.in_dim, ((),) * v.out_dim, v.bias, 1))
    broken = _with_heads(model, heads)
    cert, checks = checks_of(broken, ds)
    assert cert.verdict == "refuted"
    assert not checks["dana.feature_rank"].passed
    # the head's d_h is the rank of its value map, 0: the capacity counts what the weights do
    assert not checks["dana.capacity"].passed
    assert checks["dana.capacity"].figures["capacity"] == 4 * 2 + 2


def test_the_features_end_with_the_skip_term(small):
    """At T₀ = H·d_h + d the heads alone give H·d_h < T₀ features: the rank certified above
    counts the skip term x_S(t) = e(t_S) + pos_S, which the derived model the ball evaluator
    runs (exactmem.checks.mixtures) carries after the heads' blocks."""
    from exactmem.checks.mixtures import mixture_model
    from exactmem.core.balls import ball_bounds
    from exactmem.evaluate.softmax import run_balls

    ds, model = small
    pos, att = model.sublayers
    seq = ds.sequences[0]
    emb = model.embed
    x_S = [
        mpq(sum(c for j, c in row if j == seq[-1]), emb.denominator) + pos.table[-1][i]
        for i, row in enumerate(emb.rows)
    ]
    derived = mixture_model(model, att, values=True, keep_stream=True)
    feats = run_balls(derived, ds.vocab, [seq], precision=128, positions="last").outputs[0][-1]
    assert len(feats) == 2 + 5 * 2
    for f, x in zip(feats[:2], x_S, strict=True):
        lo, hi = ball_bounds(f)
        assert lo <= x <= hi and hi - lo < mpq(1, 2**100)


def test_meta_decides_nothing(small):
    ds, model = small
    lying = replace(model, meta={**model.meta, "heads": 99, "capacity": 10**6})
    broken = _with_heads(lying, lying.sublayers[1].heads[1:])
    _, checks = checks_of(broken, ds)
    assert checks["dana.capacity"].figures["capacity"] == 4 * 2 + 2
    assert not checks["dana.capacity"].passed


def test_a_layer_after_the_attention_is_not_the_architecture(small):
    ds, model = small
    ident = Affine.from_dense([[1, 0], [0, 1]])
    extra = MLP((ident,), residual=False)
    broken = replace(model, sublayers=model.sublayers + (extra,))
    failed = {c.name for c in certify_built(broken, ds).failed}
    assert "dana25.structure" in failed


def test_sequences_sharing_their_last_token_give_the_skip_rank_one():
    """x_S(t) = e(t_S) + pos_S depends on the last token only: T₀ = H·d_h + 2 sequences that all
    end in token 0 give features of rank ≤ H·d_h + 1, so the exact readout is refused; one more
    head memorizes them."""
    seqs = tuple((a, b, 0) for a in range(4) for b in range(3))  # 12 sequences, last token 0
    ds = Dataset(
        "next-token",
        tuple(1 + (7 * i) % 10 for i in range(12)),
        10,
        vocab=tuple((mpq(t),) for t in range(10)),
        sequences=seqs,
    )
    with pytest.raises(InputError, match="end in 1 distinct tokens"):
        dana25.build(ds, {"d": 2, "head_dim": 2, "heads": 5})
    model, _ = dana25.build(ds, {"d": 2, "head_dim": 2})
    assert len(model.sublayers[1].heads) == 6  # ⌈(12 − 1)/2⌉
    assert certify_built(model, ds).verdict == "verified"


def test_the_claims_parameter_bound_fails_with_one_head_more(small):
    """proofs/dana25.toml bounds the dense parameters by the paper's count: the model holds it
    with equality, and one head more (the former W_QK = 4I head's 4d² parameters, say) fails."""
    from pathlib import Path

    from exactmem.claims.proofs import _bound_checks, load_claim

    claim = load_claim(Path(__file__).parent.parent / "proofs" / "dana25.toml")
    ds, model = small
    options = {"d": 2, "head_dim": 2, "heads": 5}

    def dense_bound(cert):  # the paper's bound.dense_parameters (the claim also has tight.*)
        checks = [c for c, _ in _bound_checks(claim, cert, ds, options)]
        return next(c for c in checks if c.name == "bound.dense_parameters")

    held = dense_bound(certify_built(model, ds))
    assert held.passed and held.figures["measured"] == 5 * 2 * 3 * 2 + 2 * (2 + 2 * 10) + 12
    heads = model.sublayers[1].heads
    more = _with_heads(model, heads + heads[:1])
    assert not dense_bound(certify_built(more, ds)).passed


def test_a_head_wider_than_d_counts_d_features(small):
    """W_V^h A_h is an image of A_h ∈ R^d: a head with d_h = 3 > d = 2 adds 2 to the capacity."""
    ds, model = small
    heads = list(model.sublayers[1].heads)
    v, o = heads[0].value, heads[0].output
    wide = Affine(v.in_dim, v.rows + (v.rows[0],), v.bias + (0,), v.denominator)
    heads[0] = replace(heads[0], value=wide, output=replace(o, in_dim=3))
    _, checks = checks_of(_with_heads(model, heads), ds)
    assert checks["dana.capacity"].figures["capacity"] == 5 * 2 + 2


def test_past_int_bits_the_build_is_refused_naming_the_weight(tmp_path, capsys):
    """The solved read-out M and the heads' W_O are fixed-point numbers below 2^E
    (``int_bits``): one that reaches it refuses the build (exit 2), naming it and the option."""
    from exactmem.commands.main import main
    from exactmem.files.dataset_files import save_dataset

    data, out = tmp_path / "ds.json", tmp_path / "m.json"
    save_dataset(dana25.random_associations(10, 2, 42, 2), data)
    build = ["build", "--construction", "dana25", "--data", str(data), "--out", str(out)]
    assert main([*build, "--set", "heads=20", "--set", "int_bits=2"]) == 2
    err = capsys.readouterr().err
    assert "int_bits" in err and ("M[" in err or "W_O[" in err)
    assert not out.exists()
    assert main([*build, "--set", "heads=20", "--set", "frac_bits=4097"]) == 2
    assert "at most 4096 fractional bits" in capsys.readouterr().err


def test_too_few_fractional_bits_are_refuted_not_accepted():
    """Rounded to multiples of 2^−4 the read-out misses its targets: the labels refute (at
    F = 12 and above this instance verifies)."""
    ds = dana25.random_associations(10, 2, 42, 2)
    coarse, _ = dana25.build(ds, {"d": 2, "heads": 20, "frac_bits": 4})
    cert, _ = checks_of(coarse, ds)
    assert cert.verdict == "refuted" and "labels" in {c.name for c in cert.failed}
    fine, _ = dana25.build(ds, {"d": 2, "heads": 20, "frac_bits": 12})
    assert checks_of(fine, ds)[0].verdict == "verified"


@pytest.mark.parametrize("N", [3, 7, 101, 1001])
def test_the_circle_points_denominators_are_bounded(N):
    """An odd N puts one angle at π, where the float tan(θ/2) is about 10¹⁶: clamped to 10⁶, every
    point is (x/z, y/z) with z < 2⁸⁰ (the bits bound of plugins/dana25.py) and on the circle."""
    for x, y in dana25.circle_points(N):
        assert x * x + y * y == 1
        assert x.denominator < 2**80 and y.denominator < 2**80
    x, y = dana25.circle_points(N)[(N - 1) // 2] if N % 2 else (mpq(-1), mpq(0))
    assert x < -1 + mpq(1, 10**11)  # still the point at π, to 10⁻¹¹
