"""Kajitsuka & Sato 2025, Theorem 4.1 (= B.1): next-token memorization with width 14 and depth
Õ(√N): ``E_out ∘ F^(FF)_2 ∘ F^(UA) ∘ F^(FF)_1 ∘ E_in``.

Step by step (Kajitsuka & Sato 2025, Appendix B, proof of Theorem 4.1):

1. distinct tokens V and the multiset of every sequence (§2.3);
2. token ids: the Stage I projection of the memorizer on V — integers ≥ 2, ≥ 2 apart (Lemma
   C.2; one projection serves both the token id and φ̃'s Stage I, as §2.4 allows);
3. witness set A (Lemma B.1): greedy, the smallest distinguishing token in vocab order;
4. integer sequence-id weights f on A (Lemma B.2). The lemma's statement holds, but the
   printed proof's construction fails: its shift by K = ⌊2N²|S|√π⌋ cancels only between
   multisets of equal size, and the restricted multisets differ in size. ``sequence_weights`` =
   ``random`` (default): f(x) uniform in [1, N'²], redrawn until the sequence sums are
   distinct, checked exactly (what Lemma B.3 needs: sums ≥ 1 apart). ``union``: the statement
   proved by a union bound — g uniform in [N'²] until the sums are distinct, f = ⌈√|S|⌉·g,
   sums ≥ √|S| apart within the stated range. ``paper``: the printed construction with a
   rational unit direction satisfying Park's inequality, kept for the verifier to refute;
5. φ̃ = Lemma C.1 with labels f on A and the other tokens as zero-labelled extra points;
   F^(FF)_1 = (φ̃, token id, 0) (eqs. (50)–(51));
6. one attention layer with W_K = W_Q = 0 (all scores 0: weights exactly 1/n under softmax and
   hardmax alike) adding the mean of φ̃ to the third lane: the sequence id (eqs. (52)–(53));
7. F^(FF)_2 = Lemma C.1 on the distinct context ids at the last position (eq. (55)) with the
   labels; E_out reads its output.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flint import arb, ctx, fmpq
from gmpy2 import mpq

from exactmem.constructions.bit_budget import build_split_memorizer
from exactmem.constructions.circuit import Circuit
from exactmem.constructions.memorizer_arrays import IntegerPoints, build_memorizer_on_rows
from exactmem.constructions.vys import (
    DEFAULT_GADGET,
    MEMORIZER_STEPS,
    MemorizerWitness,
    Projection,
    all_distinct,
    build_memorizer,
    integer_projection,
)
from exactmem.core.errors import InputError
from exactmem.core.exact_arrays import LIMIT, exact, first_seen_ids, rational_table, top
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import (
    Multiset,
    check_consistency,
    multiset_of,
    restrict,
    sequence_tokens,
    view,
    with_positions,
)
from exactmem.runtime.progress import Steps

__all__ = [
    "KS25Witness",
    "build",
    "paper_weights",
    "random_weights",
    "random_weights_on_rows",
    "restrict",
    "union_bound_weights",
    "sequence_sums",
    "witness_set",
    "witness_set_of_rows",
]

SCHEMES = ("random", "union", "paper")
PAPER_SCHEME_LIMIT = 2000  # Park's inequality is checked over all pairs of multisets


# --------------------------------------------------------------------------- Lemma B.1


def witness_set(multisets: Sequence[Multiset]) -> list[int]:
    """Lemma B.1: A with |A| ≤ #multisets − 1 such that the restrictions stay distinct.

    Processing the distinct multisets in order, a new multiset whose restriction equals an
    earlier one's (at most one can) adds the smallest token whose counts differ. Adding a
    coordinate never merges distinct restrictions, so only the multisets containing the new
    token need their key updated.
    """
    A: list[int] = []
    in_A: set[int] = set()
    owner: dict[Multiset, int] = {}
    containing: dict[int, list[int]] = {}
    current: list[Multiset] = []
    for k, ms in enumerate(multisets):
        for t, _ in ms:
            containing.setdefault(t, []).append(k)
        key = restrict(ms, in_A)
        current.append(key)
        i = owner.get(key)
        if i is None:
            owner[key] = k
            continue
        a, b = dict(multisets[i]), dict(ms)
        x = min(t for t in set(a) | set(b) if a.get(t, 0) != b.get(t, 0))
        A.append(x)
        in_A.add(x)
        for j in containing.get(x, ()):
            if j <= k:
                old = current[j]
                if owner.get(old) == j:
                    del owner[old]
                current[j] = restrict(multisets[j], in_A)
                owner[current[j]] = j
        owner[current[k]] = k  # also when x is absent from the new multiset
    return A


KERNEL_FROM = 20_000  # distinct multisets from which Lemma B.1 runs compiled


def witness_set_of_rows(rows: np.ndarray) -> list[int]:
    """:func:`witness_set` of the distinct multisets given as sorted token rows (first-seen
    order): compiled from :data:`KERNEL_FROM` rows (the same steps and result,
    :mod:`exactmem.constructions.witness_kernel`), with dictionaries below it or after a hash
    collision."""
    if len(rows) >= KERNEL_FROM:
        from exactmem.constructions.witness_kernel import witness_rows

        A = witness_rows(rows)
        if A is not None:
            return A
    return witness_set([multiset_of(row) for row in rows.tolist()])


# --------------------------------------------------------------------------- Lemma B.2


def sequence_sums(multisets: Sequence[Multiset], f: dict[int, int]) -> list[int]:
    return [sum(c * f.get(t, 0) for t, c in ms) for ms in multisets]


def random_weights(
    multisets: Sequence[Multiset], A: Sequence[int], rng: random.Random, attempts: int = 64
) -> dict[int, int]:
    """f(x) uniform in [1, Q], Q = N'², redrawn until the sums are distinct.

    For one pair of distinct restricted multisets a collision has probability ≤ 1/Q (fix a
    token whose counts differ), so one draw succeeds with probability ≥ ½.
    """
    pad = max((t for ms in multisets for t, _ in ms), default=-1) + 1  # a token outside A
    width = max((sum(c for _, c in ms) for ms in multisets), default=0)
    rows = np.full((len(multisets), width), pad, np.int64)
    for i, ms in enumerate(multisets):
        flat = [t for t, c in ms for _ in range(c)]
        rows[i, : len(flat)] = flat
    return random_weights_on_rows(rows, A, rng, attempts)


def random_weights_on_rows(
    rows: np.ndarray, A: Sequence[int], rng: random.Random, attempts: int = 64
) -> dict[int, int]:
    """:func:`random_weights` for multisets given as rows of tokens (one distinct multiset per
    row; f vanishes outside A, so the rows need not be restricted): the same draws, the sums
    taken on whole arrays."""
    Q = max(len(rows) ** 2, 2)
    size = int(rows.max(initial=-1)) + 1
    for _ in range(attempts):
        f = {x: rng.randint(1, Q) for x in A}
        weights, _ = rational_table(f, size, rows.shape[1])
        sums = weights[rows].sum(axis=1)
        if all_distinct(sums):
            return f
    raise InputError(f"no separating weights in {attempts} draws (are two multisets equal?)")


def union_bound_weights(
    rows: np.ndarray, A: Sequence[int], rng: random.Random, attempts: int = 64
) -> dict[int, int]:
    """Lemma B.2's statement, proved by a union bound instead of the printed shift.

    Take g: S → [N²] uniform (N distinct multisets, S = A: every witness token occurs in a
    restricted multiset). For two distinct multisets fix a token whose counts differ: given the
    other values, at most one value of g there makes the two integer sums equal, so they
    collide with probability ≤ 1/N², and some pair does with probability ≤ (N − 1)/(2N) < ½.
    Draws are repeated (seeded) until the sums are distinct. Then f = ⌈√|S|⌉·g has integer
    sums at least ⌈√|S|⌉ ≥ √|S| apart, f ≤ ⌈√|S|⌉·N² ≤ ⌈4N²|S|√π⌉ and every sum of a multiset
    of size ≤ M is at most M·⌈√|S|⌉·N² ≤ 4MN²|S|√π: the lemma's
    (4MN²|S|√π, √|S|)-separation.
    """
    if not A:
        return {}
    g = random_weights_on_rows(rows, A, rng, attempts)
    scale = math.isqrt(len(A) - 1) + 1  # ⌈√|S|⌉
    return {x: scale * v for x, v in g.items()}


def _ceil_times_sqrt_pi(q: mpq) -> int:
    """⌈q·√π⌉ rigorously (Arb balls at rising precision)."""
    return _round_sqrt_pi(q, ceil=True)


def _round_sqrt_pi(q: mpq, *, ceil: bool) -> int:
    precision = 128
    while precision <= 1 << 16:
        old = ctx.prec
        ctx.prec = precision
        try:
            ball = arb(fmpq(int(q.numerator), int(q.denominator))) * arb.const_sqrt_pi()
            value = (ball.ceil() if ceil else ball.floor()).unique_fmpz()
        finally:
            ctx.prec = old
        if value is not None:
            return int(value)
        precision *= 4
    raise InputError(f"cannot round {q}·√π")  # pragma: no cover - q·√π is irrational


def _park_holds(vectors: Sequence[tuple[int, ...]], v: Sequence[mpq], N: int) -> bool:
    """Park et al. (Lemma G.1): |vᵀΔ| ≥ (1/N²)·√(8/(π|S|))·‖Δ‖ for every pair, decided with
    Arb: π·(vᵀΔ)²·|S|·N⁴ ≥ 8‖Δ‖²."""
    s = len(v)
    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            delta = [a - b for a, b in zip(vectors[i], vectors[j], strict=True)]
            dot = sum((mpq(d) * vi for d, vi in zip(delta, v, strict=True)), mpq(0))
            lhs = arb.pi() * arb(
                fmpq(int((dot * dot * s * N**4).numerator), int((dot * dot * s * N**4).denominator))
            )
            rhs = 8 * sum(d * d for d in delta)
            if not lhs > rhs and not (dot != 0 and lhs >= rhs):
                return False
    return True


def rational_unit_vector(rng: random.Random, dim: int) -> tuple[mpq, ...]:
    """A random exact unit vector: inverse stereographic projection of a rational point."""
    if dim == 1:
        return (mpq(1),)
    y = [mpq(rng.randint(-1000, 1000), 1000) for _ in range(dim - 1)]
    norm2 = sum(t * t for t in y)
    return tuple([2 * t / (norm2 + 1) for t in y] + [(norm2 - 1) / (norm2 + 1)])


def paper_weights(
    restricted: Sequence[Multiset],
    A: Sequence[int],
    N: int,
    direction: Sequence[mpq],
) -> dict[int, int]:
    """Lemma B.2 as printed: v̄_x = ⌈N²|S|√π·v_x⌉, f(x) = v̄_x + ⌊2N²|S|√π⌋ (S = A).

    The shift adds ⌊2N²|S|√π⌋·|m| to each sum, which cancels only between multisets of equal
    size: the printed construction fails on restricted multisets of different sizes (the
    statement itself holds, :func:`union_bound_weights`). Kept so the verifier can refute it.
    """
    s = len(A)
    c0 = mpq(N * N * s)
    f = {}
    K = _round_sqrt_pi(2 * c0, ceil=False)
    for x, v in zip(A, direction, strict=True):
        f[x] = _ceil_times_sqrt_pi(c0 * v) + K
    return f


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class KS25Witness:
    """What the construction intends (untrusted)."""

    scheme: str
    witness_tokens: tuple[int, ...]
    weights: tuple[int, ...]
    distinct_multisets: int
    direction: tuple[mpq, ...] = ()
    collisions: tuple[tuple[int, int], ...] = ()  # items whose context ids collide
    phi: MemorizerWitness | None = None
    f2: MemorizerWitness | None = None
    extra: dict = field(default_factory=dict)


LANES = ("phi", "tid", "seq")
VARIANTS = {
    "ks25-next-token": "Kajitsuka & Sato 2025, Theorem 4.1 (B.1)",
    "ks25-seq2seq": "Kajitsuka & Sato 2025, Corollary 4.1",
    "ks25-token-ids": "Kajitsuka & Sato 2025, Theorem E.1",
    "ks25-deep-sets": "Kajitsuka & Sato 2025, Theorem D.1",
    "ks25-bit-budget": "Kajitsuka & Sato 2025, Theorem F.1",
}
CONSISTENCY_MODE = {"ks25-seq2seq": "seq2seq", "ks25-deep-sets": "multiset"}


def _three_lanes(mlp: MLP) -> MLP:
    """Rename φ̃'s outputs (out, key) to the lanes (phi, tid) and add the empty lane seq."""
    last = mlp.layers[-1]
    final = Affine(last.in_dim, last.rows + ((),), last.bias + (0,), last.denominator, LANES)
    return MLP(mlp.layers[:-1] + (final,), False, mlp.probes, mlp.label, mlp.meta)


