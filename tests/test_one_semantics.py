"""One semantics (issue 26, point 1; docs/trust.md, "The evaluators"): every path that produces
values agrees on random small models over every IR feature, or refuses the model by name.

A seeded generator draws models mixing, in one model, ReLU, GELU and tanh-GELU MLPs (residual
and plain), attention with uniform, hardmax and softmax scores under the masks none, context and
causal, scaled by 1/√scale or not (zero key maps too, the fast evaluator's equal-score
shortcut), whole-stream and branch layer
norms, positional tables, embedding and unembedding maps, on token ids or token vectors. On each,

* the reference and the fast evaluator give the same exact outputs, or both stop with
  :class:`InconclusiveError` (GELU, softmax of unequal scores, an irrational layer norm);
  ``positions="last"`` gives the last column of ``positions="all"``;
* the Arb balls (:func:`exactmem.evaluate.softmax.run_balls`), all positions and the last,
  contain the exact outputs, and overlap the independent oracle's intervals (``tests/oracle.py``:
  Fractions and mpmath intervals, nothing from ``exactmem.evaluate``) wherever it decides;
* the float64 evaluation printed beside a certificate (:mod:`exactmem.evaluate.floats`) is within
  rounding of the balls (hardmax models aside: a float tie may break either way);
* ``certify`` (no ``--construction``) verifies labels the oracle certifies and refutes a wrong
  one, whichever path it takes (exact trace, margins on balls, the seq-to-seq ball check and
  its rank-one shortcut), or answers inconclusive — never a different verdict.

The checklists' own shapes are drawn too: one softmax layer and a plain FFN whose first layer has
rank one (ReLU or GELU), and causal softmax followed by a GELU FFN.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction

import oracle
import pytest
from gmpy2 import mpq
from mpmath import iv

from exactmem.checks.certify import certify
from exactmem.commands import main as cli
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    LayerNorm,
    PositionalEncoding,
    Transformer,
)
from exactmem.datasets.dataset import Dataset, dataset_to_json
from exactmem.evaluate import fast, reference
from exactmem.evaluate.floats import float_logits
from exactmem.evaluate.softmax import ball_bounds, run_balls
from exactmem.files.model_files import save_model

SEEDS = range(120)
PRECISION = 192


# --------------------------------------------------------------------------- random models


def _ints(rng: random.Random, rows: int, cols: int, low: int = -2, high: int = 2) -> list:
    return [[rng.randint(low, high) for _ in range(cols)] for _ in range(rows)]


def _affine(rng, out: int, inp: int, *, bias: bool = True, den: int | None = None) -> Affine:
    # now and then the same map over a denominator beyond int64 (weights scaled alike): the
    # fast evaluator must leave its int64 kernels, the values stay small
    scale = 2**63 + 1 if rng.random() < 0.1 else 1
    return Affine.from_dense(
        [[w * scale for w in row] for row in _ints(rng, out, inp)],
        [rng.randint(-2, 2) * scale for _ in range(out)] if bias else None,
        (den or rng.choice([1, 1, 2, 3])) * scale,
        in_dim=inp,
    )


def _rational(rng) -> mpq:
    return mpq(rng.randint(-3, 3), rng.choice([1, 2, 3]))


def _mlp(rng, d: int, activation: str | None = None) -> MLP:
    widths = [d] + [rng.randint(1, 3) for _ in range(rng.choice([1, 1, 2]))] + [d]
    layers = tuple(_affine(rng, b, a) for a, b in zip(widths, widths[1:], strict=False))
    act = activation or rng.choice(["relu", "relu", "gelu", "gelu_tanh"])
    return MLP(layers, residual=rng.random() < 0.5, activation=act)


def _attention(rng, d: int, score: str | None = None, mask: str | None = None) -> Attention:
    heads = []
    for _ in range(rng.choice([1, 1, 2])):
        dh, dv = rng.randint(1, 2), rng.randint(1, 2)
        key = (
            Affine.from_dense([[0] * d] * dh)
            if rng.random() < 0.2  # every score 0: the equal-score shortcut
            else _affine(rng, dh, d, bias=False, den=1)
        )
        heads.append(
            AttentionHead(
                _affine(rng, dh, d, bias=False, den=1),
                key,
                _affine(rng, dv, d, bias=False),
                _affine(rng, d, dv, bias=False),
            )
        )
    return Attention(
        tuple(heads),
        score or rng.choice(["uniform", "hardmax", "softmax"]),
        "att",
        mask or rng.choice(["none", "context", "causal"]),
        scale=rng.choice([1, 1, 2, 3]),  # scores / √scale (1/√d_h of a head size)
    )


def _layer_norm(rng, d: int) -> LayerNorm:
    eps = rng.choice([mpq(1, 4), mpq(1), mpq(1, 3)])  # width 1: √eps, rational for the first two
    if d >= 2 and rng.random() < 0.5:  # a branch: lane `source` normalised into lane `target`
        source, target = rng.sample(range(d), 2)
        return LayerNorm((_rational(rng),), (_rational(rng),), eps, "ln", source, target)
    width = d
    gain = tuple(_rational(rng) or mpq(1) for _ in range(width))
    return LayerNorm(gain, tuple(_rational(rng) for _ in range(width)), eps, "ln")


def random_model(rng: random.Random, n: int) -> tuple[Transformer, list, list]:
    """A model over every IR feature, its vocabulary and 2 to 5 sequences of length ``n``."""
    token_ids = rng.random() < 0.35
    d = rng.randint(1, 3)
    if token_ids:
        size = rng.randint(2, 4)
        vocab: list = [(mpq(0),)] * size  # unread: the embedding table is the input
        embed = _affine(rng, d, size)
        input_dim = size
    else:
        dim = rng.randint(1, 3)
        vocab = [tuple(_rational(rng) for _ in range(dim)) for _ in range(rng.randint(2, 4))]
        embed = _affine(rng, d, dim) if rng.random() < 0.5 or dim != d else None
        input_dim = dim
    subs: list = []
    for _ in range(rng.randint(2, 4)):
        kind = rng.choice(["mlp", "attention", "attention", "layer norm", "positions"])
        if kind == "mlp":
            subs.append(_mlp(rng, d))
        elif kind == "attention":
            subs.append(_attention(rng, d))
        elif kind == "layer norm":
            subs.append(_layer_norm(rng, d))
        else:
            table = tuple(tuple(_rational(rng) for _ in range(d)) for _ in range(n + 1))
            subs.append(PositionalEncoding(table, "pos"))
    unembed = _affine(rng, rng.randint(1, 3), d) if rng.random() < 0.6 else None
    model = Transformer(input_dim, tuple(subs), embed, unembed, token_inputs=token_ids)
    sequences = [[rng.randrange(len(vocab)) for _ in range(n)] for _ in range(rng.randint(2, 5))]
    return model, vocab, sequences  # (equal sequences and equal columns too: rows are shared)


# --------------------------------------------------------------------------- the paths


def _fraction(q) -> Fraction:
    return Fraction(int(q.numerator), int(q.denominator))


def _exact(module, model, vocab, sequences, positions="all"):
    """Outputs as lists of Fractions, or the exception class the evaluator stopped with."""
    try:
        trace = module.run(model, vocab, sequences, positions=positions)
    except (InconclusiveError, InputError) as exc:
        return type(exc)
    return [
        [[_fraction(v) for v in col] for col in trace.outputs[i]] for i in range(len(sequences))
    ]


def _oracle(model, vocab, sequences):
    """The oracle's output columns per sequence (Fractions or intervals), or None where a
    hardmax choice is undecided on its intervals."""
    old = iv.prec
    iv.prec = 256
    try:
        return [oracle.run_sequence(model, vocab, seq) for seq in sequences]
    except oracle.Undecided:
        return None
    finally:
        iv.prec = old


def _encloses(ball, value) -> bool:
    lo, hi = ball_bounds(ball)
    vlo, vhi = oracle.bounds(value)
    return _fraction(lo) <= vhi and vlo <= _fraction(hi)


def _has_hardmax(model) -> bool:
    return any(isinstance(s, Attention) and s.score == "hardmax" for s in model.sublayers)


def agree(model, vocab, sequences) -> str:
    """Assert that every path agrees on ``model``; returns which paths decided (for a tally)."""
    ref = _exact(reference, model, vocab, sequences)
    assert _exact(fast, model, vocab, sequences) == ref
    last = _exact(reference, model, vocab, sequences, "last")
    assert _exact(fast, model, vocab, sequences, "last") == last
    if isinstance(ref, list):  # (a model without attention keeps every position: read the last)
        assert [out[-1] for out in last] == [out[-1] for out in ref]
    else:
        assert last is ref
    told = _oracle(model, vocab, sequences)
    if isinstance(ref, list) and told is not None:  # the oracle is exact where the reference is
        assert told == ref
    balls = run_balls(model, vocab, sequences, precision=PRECISION).outputs
    tail = run_balls(model, vocab, sequences, precision=PRECISION, positions="last").outputs
    for i in range(len(sequences)):
        assert len(tail[i][-1]) == len(balls[i][-1])
        for k, col in enumerate(balls[i]):
            if isinstance(ref, list):
                assert all(map(_encloses, col, ref[i][k])), (i, k)
            if told is not None:
                assert all(map(_encloses, col, told[i][k])), (i, k)
        for ball, value in zip(tail[i][-1], balls[i][-1], strict=True):
            assert ball.overlaps(value)
    if not _has_hardmax(model):  # (a float tie may break either way)
        floats = float_logits(model, vocab, sequences)
        for i in range(len(sequences)):
            for x, ball in zip(floats[i], balls[i][-1], strict=True):
                mid = float(ball.mid())
                assert abs(x - mid) <= 1e-6 * (1 + abs(mid)), (i, x, mid)
    return "exact" if isinstance(ref, list) else "balls"


@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_path_agrees_on_random_models_over_every_feature(n):
    tally: dict[str, int] = {}
    for seed in SEEDS:
        rng = random.Random(1000 * n + seed)
        model, vocab, sequences = random_model(rng, n)
        try:
            how = agree(model, vocab, sequences)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, n = {n}: {model}") from exc
        tally[how] = tally.get(how, 0) + 1
    # both regimes are exercised: exact models, and models only the balls evaluate
    assert tally.get("exact", 0) >= 10 and tally.get("balls", 0) >= 10, tally


# --------------------------------------------------------------------------- certify's paths


def _oracle_label(col, C: int) -> int | None:
    """The argmax label (1..C) the oracle certifies for an output column, else None."""
    for y in range(C):
        leads = [oracle.bounds(oracle.add(col[y], oracle.mul(Fraction(-1), o))) for o in col]
        if all(lo > 0 for c, (lo, _) in enumerate(leads) if c != y):
            return y + 1
    return None


def _verdict(model, ds) -> str:
    try:
        return certify(model, ds).verdict
    except InconclusiveError:
        return "inconclusive"
    except InputError:  # labels no model of this kind can produce (exit 2)
        return "refused"


def _certify_agrees(model, vocab, sequences, task: str) -> str | None:
    """certify (no --construction) verifies the oracle's argmax labels and refutes a wrong one;
    None when the oracle cannot decide a label (nothing to compare)."""
    C = model.unembed.out_dim if model.unembed else model.sublayers[-1].out_dim
    told = _oracle(model, vocab, sequences)
    if told is None:
        return None
    cols = [out if task == "seq2seq" else out[-1:] for out in told]
    labels = [[_oracle_label(c, C) for c in out] for out in cols]
    if any(y is None for out in labels for y in out):
        return None
    wrong = [out.copy() for out in labels]
    wrong[0][-1] = labels[0][-1] % C + 1  # another class: certainly not the argmax
    verdicts = []
    for ys in (labels, wrong):
        ds = Dataset(
            task,
            tuple(tuple(y) if task == "seq2seq" else y[0] for y in ys),
            C,
            vocab=tuple(tuple(mpq(x) for x in v) for v in vocab),
            sequences=tuple(tuple(s) for s in sequences),
        )
        verdicts.append(_verdict(model, ds))
    assert verdicts[0] in ("verified", "inconclusive"), verdicts
    assert verdicts[1] in ("refuted", "refused"), verdicts  # (a wrong label may conflict)
    return verdicts[0]


def _rank_one_ffn(rng, d: int, C: int, activation: str, residual: bool = False) -> MLP:
    """An FFN whose first layer's rows are multiples of one vector (ks24's shape)."""
    w = [rng.choice([-2, -1, 1, 2]) for _ in range(d)]
    hidden = rng.randint(2, 4)
    first = Affine.from_dense(
        [[f * x for x in w] for f in (rng.choice([-2, -1, 1, 2, 3]) for _ in range(hidden))],
        [rng.randint(-3, 3) for _ in range(hidden)],
        rng.choice([1, 2]),
    )
    return MLP((first, _affine(rng, C, hidden)), residual=residual, activation=activation)


def checklist_shaped(rng: random.Random, n: int) -> tuple[Transformer, list, list]:
    """The shapes the checklists build: one softmax layer and a rank-one FFN (ks24, ReLU or
    GELU, plain or residual), or causal softmax and a GELU FFN (madden24), on token vectors,
    C outputs."""
    d, C = rng.randint(1, 3), rng.randint(2, 3)
    vocab = [tuple(_rational(rng) for _ in range(d)) for _ in range(4)]
    if rng.random() < 0.5:
        att = _attention(rng, d, "softmax", rng.choice(["none", "none", "causal", "context"]))
        residual = d >= 2 and rng.random() < 0.4  # F(Z) = Z + W₂σ(W₁Z + b₁) + b₂: C = d
        C = d if residual else C
        ffn = _rank_one_ffn(rng, d, C, rng.choice(["relu", "gelu"]), residual)
    else:
        att = _attention(rng, d, "softmax", "causal")
        ffn = _mlp(rng, d, "gelu")
        ffn = MLP(
            ffn.layers[:-1] + (_affine(rng, C, ffn.layers[-1].in_dim),),
            False,
            (),
            "",
            activation="gelu",
        )
    model = Transformer(d, (att, ffn))
    sequences = [[rng.randrange(len(vocab)) for _ in range(n)] for _ in range(3)]
    return model, vocab, sequences


@pytest.mark.parametrize("task", ["next-token", "seq2seq"])
def test_certify_agrees_with_the_oracle_on_every_path(task):
    """Random models with C outputs (every feature) and the checklists' own shapes: certify's
    verdict is the oracle's, whichever evaluator and shortcut it takes."""
    tally: dict[str | None, int] = {}
    for seed in range(40):
        rng = random.Random(7000 + seed)
        n = rng.randint(1, 3)
        if seed % 2:
            model, vocab, sequences = checklist_shaped(rng, n)
        else:
            model, vocab, sequences = random_model(rng, n)
            if model.unembed is None or model.unembed.out_dim < 2 or model.token_inputs:
                continue
        sequences = [list(s) for s in dict.fromkeys(tuple(s) for s in sequences)]
        try:
            how = _certify_agrees(model, vocab, sequences, task)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {model}") from exc
        tally[how] = tally.get(how, 0) + 1
    assert tally.get("verified", 0) >= 5, tally


