"""kim23's checklist against crafted files (issue 26, file B and point 5): the softmax checks
take score gaps over the visible keys only, the labels of a softmax model are judged on the
model (its hardmax limit only where kim23.softmax certifies the two equal), and the lanes the
checklist reads by name are validated against the evaluated values."""

import itertools
import random
from dataclasses import replace

from gmpy2 import mpq
from support import certify_built

from exactmem.checks.certify import certify
from exactmem.checks.measures.kim23 import hardmax_limit
from exactmem.commands.main import main
from exactmem.constructions import kim23
from exactmem.core.model import Affine, AttentionHead
from exactmem.datasets.dataset import Dataset
from exactmem.files.dataset_files import save_dataset
from exactmem.files.model_files import save_model

V = 6  # the lane v of the softmax rounds (kim23_softmax.SOFT_LANES), reset by the first FFN


def _data(keep=lambda seq: True) -> Dataset:
    """Sequences (x, y, z*) of distinct tokens (k, 0), z* = (5, 1) always last; labels a
    function of (token, multiset)."""
    vocab = [(1, 0), (2, 0), (3, 0), (4, 0), (5, 1)]
    rng = random.Random(5)
    label: dict = {}
    seqs, labels = [], []
    for x, y in itertools.permutations(range(4), 2):
        seq = (x, y, 4)
        if not keep(seq):
            continue
        ms = tuple(sorted(seq))
        seqs.append(seq)
        labels.append(tuple(label.setdefault((ms, t), rng.randint(1, 3)) for t in seq))
    return Dataset(
        "seq2seq",
        tuple(labels),
        3,
        vocab=tuple(tuple(mpq(v) for v in z) for z in vocab),
        sequences=tuple(seqs),
    )


def _key(model, z) -> mpq:
    row = model.embed.rows[1]  # the lane a: the token's key
    return (sum((c * z[j] for j, c in row), mpq(0)) + model.embed.bias[1]) / model.embed.denominator


def _file_b():
    """The first max-read attends to all keys but the last (mask "context"), whose token z*
    gets a key 199 above every score through the lane v (erased by the next FFN); the visible
    keys are 1/1000 apart. The hardmax limit is right (z*'s key is never the maximum), the
    softmax model is not."""
    ds = _data()
    model, _ = kim23.build(ds, {"seed": 0, "attention": "softmax"})
    star = _key(model, ds.vocab[4])
    ds = _data(lambda seq: max(_key(model, _data().vocab[t]) for t in seq[:2]) > star)
    model, _ = kim23.build(ds, {"seed": 0, "attention": "softmax"})
    assert _key(model, ds.vocab[4]) == star
    embed = model.embed
    rows = list(embed.rows)
    rows[V] = (
        (1, 199_000 * embed.denominator),
    )  # v = 199000 at z* = (5, 1) only (the lane reads its second coordinate)
    embed = replace(embed, rows=tuple(rows))
    subs = list(model.sublayers)
    head = subs[0].heads[0]
    width = head.key.in_dim
    head = AttentionHead(
        Affine(width, (((5, 1),),), (0,), 1000),  # the query: the lane one, over 1000
        Affine(width, (((1, 1), (V, 1)),), (0,)),  # the key: a + v
        head.value,
        head.output,
    )
    subs[0] = replace(subs[0], heads=(head,), mask="context")
    return ds, replace(model, embed=embed, sublayers=tuple(subs))


def test_file_b_a_masked_key_does_not_certify_the_softmax(tmp_path):
    ds, model = _file_b()
    assert certify(hardmax_limit(model), ds).verdict == "verified"  # the limit is right
    save_model(model, tmp_path / "b.json")
    save_dataset(ds, tmp_path / "d.json")
    argv = ["verify", str(tmp_path / "b.json"), "--data", str(tmp_path / "d.json"), "--quiet"]
    assert main(argv) == 1
    assert main([*argv, "--construction", "kim23"]) == 1
    cert = certify_built(model, ds)
    failed = {c.name for c in cert.failed}
    assert "kim23.softmax" in failed
    assert not any(c.name == "labels" and c.passed for c in cert.checks)


# --------------------------------------------------------------------------- lanes by name


def _renamed(model, names: dict):
    """The model with lanes of its embedding (whose names the residual stream carries)
    renamed: ``names`` maps old → new."""
    new = tuple(names.get(x, x) for x in model.embed.names)
    return replace(model, embed=replace(model.embed, names=new))


def _honest():
    from test_kim23 import seq2seq

    ds = seq2seq(N=30, n=3, vocab=5, C=3, seed=2)
    model, _ = kim23.build(ds, {"seed": 0})
    return ds, model


def test_the_constant_lane_renamed_s_is_refuted_by_the_context_check():
    """Issue 26 point 5: the constant lane named S gave `ok kim23.context … 1 distinct value`."""
    ds, model = _honest()
    assert certify_built(model, ds).verdict == "verified"
    cert = certify_built(_renamed(model, {"one": "S", "S": "x"}), ds)
    assert cert.verdict == "refuted"
    context = next(c for c in cert.checks if c.name == "kim23.context")
    assert not context.passed and "the contexts are not told apart" in context.detail


def test_swapping_two_lane_names_never_verifies_falsely():
    """Two names of an honest model swapped: judged as the honest one, or refuted."""
    ds, model = _honest()
    for a, b in itertools.combinations(model.embed.names, 2):
        swapped = _renamed(model, {a: b, b: a})
        cert = certify_built(swapped, ds)
        if cert.verdict == "verified":
            honest = certify_built(model, ds)
            assert [(c.name, c.passed) for c in cert.checks] == [
                (c.name, c.passed) for c in honest.checks
            ], (a, b)


def test_no_label_line_from_the_limit_when_the_structure_is_refuted():
    """Issue 26 point 7: a softmax model's labels were judged on its hardmax limit and printed
    as reproduced although the checklist (here its structure) was refuted."""
    from test_kim23 import seq2seq

    ds = seq2seq(N=10)
    model, _ = kim23.build(ds, {"seed": 0, "attention": "softmax"})
    honest = certify_built(model, ds)
    assert honest.verdict == "verified" and "kim23.softmax" in honest.checks[0].detail
    broken = _renamed(model, {"S": "T"})  # the checklist finds no lane S: structure refuted
    cert = certify_built(broken, ds)
    assert cert.verdict == "refuted"
    assert "kim23.structure" in {c.name for c in cert.failed}
    assert not any(c.name == "labels" and c.passed for c in cert.checks)


def test_a_lane_named_s_that_the_memorizer_does_not_read_fails():
    """The name S moved to a lane that is constant per sequence and apart where needed would
    still not be the context value the ids are made of: the memorizer must read it."""
    ds, model = _honest()
    cert = certify_built(_renamed(model, {"S": "m", "m": "S"}), ds)  # S: the lane m (all 0)
    context = next(c for c in cert.checks if c.name == "kim23.context")
    assert not context.passed
    assert "does not read the lane named S" in context.detail