def _token_ids_only(proj: Projection, dim: int, label: str) -> MLP:
    """F^(FF)_1 when A = ∅ (one distinct multiset): φ̃ ≡ 0, token ids only (Kajitsuka & Sato
    2025)."""
    from exactmem.constructions.circuit import const, var

    names = tuple(f"x{j}" for j in range(dim))
    circ = Circuit(names)
    circ.layer({"t": proj.expr(names)})
    return circ.finish(
        {"phi": const(0), "tid": var("t"), "seq": const(0)},
        label=label,
        meta={"lemma": "token ids only (A is empty)"},
    )


def _uniform_attention(score: str) -> Attention:
    """W_K = W_Q = 0, W_O W_V = e_seq e_phiᵀ (eq. (52))."""
    zero = Affine(3, ((),), (0,))
    value = Affine(3, (((0, 1),),), (0,))
    output = Affine(1, ((), (), ((0, 1),)), (0, 0, 0), 1, LANES)
    return Attention((AttentionHead(zero, zero, value, output),), score, "ua")


def parse_direction(text: str | Sequence) -> tuple[mpq, ...]:
    from exactmem.core.exact import parse_rational

    parts = text.split(",") if isinstance(text, str) else list(text)
    v = tuple(parse_rational(p, f"paper_direction[{i}]") for i, p in enumerate(parts))
    if sum(x * x for x in v) != 1:
        raise InputError("paper_direction must be an exact unit vector (e.g. 4/5,-3/5)")
    return v


