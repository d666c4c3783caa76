"""Mahdavi et al. 2024: heads of dimension d_h < n and ≥ n, and a checklist measured on the
model's own attention."""

from dataclasses import replace
from pathlib import Path

import pytest
from flint import ctx
from gmpy2 import mpq
from support import certify_built

from exactmem.checks.attention import _certified_rank
from exactmem.checks.certify import certify
from exactmem.claims.proofs import GENERATORS, _build, load_claim
from exactmem.commands.main import main
from exactmem.constructions import mahdavi24
from exactmem.core.balls import to_ball
from exactmem.core.errors import InputError
from exactmem.core.model import Affine, Attention
from exactmem.files.dataset_files import save_dataset

PROOFS = Path(__file__).resolve().parent.parent / "proofs"


def checks(cert):
    return {c.name: c for c in cert.checks}


def failed(cert):
    return {c.name for c in cert.failed}


def with_heads(model, heads):
    att = model.sublayers[0]
    return replace(model, sublayers=(replace(att, heads=tuple(heads)),))


def zero_key(head):
    k = head.key
    return replace(head, key=Affine(k.in_dim, ((),) * k.out_dim, k.bias, 1))


@pytest.mark.parametrize(
    "n, d, d_h, H",
    [(6, 12, 3, 4), (6, 12, 4, 3), (5, 10, 2, 6), (4, 10, 4, 3), (4, 10, 7, 3), (3, 8, 8, 4)],
)
def test_head_dim_capacity_is_certified(n, d, d_h, H):
    """H(min(n, d_h) − 1) + 1 examples, exact (hardmax limit), for d_h < n, = n and > n; the
    heads have d_h-row query, key and value maps, and the capacity is read off the rank of
    their score forms W_Q^hᵀW_K^h: min(n, d_h) (the construction's W_G + λuvᵀ), which is all
    that d_h rows give the capacity."""
    T = H * (min(n, d_h) - 1) + 1
    ds = mahdavi24.random_instance(T, n, d, 5, seed=T + d_h)
    model, w = mahdavi24.build(ds, {"heads": H, "head_dim": d_h, "seed": 1})
    att = model.sublayers[0]
    assert len(att.heads) == H
    assert {(h.query.out_dim, h.key.out_dim, h.value.out_dim) for h in att.heads} == {
        (d_h, d_h, d_h)
    }
    cert = certify(model, ds, construction="mahdavi24")
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    c = checks(cert)
    assert c["mahdavi.capacity"].figures == {"capacity": T, "heads": H, "head_dim": min(n, d_h)}
    assert c["mahdavi.feature_rank"].figures["rank"] == T == w.feature_rank
    assert "exactly" in c["labels"].detail