def _softmax_then_ffn(activation: str) -> Transformer:
    """One softmax layer (unequal scores) and a plain FFN of rank-one first layer: ReLU(x + 1) −
    ReLU(x) is exactly 1 for every x ≥ 0 (the tokens are positive); GELU(x + 1) − GELU(x) is not."""
    one = Affine.from_dense([[1]])
    att = Attention((AttentionHead(one, one, one, one),), "softmax", "att")
    ffn = MLP(
        (Affine.from_dense([[1], [1]], [1, 0]), Affine.from_dense([[1, -1]])),
        residual=False,
        activation=activation,
    )
    return Transformer(1, (att, ffn))


def _write(tmp_path, model, ds) -> list[str]:
    save_model(model, tmp_path / "model.json")
    (tmp_path / "data.json").write_text(json.dumps(dataset_to_json(ds)))
    return ["verify", str(tmp_path / "model.json"), "--data", str(tmp_path / "data.json")]


@pytest.mark.parametrize("task", ["seq2seq", "next-token"])
def test_a_gelu_ffn_is_never_evaluated_as_relu(tmp_path, task, capsys):
    """Issue 26, file A without a construction: labels only the ReLU FFN reproduces (exactly 1)
    are refuted for the GELU FFN on every generic path (the seq-to-seq ball check, whose rank-one
    shortcut computes ReLU, and the next-token one)."""
    vocab = ((mpq(1),), (mpq(2),), (mpq(3),))
    sequences = ((0, 1), (1, 2), (2, 0))
    labels = tuple((1, 1) for _ in sequences) if task == "seq2seq" else (1, 1, 1)
    ds = Dataset(task, labels, 1, vocab=vocab, sequences=sequences)
    relu = _verdict(_softmax_then_ffn("relu"), ds)  # the labels are ReLU's
    # (exactly 1 on balls of radius 0 through the rank-one shortcut; elsewhere (x + 1) − x)
    assert relu == "verified" if task == "seq2seq" else relu != "refuted"
    assert certify(_softmax_then_ffn("gelu"), ds).verdict == "refuted"
    assert cli.main(_write(tmp_path, _softmax_then_ffn("gelu"), ds)) == 1
    assert "FAIL labels" in capsys.readouterr().out