def _memorizer(points, labels, *, options, **kw):
    """Lemma C.1, or its Theorem F.1 split when a bit budget is set; on arrays when the points
    come as an :class:`IntegerPoints`."""
    budget = options.get("bit_budget")
    if isinstance(points, IntegerPoints):
        if not budget:
            return build_memorizer_on_rows(
                points, labels, gadget=options.get("gadget", DEFAULT_GADGET), **kw
            )
        points, labels = points.vectors(), labels.tolist()
    if budget:
        mlp, _ = build_split_memorizer(
            points, labels, budget=budget, gadget=options.get("gadget", DEFAULT_GADGET), **kw
        )
        return mlp, None
    return build_memorizer(points, labels, gadget=options.get("gadget", DEFAULT_GADGET), **kw)


def _weights(rows, A, options, rng) -> tuple[dict[int, int], tuple[mpq, ...]]:
    """Lemma B.2: random weights (default), the union-bound construction of the statement, or
    the printed construction. ``rows``: the distinct multisets as rows of sorted tokens."""
    scheme = options.get("sequence_weights", "random")
    if scheme not in SCHEMES:
        raise InputError(f"sequence_weights must be one of {', '.join(SCHEMES)}")
    if scheme == "random":
        return random_weights_on_rows(rows, A, rng), ()
    if scheme == "union":
        return union_bound_weights(rows, A, rng), ()
    in_A = set(A)
    restricted = [restrict(multiset_of(row), in_A) for row in rows.tolist()]
    if not A:
        return {}, ()
    if len(restricted) > PAPER_SCHEME_LIMIT:
        raise InputError(
            f"sequence_weights=paper checks Park's inequality over all pairs; "
            f"limited to {PAPER_SCHEME_LIMIT} distinct multisets"
        )
    order = sorted(A)
    vectors = [tuple(dict(ms).get(t, 0) for t in order) for ms in restricted]
    given = options.get("paper_direction")
    if given:
        direction = parse_direction(given)
        if len(direction) != len(order):
            raise InputError(
                f"paper_direction has {len(direction)} coordinates; |A| = {len(order)}"
            )
        if not _park_holds(vectors, direction, len(restricted)):
            raise InputError(
                "paper_direction violates Park's inequality (Lemma G.1), the "
                "hypothesis of Lemma B.2"
            )
    else:
        for _ in range(64):
            direction = rational_unit_vector(rng, len(order))
            if _park_holds(vectors, direction, len(restricted)):
                break
        else:
            raise InputError("no direction satisfying Park's inequality in 64 draws")
    return paper_weights(restricted, order, len(restricted), direction), direction


