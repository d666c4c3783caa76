"""The table of the field (`bounds`): every row recomputed independently, orders pinned,
assumptions honoured in every output format."""

import json
from fractions import Fraction

import mpmath
import pytest

from exactmem.commands.main import main
from exactmem.reports.field import EXACT_COUNT, ORDER_ONLY, ROWS, evaluate_rows


def lg(x):
    return mpmath.log(x, 2)


def lemma_c1_depth(extra, M, R, C):
    """extra + √(M log M) + √(M / log M)·max(log R, log C), written out afresh."""
    return extra + mpmath.sqrt(M * lg(M)) + mpmath.sqrt(M / lg(M)) * max(lg(R), lg(C))


PI, E = mpmath.pi, mpmath.e

# an independent implementation of every row, from the papers' statements (r = δ = 1)
INDEPENDENT = {
    "vys22-upper": lambda N, n, d, w, C: lemma_c1_depth(d, N, 10 * N**2 * mpmath.sqrt(PI * d), C),
    "vys22-lower": lambda N, n, d, w, C: mpmath.sqrt(N),
    "kkm23-upper": lambda N, n, d, w, C: d + n + mpmath.sqrt(n * N),
    "mahdavi24-upper": lambda N, n, d, w, C: mpmath.ceil(mpmath.mpf(N - 1) / (n - 1)) * 2 * d * d,
    "ks24-upper": lambda N, n, d, w, C: d * (2 * n * N + d),
    "madden24-upper": lambda N, n, d, w, C: w * N,
    "madden24-lower": lambda N, n, d, w, C: w * N,
    "madden24-count": lambda N, n, d, w, C: N * (w - 1),
    "ks25-thm4.1": lambda N, n, d, w, C: lemma_c1_depth(
        d, N, 400 * PI * mpmath.sqrt(3 * d) * n**3 * N**5, C
    ),
    "ks25-thm4.2": lambda N, n, d, w, C: mpmath.sqrt(N),
    "ks25-cor4.1": lambda N, n, d, w, C: lemma_c1_depth(
        d, n * N, 400 * PI * mpmath.sqrt(3 * d) * n**5 * N**5, C
    ),
    "ks25-thm4.3": lambda N, n, d, w, C: mpmath.sqrt(n * N / (9 * lg(48 * E * n * N))),
    "ks25-thmE.1": lambda N, n, d, w, C: lemma_c1_depth(
        w, N, 200 * mpmath.sqrt(3) * n**2 * w * N**5 * w * PI, C
    ),
    "ks25-rem4.4": lambda N, n, d, w, C: mpmath.mpf(N),
    "ks25-rem4.6": lambda N, n, d, w, C: mpmath.mpf(n * N),
}

# the order each paper states, and the exponent of N in it (logarithms ignored)
ORDERS = {
    "vys22-upper": ("Õ(d + √N)", "1/2"),
    "vys22-lower": ("Ω(√N)", "1/2"),
    "kkm23-upper": ("Õ(d + n + √(nN))", "1/2"),
    "mahdavi24-upper": ("Θ(Hd(d_h + d_v)), H = ⌈(N − 1)/(n − 1)⌉", "1"),
    "ks24-upper": ("O(d(2nN + d))", "1"),
    "madden24-upper": ("O(ωN)", "1"),
    "madden24-lower": ("Ω(ωN)", "1"),
    "madden24-count": ("k ≥ n(ω − 1)", "1"),
    "ks25-thm4.1": ("Õ(d + √N)", "1/2"),
    "ks25-thm4.2": ("Ω(√N)", "1/2"),
    "ks25-cor4.1": ("Õ(d + √(nN))", "1/2"),
    "ks25-thm4.3": ("Ω(√(nN / log(nN)))", "1/2"),
    "ks25-thmE.1": ("ω + Õ(√N)", "1/2"),
    "ks25-rem4.4": ("Ω(N)", "1"),
    "ks25-rem4.6": ("Ω(nN)", "1"),
}

EXPLICIT = {"ks25-thm4.3", "ks25-rem4.4", "ks25-rem4.6"}

# three points where every row's assumptions hold (n < d for Mahdavi et al.)
POINTS = [
    dict(N=1000, n=8, d=16, omega=1000, C=10),
    dict(N=97, n=3, d=5, omega=40, C=2),
    dict(N=123456, n=32, d=64, omega=50000, C=1000),
]


def test_rows_are_the_pinned_seed_table():
    assert {r.key: (r.order, r.growth) for r in ROWS} == ORDERS
    assert {r.key for r in ROWS if r.explicit} == EXPLICIT
    assert all(r.source and r.formula for r in ROWS)
    assert all(r.constant == ORDER_ONLY for r in ROWS if not r.explicit and not r.exact_count)
    assert {r.key for r in ROWS if r.constant == EXACT_COUNT} == {"madden24-count"}


@pytest.mark.parametrize("sizes", POINTS, ids=lambda s: f"N={s['N']}")
def test_every_row_matches_an_independent_mpmath_evaluation(sizes):
    with mpmath.workdps(50):
        for row in evaluate_rows(sizes):
            assert row["status"] == "evaluated", row["key"]
            want = INDEPENDENT[row["key"]](*(sizes[k] for k in ("N", "n", "d", "omega", "C")))
            got = mpmath.mpf(row["value"])
            assert abs(got - want) <= abs(want) * mpmath.mpf(10) ** -10, (row["key"], got, want)


