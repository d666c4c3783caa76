"""Argmax labels certified example by example on Arb balls, with each example's margin made
tight, and a float64 evaluation of the same model beside them (labelled as float, deciding
nothing).

This is how a trained model is judged: softmax attention makes its outputs transcendental, so
each example's logits are enclosed in balls (:mod:`exactmem.evaluate.softmax`). An example's
*margin* is m = min over its judged positions k and classes c ≠ y_k of logit_{y_k} − logit_c
(next-token: the last position; seq2seq: every position). Its enclosure [m̲, m̄] is the least
lower and the least upper bound of those leads. An example is

* *certified* when m̲ > 0, and its margin is *tight* when moreover m̄ ≤ (1 + 1/100)·m̲: then
  m̲ ≥ m/1.01, the certified margin lies within 1 % of the true one;
* *refuted* when m̄ ≤ 0 (some other logit is certainly at least the target's) — at once, with
  m = 0, when the read-out gives the target's class and another the same row and bias
  (:func:`tied_classes`: equal for every input, which balls could never decide);
* *undecided* otherwise.

Undecided examples and certified ones whose margin is not yet tight are evaluated again at a
higher precision — the next precision is read off the enclosure's width (in the linear regime a
ball's radius shrinks as 2^-p: the bits missing for a width of m̲/101, plus a guard, at least
16 more and at most twice as many), up to the user's cap. Only when an example is still
undecided at the cap (and none is refuted) is the answer inconclusive, naming the examples; a
certified margin not tight at the cap is reported as such (``loose``), its bound still a bound.
The smallest certified margin is then within 1 % of the true smallest margin whenever no
margin is loose (each m̲_i ≥ m_i/1.01 ≥ min_j m_j/1.01).

The float evaluation (:mod:`exactmem.evaluate.floats`) says what a float framework would call
the model's accuracy; every example where the float verdict differs from the certified one is
listed. The float values never enter a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpq

from exactmem.checks.attention import brief
from exactmem.checks.certificate import Check, _examples
from exactmem.core.errors import InconclusiveError
from exactmem.core.exact import format_rational
from exactmem.core.model import MLP
from exactmem.core.weight_rows import BlockRows
from exactmem.evaluate.floats import float_logits
from exactmem.evaluate.softmax import MAX_PRECISION, ball_bounds, run_balls

__all__ = [
    "START_PRECISION",
    "TIGHT",
    "ExampleMargin",
    "argmax_margins",
    "margin_check",
    "tied_classes",
]

START_PRECISION = 64
TIGHT = mpq(1, 100)  # a certified margin is tight when m̄ ≤ (1 + TIGHT)·m̲
GUARD_BITS = 8  # beyond the bits the width says are missing
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
PER_EXAMPLE = 10_000  # up to this many examples, the certificate lists every margin


@dataclass(frozen=True)
class ExampleMargin:
    """One example's certified standing. ``status``: certified | refuted | undecided.
    ``margin``: for certified, a lower bound m̲ on the target's lead; for refuted, an upper
    bound on it (≤ 0); None when undecided. ``upper``: m̄, the upper bound of the margin's
    enclosure (None when not finite). ``tight``: certified with m̄ ≤ (1 + 1/100)·m̲.
    ``precision``: the bits that decided it."""

    index: int
    status: str
    margin: mpq | None
    precision: int
    upper: mpq | None = None
    tight: bool = False


def _judge(columns, targets: Sequence[int]) -> tuple[str, mpq | None, mpq | None]:
    """(status, m̲, m̄) of one example: ``columns`` the judged output columns of balls,
    ``targets`` their 0-based labels."""
    low = high = None
    finite = True
    for logits, target in zip(columns, targets, strict=True):
        for c, other in enumerate(logits):
            if c == target:
                continue
            lead = logits[target] - other
            if not lead.is_finite():
                finite = False
                continue
            lo, hi = ball_bounds(lead)
            low = lo if low is None else min(low, lo)
            high = hi if high is None else min(high, hi)
    if high is not None and high <= 0:
        return "refuted", high, high
    if not finite:
        return "undecided", None, None
    if low is None:  # one class: nothing to lead
        return "certified", None, None
    if low > 0:
        return "certified", low, high
    return "undecided", low, high


def _next_precision(precision: int, low: mpq | None, high: mpq | None) -> int:
    """The precision to try next: the bits the enclosure's width says are missing for a width
    of |midpoint|/101 (module docstring), plus a guard; doubling when the width says nothing."""
    if low is None or high is None or high == low:
        return 2 * precision
    mid = abs(low + high) / 2
    if mid == 0:
        return 2 * precision
    missing = math.ceil(math.log2((high - low) * 101 / mid)) + GUARD_BITS
    step = min(max(missing, 16), precision)
    return precision + -(-step // 16) * 16


def tied_classes(model) -> set[int]:
    """The 0-based classes whose logit equals another's for every input, read off the weights:
    two rows of the read-out map (or, without one, of a last non-residual MLP's last layer)
    with the same coefficients and bias. Their lead is exactly 0
    — no strict argmax — which balls, enclosing each logit apart, could never decide (the
    ladder would climb to the cap on every example)."""
    unembed = model.unembed
    if unembed is None:  # the logits are the stream: the last map, if nothing adds to it
        last = model.sublayers[-1] if model.sublayers else None
        if not isinstance(last, MLP) or last.residual:
            return set()
        unembed = last.layers[-1]
    if isinstance(unembed.rows, BlockRows):  # an imported checkpoint's: no tuples to compare
        return set()
    first: dict[tuple, int] = {}
    tied: set[int] = set()
    for c, (row, bias) in enumerate(zip(unembed.rows, unembed.bias, strict=True)):
        j = first.setdefault((tuple(row), bias), c)
        if j != c:
            tied |= {j, c}
    return tied


def argmax_margins(
    model,
    vocab: Sequence,
    sequences: Sequence[Sequence[int]],
    labels: Sequence,
    *,
    start: int = START_PRECISION,
    limit: int = MAX_PRECISION,
    seq2seq: bool = False,
) -> list[ExampleMargin]:
    """Each example's standing (labels 1..C; next-token: one label per sequence, judged at the
    last position; ``seq2seq``: one per position), raising the precision of the undecided and
    of the loosely certified examples only (module docstring), from ``start`` up to
    ``limit`` bits."""
    results: dict[int, ExampleMargin] = {}
    twins = tied_classes(model)
    pending = {}
    for i in range(len(sequences)):
        targets = [y - 1 for y in labels[i]] if seq2seq else [labels[i] - 1]
        if any(t in twins for t in targets):  # a tie for every input: m = 0 exactly
            results[i] = ExampleMargin(i, "refuted", mpq(0), 0, mpq(0))
        else:
            pending[i] = min(start, limit)
    while pending:
        precision = min(pending.values())
        batch = [i for i, p in pending.items() if p == precision]
        trace = run_balls(
            model,
            vocab,
            [sequences[i] for i in batch],
            precision=precision,
            positions="all" if seq2seq else "last",
        )
        for i, out in zip(batch, trace.outputs, strict=True):
            del pending[i]
            targets = [y - 1 for y in labels[i]] if seq2seq else [labels[i] - 1]
            columns = out if seq2seq else out[-1:]
            status, low, high = _judge(columns, targets)
            tight = status == "certified" and (low is None or high <= (1 + TIGHT) * low)
            done = status == "refuted" or tight
            if not done and precision < limit:
                pending[i] = min(_next_precision(precision, low, high), limit)
                continue
            margin = None if status == "undecided" else low
            results[i] = ExampleMargin(i, status, margin, precision, high, tight)
    return [results[i] for i in range(len(sequences))]


def _float_verdicts(
    logits: np.ndarray, labels: Sequence, seq2seq: bool = False
) -> tuple[list[bool], np.ndarray]:
    """Float: an example is correct when at each judged position the target logit is strictly
    above every other; its float margin is the least lead (as :func:`argmax_margins`)."""
    correct, margins = [], []
    for rows, ys in zip(logits, labels, strict=True):
        if not seq2seq:
            rows, ys = [rows], [ys]
        lead = float("inf")
        for row, y in zip(rows, ys, strict=True):
            others = np.delete(row, y - 1)
            if others.size:
                lead = min(lead, float(row[y - 1] - others.max()))
        margins.append(lead)
        correct.append(bool(lead > 0))
    return correct, np.array(margins)


def _distribution(margins: list[mpq]) -> dict[str, str]:
    """Quantiles of the certified margins (lower bounds, rounded down to 3 digits)."""
    ordered = sorted(margins)
    out = {}
    for q in QUANTILES:
        at = min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))
        out[f"q{int(q * 100)}"] = brief(ordered[at], up=False)
    return out


def _bound(r: ExampleMargin) -> str | None:
    """An example's margin as short decimal text that stays a bound: a certified lead rounded
    down (≥), a refuted one rounded up (≤ 0)."""
    if r.margin is None:
        return None
    return brief(r.margin, up=r.status == "refuted")


def margin_check(model, ds, *, limit: int = MAX_PRECISION) -> Check:
    """The ``labels`` check of an argmax model on balls, per example (module docstring) —
    next-token and seq2seq alike — with the float evaluation beside it under ``float``
    (figures labelled as float).

    Figures: ``certified``, ``refuted``, ``min_margin_lower_bound`` (exact), ``precision`` (the
    most bits any example needed), ``margins`` (the smallest certified margin, where, its
    quantiles, rounded down, and ``tight``: how many certified margins are within 1 % of the
    true one, ``loose``: the examples whose margin is not at the cap), ``per_example`` (up to
    :data:`PER_EXAMPLE` examples: each margin, a lower bound when certified, an upper bound
    ≤ 0 when refuted) and ``float`` (accuracy, smallest float margin, every disagreement)."""
    seq2seq = ds.task == "seq2seq"
    results = argmax_margins(model, ds.vocab, ds.sequences, ds.labels, limit=limit, seq2seq=seq2seq)
    undecided = [r for r in results if r.status == "undecided"]
    refuted = [r for r in results if r.status == "refuted"]
    certified = [r for r in results if r.status == "certified"]
    flogits = float_logits(model, ds.vocab, ds.sequences, positions="all" if seq2seq else "last")
    fcorrect, fmargins = _float_verdicts(flogits, ds.labels, seq2seq)
    disagreements = []
    for r in results:
        if r.status == "undecided":
            continue
        if fcorrect[r.index] != (r.status == "certified"):
            said = "correct" if fcorrect[r.index] else "wrong"
            disagreements.append(
                f"sequences[{r.index}]: float says {said} (float margin "
                f"{fmargins[r.index]:.3g}), certified {r.status}"
            )
    if undecided and not refuted:
        names = ", ".join(f"sequences[{r.index}]" for r in undecided[:10])
        more = f" and {len(undecided) - 10} more" if len(undecided) > 10 else ""
        raise InconclusiveError(
            f"the enclosures of {names}{more} stay too wide at {limit} bits to decide the "
            "argmax label (raise --max-precision)"
        )
    top = max(r.precision for r in results) if results else START_PRECISION
    margins = [r.margin for r in certified if r.margin is not None]
    loose = [r for r in certified if not r.tight]
    worst = min(margins) if margins else None
    finite = fmargins[np.isfinite(fmargins)]
    figures: dict = {
        "min_margin_lower_bound": None if worst is None else format_rational(worst),
        "precision": top,
        "certified": len(certified),
        "refuted": len(refuted),
        "margins": {
            "smallest": None if worst is None else brief(worst, up=False),
            "smallest_at": None
            if worst is None
            else next(f"sequences[{r.index}]" for r in certified if r.margin == worst),
            **(_distribution(margins) if margins else {}),
            "tight": f"{len(certified) - len(loose)}/{len(certified)} within 1 %",
            "loose": [
                f"sequences[{r.index}]: ≥ {brief(r.margin, up=False)}, ≤ {brief(r.upper)}"
                if r.margin is not None and r.upper is not None
                else f"sequences[{r.index}]"
                for r in loose[:PER_EXAMPLE]
            ],
        },
        **({"per_example": [_bound(r) for r in results]} if len(results) <= PER_EXAMPLE else {}),
        "float": {
            "evaluator": "numpy float64 (labelled float: decides nothing)",
            "correct": sum(fcorrect),
            "accuracy": f"{sum(fcorrect)}/{len(fcorrect)}",
            "smallest_margin": None if not finite.size else f"{finite.min():.6g}",
            "per_example": [f"{m:.6g}" for m in fmargins[:PER_EXAMPLE]],
            "disagreements": len(disagreements),
            "disagreements_listed": disagreements,
        },
    }
    float_text = (
        f"; float64 says {sum(fcorrect)}/{len(fcorrect)} correct, "
        f"{len(disagreements)} disagreement(s) with the certified verdict"
    )
    if refuted:
        bad = [
            f"sequences[{r.index}]: another logit is ≥ the target's (lead ≤ "
            f"{brief(r.margin)}, {r.precision} bits)"
            if r.precision
            else f"sequences[{r.index}]: the read-out gives the target's class the row of "
            "another (lead = 0 for every input)"
            for r in refuted
        ]
        return Check("labels", False, _examples(bad) + float_text, figures)
    labels = sum(len(y) for y in ds.labels) if seq2seq else ds.size
    where = f" at every position of {ds.size} sequences" if seq2seq else ""
    tightness = (
        "every margin within 1 % of the true one"
        if not loose
        else f"{len(loose)} margin(s) not within 1 % at the cap of {limit} bits "
        "(raise --max-precision)"
    )
    detail = (
        f"all {labels} argmax labels{where} certified, smallest margin ≥ "
        f"{figures['margins']['smallest']} at {figures['margins']['smallest_at']}, "
        f"{tightness} (Arb, up to {top} bits){float_text}"
    )
    return Check("labels", True, detail, figures)
