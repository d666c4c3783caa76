"""Tokenwise (r_min, r_max, ε)-separatedness of sequence data, measured exactly.

Kajitsuka & Sato 2024 (ICLR), following Kim, Kim & Mozafari 2023: inputs Z^(1), …, Z^(N) are
*tokenwise (r_min, r_max, ε)-separated* when (i) r_min ≤ ‖z‖ ≤ r_max for every token and (ii)
any two tokens, across all sequences, are identical or at distance ≥ ε. Their contextual
mapping further takes the tokens of one sequence pairwise distinct (two equal tokens of one
sequence receive one context value, and a contextual mapping gives every position of a sequence
its own). RECONSTRUCTED: the paper's exact wording of the hypothesis was not available; the
conditions above are the ones its contextual-mapping lemma is stated under as far as we could
reconstruct it, and every one is checked here on squared norms (exact rationals).

Shared by the construction (which refuses data outside the hypothesis) and the verifier (which
measures the same figures): this module decides nothing about a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.core.exact import format_rational
from exactmem.datasets.dataset import SEPARATION_LIMIT, Dataset, squared_separation

__all__ = ["Separation", "repeated_tokens", "require_separated", "separation"]


@dataclass(frozen=True)
class Separation:
    """The exact figures: r_min², r_max², ε² (None: one distinct token, or more than
    :data:`~exactmem.datasets.dataset.SEPARATION_LIMIT`), the distinct tokens, and the violations
    found."""

    r_min2: mpq
    r_max2: mpq
    eps2: mpq | None
    distinct: int
    zero_tokens: tuple[int, ...]  # vocabulary indices of tokens with ‖z‖ = 0
    repeats: tuple[tuple[int, int, int], ...]  # (sequence, position, earlier position)

    def figures(self) -> dict:
        return {
            "r_min2": format_rational(self.r_min2),
            "r_max2": format_rational(self.r_max2),
            "epsilon2": None if self.eps2 is None else format_rational(self.eps2),
            "distinct_tokens": self.distinct,
        }

    def describe(self) -> str:
        eps = "—" if self.eps2 is None else format_rational(self.eps2)
        return (
            f"r_min² = {format_rational(self.r_min2)}, r_max² = {format_rational(self.r_max2)}, "
            f"ε² = {eps} over {self.distinct} distinct tokens"
        )


def repeated_tokens(ds: Dataset, limit: int = 6) -> tuple[tuple[int, int, int], ...]:
    """Up to ``limit`` (sequence, position, earlier position) whose tokens are equal vectors."""
    out = []
    for i, seq in enumerate(ds.sequences):
        seen: dict[tuple, int] = {}
        for k, t in enumerate(seq):
            j = seen.setdefault(tuple(ds.vocab[t]), k)
            if j != k:
                out.append((i, k, j))
                if len(out) >= limit:
                    return tuple(out)
    return tuple(out)


def separation(ds: Dataset) -> Separation:
    """The tokenwise separation figures of the tokens the sequences use (exact)."""
    used = sorted({t for seq in ds.sequences for t in seq})
    norms = {t: sum((x * x for x in ds.vocab[t]), mpq(0)) for t in used}
    vectors = list(dict.fromkeys(tuple(ds.vocab[t]) for t in used))
    eps2 = squared_separation(vectors) if len(vectors) <= SEPARATION_LIMIT else None
    return Separation(
        r_min2=min(norms.values()),
        r_max2=max(norms.values()),
        eps2=eps2,
        distinct=len(vectors),
        zero_tokens=tuple(t for t in used if norms[t] == 0)[:6],
        repeats=repeated_tokens(ds),
    )


def _where(ds: Dataset, token: int) -> str:
    i, k = next((i, k) for i, s in enumerate(ds.sequences) for k, t in enumerate(s) if t == token)
    return f"vocab[{token}] (first used at sequences[{i}][{k}])"


def require_separated(
    ds: Dataset,
    *,
    allow_repeats: bool = False,
    r_min: mpq | None = None,
    r_max: mpq | None = None,
    epsilon: mpq | None = None,
) -> Separation:
    """The figures, or exit 2 naming the offending tokens: a zero token (r_min > 0 fails), two
    equal tokens in one sequence (unless ``allow_repeats``), and — when the user states them —
    a token outside [r_min, r_max] or two distinct tokens closer than ε."""
    sep = separation(ds)
    if sep.zero_tokens:
        raise InputError(
            f"{_where(ds, sep.zero_tokens[0])} is the zero vector: tokenwise separatedness needs "
            "r_min > 0"
        )
    if sep.repeats and not allow_repeats:
        i, k, j = sep.repeats[0]
        raise InputError(
            f"sequences[{i}][{j}] and sequences[{i}][{k}] are equal tokens: Kajitsuka & Sato's "
            "contextual mapping needs the tokens of a sequence pairwise distinct "
            "(--set allow_repeats=true builds anyway; the verifier then refutes)"
        )
    used = sorted({t for seq in ds.sequences for t in seq})
    for bound, bad, what in (
        (r_min, lambda n2, b: n2 < b * b, "below r_min"),
        (r_max, lambda n2, b: n2 > b * b, "above r_max"),
    ):
        if bound is None:
            continue
        for t in used:
            n2 = sum((x * x for x in ds.vocab[t]), mpq(0))
            if bad(n2, mpq(bound)):
                raise InputError(
                    f"{_where(ds, t)} has ‖z‖² = {format_rational(n2)}, {what} = "
                    f"{format_rational(mpq(bound))}"
                )
    if epsilon is not None:
        _require_epsilon(ds, used, mpq(epsilon))
    return sep


def _require_epsilon(ds: Dataset, used: Sequence[int], epsilon: mpq) -> None:
    first: dict[tuple, int] = {}
    for t in used:
        first.setdefault(tuple(ds.vocab[t]), t)
    reps = list(first.values())
    e2 = epsilon * epsilon
    for a in range(len(reps)):
        for b in range(a + 1, len(reps)):
            x, y = ds.vocab[reps[a]], ds.vocab[reps[b]]
            dist2 = sum(((p - q) ** 2 for p, q in zip(x, y, strict=True)), mpq(0))
            if dist2 < e2:
                raise InputError(
                    f"vocab[{reps[a]}] and vocab[{reps[b]}] are distinct tokens at squared "
                    f"distance {format_rational(dist2)} < ε² = {format_rational(e2)}"
                )