def _mixed(first: str, second: str) -> Transformer:
    """Hardmax and softmax layers in one model (two lanes, two outputs)."""
    eye = Affine.from_dense([[1, 0], [0, 1]])
    head = AttentionHead(Affine.from_dense([[1, 0]]), Affine.from_dense([[1, 1]]), eye, eye)
    return Transformer(
        2,
        (Attention((head,), first, "a"), Attention((head,), second, "b")),
        unembed=Affine.from_dense([[1, 0], [0, 1]]),
    )


@pytest.mark.parametrize("order", [("hardmax", "softmax"), ("softmax", "hardmax")])
def test_hardmax_beside_softmax_is_evaluated_never_an_internal_error(tmp_path, order, capsys):
    """Issue 26, point 1: a model mixing hardmax and softmax layers made plain ``verify`` exit 3.
    The balls now carry hardmax (exact up to the last hardmax layer, else enclosed): labels the
    oracle certifies verify, a wrong one is refuted."""
    model = _mixed(*order)
    vocab = [(mpq(1), mpq(0)), (mpq(0), mpq(2)), (mpq(3), mpq(1))]
    sequences = [[0, 1], [1, 2], [2, 0], [2, 1]]
    told = _oracle(model, vocab, sequences)
    labels = [_oracle_label(out[-1], 2) for out in told]
    assert None not in labels
    ds = Dataset(
        "next-token", tuple(labels), 2, vocab=tuple(vocab), sequences=tuple(map(tuple, sequences))
    )
    assert cli.main(_write(tmp_path, model, ds)) == 0
    wrong = Dataset(
        "next-token",
        (3 - labels[0], *labels[1:]),
        2,
        vocab=tuple(vocab),
        sequences=tuple(map(tuple, sequences)),
    )
    assert cli.main(_write(tmp_path, model, wrong)) == 1
    assert "internal error" not in capsys.readouterr().err


