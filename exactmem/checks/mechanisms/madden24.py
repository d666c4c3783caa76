"""The mechanisms the madden24 checklist tests (Madden, Fox & Thrampoulidis 2024, arXiv
2405.13718; the theorem forms are reconstructed), each check with its breakers.

Every breaker changes the honest built decoder on the IR so that one mechanism is gone: the
injectivity of the attention's last-position output (the head's output map zeroed: h(x) is the
last token's embedding plus its position, so contexts ending alike collide; or the head writing
only a lane the FNN does not read), the rank of the GELU features (two FNN units silenced:
[Φ, 1] loses rank; or W₂ reading one feature, its other columns the same for every logit),
the interpolation of the targets (a class's output bias shifted), the dimension count (the FNN
narrowed to one unit: k below n(ω − 1)), the decoder's architecture (ReLU for GELU, the causal
mask opened).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.core.model import MLP, Affine, Attention, Transformer
from exactmem.datasets.attention_data import random_contexts
from exactmem.datasets.dataset import Dataset

PAPER = "Madden, Fox & Thrampoulidis 2024 (arXiv 2405.13718; theorem forms reconstructed)"


def _parts(model: Transformer) -> tuple[Attention, MLP]:
    *_, att, fnn = model.sublayers
    assert isinstance(att, Attention) and isinstance(fnn, MLP)
    return att, fnn


def _with(model: Transformer, att: Attention, fnn: MLP) -> Transformer:
    return replace(model, sublayers=(*model.sublayers[:-2], att, fnn))


def zero_output_map(model: Transformer, dataset: Dataset) -> Transformer:
    """The head's W_O zeroed: the attention adds nothing, h(x) = e(x_S) + p_S."""
    att, fnn = _parts(model)
    h = att.heads[0]
    o = h.output
    h0 = replace(h, output=Affine(o.in_dim, ((),) * o.out_dim, o.bias, 1))
    return _with(model, replace(att, heads=(h0,)), fnn)


def head_beside_fnn(model: Transformer, dataset: Dataset) -> Transformer:
    """W_O := 0 with a bypass: the stream widened by one lane that the FNN does not read, the
    head's W_O zeroed on every lane the FNN reads and its first row moved to the new lane. The
    head still attends and writes, but only where nothing reads it: the FNN sees the skip term
    e(x_S) + p_S alone (review r1, F4)."""
    att, fnn = _parts(model)
    e = model.embed
    assert e is not None
    w = e.out_dim
    h = att.heads[0]
    o = h.output
    first = next(r for r in o.rows if r)
    spare = (0,) * (w + 1)
    out = Affine(o.in_dim, ((),) * w + (first,), spare, o.denominator)
    head = replace(
        h,
        query=replace(h.query, in_dim=w + 1, names=()),
        key=replace(h.key, in_dim=w + 1, names=()),
        value=replace(h.value, in_dim=w + 1, names=()),
        output=out,
    )
    embed = replace(e, rows=e.rows + ((),), bias=e.bias + (0,), names=())
    front = [
        replace(s, table=tuple(tuple(r) + (type(r[0])(0) if r else 0,) for r in s.table))
        for s in model.sublayers[:-2]
    ]
    w1, w2 = fnn.layers
    fnn2 = replace(fnn, layers=(replace(w1, in_dim=w + 1), w2))
    return replace(
        model,
        embed=embed,
        sublayers=(*front, replace(att, heads=(head,)), fnn2),
    )


def silence_units(model: Transformer, dataset: Dataset) -> Transformer:
    """Two FNN units' rows of W₁ and their biases zeroed: GELU(0) = 0, two dead features."""
    att, fnn = _parts(model)
    w1 = fnn.layers[0]
    rows = ((), ()) + w1.rows[2:]
    bias = (0, 0) + w1.bias[2:]
    first = replace(w1, rows=rows, bias=bias)
    return _with(model, att, replace(fnn, layers=(first, *fnn.layers[1:])))


def read_one_feature(model: Transformer, dataset: Dataset) -> Transformer:
    """W₂ reads one feature: every column of W₂ but the first set to the same value for every
    logit (1: a per-context shift, which softmax ignores). The m units are all still computed,
    Φ keeps its full rank, but the output reads feature 1 alone (issue 26)."""
    att, fnn = _parts(model)
    w2 = fnn.layers[-1]
    rows = tuple(
        tuple((j, v) for j, v in row if j == 0)
        + tuple((j, w2.denominator) for j in range(1, w2.in_dim))
        for row in w2.rows
    )
    return _with(model, att, replace(fnn, layers=(*fnn.layers[:-1], replace(w2, rows=rows))))