def _context_ids(dataset: Dataset, sv, variant: str, f: dict[int, int], key_of: dict):
    """The intended context ids (φ̃(x_k), id(x_k), Σ φ̃ / n) at the judged positions (eq. (53);
    the sum alone for deep sets), distinct, in first-seen order, with the first label of each,
    and the (sequence, sequence) pairs whose labels collide on one id. Whole arrays: a million
    sequences are a million items. The ids come as an :class:`IntegerPoints` (numerators over
    n) and their labels as an array when every numerator fits in int64, else as tuples of
    rationals and a list."""
    n = sv.sorted_tokens.shape[1]
    positions = list(range(n)) if variant == "ks25-seq2seq" else [n - 1]
    canon = sequence_tokens(dataset, sv)
    weights, _ = rational_table(f, int(canon.max(initial=0)) + 1, n)
    sums = weights[canon].sum(axis=1)  # Σ_k f(x_k) = Σ over the multiset
    tok = canon[:, positions]
    P = len(positions)
    if variant == "ks25-deep-sets":
        parts = [np.repeat(sums, P)]
    else:
        ids_of, _ = rational_table(key_of)
        parts = [weights[tok].reshape(-1), ids_of[tok].reshape(-1), np.repeat(sums, P)]
    dtype = object if any(p.dtype == object for p in parts) else np.int64
    ids, firsts = first_seen_ids(np.stack([p.astype(dtype) for p in parts], axis=1))
    labels = exact(np.array(dataset.labels, dtype=object)).reshape(-1)
    owner = firsts[ids]
    clash = np.nonzero(labels != labels[owner])[0]
    collisions = [(int(owner[m]) // P, int(m) // P) for m in clash]
    small = dtype is not object and labels.dtype != object
    if small and all(top(p) * n < LIMIT for p in parts):
        first_tok = tok.reshape(-1)[firsts]
        sums_at = sums[firsts // P]
        if variant == "ks25-deep-sets":
            zero = np.zeros(len(firsts), np.int64)
            numerators = np.stack([zero, zero, sums_at], axis=1)
        else:
            numerators = np.stack([weights[first_tok] * n, ids_of[first_tok] * n, sums_at], axis=1)
        return IntegerPoints.over(numerators, n), labels[firsts].astype(np.int64), collisions
    points = []
    for m in firsts.tolist():
        i, t = m // P, int(tok.reshape(-1)[m])
        seq = mpq(int(sums[i]), n)
        if variant == "ks25-deep-sets":
            points.append((mpq(0), mpq(0), seq))
        else:
            points.append((mpq(f.get(t, 0)), mpq(key_of[t]), seq))
    return points, labels[firsts].tolist(), collisions


def build(
    dataset: Dataset,
    options: dict,
    variant: str = "ks25-next-token",
    *,
    progress: Callable[..., Any] | None = None,
):
    """Build one of the Kajitsuka–Sato Transformers (``variant``, see :data:`VARIANTS`);
    ``progress`` hears its steps (:class:`exactmem.runtime.progress.Steps`)."""
    if variant not in VARIANTS:
        raise InputError(f"unknown variant {variant!r}")
    if variant == "ks25-bit-budget" and not options.get("bit_budget"):
        raise InputError("ks25-bit-budget needs --set bit_budget=B")
    task = "seq2seq" if variant == "ks25-seq2seq" else "next-token"
    if dataset.task != task:
        raise InputError(f"{variant} needs task {task!r}, the dataset has {dataset.task!r}")
    if options.get("position_aware"):
        if variant == "ks25-token-ids":
            raise InputError("position_aware does not apply to token-id inputs")
        dataset = with_positions(dataset)
    token_ids = variant == "ks25-token-ids"
    seed = options.get("seed", 0)
    rng = random.Random(seed)
    steps = Steps(progress, f"building {variant}", 4 + MEMORIZER_STEPS * (2 - token_ids))
    steps.step(f"consistency of {dataset.size} sequences")
    sv = check_consistency(
        dataset,
        CONSISTENCY_MODE.get(variant, "next-token"),
        view(dataset, by_index=token_ids),
        position_advice=not token_ids,
    )
    n = len(dataset.sequences[0])
    # distinct multisets, first-seen order (int64: the kernels and sums take them so)
    rows = sv.sorted_tokens[sv.first_of_multiset].astype(np.int64)
    steps.step(f"witness set of {len(rows)} multisets")
    A = witness_set_of_rows(rows)
    in_A = set(A)
    steps.step(f"sequence weights ({options.get('sequence_weights', 'random')})")
    f, direction = _weights(rows, A, options, rng)

    tokens = list(sv.tokens)
    phi_witness = None
    # token_ids=weakened (a claim's adversary, refuted): Lemma C.2's ids one unit apart instead
    # of two; Theorem E.1's counted from 0, outside [1, ω]
    weakened = options.get("token_ids", "lemma") == "weakened"
    first_id = 0 if weakened else 1
    if token_ids:
        # Theorem E.1: the embedding column of token x is (f(x), x, 0), x counted from 1
        omega = len(dataset.vocab)
        rows = (
            tuple((t, f[t]) for t in tokens if f.get(t)),
            tuple((t, t + first_id) for t in range(omega) if t + first_id),
            (),
        )
        first = Affine(omega, rows, (0, 0, 0), 1, LANES)
        key_of = {t: t + first_id for t in tokens}
        sublayers: tuple = ()
    else:
        vectors_of = {t: dataset.vocab[t] for t in tokens}
        labelled = [t for t in tokens if t in in_A]
        extra = [t for t in tokens if t not in in_A]
        # one Stage I projection: φ̃'s keys are the token ids (Kajitsuka & Sato 2025, Theorem 4.1)
        proj = integer_projection([vectors_of[t] for t in labelled + extra], random.Random(seed))
        if weakened:  # ids one unit apart: t = p − p_min + 2 instead of 2(p − p_min) + 2
            proj = Projection(proj.scale, proj.direction, (proj.shift - 2) // 2 + 2, 1)
        if labelled:
            mlp, phi_witness = _memorizer(
                [vectors_of[t] for t in labelled],
                [f[t] for t in labelled],
                options=options,
                num_classes=max(f.values()),
                extra_points=[vectors_of[t] for t in extra],
                seed=seed,
                input_names=tuple(f"x{j}" for j in range(dataset.dim)),
                label="phi",
                carry_key=True,
                projection=proj,
                steps=steps,
            )
            ffn1 = _three_lanes(mlp)
        else:
            ffn1 = _token_ids_only(proj, dataset.dim, "phi")
        key_of = {t: proj.key(vectors_of[t]) for t in tokens}
        sublayers = (ffn1,)

    steps.step("context ids")
    points, point_labels, collisions = _context_ids(dataset, sv, variant, f, key_of)
    projection = None
    if variant == "ks25-deep-sets":  # ρ̃ reads the sum only (Theorem D.1)
        if isinstance(points, IntegerPoints):
            lowest = mpq(int(points.rows[:, 2].min()), points.scale)
        else:
            lowest = min(p[2] for p in points)
        projection = Projection(n, (0, 0, 1), int(2 - 2 * n * lowest))
    ffn2, f2_witness = _memorizer(
        points,
        point_labels,
        options=options,
        num_classes=dataset.num_classes,
        seed=seed + 1,
        input_names=LANES,
        label="f2",
        steps=steps,
        **({"projection": projection} if projection else {}),
    )
    model = Transformer(
        input_dim=len(dataset.vocab) if token_ids else dataset.dim,
        sublayers=sublayers + (_uniform_attention(options.get("attention", "softmax")), ffn2),
        embed=first if token_ids else None,
        token_inputs=token_ids,
        meta={
            "construction": variant,
            "theorem": VARIANTS[variant],
            "options": {
                k: (v if not isinstance(v, tuple) else list(v)) for k, v in options.items()
            },
            "sequence_length": n,
            "position_aware": bool(options.get("position_aware")),
            "token_id_gap": 1 if token_ids else 2,
        },
    )
    witness = KS25Witness(
        scheme=options.get("sequence_weights", "random"),
        witness_tokens=tuple(A),
        weights=tuple(f.get(x, 0) for x in A),
        distinct_multisets=len(rows),
        direction=direction,
        collisions=tuple(collisions),
        phi=phi_witness,
        f2=f2_witness,
    )
    steps.done()
    return model, witness