def test_an_undecidable_hardmax_tie_on_balls_is_inconclusive_not_an_error(tmp_path, capsys):
    """Hardmax after softmax whose two scores are equal, but only in exact arithmetic: the
    softmax layer makes lane 1 of both keys 1/3 + (a₀ + a₁)/3 = 2/3, balls of radius > 0. The
    hardmax output is then the hull of both keys' values (lane 0: the tokens 1 and 2, so
    [3, 4] at the last position where the true value is 2 + 3/2), and a label that hangs on it
    (logit 1 = lane 0 against logit 2 = 13/4) is undecided: exit 4 with a message."""
    soft = AttentionHead(
        Affine.from_dense([[1, 0]]),
        Affine.from_dense([[1, 0]]),
        Affine.from_dense([[0, 1]]),
        Affine.from_dense([[0], [1]]),
    )
    hard = AttentionHead(
        Affine.from_dense([[0, 1]]),
        Affine.from_dense([[0, 1]]),
        Affine.from_dense([[1, 0]]),
        Affine.from_dense([[1], [0]]),
    )
    model = Transformer(
        2,
        (Attention((soft,), "softmax", "s"), Attention((hard,), "hardmax", "h")),
        unembed=Affine.from_dense([[4, 0], [0, 0]], [0, 13], 4),
    )
    vocab = ((mpq(1), mpq(1, 3)), (mpq(2), mpq(1, 3)))
    out = run_balls(model, vocab, [[0, 1]], precision=256, positions="last").outputs[0][-1][0]
    lo, hi = ball_bounds(out)
    assert mpq(29, 10) < lo <= 3 and 4 <= hi < mpq(41, 10)  # the hull, around the true 7/2
    ds = Dataset("next-token", (1,), 2, vocab=vocab, sequences=((0, 1),))
    code = cli.main([*_write(tmp_path, model, ds), "--max-precision", "128"])
    captured = capsys.readouterr()
    assert code == 4 and "internal error" not in captured.err, captured.err
    # the undecided labels check, in the verdict table (precedence: nothing failed)
    assert "undecided labels" in captured.out and "too wide" in captured.out