def shift_target(model: Transformer, dataset: Dataset) -> Transformer:
    """Class 2's output bias raised by 1: its probability moves off the target everywhere."""
    att, fnn = _parts(model)
    w2 = fnn.layers[-1]
    bias = list(w2.bias)
    bias[1] += w2.denominator
    last = replace(w2, bias=tuple(bias))
    return _with(model, att, replace(fnn, layers=(*fnn.layers[:-1], last)))


def one_unit(model: Transformer, dataset: Dataset) -> Transformer:
    """The FNN narrowed to its first unit: k = dense parameters drops below n(ω − 1)."""
    att, fnn = _parts(model)
    w1, w2 = fnn.layers
    first = replace(w1, rows=w1.rows[:1], bias=w1.bias[:1], names=())
    rows = tuple(tuple((j, c) for j, c in row if j == 0) for row in w2.rows)
    last = replace(w2, in_dim=1, rows=rows)
    return _with(model, att, replace(fnn, layers=(first, last)))


def relu_fnn(model: Transformer, dataset: Dataset) -> Transformer:
    """ReLU for GELU: a polynomial-like activation the generic-rank argument does not cover."""
    att, fnn = _parts(model)
    return _with(model, att, replace(fnn, activation="relu"))


def open_mask(model: Transformer, dataset: Dataset) -> Transformer:
    """The causal mask opened: not a decoder."""
    att, fnn = _parts(model)
    return _with(model, replace(att, mask="none"), fnn)


CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "madden24": (
        CheckSpec(
            "madden24.injectivity",
            PAPER,
            "injectivity of causal self-attention (generic weights)",
            "the head's last-position outputs W_O·W_V·Σ_j a_j X_j, on the lanes the FNN reads, "
            "are pairwise distinct over the distinct contexts (the paper's decoder has no "
            "residual connection; separated balls, or exact when the head adds nothing)",
            (
                Breaker(
                    "the head's output map zeroed",
                    "the attention's dependence on the context before the last token",
                    "madden24.injectivity",
                    model=zero_output_map,
                ),
                Breaker(
                    "W_O := 0 with a bypass",
                    "the attention's part in h(x): the head writes one lane the FNN does not "
                    "read, the FNN sees the skip term e(x_S) + p_S alone",
                    "madden24.injectivity",
                    model=head_beside_fnn,
                ),
            ),
        ),
        CheckSpec(
            "madden24.feature_rank",
            PAPER,
            "the lower bound: generic full rank of the analytic FNN features, m ≥ n − 1",
            "[Φ, 1] with Φ = GELU(W₁h + b₁) has full row rank n on the contexts, over the "
            "features the output layer reads (W₂'s columns not the same for every logit) that "
            "are not identically 0 (a non-zero determinant on balls)",
            (
                Breaker(
                    "two FNN units silenced",
                    "two of the m features (exact zeros)",
                    "madden24.feature_rank",
                    model=silence_units,
                ),
                Breaker(
                    "W₂ reads one feature",
                    "the features the output reads: W₂'s other columns the same for every logit",
                    "madden24.feature_rank",
                    model=read_one_feature,
                ),
            ),
        ),
        CheckSpec(
            "madden24.targets",
            PAPER,
            "the lower bound: interpolation of the next-token distributions",
            "softmax of the output logits is within the user's --tolerance of every target "
            "row (certified on balls)",
            (
                Breaker(
                    "class 2's output bias shifted by 1",
                    "the solved output layer",
                    "madden24.targets",
                    model=shift_target,
                ),
            ),
        ),
        CheckSpec(
            "madden24.dimension_count",
            PAPER,
            "the upper capacity bound: k ≥ n(ω − 1) parameters for generic targets "
            "(dimension count, reconstructed)",
            "the dense parameter count k is at least n(ω − 1) (datasets with targets only)",
            (
                Breaker(
                    "the FNN narrowed to one unit",
                    "the parameters the output layer needs",
                    "madden24.dimension_count",
                    model=one_unit,
                ),
            ),
        ),
        CheckSpec(
            "madden24.structure",
            PAPER,
            "the one-layer decoder: embedding + positions, one causal softmax head, a GELU FNN",
            "the model is token ids → embedding → positional tables → one causal softmax "
            "head → a plain two-layer GELU FNN giving the C logits",
            (
                Breaker(
                    "ReLU for GELU",
                    "the real-analytic, non-polynomial activation",
                    "madden24.structure",
                    model=relu_fnn,
                ),
                Breaker(
                    "the causal mask opened",
                    "the decoder's mask",
                    "madden24.structure",
                    model=open_mask,
                ),
            ),
        ),
    ),
}


def example() -> Dataset:
    """40 distinct contexts of 2 tokens over ω = 8 with full-support next-token
    distributions: n(ω − 1) = 280 is above what a one-unit FNN has, below the honest k."""
    return random_contexts(40, 2, 8, seed=2)


# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {"madden24": example}
EXAMPLE_OPTIONS: dict[str, dict] = {"madden24": {"d": 4, "tolerance": "1/1000000"}}
