"""Kim, Kim & Mozafari 2023: the reconstructed contextual mapping (2n hardmax attention layers),
the (context, token) ids, the memorizer, and a checklist that refutes broken models."""

import random
from dataclasses import replace

import numpy as np
import pytest
from gmpy2 import mpq
from support import both, certify_built

from exactmem.commands.main import main
from exactmem.constructions import kim23
from exactmem.constructions.kim23 import A_, ONE, S_, T_, context_rounds, draw_functional
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Affine, Attention
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import random_sequences
from exactmem.files.dataset_files import save_dataset


def seq2seq(N=20, n=4, d=2, vocab=5, C=3, seed=1):
    return random_sequences(N, n, d, vocab, C, seed=seed, task="seq2seq", labels_by="key")


def checks_of(model, ds):
    cert = certify_built(model, ds)
    return cert, {c.name: c for c in cert.checks}


def tokens(vocab, sequences, labels, C=3, task="seq2seq"):
    return Dataset(
        task,
        tuple(labels),
        C,
        vocab=tuple(tuple(mpq(x) for x in v) for v in vocab),
        sequences=tuple(tuple(s) for s in sequences),
    )


# --------------------------------------------------------------------------- the mathematics


def test_rounds_list_values_with_multiplicities_and_separate_aab_from_abb():
    keys = np.array([[1, 1, 2], [1, 2, 2], [2, 1, 1], [3, 3, 3]], object)
    M, c, a, e = context_rounds(keys, L=4)
    assert M[0].tolist() == [2, 1, -2] and c[0].tolist() == [1, 2, 1]
    assert M[1].tolist() == [2, 1, -2] and c[1].tolist() == [2, 1, 2]
    assert M[2].tolist() == M[0].tolist() and c[2].tolist() == c[0].tolist()  # a permutation
    assert M[3].tolist() == [3, -1, -5] and c[3].tolist() == [3, 3, 3]  # all tokens equal
    assert a[3].tolist() == [-9, -9, -9] and e[3].tolist() == [1, 1, 1]


def test_the_functional_is_redrawn_until_injective_and_kept_when_told():
    rng = np.random.default_rng(0)
    keys = rng.integers(1, 6, size=(60, 3)).astype(object)
    keys = np.unique(np.sort(keys.astype(np.int64), axis=1), axis=0).astype(object)
    M, c, _, _ = context_rounds(keys, 6)
    alpha, beta, S, draws = draw_functional(M, c, 8, random.Random(7))
    assert len(set(S.tolist())) == len(keys) and draws > 1
    _, _, S, draws = draw_functional(M, c, 1, random.Random(3), resample=False)
    assert draws == 1 and len(set(S.tolist())) < len(keys)


# --------------------------------------------------------------------------- the model