def test_the_balls_refuse_what_the_exact_evaluators_refuse():
    """A token id outside the embedding table, a sequence longer than a positional table: an
    InputError naming it, never a value read from the wrong place."""
    model = Transformer(2, (), embed=Affine.from_dense([[1, 0]]), token_inputs=True)
    with pytest.raises(InputError, match="token 2 is outside the embedding table"):
        run_balls(model, [], [[0, 2]])
    with pytest.raises(InputError, match="token 2 is outside"):
        reference.run(model, [], [[0, 2]])
    table = PositionalEncoding(((mpq(1),),), "pos")
    soft = _softmax_then_ffn("relu").sublayers[0]
    short = Transformer(1, (soft, table))
    with pytest.raises(InputError, match="covers 1 positions"):
        run_balls(short, [(mpq(1),), (mpq(2),)], [[0, 1]])


def test_a_positional_table_after_the_last_attention_reads_the_last_position():
    """positions="last" carries only the last column after the last attention layer: a
    positional table after it adds its last row there, not its first."""
    soft = _softmax_then_ffn("relu").sublayers[0]
    table = PositionalEncoding(((mpq(0),), (mpq(100),)), "pos")
    model = Transformer(1, (soft, table))
    vocab = [(mpq(1),), (mpq(2),)]
    every = run_balls(model, vocab, [[0, 1]], precision=128).outputs[0][-1][0]
    last = run_balls(model, vocab, [[0, 1]], precision=128, positions="last").outputs[0][-1][0]
    assert last.overlaps(every) and ball_bounds(last)[0] > 100