@pytest.mark.parametrize("readout", ["regression", "classification"])
def test_head_dim_below_n_softmax(readout):
    ds = mahdavi24.random_instance(9, 6, 12, 4, seed=3)  # H = 4, d_h = 3: 4·2 + 1
    model, _ = mahdavi24.build(
        ds, {"heads": 4, "head_dim": 3, "score": "softmax", "readout": readout}
    )
    cert = certify_built(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    rank = checks(cert)["mahdavi.feature_rank"]
    assert rank.figures == {"rank": 9, "exact": False, "T": 9}
    assert "certified on Arb balls" in rank.detail


def test_head_dim_beyond_capacity_and_out_of_range(tmp_path, capsys):
    ds = mahdavi24.random_instance(10, 6, 12, 4, seed=4)
    with pytest.raises(InputError, match=r"capacity H\(min\(n, d_h\) − 1\) \+ 1 = 9"):
        mahdavi24.build(ds, {"heads": 4, "head_dim": 3})
    for bad in (1, 13):
        with pytest.raises(InputError, match="head_dim must lie in"):
            mahdavi24.build(ds, {"heads": 4, "head_dim": bad})
    ds = mahdavi24.random_instance(14, 6, 12, 4, seed=4)  # N ≥ 13: within --set's size limits
    path = tmp_path / "ds.json"
    save_dataset(ds, path)
    out = str(tmp_path / "m.json")
    argv = ["build", "--construction", "mahdavi24", "--data", str(path), "--out", out]
    assert main([*argv, "--quiet", "--set", "head_dim=13"]) == 2
    assert "head_dim must lie in [2, d = 12], got 13" in capsys.readouterr().err
    assert main([*argv, "--quiet", "--set", "head_dim=4", "--set", "heads=5"]) == 0
    assert main(["verify", out, "--data", str(path), "--construction", "mahdavi24"]) == 0


def test_zero_rows_padding_the_query_map_add_no_capacity():
    """Query and key maps padded with zero rows to 12: the file says d_h = 12, the score form
    still has rank 2, and the capacity stays 4·1 + 1 = 5 < 9 (the old checklist counted the
    rows and passed)."""
    ds = mahdavi24.random_instance(9, 6, 12, 4, seed=5)
    model, _ = mahdavi24.build(ds, {"heads": 4, "head_dim": 3})
    cut = []
    for h in model.sublayers[0].heads:
        q, k = h.query, h.key
        pad = 12 - 2
        cut.append(
            replace(
                h,
                query=Affine(q.in_dim, q.rows[:2] + ((),) * pad, (0,) * 12, q.denominator),
                key=Affine(k.in_dim, k.rows[:2] + ((),) * pad, (0,) * 12, k.denominator),
            )
        )
    cert = certify(with_heads(model, cut), ds, construction="mahdavi24")
    cap = checks(cert)["mahdavi.capacity"]
    assert not cap.passed and cap.figures["head_dim"] == 2 and cap.figures["capacity"] == 5


def test_capacity_reads_the_head_dimension_off_the_weights():
    """Query and key maps cut to 2 rows: d_h = 2 from the weights, capacity H·1 + 1 = 5 < 9."""
    ds = mahdavi24.random_instance(9, 6, 12, 4, seed=5)
    model, _ = mahdavi24.build(ds, {"heads": 4, "head_dim": 3})
    cut = []
    for h in model.sublayers[0].heads:
        q, k = h.query, h.key
        cut.append(
            replace(
                h,
                query=Affine(q.in_dim, q.rows[:2], q.bias[:2], q.denominator),
                key=Affine(k.in_dim, k.rows[:2], k.bias[:2], k.denominator),
            )
        )
    cert = certify(with_heads(model, cut), ds, construction="mahdavi24")
    cap = checks(cert)["mahdavi.capacity"]
    assert not cap.passed and cap.figures["head_dim"] == 2 and cap.figures["capacity"] == 5


@pytest.fixture(scope="module")
def shared():
    ds = mahdavi24.random_instance(21, 6, 16, 5, seed=4, shared_context=True)  # ceiling 21
    return ds, mahdavi24.build(ds, {"heads": 4})[0]


def test_ceiling_is_attained_by_the_models_own_features(shared):
    ds, model = shared
    ceiling = checks(certify(model, ds, construction="mahdavi24"))["mahdavi.rank_ceiling"]
    assert ceiling.passed
    assert ceiling.figures == {"ceiling": 21, "rank": 21, "attained": True, "T": 21}


def test_zeroed_key_map_loses_rank(shared):
    """A head whose key map is zero attends uniformly: its block is one fixed point and the
    measured rank drops below T = the ceiling."""
    ds, model = shared
    heads = model.sublayers[0].heads
    broken = with_heads(model, (zero_key(heads[0]),) + heads[1:])
    cert = certify(broken, ds, construction="mahdavi24")
    c = checks(cert)
    assert cert.verdict == "refuted"
    assert not c["mahdavi.feature_rank"].passed and c["mahdavi.feature_rank"].figures["exact"]
    assert c["mahdavi.feature_rank"].figures["rank"] < 21
    assert c["mahdavi.rank_ceiling"].figures["attained"] is False
    assert "labels" in failed(cert)


def test_equal_heads_lose_certified_rank():
    """Softmax, shared context: two equal heads give equal blocks; no 21 × 21 minor exists."""
    ds = mahdavi24.random_instance(21, 6, 16, 5, seed=11, shared_context=True)
    model, _ = mahdavi24.build(ds, {"heads": 4, "score": "softmax"})
    heads = model.sublayers[0].heads
    honest = certify(model, ds, construction="mahdavi24", tolerance="1/1000")
    assert honest.verdict == "verified"
    twin = with_heads(model, (heads[0], heads[0]) + heads[2:])
    cert = certify(twin, ds, construction="mahdavi24", tolerance="1/1000")
    rank = checks(cert)["mahdavi.feature_rank"]
    assert not rank.passed and rank.figures["rank"] < 21
    assert "no nonsingular 21 × 21 minor" in rank.detail


@pytest.mark.parametrize("index", [0, 1, 2, 3])
def test_broken_construction_flips_the_tightness_claim(index):
    """proofs/mahdavi24_tightness.toml expects 'verified'; with head 0's key map zeroed the
    checklist it demands refutes the same instance."""
    claim = load_claim(PROOFS / "mahdavi24_tightness.toml")
    inst = claim.instances[index]
    ds = GENERATORS[inst.generator](inst.params)
    options = {**claim.options, **inst.options, "seed": inst.params.get("seed", 0)}
    model, _ = _build(claim.construction, ds, options)
    tol = options.get("tolerance")
    honest = certify(model, ds, construction=claim.construction, tolerance=tol)
    assert claim.expect == honest.verdict == "verified"
    heads = model.sublayers[0].heads
    broken = with_heads(model, (zero_key(heads[0]),) + heads[1:])
    cert = certify(broken, ds, construction=claim.construction, tolerance=tol)
    assert cert.verdict == "refuted"
    assert "mahdavi.feature_rank" in failed(cert)


def test_over_the_ceiling_is_refuted_with_the_ceiling_attained():
    ds = mahdavi24.random_instance(22, 6, 16, 5, seed=4, shared_context=True)
    model, w = mahdavi24.build(ds, {"heads": 4, "over_capacity": True})
    assert w.feature_rank == 21
    cert = certify(model, ds, construction="mahdavi24")
    c = checks(cert)
    assert {"mahdavi.rank_ceiling", "mahdavi.capacity", "labels"} <= failed(cert)
    assert c["mahdavi.rank_ceiling"].figures == {
        "ceiling": 21,
        "rank": 21,
        "attained": True,
        "T": 22,
    }


def test_query_attending_to_itself_is_refuted(shared):
    ds, model = shared
    att = model.sublayers[0]
    unmasked = replace(model, sublayers=(Attention(att.heads, att.score, att.label, "none"),))
    cert = certify(unmasked, ds, construction="mahdavi24")
    assert "mahdavi24.structure" in failed(cert)
    assert "mask 'context'" in checks(cert)["mahdavi24.structure"].detail


def test_certified_rank_is_a_lower_bound():
    full = [[mpq(1), mpq(2), mpq(3)], [mpq(4), mpq(5), mpq(6)], [mpq(7), mpq(8), mpq(10)]]
    singular = [full[0], full[1], [a + b for a, b in zip(full[0], full[1], strict=True)]]
    old = ctx.prec
    ctx.prec = 64
    try:
        as_balls = [[to_ball(x) for x in row] for row in full]
        sing_balls = [[to_ball(x) for x in row] for row in singular]
        third = [to_ball(mpq(1, 3))] * 3
    finally:
        ctx.prec = old
    assert _certified_rank(as_balls, 64) == 3
    assert _certified_rank(sing_balls, 64) == 2
    assert _certified_rank([third, third], 64) == 1
    assert _certified_rank([[to_ball(mpq(0))] * 2], 64) == 0


def test_value_maps_carry_the_readout(shared):
    """A head's output map scaled: the labels move although the attention does not."""
    ds, model = shared
    h = model.sublayers[0].heads[1]
    o = h.output
    bent = replace(h, output=Affine(o.in_dim, o.rows, o.bias, o.denominator * 2))
    heads = model.sublayers[0].heads
    cert = certify(with_heads(model, (heads[0], bent) + heads[2:]), ds, construction="mahdavi24")
    assert "labels" in failed(cert)
    assert checks(cert)["mahdavi.feature_rank"].passed


def _own_labels(model, ds):
    """The labels the model predicts (argmax of its outputs at the query, on Arb balls)."""
    from exactmem.core.balls import ball_midpoint
    from exactmem.evaluate.softmax import run_balls

    trace = run_balls(model, ds.vocab, ds.sequences, precision=256, positions="last")
    mids = [[ball_midpoint(x) for x in out[-1]] for out in trace.outputs]
    return replace(ds, labels=tuple(1 + max(range(len(m)), key=m.__getitem__) for m in mids))


@pytest.mark.parametrize("score", ["hardmax", "softmax"])
def test_a_head_nothing_reads_adds_no_feature_rank(score):
    """Issue 26 (hostile review A5): two heads of d_h = 3 for T = 5 (both read by the honest
    read-out), head 1's W_O zeroed and the labels the model's own predictions. Head 1 still
    attends and mixes, but nothing reads it: the features the output reads are head 0's
    value vector, of rank 3 < T = 5, and the verdict is REFUTED with the feature rank failing
    (measured before W_V and W_O it was 5 = T: VERIFIED). The capacity still counts the H = 2
    heads of the model, as Theorem 1 does."""
    ds = mahdavi24.random_instance(5, 4, 8, 3, seed=2)
    options = {"heads": 2, "head_dim": 3, "readout": "classification", "score": score}
    model, _ = mahdavi24.build(ds, options)
    att = model.sublayers[0]
    assert all(any(h.output.rows) for h in att.heads)  # the honest read-out reads both heads
    o = att.heads[1].output
    dead_out = Affine(o.in_dim, ((),) * o.out_dim, (0,) * o.out_dim)
    dead = with_heads(model, [att.heads[0], replace(att.heads[1], output=dead_out)])
    own = _own_labels(dead, ds)
    cert = certify(dead, own, construction="mahdavi24")
    c = checks(cert)
    assert cert.verdict == "refuted" and "mahdavi.feature_rank" in failed(cert)
    assert c["mahdavi.feature_rank"].figures["rank"] == 3 < 5
    assert "1 of the 2 heads, the others read by nothing" in c["mahdavi.feature_rank"].detail
    assert c["mahdavi.capacity"].passed and c["mahdavi.capacity"].figures["heads"] == 2
    honest = certify(model, ds, construction="mahdavi24")
    assert honest.verdict == "verified", [x.detail for x in honest.failed]


def test_a_head_the_honest_read_out_leaves_unread_is_not_needed():
    """The reviewer's literal A5 (``generate`` T = 5, n = 3, d = 6, C = 2, seed 1; two heads of
    d_h = d): the honest build reads head 0 alone (its 5 value coordinates span the features),
    so zeroing head 1's W_O changes nothing — the features the output reads have rank 5 = T
    and the model verifies."""
    from exactmem.datasets.attention_data import random_instance

    ds = random_instance(5, 3, 6, 2, seed=1)
    model, _ = mahdavi24.build(ds, {"heads": 2, "readout": "classification"})
    att = model.sublayers[0]
    assert not any(att.heads[1].output.rows)  # the honest read-out needs head 0 only
    cert = certify(model, ds, construction="mahdavi24")
    assert cert.verdict == "verified", [x.detail for x in cert.failed]
    rank = checks(cert)["mahdavi.feature_rank"]
    assert (
        rank.figures["rank"] == 5 and "1 of the 2 heads, the others read by nothing" in rank.detail
    )