def test_each_formula_grows_as_its_stated_order():
    """The exponent of N fitted between N = 10¹² and 10²⁴ (others fixed) is the pinned one:
    logarithmic factors move it by less than 0.1 there."""
    lo, hi = 10**12, 10**24
    base = dict(n=8, d=16, omega=1000, C=10)
    rows_lo = {r["key"]: r for r in evaluate_rows({**base, "N": lo})}
    rows_hi = {r["key"]: r for r in evaluate_rows({**base, "N": hi})}
    with mpmath.workdps(30):
        for key, (_, growth) in ORDERS.items():
            a, b = mpmath.mpf(rows_lo[key]["value"]), mpmath.mpf(rows_hi[key]["value"])
            slope = mpmath.log(b / a) / mpmath.log(mpmath.mpf(hi) / lo)
            assert abs(slope - float(Fraction(growth))) < 0.1, (key, slope)


def test_the_issue_values_at_n1000_n8_d8():
    """VYS's own R (not Kajitsuka & Sato's): ≈ 364 and independent of n; Corollary 4.1 with
    R′ (n⁵) as its claim file; Mahdavi et al. not applicable at n = d."""
    rows = {r["key"]: r for r in evaluate_rows(dict(N=1000, n=8, d=8, omega=1000, C=10))}
    assert rows["vys22-upper"]["value"].startswith("364.05995")
    assert rows["ks25-cor4.1"]["value"].startswith("2253.071")
    assert rows["ks25-thm4.1"]["value"].startswith("823.2212")
    assert rows["mahdavi24-upper"]["value"] is None
    assert rows["mahdavi24-upper"]["status"] == "n/a: needs n < d"
    for n in (2, 64):
        other = {r["key"]: r for r in evaluate_rows(dict(N=1000, n=n, d=8, omega=1000, C=10))}
        assert other["vys22-upper"]["value"] == rows["vys22-upper"]["value"]


def test_not_applicable_in_text_json_and_latex(capsys):
    args = ["bounds", "--N", "1000", "--n", "8", "--d", "8"]
    assert main(args) == 0
    text = capsys.readouterr().out
    line = next(t for t in text.splitlines() if "Mahdavi" in t)
    assert line.endswith("n/a: needs n < d")
    assert "order only, constant 1" in line
    assert main([*args, "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out)["bounds"] if "Mahdavi" in r["work"])
    assert (row["value"], row["status"]) == (None, "n/a: needs n < d")
    assert row["source"].startswith("ICLR 2024, Theorem 1") and row["formula"]
    assert main([*args, "--latex"]) == 0
    latex = capsys.readouterr().out
    line = next(t for t in latex.splitlines() if "& Mahdavi" in t)
    assert line.endswith("n/a: needs n \\ensuremath{<} d \\\\")
    assert main(["bounds", "--N", "1000", "--n", "8", "--d", "9", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out)["bounds"] if "Mahdavi" in r["work"])
    assert row["status"] == "evaluated" and row["value"].startswith("23166.")  # ⌈999/7⌉·2·9²


def test_log_rows_need_two_points(capsys):
    rows = {r["key"]: r for r in evaluate_rows(dict(N=1, n=2, d=3, omega=5, C=2))}
    assert rows["vys22-upper"]["status"] == "n/a: needs N ≥ 2 (log N)"
    assert rows["ks25-thm4.3"]["status"] == "evaluated"


def test_measured_rows_stand_against_the_papers_and_the_fitted_constants():
    """`bounds --measure`'s extra columns: dense parameters over the paper row at the measured
    sizes, and the constants of the claim's [tight] table (they move with the claim file)."""
    from exactmem.claims.proofs import load_claim, shipped_proofs_dir
    from exactmem.constructions import ks25
    from exactmem.core.model import resources
    from exactmem.datasets.sequences import random_sequences
    from exactmem.reports.field import against_paper, fitted_constants

    ds = random_sequences(60, 4, 3, 20, 4, seed=2)
    model, _ = ks25.build(ds, {"seed": 0})
    dense = resources(model).dense_parameters
    figures = against_paper("ks25-next-token", ds, dense)
    assert figures["paper_row"] == "ks25-thm4.1"
    assert float(figures["measured_over_paper"]) > 0
    twice = against_paper("ks25-next-token", ds, 2 * dense)
    assert float(twice["measured_over_paper"]) > float(figures["measured_over_paper"])
    tight = load_claim(shipped_proofs_dir() / "ks25_theorem_4_1.toml").tight
    constants = fitted_constants("ks25-next-token")
    assert tight["depth"].startswith(constants["depth"]["constant"] + "*(")
    assert figures["fitted_constants"]["depth"] == constants["depth"]["constant"]
    assert fitted_constants("no-such-construction") == {}


def test_madden24_rows_cite_the_right_capacity_bound():
    """Parameters that suffice (O(ωN)) come from the construction, the lower capacity bound;
    parameters that are needed (Ω(ωN)) from the upper capacity bound, whose exact dimension
    count n(ω − 1) — what ``madden24.dimension_count`` judges — has its own row."""
    rows = {r.key: r for r in ROWS}
    assert rows["madden24-upper"].kind == "upper"
    assert "lower capacity bound" in rows["madden24-upper"].source
    assert rows["madden24-lower"].kind == "lower"
    assert "upper capacity bound" in rows["madden24-lower"].source
    count = {r["key"]: r for r in evaluate_rows(dict(N=30, n=3, d=8, omega=5, C=5))}
    assert count["madden24-count"]["kind"] == "lower"
    assert count["madden24-count"]["exact"] == "120"  # n(ω − 1) = 30·4