def test_a_masked_model_is_not_held_to_permutation_equivariance():
    """A causal mask tells (1, 2, 2) from (2, 1, 2): labels that differ on them are what the
    model computes, not a conflict to refuse with exit 2 (the consistency check assumed a
    permutation-equivariant model whatever the mask)."""
    one, zero = Affine.from_dense([[1]]), Affine.from_dense([[0]])

    def mean(label):  # position k gets the mean of positions 0..k added
        return Attention((AttentionHead(zero, zero, one, one),), "uniform", label, "causal")

    # last positions 121/18 and 127/18: logit 1 = output − 124/18, logit 2 its negative
    model = Transformer(
        1, (mean("a"), mean("b")), unembed=Affine.from_dense([[18], [-18]], [-124, 124], 18)
    )
    vocab = ((mpq(1),), (mpq(2),))
    ds = Dataset("next-token", (2, 1), 2, vocab=vocab, sequences=((0, 1, 1), (1, 0, 1)))
    assert certify(model, ds).verdict == "verified"
    wrong = Dataset("next-token", (1, 1), 2, vocab=vocab, sequences=((0, 1, 1), (1, 0, 1)))
    assert certify(model, wrong).verdict == "refuted"


def test_saturated_softmax_weights_have_bounds():
    """Scores 2^64 apart give softmax weights exp(−2^64): a ball whose exact bounds cannot be
    written down (2^-(2^64)). Bounds are rounded outward below 2^-FINEST, so the labels are
    judged instead of the verifier hanging."""
    from flint import arb, ctx

    from exactmem.core.balls import FINEST

    old = ctx.prec
    ctx.prec = 64
    try:
        tiny = (-(arb(2) ** 64)).exp()
        lo, hi = ball_bounds(tiny)
        assert lo <= 0 < hi <= mpq(2, 2**FINEST)
        lo, hi = ball_bounds(1 + tiny)
        assert lo <= 1 <= hi and hi - lo <= mpq(1, 2**60)
    finally:
        ctx.prec = old
    one = Affine.from_dense([[1]])
    att = Attention((AttentionHead(Affine.from_dense([[2**64]]), one, one, one),), "softmax", "a")
    # logits (z, 7/2): the last position of (1, 2) gets 2 + 2 (the key 2 wins), of (2, 1) 1 + 2
    model = Transformer(1, (att,), unembed=Affine.from_dense([[2], [0]], [0, 7], 2))
    vocab = ((mpq(1),), (mpq(2),))
    ds = Dataset("next-token", (1, 2), 2, vocab=vocab, sequences=((0, 1), (1, 0)))
    assert certify(model, ds).verdict == "verified"
    flipped = Dataset("next-token", (2, 2), 2, vocab=vocab, sequences=((0, 1), (1, 0)))
    assert certify(model, flipped).verdict == "refuted"


