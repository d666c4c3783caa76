"""The construction-independent lower-bound checks (:mod:`exactmem.checks.lower_bounds`: Kajitsuka &
Sato 2025, Theorems 4.2 and 4.3, eq. (72), Remarks 4.4/4.6), each with its breakers.

They run for every model (bit counting) or wherever their hypothesis holds (Theorem 4.3 and the
sign-pattern count on seq-to-seq data with all nN tokens distinct; Theorem 4.2 under a
Kajitsuka–Sato checklist). A breaker here destroys what the bound needs of a model — its
parameters and bits (the model starved to one affine map), or the permutation equivariance of
its attention (a positional table inserted) — and the check is seen to fail on it
(tests/test_breakers_attention.py).
"""

from __future__ import annotations

from dataclasses import replace

from gmpy2 import mpq

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.core.model import Affine, PositionalEncoding, Transformer
from exactmem.datasets.dataset import Dataset

PAPER = "Kajitsuka & Sato 2025 (ICLR)"


def starve(model: Transformer, dataset: Dataset) -> Transformer:
    """The model replaced by one affine map reading the first input lane (one weight of one
    bit, plus a zero bias): far fewer parameters and bits than the labels need."""
    one = Affine(model.input_dim, (((0, 1),),), (0,))
    return Transformer(model.input_dim, (), None, one, {}, False)


def insert_positions(model: Transformer, dataset: Dataset) -> Transformer:
    """A positional table inserted first: position k adds k to the stream's last lane, so the
    columns of a constant sequence differ (no permutation equivariance)."""
    width = model.embed.out_dim if model.embed else model.input_dim
    n = len(dataset.sequences[0])
    table = tuple(tuple(mpq(k if i == width - 1 else 0) for i in range(width)) for k in range(n))
    return replace(model, sublayers=(PositionalEncoding(table, "breaker"), *model.sublayers))


STARVE = Breaker(
    "the model starved to one weight",
    "the parameters and bits the labels need",
    "",  # set per check below
    model=starve,
)

CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        "lower_bound.bit_count",
        PAPER + ", Remarks 4.4 and 4.6",
        "one architecture of P parameters of b bits realises at most 2^{P·b} functions",
        "P·b ≥ the number of labels (N, or nN for seq-to-seq)",
        (replace(STARVE, fails="lower_bound.bit_count"),),
    ),
    CheckSpec(
        "lower_bound.theorem_4_2",
        PAPER + ", Theorem 4.2",
        "on constant sequences a Transformer equals an MLP on the first column",
        "every column of a constant sequence stays identical after every sub-layer, and the "
        "output equals the equivalent MLP's (attention as its linear action)",
        (
            Breaker(
                "a positional table inserted",
                "permutation equivariance (identical columns stay identical)",
                "lower_bound.theorem_4_2",
                model=insert_positions,
            ),
        ),
    ),
    CheckSpec(
        "lower_bound.theorem_4_3",
        PAPER + ", Theorem 4.3",
        "a hardmax Transformer shattering nN distinct tokens has W ≥ √(nN / (9·log₂(48e·nN)))",
        "the dense parameter count meets the bound (decided on Arb balls)",
        (replace(STARVE, fails="lower_bound.theorem_4_3"),),
    ),
    CheckSpec(
        "lower_bound.sign_patterns",
        PAPER + ", eq. (72) with Goldberg–Jerrum's Lemma B.4",
        "the sign vectors of the block architecture number at least 2^{nN} to shatter",
        "N is within the largest N the model's block architecture can shatter",
        (replace(STARVE, fails="lower_bound.sign_patterns"),),
    ),
)
