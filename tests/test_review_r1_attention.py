"""Review r1's false VERIFIED verdicts on the attention constructions, as tests (the
reproducers of branch r1-review, repro/{mahdavi24,dana25,madden24}_dead_attention.py and
madden24_valueerror_swallowed.py): every head's W_O zeroed and a bypass around the attention
must exit 1 under ``--construction``, and an internal limit of the ball arithmetic must never be
shown as a failed structure."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from fractions import Fraction

import pytest
from flint import arb
from gmpy2 import mpq

import exactmem
from exactmem.commands.main import main
from exactmem.core.balls import ball_bounds
from exactmem.core.errors import InconclusiveError
from exactmem.core.model import Affine, Transformer


def _verify(capsys, model, data, *extra) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["verify", str(model), "--data", str(data), "--quiet", *extra])
    return code, capsys.readouterr().out


def _failed(out: str) -> set[str]:
    return {line.split()[1] for line in out.splitlines() if line.strip().startswith("FAIL")}


def _zero_outputs(att):
    return replace(
        att,
        heads=tuple(
            replace(h, output=Affine(h.output.in_dim, ((),) * h.output.out_dim, h.output.bias, 1))
            for h in att.heads
        ),
    )


def _affine_fit(X: list[list[Fraction]], y: list[Fraction]) -> list[Fraction]:
    """c with [x, 1]·c = y for every row, exactly (Gauss–Jordan); asserts it exists."""
    A = [[*x, Fraction(1), t] for x, t in zip(X, y, strict=True)]
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
    sol = [Fraction(0)] * cols
    for i, c in enumerate(pivots):
        sol[c] = A[i][-1]
    assert all(
        sum(a * s for a, s in zip([*x, 1], sol, strict=True)) == t
        for x, t in zip(X, y, strict=True)
    )
    return sol


def test_f2_mahdavi24_dead_heads_with_the_query_through_the_skip_connection(tmp_path, capsys):
    """Every W_O = 0 and the output lane an exact affine fit of the labels from the query token
    (which reaches the output through the attention's skip connection): the labels are met,
    the attention checks measure maps the output never reads — mahdavi.readout refutes."""
    data, good, bad = tmp_path / "att.json", tmp_path / "m.json", tmp_path / "bad.json"
    gen = ["generate", "attention", "--N", "6", "--n", "3", "--d", "5", "--C", "3"]
    assert main([*gen, "--out", str(data), "--quiet"]) == 0
    build = ["build", "--construction", "mahdavi24", "--data", str(data), "--out", str(good)]
    assert main([*build, "--quiet"]) == 0
    m, ds = exactmem.load_model(str(good)), exactmem.load_dataset(str(data))
    queries = [[Fraction(str(v)) for v in ds.vocab[seq[-1]]] for seq in ds.sequences]
    sol = _affine_fit(queries, [Fraction(y) for y in ds.labels])
    e = m.embed
    lane = next(c for row in m.unembed.rows for c, _ in row)  # the output lane
    den = e.denominator
    for s in sol:
        den = den * s.denominator // math.gcd(den, s.denominator)
    k = den // e.denominator
    rows = [tuple((c, v * k) for c, v in row) for row in e.rows]
    rows[lane] = tuple((c, int(sol[c] * den)) for c in range(e.in_dim) if sol[c])
    bias = [b * k for b in e.bias]
    bias[lane] = int(sol[-1] * den)
    embed = Affine(e.in_dim, tuple(rows), tuple(bias), den, e.names)
    broken = replace(m, embed=embed, sublayers=(_zero_outputs(m.sublayers[0]),))
    exactmem.save_model(broken, str(bad))
    # the labels are met exactly: the bypass memorizes
    outs = exactmem.run(broken, ds, positions="last")
    assert [o[-1][0] for o in outs] == list(ds.labels)
    assert _verify(capsys, good, data, "--construction", "mahdavi24")[0] == 0
    code, out = _verify(capsys, bad, data, "--construction", "mahdavi24")
    assert code == 1 and "mahdavi.readout" in _failed(out), out


ASSOC = {
    "format": "exactmem.dataset/1",
    "task": "next-token",
    "C": 12,
    "sequences": [[6, 6, 0], [8, 7, 6], [7, 5, 9], [8, 2, 4], [1, 9, 3], [11, 9, 2]],
    "labels": [5, 5, 4, 3, 9, 5],
    "vocab": [[str(i)] for i in range(12)],
}


def test_f5_dana25_dead_heads_and_a_skip_term_fitted_to_the_labels(tmp_path, capsys):
    """Every W_O = 0, the last tokens' embeddings and the unembedding re-chosen so that the
    skip term alone fits the labels: the heads' features W_O^h W_V^h A_h are 0, so
    dana.feature_rank and dana.capacity refute."""
    data, good, bad = tmp_path / "assoc.json", tmp_path / "d.json", tmp_path / "bad.json"
    data.write_text(json.dumps(ASSOC))
    build = ["build", "--construction", "dana25", "--data", str(data), "--out", str(good)]
    assert main([*build, "--quiet"]) == 0
    m, ds = exactmem.load_model(str(good)), exactmem.load_dataset(str(data))
    C, V = ds.num_classes, m.input_dim

    def point(c):  # rational points on the unit circle at distinct angles
        t = Fraction(c, 3)
        return ((1 - t * t) / (1 + t * t), 2 * t / (1 + t * t))

    label_of_last = {seq[-1]: y for seq, y in zip(ds.sequences, ds.labels, strict=True)}
    E = [
        [Fraction(dict(m.embed.rows[i]).get(t, 0), m.embed.denominator) for t in range(V)]
        for i in range(2)
    ]
    for t, y in label_of_last.items():
        E[0][t] = 10**6 * point(y)[0] + 7 * t + 1
        E[1][t] = 10**6 * point(y)[1] + 3 * t * t + 2
    den = 1
    for x in (x for r in E for x in r):
        den = den * x.denominator // math.gcd(den, x.denominator)
    rows = tuple(tuple((t, int(x * den)) for t, x in enumerate(r) if x) for r in E)
    embed = Affine(V, rows, (0, 0), den, m.embed.names)
    U = [point(c) for c in range(1, C + 1)]
    uden = 1
    for x in (x for r in U for x in r):
        uden = uden * x.denominator // math.gcd(uden, x.denominator)
    unembed = Affine(
        2, tuple(tuple((j, int(x * uden)) for j, x in enumerate(r) if x) for r in U), (0,) * C, uden
    )
    att = _zero_outputs(m.sublayers[-1])
    broken = replace(m, embed=embed, unembed=unembed, sublayers=(*m.sublayers[:-1], att))
    exactmem.save_model(broken, str(bad))
    assert _verify(capsys, good, data, "--construction", "dana25")[0] == 0
    code, out = _verify(capsys, bad, data, "--construction", "dana25")
    assert "labels" not in _failed(out), out  # the skip term alone fits the labels
    assert code == 1 and {"dana.feature_rank", "dana.capacity"} <= _failed(out), out


TARGETS = [
    [
        "4/75",
        "8/75",
        "3/25",
        "4/25",
        "8/75",
        "7/75",
        "1/25",
        "4/75",
        "1/25",
        "3/25",
        "7/75",
        "1/75",
    ],
    [
        "1/23",
        "3/23",
        "5/69",
        "1/69",
        "5/69",
        "8/69",
        "7/69",
        "7/69",
        "7/69",
        "8/69",
        "1/23",
        "2/23",
    ],
    [
        "6/43",
        "4/43",
        "2/43",
        "5/86",
        "7/86",
        "5/86",
        "7/86",
        "9/86",
        "7/86",
        "3/43",
        "9/86",
        "7/86",
    ],
    [
        "3/29",
        "1/58",
        "5/58",
        "11/58",
        "3/29",
        "9/58",
        "1/29",
        "2/29",
        "5/58",
        "5/58",
        "1/29",
        "1/29",
    ],
    [
        "2/15",
        "1/30",
        "1/10",
        "1/30",
        "7/60",
        "1/20",
        "1/60",
        "1/12",
        "7/60",
        "7/60",
        "11/60",
        "1/60",
    ],
]


def _dead_madden(tmp_path, monkeypatch, sequences):
    """Madden et al.'s decoder built with its head's W_O = 0 (the FNN solved on the skip term
    e(x_S) + p_S), as the reproducers build it."""
    import exactmem.constructions.madden24 as M

    data = tmp_path / "ctx.json"
    data.write_text(
        json.dumps(
            {
                "format": "exactmem.dataset/1",
                "task": "next-token",
                "C": 12,
                "sequences": sequences,
                "labels": [4, 2, 1, 4, 11],
                "targets": TARGETS,
                "vocab": [[str(i)] for i in range(12)],
            }
        )
    )
    ds = exactmem.load_dataset(str(data))
    orig = M._last_output

    def dead(tokens, emb, pos, head):
        WQ, WK, WV, WO = head
        return orig(tokens, emb, pos, (WQ, WK, WV, [[arb(0)] * len(r) for r in WO]))

    monkeypatch.setattr(M, "_last_output", dead)
    # (sequences sharing a last token make the solve ill-conditioned: weights up to 2^256)
    model, _ = M.build(ds, {"int_bits": 4096})
    subs = list(model.sublayers)
    subs[1] = _zero_outputs(subs[1])
    bad = tmp_path / "dead.json"
    exactmem.save_model(replace(model, sublayers=tuple(subs)), str(bad))
    return bad, data


def test_f4_madden24_dead_head_with_distinct_last_tokens(tmp_path, monkeypatch, capsys):
    """W_O = 0 and contexts with distinct last tokens: h(x) = e(x_S) + p_S separates them and
    the FNN fits the targets — a unigram model. The paper's decoder has no skip connection, so
    injectivity is judged on the attention's output, which is 0 for every context: refuted."""
    seqs = [[3, 9, 8], [2, 5, 1], [7, 10, 6], [1, 9, 0], [7, 4, 11]]
    bad, data = _dead_madden(tmp_path, monkeypatch, seqs)
    code, out = _verify(capsys, bad, data, "--construction", "madden24", "--tolerance", "1/1000")
    assert code == 1 and "madden24.injectivity" in _failed(out), out


def test_m2_a_non_finite_enclosure_is_no_structure_failure(tmp_path, monkeypatch, capsys):
    """Contexts sharing last tokens make the dead-head model ill-conditioned: a non-finite
    enclosure used to raise flint's ValueError, shown as 'madden24.structure FAIL'. It is the
    arithmetic's limit (undecided), never a refutation of the structure."""
    seqs = [[3, 9, 8], [2, 5, 9], [7, 10, 9], [1, 9, 0], [7, 4, 8]]
    bad, data = _dead_madden(tmp_path, monkeypatch, seqs)
    code, out = _verify(capsys, bad, data, "--construction", "madden24", "--tolerance", "1/1000")
    assert "madden24.structure" not in _failed(out), out
    assert code == 1, out  # refuted by the checks that decide (labels, injectivity)


def test_ball_bounds_of_a_non_finite_ball_is_inconclusive():
    for x in (arb("inf"), arb("nan"), -arb("inf")):
        with pytest.raises(InconclusiveError):
            ball_bounds(x)


def test_only_deliberate_structure_errors_refute():
    """guarded turns a ChecklistStructureError into NAME.structure FAIL; any other error (a
    ValueError from a library, a KeyError from a bug) is not a refutation."""
    from exactmem.checks.certificate import ChecklistStructureError
    from exactmem.checks.checklist import guarded

    def structure():
        raise ChecklistStructureError("no attention layer")

    (check,) = guarded("demo", structure)
    assert check.name == "demo.structure" and not check.passed

    def missing_lane():  # a lane the model lacks, as the evaluator's trace reports it
        from exactmem.evaluate.reference import run

        run(Transformer(1, ()), [(mpq(1),)], [[0]]).lane("match[0]")

    (check,) = guarded("demo", missing_lane)
    assert check.name == "demo.structure" and "no probe 'match[0]'" in check.detail
    for exc in (ValueError("man_exp requires an exact, finite value"), KeyError("lane")):

        def internal(exc=exc):
            raise exc

        with pytest.raises(type(exc)):
            guarded("demo", internal)