def test_weights_beyond_the_doubles_give_a_float_report_not_an_error():
    """The float evaluation beside a certificate holds a weight beyond 1.8·10^308 as inf (it
    stopped certify with an OverflowError: exit 3); the verdict comes from the balls."""
    one = Affine.from_dense([[1]])
    huge = Affine.from_dense([[2**2000]])
    att = Attention((AttentionHead(huge, one, one, one),), "softmax", "a")
    model = Transformer(1, (att,), unembed=Affine.from_dense([[2], [0]], [0, 7], 2))
    vocab = ((mpq(1),), (mpq(2),))
    ds = Dataset("next-token", (1, 2), 2, vocab=vocab, sequences=((0, 1), (1, 0)))
    cert = certify(model, ds)
    assert cert.verdict == "verified"
    assert "float64 says" in cert.checks[0].detail


@pytest.mark.parametrize("step", [reference._mlp, fast.mlp])
def test_an_exact_mlp_step_refuses_gelu(step):
    """The exact MLP steps compute ReLU: handed a GELU MLP directly (not through ``run``, which
    refuses it first) they stop rather than read GELU as ReLU."""
    import numpy as np

    mlp = MLP((Affine.from_dense([[1]]), Affine.from_dense([[1]])), activation="gelu")
    with pytest.raises(InconclusiveError, match="gelu"):
        step(mlp, [np.array([1], dtype=object)], 1, 1, 0, lambda *a: None, [])


def test_the_exact_prefix_of_the_balls_keeps_the_value_bound():
    """The exact steps the balls run before a hardmax layer are held to ``--max-value-bits``
    as the reference's own run is: a model whose values compound past it is refused by name."""
    from exactmem.core import limits

    one = Affine.from_dense([[1]])
    head = AttentionHead(one, one, one, one)
    deep = MLP((Affine.from_dense([[3**100]]),) * 200, residual=False)
    model = Transformer(
        1, (deep, Attention((head,), "hardmax", "h"), Attention((head,), "softmax", "s"))
    )
    vocab = [(mpq(1),), (mpq(2),)]
    with limits.use(limits.Limits(max_value_bits=10_000)):
        with pytest.raises(InputError, match="10000 bits"):
            run_balls(model, vocab, [[0, 1]])
        with pytest.raises(InputError, match="10000 bits"):
            reference.run(model, vocab, [[0, 1]])