@pytest.mark.parametrize("aware", [False, True])
def test_seq2seq_is_memorized_and_the_checklist_passes(aware):
    ds = seq2seq()
    model, witness = kim23.build(ds, {"seed": 0, "position_aware": aware})
    n = len(ds.sequences[0])
    assert sum(isinstance(s, Attention) for s in model.sublayers) == 2 * n
    cert, checks = checks_of(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    assert checks["kim23.attention"].figures["score_margin"] is not None
    parts = checks["kim23.architecture"].figures["parameters_by_part"]
    assert parts == model.meta["resources_by_part"] == witness.parts
    assert parts["total"] == parts["d"] + parts["n"] + parts["sqrt_nN"]
    assert checks["kim23.context"].figures["contexts"] == witness.distinct_contexts


def test_next_token_is_memorized():
    ds = random_sequences(30, 5, 2, 6, 3, seed=2, task="next-token")
    model, _ = kim23.build(ds, {"seed": 0})
    cert, _ = checks_of(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]


def test_repeated_tokens_and_multiplicities():
    """{a, a, b} and {a, b, b} need different labels at a: the count rounds tell them apart."""
    vocab = [(1, 0), (0, 1)]
    seqs = [(0, 0, 1), (0, 1, 1), (1, 0, 0), (1, 1, 1)]
    labels = [(1, 1, 2), (3, 2, 2), (2, 1, 1), (3, 3, 3)]
    ds = tokens(vocab, seqs, labels)
    model, _ = kim23.build(ds, {"seed": 0})
    cert, _ = checks_of(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]


def test_fast_and_reference_evaluators_agree():
    ds = seq2seq(N=12)
    model, _ = kim23.build(ds, {"seed": 0})
    both(model, ds.vocab, ds.sequences)


def test_inconsistent_labels_are_refused_naming_both_items():
    vocab = [(1, 0), (0, 1)]
    ds = tokens(vocab, [(0, 1, 1), (1, 0, 1)], [(1, 2, 2), (3, 2, 2)])
    with pytest.raises(InputError, match=r"sequences\[0\]\[0\] and sequences\[1\]\[1\]"):
        kim23.build(ds, {"seed": 0})
    model, _ = kim23.build(ds, {"seed": 0, "position_aware": True})  # positions tell them apart
    assert certify_built(model, ds).verdict == "verified"


def test_other_tasks_are_refused():
    ds = Dataset("points", (1,), 1, points=((mpq(1),),))
    with pytest.raises(InputError, match="kim23 needs task seq2seq or next-token"):
        kim23.build(ds, {})


# --------------------------------------------------------------------------- refutations


def test_a_colliding_functional_is_refuted_by_the_ids_check():
    ds = seq2seq()
    model, witness = kim23.build(ds, {"seed": 0, "functional_bound": 1, "resample": False})
    assert witness.collisions and witness.distinct_values < witness.distinct_contexts
    cert, checks = checks_of(model, ds)
    assert not checks["kim23.token_ids"].passed and not checks["labels"].passed
    assert "share the id" in checks["kim23.token_ids"].detail
    # S is still one value per sequence, but two contexts the data must tell apart share it
    assert "the contexts are not told apart" in checks["kim23.context"].detail
    assert "differs across its positions" not in checks["kim23.context"].detail


def _swap(model, i, sub):
    subs = list(model.sublayers)
    subs[i] = sub
    return replace(model, sublayers=tuple(subs))


def test_a_token_dependent_context_value_is_refuted():
    """The reset FFN of round 0 also adds g to S: S then differs across a sequence."""
    ds = seq2seq()
    model, _ = kim23.build(ds, {"seed": 0})
    reset = model.sublayers[1]
    hidden, out = reset.layers
    rows = list(out.rows)
    rows[S_] = ((0, 1),)
    broken = _swap(model, 1, replace(reset, layers=(hidden, replace(out, rows=tuple(rows)))))
    _, checks = checks_of(broken, ds)
    assert not checks["kim23.context"].passed
    assert "differs across its positions" in checks["kim23.context"].detail


def test_ties_between_unequal_values_are_refuted():
    """Round 1's key map reads a − t: every token not yet lowered scores 0, ties of tokens with
    different values, which hardmax averages."""
    ds = seq2seq()
    model, _ = kim23.build(ds, {"seed": 0})
    att = model.sublayers[3]
    head = att.heads[0]
    key = Affine(6, (((T_, -1), (A_, 1)),), (0,))
    broken = _swap(model, 3, replace(att, heads=(replace(head, key=key),)))
    _, checks = checks_of(broken, ds)
    assert not checks["kim23.attention"].passed
    assert "ties unequal values" in checks["kim23.attention"].detail


def test_two_heads_or_wider_heads_break_the_architecture():
    ds = seq2seq(N=10)
    model, _ = kim23.build(ds, {"seed": 0})
    att = model.sublayers[2]  # a count round: a second copy of its head doubles β_0
    broken = _swap(model, 2, replace(att, heads=att.heads * 2))
    _, checks = checks_of(broken, ds)
    assert "has 2 heads" in checks["kim23.architecture"].detail
    head = att.heads[0]
    wide = replace(
        head,
        query=Affine(6, ((), ()), (0, 0)),
        key=Affine(6, ((), ()), (0, 0)),
        value=Affine(6, (((4, 1),), ((ONE, 1),)), (0, 0)),
        output=Affine(2, ((),) * 6, (0,) * 6),
    )
    _, checks = checks_of(_swap(model, 2, replace(att, heads=(wide,))), ds)
    assert "head of size > 1" in checks["kim23.architecture"].detail


def test_fewer_rounds_are_refuted():
    ds = seq2seq(N=10)
    model, _ = kim23.build(ds, {"seed": 0})
    broken = replace(model, sublayers=model.sublayers[3:])
    _, checks = checks_of(broken, ds)
    assert "6 attention layers, 2n = 8" in checks["kim23.architecture"].detail


def test_a_broken_memorizer_is_refuted():
    """A wrong bias in Stage II: the memorizer's stage checks fail, not only the labels."""
    ds = seq2seq(N=10)
    model, _ = kim23.build(ds, {"seed": 0})
    mem = model.sublayers[-1]
    layers = list(mem.layers)
    first = layers[0]
    layers[0] = replace(first, bias=tuple(b + 3 for b in first.bias))
    _, checks = checks_of(
        _swap(model, len(model.sublayers) - 1, replace(mem, layers=tuple(layers))), ds
    )
    failed = [name for name, c in checks.items() if not c.passed]
    assert any(name.startswith("memorizer.") for name in failed), failed


def test_models_without_the_parts_are_structure_failures():
    ds = seq2seq(N=10)
    model, _ = kim23.build(ds, {"seed": 0})
    no_embed = replace(
        model,
        embed=None,
        sublayers=(MLP((model.embed,), residual=False, label="proj"), *model.sublayers),
    )
    _, checks = checks_of(no_embed, ds)
    assert not checks["kim23.structure"].passed
    renamed = replace(model, embed=replace(model.embed, names=("t", "a", "m", "e", "X", "one")))
    _, checks = checks_of(renamed, ds)
    assert "no lane S" in checks["kim23.structure"].detail
    no_memorizer = replace(
        model, sublayers=model.sublayers[:-1], unembed=Affine(6, (((0, 1),),), (0,))
    )
    _, checks = checks_of(no_memorizer, ds)
    assert not checks["kim23.structure"].passed


# --------------------------------------------------------------------------- the CLI


def test_cli_build_verify_and_exit_codes(tmp_path, capsys):
    ds = seq2seq(N=16)
    path = tmp_path / "ds.json"
    save_dataset(ds, path)
    out = str(tmp_path / "m.json")
    argv = ["build", "--construction", "kim23", "--data", str(path), "--out", out, "--quiet"]
    assert main([a for a in argv if a != "--quiet"]) == 0
    assert "non-zero parameters by part: d " in capsys.readouterr().out
    assert main(["verify", out, "--data", str(path), "--construction", "kim23", "--quiet"]) == 0
    bad = argv + ["--set", "functional_bound=1", "--set", "resample=false"]
    assert main(bad) == 0
    assert main(["verify", out, "--data", str(path), "--construction", "kim23", "--quiet"]) == 1
    assert main(argv + ["--set", "resample=maybe"]) == 2
    clash = tokens([(1, 0), (0, 1)], [(0, 1, 1), (1, 0, 1)], [(1, 2, 2), (3, 2, 2)])
    save_dataset(clash, path)
    capsys.readouterr()
    assert main(argv) == 2
    assert "sequences[0][0] and sequences[1][1]" in capsys.readouterr().err


# --------------------------------------------------------------------------- softmax


@pytest.mark.parametrize("aware", [False, True])
def test_softmax_at_the_default_temperature_is_certified(aware):
    ds = seq2seq()
    model, _ = kim23.build(ds, {"seed": 0, "attention": "softmax", "position_aware": aware})
    assert {s.score for s in model.sublayers if isinstance(s, Attention)} == {"softmax"}
    cert, checks = checks_of(model, ds)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    bound = mpq(checks["kim23.softmax"].figures["max_error_upper_bound"])
    assert 0 < bound < mpq(1, 4)


def test_softmax_too_cold_is_refuted_by_the_requantization_check():
    """λ = 4: the max-read's error reaches the margin step, whose units change sign."""
    ds = seq2seq()
    model, _ = kim23.build(ds, {"seed": 0, "attention": "softmax", "temperature": 4})
    cert, checks = checks_of(model, ds)
    assert [c.name for c in cert.failed] == ["kim23.softmax"]
    assert "changes sign within the softmax error" in checks["kim23.softmax"].detail


def test_softmax_without_a_requantizing_ffn_is_refuted():
    """The reset FFN after a softmax max-read replaced by the hardmax one (no margin step)."""
    ds = seq2seq(N=10)
    model, _ = kim23.build(ds, {"seed": 0, "attention": "softmax"})
    plain = MLP(
        (
            Affine(7, (((1, 1), (2, -1)),), (1,)),
            Affine(1, ((), ((0, -1),), (), (), (), (), ()), (0,) * 7),
        ),
        True,
        label="reset0",
    )
    _, checks = checks_of(_swap(model, 1, plain), ds)
    assert not checks["kim23.softmax"].passed


def test_softmax_models_are_inconclusive_without_the_checklist():
    """The construction-independent path cannot evaluate unequal softmax scores exactly: the
    labels check is undecided (not escaping), the verdict inconclusive since nothing failed."""
    from exactmem.checks.certify import certify

    ds = seq2seq(N=10)
    model, _ = kim23.build(ds, {"seed": 0, "attention": "softmax"})
    cert = certify(model, ds)
    assert cert.verdict == "inconclusive" and not cert.failed
    assert [c.name for c in cert.undecided] == ["labels"]
