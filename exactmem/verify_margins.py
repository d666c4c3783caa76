"""Argmax labels certified example by example on Arb balls, with each example's margin, and a
float64 evaluation of the same model beside them (labelled as float, deciding nothing).

This is how a trained model is judged: softmax attention makes its outputs transcendental, so
each example's logits are enclosed in balls (:mod:`exactmem.evaluate.softmax`). An example is

* *certified* when the target logit's lead over every other logit has a positive lower bound
  (its *margin*, a certified lower bound on ``logit_y − max_{c≠y} logit_c``);
* *refuted* when some other logit is certainly at least the target's;
* *undecided* otherwise: the example alone is evaluated again at twice the precision, up to the
  user's cap. Only when an example is still undecided at the cap (and none is refuted) is the
  answer inconclusive, naming the examples.

The float evaluation (:mod:`exactmem.evaluate.floats`) says what a float framework would call
the model's accuracy; every example where the float verdict differs from the certified one is
listed. The float values never enter a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpq

from exactmem.errors import InconclusiveError
from exactmem.evaluate.floats import float_logits
from exactmem.evaluate.softmax import MAX_PRECISION, ball_bounds, run_balls
from exactmem.exact import format_rational
from exactmem.verify import Check, _examples
from exactmem.verify_attention import brief

__all__ = ["START_PRECISION", "ExampleMargin", "argmax_margins", "margin_check"]

START_PRECISION = 64
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
PER_EXAMPLE = 10_000  # up to this many examples, the certificate lists every margin


@dataclass(frozen=True)
class ExampleMargin:
    """One example's certified standing. ``status``: certified | refuted | undecided.
    ``margin``: for certified, a lower bound on the target's lead; for refuted, an upper bound
    on it (≤ 0); None when undecided. ``precision``: the bits that decided it."""

    index: int
    status: str
    margin: mpq | None
    precision: int


def _judge(logits, target: int) -> tuple[str, mpq | None]:
    lows, highs = [], []
    for c, other in enumerate(logits):
        if c == target:
            continue
        lead = logits[target] - other
        if not lead.is_finite():
            return "undecided", None
        lo, hi = ball_bounds(lead)
        lows.append(lo)
        highs.append(hi)
    if not lows:  # one class: nothing to lead
        return "certified", None
    if min(highs) <= 0:
        return "refuted", min(highs)
    if min(lows) > 0:
        return "certified", min(lows)
    return "undecided", None


def argmax_margins(
    model,
    vocab: Sequence,
    sequences: Sequence[Sequence[int]],
    labels: Sequence[int],
    *,
    start: int = START_PRECISION,
    limit: int = MAX_PRECISION,
) -> list[ExampleMargin]:
    """Each example's standing at the last position (labels 1..C), raising the precision of
    the undecided examples only, doubling from ``start`` up to ``limit`` bits."""
    results: dict[int, ExampleMargin] = {}
    pending = list(range(len(sequences)))
    precision = start
    while pending:
        trace = run_balls(
            model, vocab, [sequences[i] for i in pending], precision=precision, positions="last"
        )
        still = []
        for i, out in zip(pending, trace.outputs, strict=True):
            status, margin = _judge(out[-1], labels[i] - 1)
            if status == "undecided" and precision * 2 <= limit:
                still.append(i)
            else:
                results[i] = ExampleMargin(i, status, margin, precision)
        pending, precision = still, precision * 2
    return [results[i] for i in range(len(sequences))]


def _float_verdicts(logits: np.ndarray, labels: Sequence[int]) -> tuple[list[bool], np.ndarray]:
    """Float: correct when the target logit is strictly above every other; the float margin."""
    correct, margins = [], []
    for row, y in zip(logits, labels, strict=True):
        others = np.delete(row, y - 1)
        lead = float(row[y - 1] - others.max()) if others.size else float("inf")
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
    """The ``labels`` check of an argmax model on balls, per example (module docstring), with
    the float evaluation beside it under ``float`` (figures labelled as float).

    Figures: ``certified``, ``refuted``, ``min_margin_lower_bound`` (exact), ``precision`` (the
    most bits any example needed), ``margins`` (the smallest certified margin, where, and its
    quantiles, rounded down), ``per_example`` (up to :data:`PER_EXAMPLE` examples: each margin,
    a lower bound when certified, an upper bound ≤ 0 when refuted) and ``float`` (accuracy,
    smallest float margin, every disagreement)."""
    results = argmax_margins(model, ds.vocab, ds.sequences, ds.labels, limit=limit)
    undecided = [r for r in results if r.status == "undecided"]
    refuted = [r for r in results if r.status == "refuted"]
    certified = [r for r in results if r.status == "certified"]
    flogits = float_logits(model, ds.vocab, ds.sequences)
    fcorrect, fmargins = _float_verdicts(flogits, ds.labels)
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
        },
        **({"per_example": [_bound(r) for r in results]} if len(results) <= PER_EXAMPLE else {}),
        "float": {
            "evaluator": "numpy float64 (labelled float: decides nothing)",
            "correct": sum(fcorrect),
            "accuracy": f"{sum(fcorrect)}/{len(fcorrect)}",
            "smallest_margin": None if not finite.size else f"{finite.min():.6g}",
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
            for r in refuted
        ]
        return Check("labels", False, _examples(bad) + float_text, figures)
    detail = (
        f"all {ds.size} argmax labels certified, smallest margin ≥ "
        f"{figures['margins']['smallest']} at {figures['margins']['smallest_at']} "
        f"(Arb, up to {top} bits){float_text}"
    )
    return Check("labels", True, detail, figures)
