"""Attention semantics of the reference evaluator (eq. (1), (2), (39); T14)."""

import itertools

import pytest
from gmpy2 import mpq

from exactmem.core.errors import InconclusiveError
from exactmem.core.model import Affine, Attention, AttentionHead, Transformer
from exactmem.evaluate.reference import run


def head(query, key, value, output):
    return AttentionHead(*(Affine.from_dense(m) for m in (query, key, value, output)))


def model(score):
    # stream (a, b): scores = a_k · a_k' ; values copy a into b's lane
    h = head([[1, 0]], [[1, 0]], [[1, 0]], [[0], [1]])
    return Transformer(2, (Attention((h,), score),))


VOCAB = [(mpq(1), mpq(0)), (mpq(3), mpq(0)), (mpq(-2), mpq(0))]


def test_hardmax_averages_ties_over_all_maximisers():
    # queries with a > 0 pick the largest a; a tie between two columns of value 3 averages
    trace = run(model("hardmax"), VOCAB, [[0, 1, 1, 2]])
    outs = [col[1] for col in trace.outputs[0]]
    assert outs[:3] == [mpq(3)] * 3
    # query a = −2 maximises −2·a_k: the smallest a (−2), unique
    assert outs[3] == mpq(-2)


def test_hardmax_tie_between_different_values_is_averaged_not_first_index():
    vocab = [(mpq(0), mpq(0)), (mpq(5), mpq(0)), (mpq(7), mpq(0))]
    trace = run(model("hardmax"), vocab, [[0, 1, 2]])
    # query a = 0: all scores are 0, a three-way tie: (0 + 5 + 7)/3
    assert trace.outputs[0][0][1] == mpq(4)


def test_permutation_equivariance():
    seq = [0, 1, 1, 2]
    base = run(model("hardmax"), VOCAB, [seq]).outputs[0]
    for perm in itertools.permutations(range(4)):
        out = run(model("hardmax"), VOCAB, [[seq[p] for p in perm]]).outputs[0]
        assert out == [base[p] for p in perm]


def test_uniform_is_exact_mean():
    trace = run(model("uniform"), VOCAB, [[0, 1, 2]])
    assert {col[1] for col in trace.outputs[0]} == {mpq(2, 3)}


def test_softmax_equal_scores_exact_unequal_inconclusive():
    zero_query = Transformer(
        2, (Attention((head([[0, 0]], [[1, 0]], [[1, 0]], [[0], [1]]),), "softmax"),)
    )
    assert run(zero_query, VOCAB, [[0, 1]]).outputs[0][0][1] == mpq(2)
    with pytest.raises(InconclusiveError):
        run(model("softmax"), VOCAB, [[0, 1]])


def test_positions_last_keeps_only_last_column():
    trace = run(model("uniform"), VOCAB, [[0, 1, 2], [2, 2, 1]], positions="last")
    assert [len(o) for o in trace.outputs] == [1, 1]
    assert trace.outputs[1][0] == (mpq(3), mpq(-1, 3))
