"""The seeded random datasets of the attention memorization results: Mahdavi et al. 2024's
(query, context) examples, Dana et al. 2025's next-token associations, Madden et al. 2024's
contexts with next-token distributions.

Data, not construction: the claim files' generators, the constructions' examples and the
checklists' self-test datasets (:mod:`exactmem.checks.mechanisms`) draw them here, so that the
trusted
side never imports a construction.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset
from exactmem.runtime.progress import counter

__all__ = ["random_associations", "random_contexts", "random_instance"]

Vec = tuple[mpq, ...]


def random_instance(
    T: int,
    n: int,
    d: int,
    C: int,
    seed: int = 0,
    *,
    shared_context: bool = False,
    bound: int = 9,
    progress: Callable[..., Any] | None = None,
) -> Dataset:
    """T examples: n context tokens and a query, integer coordinates in [−bound, bound];
    ``progress`` hears the examples drawn."""
    drawn = counter(progress, "generating examples", T)
    rng = random.Random(seed)
    vocab: list[Vec] = []

    def token() -> int:
        vocab.append(tuple(mpq(rng.randint(-bound, bound)) for _ in range(d)))
        return len(vocab) - 1

    shared = [token() for _ in range(n)] if shared_context else None
    seqs, labels = [], []
    for _ in range(T):
        ctx_ = shared if shared else [token() for _ in range(n)]
        seqs.append(tuple(ctx_) + (token(),))
        labels.append(rng.randint(1, C))
        drawn(len(seqs))
    return Dataset(
        "next-token",
        tuple(labels),
        C,
        vocab=tuple(vocab),
        sequences=tuple(seqs),
        meta={"generator": "mahdavi_instance", "shared_context": shared_context},
    )


def random_associations(
    N: int, S: int, T0: int, seed: int = 0, *, progress: Callable[..., Any] | None = None
) -> Dataset:
    """T₀ distinct sequences of S tokens over [N] with random targets (a random function g);
    ``progress`` hears the associations drawn."""
    if T0 > N**S:
        raise InputError(f"only {N**S} distinct sequences of length {S} over {N} tokens")
    drawn = counter(progress, "generating associations", T0)
    rng = random.Random(seed)
    seqs: dict = {}
    while len(seqs) < T0:
        s = tuple(rng.randrange(N) for _ in range(S))
        seqs.setdefault(s, rng.randint(1, N))
        drawn(len(seqs))
    vocab = tuple((mpq(t),) for t in range(N))
    return Dataset(
        "next-token",
        tuple(seqs.values()),
        N,
        vocab=vocab,
        sequences=tuple(seqs),
        meta={"generator": "random_associations"},
    )


def random_contexts(n: int, S: int, omega: int, seed: int = 0, *, targets: bool = True) -> Dataset:
    """n distinct contexts of S tokens over ω tokens (vocabulary vectors (t,)), C = ω classes;
    with ``targets`` a full-support distribution per context (integer weights 1..9, the label's
    raised to be the unique largest), else labels only."""
    if n > omega**S:
        raise InputError(f"only {omega**S} distinct contexts of length {S} over {omega} tokens")
    if omega < 2:
        raise InputError("random_contexts needs ω ≥ 2")
    rng = random.Random(seed)
    seqs: dict = {}
    while len(seqs) < n:
        seqs.setdefault(tuple(rng.randrange(omega) for _ in range(S)), None)
    labels, rows = [], []
    for _ in seqs:
        y = rng.randint(1, omega)
        w = [rng.randint(1, 9) for _ in range(omega)]
        w[y - 1] = max(w) + rng.randint(1, 3)
        total = sum(w)
        labels.append(y)
        rows.append(tuple(mpq(x, total) for x in w))
    return Dataset(
        "next-token",
        tuple(labels),
        omega,
        vocab=tuple((mpq(t),) for t in range(omega)),
        sequences=tuple(seqs),
        meta={"generator": "random_contexts", "seed": seed},
        targets=tuple(rows) if targets else (),
    )
