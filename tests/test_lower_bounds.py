"""Lower bounds as checks (Kajitsuka & Sato 2025, Theorems 4.2, 4.3, Remarks 4.4/4.6)."""

import json

import mpmath
import pytest
from gmpy2 import mpq
from support import certify_built

from exactmem.checks.lower_bounds import (
    Architecture,
    architecture_of,
    constant_sequence_check,
    max_shatterable,
    sign_pattern_log2,
    theorem_4_3_bound,
    theorem_4_3_holds,
)
from exactmem.commands.main import main
from exactmem.constructions import ks25
from exactmem.core.bounds import evaluate_ball
from exactmem.core.model import PositionalEncoding, Transformer
from exactmem.datasets.sequences import random_sequences


def test_theorem_4_3_value_is_exact():
    with mpmath.workdps(60):
        n, N = 8, 1000
        want = mpmath.sqrt(mpmath.mpf(n * N) / (9 * mpmath.log(48 * mpmath.e * n * N, 2)))
        ball = evaluate_ball(theorem_4_3_bound(n, N), 200)
        assert abs(mpmath.mpf(ball.mid().str(40, radius=False)) - want) < mpmath.mpf(10) ** -35


def test_undersized_architecture_is_rejected():
    """Fewer parameters than Theorem 4.3 demands, asked to shatter nN = 8000 labels."""
    assert theorem_4_3_holds(7, 8, 1000).holds is True  # bound ≈ 6.67
    assert theorem_4_3_holds(6, 8, 1000).holds is False
    tiny = Architecture(d=1, m=1, s=1, H=1, q=1, L=1)  # W = 9 parameters
    assert theorem_4_3_holds(tiny.parameters, 8, 10**6).holds is False  # bound ≈ 176
    assert max_shatterable(tiny, 8) < 1000  # the eq. (72) count rejects it too
    big = Architecture(d=8, m=14, s=1, H=1, q=14, L=200)
    assert max_shatterable(big, 8) >= 1000


def test_sign_pattern_count_grows_with_parameters_and_sizes():
    small = Architecture(d=2, m=4, s=1, H=1, q=4, L=3)
    large = Architecture(d=2, m=8, s=1, H=1, q=8, L=6)
    assert sign_pattern_log2(small, 4, 100) < sign_pattern_log2(large, 4, 100)
    assert sign_pattern_log2(small, 4, 100) < sign_pattern_log2(small, 4, 10_000)


@pytest.fixture(scope="module")
def model_and_data():
    ds = random_sequences(80, 4, 3, 25, 4, seed=1)
    model, _ = ks25.build(ds, {})
    return model, ds


def test_constant_sequences_pass_on_the_construction(model_and_data):
    model, ds = model_and_data
    check = constant_sequence_check(model, ds.vocab, list(range(25)), 4)
    assert check.passed, check.detail


def test_constant_sequences_fail_with_a_positional_encoding(model_and_data):
    """Positional encodings break permutation equivariance: columns differ."""
    model, ds = model_and_data
    pe = PositionalEncoding(tuple((mpq(0), mpq(0), mpq(k, 2)) for k in range(4)), "pe")
    broken = Transformer(
        model.input_dim, (model.sublayers[0], pe) + model.sublayers[1:], meta=model.meta
    )
    check = constant_sequence_check(broken, ds.vocab, list(range(25)), 4)
    assert not check.passed
    assert "columns differ" in check.detail


def test_certificate_holds_constructions_against_the_bounds(model_and_data):
    model, ds = model_and_data
    names = {c.name: c for c in certify_built(model, ds).checks}
    assert names["lower_bound.bit_count"].passed
    assert names["lower_bound.theorem_4_2"].passed
    distinct = random_sequences(30, 3, 2, 1, 2, seed=2, task="seq2seq", family="distinct")
    m2, _ = ks25.build(distinct, {"attention": "hardmax"}, "ks25-seq2seq")
    names = {c.name: c for c in certify_built(m2, distinct).checks}
    assert names["lower_bound.theorem_4_3"].passed
    assert names["lower_bound.sign_patterns"].passed
    assert architecture_of(m2).parameters > 0


def test_bounds_command_json_and_latex(capsys):
    assert main(["bounds", "--N", "1000", "--n", "8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    row = next(r for r in report["bounds"] if r["work"].endswith("Theorem 4.3"))
    assert row["explicit"] and row["value"].startswith("6.6677599645")
    orders = [r for r in report["bounds"] if not r["explicit"] and not r["exact_count"]]
    assert orders and all(r["constant"] == "order only, constant 1" for r in orders)
    assert main(["bounds", "--N", "1000", "--n", "8", "--latex"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("% exactmem bounds --latex") and "\\begin{tabular}" in out
    assert "Theorem 4.3" in out


def test_bounds_measure_small(capsys):
    assert (
        main(
            [
                "bounds",
                "--N",
                "40",
                "--n",
                "3",
                "--d",
                "3",
                "--vocab",
                "20",
                "--C",
                "3",
                "--measure",
                "--json",
                "--quiet",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    kinds = {m["construction"]: m for m in report["measured"]}
    assert set(kinds) == {
        "vys",
        "ks25-next-token",
        "ks25-seq2seq",
        "kim23",
        "ks25-token-ids",
        "mahdavi24",
        "dana25",
        "ks24",
        "madden24",
    }
    assert all(m["verdict"] == "verified" for m in kinds.values())
    assert all(m["eq72_max_N"] >= 40 for m in kinds.values())


def test_bounds_rejects_bad_sizes(capsys):
    assert main(["bounds", "--N", "0", "--n", "8"]) == 2
    assert main(["bounds", "--N", "10", "--n", "1"]) == 2
