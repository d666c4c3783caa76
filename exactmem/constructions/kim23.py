"""Kim, Kim & Mozafari 2023 (ICLR), "Provable Memorization Capacity of Transformers":
sequence-to-sequence memorization with Õ(d + n + √(nN)) parameters.

The paper's pipeline has three parts, one per term of the bound; the exact weights of its
contextual mapping were not at hand (only the abstract was read), so the middle part is **our
reconstruction** (marked R):

1. **d — token projection** (E_in): an integer direction w (Stage I of Vardi et al. 2022,
   resampled until the distinct tokens project apart) maps a token x to an integer key
   t(x) = s·wᵀx + shift ∈ [1, T]. The embedding writes the residual stream
   (t, a, m, e, S, 1) = (t, t, 0, 0, 0, 1). With ``position_aware`` a positional encoding adds
   k·T to t and a at position k, so (token, position) pairs get distinct keys in [1, nT] (the
   paper's variant with positional encodings).
2. **n — contextual mapping by 2n hardmax attention layers of head size 1** (R). Round r:

   * *max-read* attention: query = the lane 1, key = value = a. Hardmax returns
     M_r = max_k a_k to every token (ties average equal values: exact); W_O writes it to m;
   * FFN: g = σ(a − m + 1) ∈ {0, 1} is exactly [a = M_r] (integers, a ≤ M_r);
     a ← a − L·g (L = T + 1 deactivates the maximisers), e ← g (e − σ(e) + g: e ≥ 0),
     m ← m − (σ(m) − σ(−m)) = 0;
   * *count* attention: a zero query map, so all scores are equal and the weights exactly
     1/n under hardmax and softmax alike; value e, W_O adds β_r·n·mean(e) = β_r·c_r to S
     (c_r the number of maximisers), while the max-read layer added α_r·M_r.

   After n rounds S = Σ_r α_r M_r + β_r c_r, the same at every token of a sequence. The vector
   (M_1, c_1, …, M_n, c_n) lists the distinct keys in decreasing order with their
   multiplicities, then a deterministic tail (deactivated keys t − L, t − 2L, …): an injective
   function of the multiset. The integer functional (α, β) is drawn uniformly from
   [−K', K']^{2n}, K' = N'² (N' distinct contexts; smaller K' are tried first), and redrawn
   (seeded) until the N' values S are distinct, checked exactly; ``resample=false`` keeps the
   first draw (a collision is then left for the verifier to refute). With
   ``attention=softmax`` the rounds are those of :mod:`exactmem.constructions.kim23_softmax`
   (a temperature, a margin step that re-quantizes the max-read, S from exact quantities).
3. **√(nN) — the memorizer** on the ≤ nN (context, token) ids z = A(S − S_min) + t, A = T + 1
   (distinct exactly when (S, t) are): the VYS network of Lemma C.1 (exactmem.constructions.vys)
   with Stage I the projection 2z (keys ≥ 2, ≥ 2 apart), read from the lanes t and S.

Repeated tokens are allowed (permutation-equivariant setting): labels must then be a function
of (token, multiset) — checked, inconsistent data is refused naming both items. Task seq2seq
(labels at every position) and next-token (the last position).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gmpy2 import mpq

from exactmem.constructions.kim23_softmax import (
    SOFT_LANES,
    count_soft,
    max_read_soft,
    reset_soft,
    temperature_for,
)
from exactmem.constructions.vys import (
    DEFAULT_GADGET,
    MEMORIZER_STEPS,
    MemorizerWitness,
    Projection,
    build_memorizer,
    integer_projection,
)
from exactmem.core.errors import InputError
from exactmem.core.model import (
    MLP,
    Affine,
    Attention,
    AttentionHead,
    PositionalEncoding,
    Transformer,
)
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import canonical_tokens, check_consistency, view
from exactmem.runtime.progress import Steps

__all__ = [
    "LANES",
    "Kim23Witness",
    "build",
    "context_rounds",
    "draw_functional",
    "resources_by_part",
]

LANES = ("t", "a", "m", "e", "S", "one")
T_, A_, M_, E_, S_, ONE = range(6)
THEOREM = "Kim, Kim & Mozafari 2023, Theorem 4.1 (seq-to-seq memorization, Õ(d + n + √(nN)))"


@dataclass(frozen=True)
class Kim23Witness:
    """What the construction intends (untrusted): keys, functional, context values."""

    token_bound: int  # T: keys in [1, T] (after the positional offsets)
    alphas: tuple[int, ...]
    betas: tuple[int, ...]
    draws: int
    distinct_contexts: int
    distinct_values: int  # distinct S over the distinct contexts (= distinct_contexts if injective)
    collisions: tuple[tuple[str, str], ...] = ()  # items whose ids collide with other labels
    memorizer: MemorizerWitness | None = None
    parts: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- the mathematics


def context_rounds(keys: np.ndarray, L: int):
    """The n rounds of the contextual mapping on rows of integer keys (one row per context):
    (M, c, a, e) with M[:, r] the round-r maximum, c[:, r] its multiplicity, a the keys after
    the n rounds (maximisers lowered by L each time they are read) and e the last round's
    indicators [a = M_n]."""
    a = keys.astype(object).copy()
    rows, n = a.shape
    M = np.empty((rows, n), object)
    c = np.empty((rows, n), object)
    hit = np.zeros(a.shape, bool)
    for r in range(n):
        top = a.max(axis=1)
        hit = a == top[:, None]
        M[:, r] = top
        c[:, r] = hit.sum(axis=1)
        a = a - L * hit
    return M, c, a, hit.astype(int)


def draw_functional(
    M: np.ndarray, c: np.ndarray, bound: int, rng: random.Random, *, resample: bool = True
) -> tuple[list[int], list[int], np.ndarray, int]:
    """(α, β, S, draws): α, β uniform in [−bound, bound]^n, redrawn until S = Mα + cβ is
    injective on the rows (distinct (M, c) vectors). For one pair of distinct vectors fix a
    coordinate where they differ: at most one value of it makes S equal, so a collision has
    probability ≤ 1/(2·bound + 1) and, with bound ≥ N'², some pair collides with probability
    < ½ (a union bound over the N'(N' − 1)/2 pairs; our reconstruction)."""
    n = M.shape[1]
    draws = 0
    while True:
        draws += 1
        alpha = [rng.randint(-bound, bound) for _ in range(n)]
        beta = [rng.randint(-bound, bound) for _ in range(n)]
        S = M.dot(np.array(alpha, object)) + c.dot(np.array(beta, object))
        vectors = {tuple(v) for v in np.concatenate([M, c], axis=1).tolist()}
        if not resample or len(set(S.tolist())) == len(vectors):
            return alpha, beta, S, draws
        if draws >= 64:
            raise InputError("no injective functional in 64 draws (raise functional_bound)")


def _functional(M: np.ndarray, c: np.ndarray, options: dict, rng: random.Random):
    """:func:`draw_functional` at the given ``functional_bound``; without one, a few draws at
    K' = 1, 2, 4, … below N'² first (fewer bits in S, hence in the memorizer's keys), then
    N'² as the fallback, so the guarantee is unchanged (as Stage I's direction search)."""
    resample = options.get("resample", True)
    given = options.get("functional_bound")
    if given or not resample:
        return draw_functional(M, c, given or max(len(M) ** 2, 1), rng, resample=resample)
    top = max(len(M) ** 2, 1)
    vectors = len({tuple(v) for v in np.concatenate([M, c], axis=1).tolist()})
    tried = 0
    for e in range(max(top.bit_length() - 1, 0)):
        for _ in range(3):
            alpha, beta, S, _ = draw_functional(M, c, 1 << e, rng, resample=False)
            tried += 1
            if len(set(S.tolist())) == vectors:
                return alpha, beta, S, tried
    alpha, beta, S, draws = draw_functional(M, c, top, rng)
    return alpha, beta, S, tried + draws


# --------------------------------------------------------------------------- the layers


def _affine(rows: dict[int, tuple], in_dim: int, out_dim: int, bias=None, names=()) -> Affine:
    return Affine(
        in_dim,
        tuple(tuple(sorted(rows.get(i, ()))) for i in range(out_dim)),
        tuple(bias or (0,) * out_dim),
        1,
        tuple(names),
    )


def _one_row(col: int, coeff: int = 1) -> Affine:
    return _affine({0: ((col, coeff),)}, len(LANES), 1)


def max_read(alpha: int, score: str, r: int) -> Attention:
    """Round r, block A: hardmax over the scores a_k·1 returns M_r; m += M_r, S += α_r·M_r."""
    out = {M_: ((0, 1),)}
    if alpha:
        out[S_] = ((0, alpha),)
    head = AttentionHead(_one_row(ONE), _one_row(A_), _one_row(A_), _affine(out, 1, len(LANES)))
    return Attention((head,), score, f"max{r}")


def deactivate(L: int, r: int) -> MLP:
    """Round r, block A's FFN: g = σ(a − m + 1), a −= L·g, e ← g, m ← 0 (residual)."""
    hidden = _affine(
        {0: ((A_, 1), (M_, -1)), 1: ((M_, 1),), 2: ((M_, -1),), 3: ((E_, 1),)},
        len(LANES),
        4,
        (1, 0, 0, 0),
        ("g", "m+", "m-", "e+"),
    )
    out = _affine({A_: ((0, -L),), M_: ((1, -1), (2, 1)), E_: ((0, 1), (3, -1))}, 4, len(LANES))
    return MLP((hidden, out), True, label=f"reset{r}")


def count(beta: int, n: int, r: int, score: str = "hardmax") -> Attention:
    """Round r, block B: a zero query map makes every score 0 (weights exactly 1/n); the
    value e averages to c_r/n and W_O adds β_r·n·c_r/n = β_r·c_r to S."""
    zero = Affine(len(LANES), ((),), (0,))
    out = {S_: ((0, beta * n),)} if beta else {}
    head = AttentionHead(zero, zero, _one_row(E_), _affine(out, 1, len(LANES)))
    return Attention((head,), score, f"count{r}")


def embedding(proj: Projection, dim: int, lanes: tuple[str, ...] = LANES) -> Affine:
    """E_in: (t, t, 0, 0, 0, 1, 0…) with t = factor·scale·wᵀx + shift."""
    f = proj.factor * proj.scale
    row = tuple((j, f * w) for j, w in enumerate(proj.direction) if w)
    extra = len(lanes) - len(LANES)
    rows = (row, row, (), (), (), ()) + ((),) * extra
    bias = (proj.shift, proj.shift, 0, 0, 0, 1) + (0,) * extra
    return Affine(dim, rows, bias, 1, lanes)


def resources_by_part(model: Transformer) -> dict:
    """Non-zero parameters of the three parts of the bound: d (E_in and the positional
    table), n (the contextual mapping: attention layers and their FFNs), √(nN) (the last
    MLP, the memorizer). Counted from the weights."""

    def count_affine(a: Affine, bias: bool) -> int:
        return sum(len(r) for r in a.rows) + (sum(1 for b in a.bias if b) if bias else 0)

    d = count_affine(model.embed, True) if model.embed else 0
    n_part = mem = 0
    for i, s in enumerate(model.sublayers):
        if isinstance(s, PositionalEncoding):
            d += sum(1 for row in s.table for v in row if v)
        elif isinstance(s, Attention):
            n_part += sum(
                count_affine(m, False) for h in s.heads for m in (h.query, h.key, h.value, h.output)
            )
        elif i == len(model.sublayers) - 1:
            mem += sum(count_affine(layer, True) for layer in s.layers)
        else:
            n_part += sum(count_affine(layer, True) for layer in s.layers)
    return {"d": d, "n": n_part, "sqrt_nN": mem, "total": d + n_part + mem}


# --------------------------------------------------------------------------- the model


def _token_keys(dataset: Dataset, tokens: list[int], seed: int) -> tuple[Projection, dict]:
    """Integer keys in [1, T] for the distinct tokens (Stage I direction, factor 1)."""
    vectors = [dataset.vocab[t] for t in tokens]
    p = integer_projection(vectors, random.Random(seed))
    proj = Projection(p.scale, p.direction, (p.shift - 2) // 2 + 1, 1)
    keys = {t: proj.key(dataset.vocab[t]) for t in tokens}
    if min(keys.values()) != 1 or len(set(keys.values())) != len(keys):  # pragma: no cover
        raise InputError("the token projection does not separate the tokens")
    return proj, keys


def build(
    dataset: Dataset, options: dict, *, progress: Callable[..., Any] | None = None
) -> tuple[Transformer, Kim23Witness]:
    """``build --construction kim23``: tokens → integer keys → 2n attention layers →
    (context, token) ids → the memorizer of Lemma C.1. ``progress`` hears the named steps."""
    steps = Steps(progress, "building kim23", 3 + MEMORIZER_STEPS)
    steps.step("token keys and label consistency")
    if dataset.task not in ("seq2seq", "next-token"):
        raise InputError(
            f"kim23 needs task seq2seq or next-token, the dataset has {dataset.task!r}"
        )
    seq2seq = dataset.task == "seq2seq"
    positional = bool(options.get("position_aware"))
    soft = options.get("attention", "hardmax") == "softmax"
    lanes = SOFT_LANES if soft else LANES
    seed = options.get("seed", 0)
    sv = view(dataset)
    mode = "sequence" if positional else ("seq2seq" if seq2seq else "next-token")
    check_consistency(dataset, mode, sv, position_advice=not positional)
    canon = canonical_tokens(dataset, sv.canonical)  # (N, n)
    N, n = canon.shape
    proj, key_of = _token_keys(dataset, list(sv.tokens), seed)
    T = max(key_of.values())
    table = np.zeros(int(canon.max()) + 1, object)
    for t, k in key_of.items():
        table[t] = k
    keys = table[canon]  # (N, n) integer keys
    sublayers: list = []
    if positional:
        offsets = tuple((mpq(k * T), mpq(k * T), *(mpq(0),) * (len(lanes) - 2)) for k in range(n))
        sublayers.append(PositionalEncoding(offsets, "positions"))
        keys = keys + np.arange(n, dtype=object)[None, :] * T
        T = n * T
        context_rows = canon  # the sequence itself is the context
    else:
        context_rows = np.sort(canon, axis=1)
    _, first, ctx_id = np.unique(context_rows, axis=0, return_index=True, return_inverse=True)
    ctx_id = ctx_id.reshape(-1)
    L = T + 1
    steps.step("the contextual mapping: context values and the functional")
    M, c, a_final, e_final = context_rounds(keys, L)
    # softmax: S reads (c_r·M_r, c_r), exact after the re-quantization (kim23_softmax)
    moments = M * c if soft else M
    alpha, beta, S, draws = _functional(moments[first], c[first], options, random.Random(seed))
    S_of = S[ctx_id]  # per sequence
    temperature = None
    for r in range(n):
        if soft:
            temperature = options.get("temperature") or temperature_for(n, n * L)
            sublayers += [
                max_read_soft(temperature, r),
                reset_soft(L, n * L, r),
                count_soft(alpha[r], beta[r], n, r),
            ]
        else:
            sublayers += [max_read(alpha[r], "hardmax", r), deactivate(L, r), count(beta[r], n, r)]

    # the (context, token) ids at the judged positions, distinct, with their first label
    steps.step("the (context, token) ids")
    positions = list(range(n)) if seq2seq else [n - 1]
    A = T + 1
    A = options.get("id_multiplier") or A  # a user's A (A ≥ T keeps the ids apart)
    S_min = min(S.tolist())
    labels = dataset.labels
    first_item: dict[int, tuple[int, int]] = {}
    points, point_labels, collisions = [], [], []
    for i in range(N):
        for k in positions:
            t = int(keys[i, k])
            z = A * (int(S_of[i]) - S_min) + t
            y = labels[i][k] if seq2seq else labels[i]
            owner = first_item.setdefault(z, (i, k))
            if owner != (i, k):
                oi, ok = owner
                oy = labels[oi][ok] if seq2seq else labels[oi]
                if oy != y:
                    collisions.append((_item(oi, ok, seq2seq), _item(i, k, seq2seq)))
                continue
            a, e = int(a_final[i, k]), int(e_final[i, k])
            point = (mpq(t), mpq(a), mpq(0), mpq(e), mpq(int(S_of[i])), mpq(1))
            if soft:  # v = a·g of the last round: M_n at its maximisers
                point += (mpq(e * int(M[i, n - 1])),)
            points.append(point)
            point_labels.append(y)
    direction = (1, 0, 0, 0, A, 0) + (0,) * (len(lanes) - len(LANES))
    memorizer_projection = Projection(1, direction, -2 * A * S_min, 2)
    mlp, mem_witness = build_memorizer(
        points,
        point_labels,
        num_classes=dataset.num_classes,
        gadget=options.get("gadget", DEFAULT_GADGET),
        group_size=options.get("group_size"),
        seed=seed + 1,
        projection=memorizer_projection,
        input_names=lanes,
        label="memorizer",
        steps=steps,
    )
    sublayers.append(mlp)
    model = Transformer(
        input_dim=dataset.dim,
        sublayers=tuple(sublayers),
        embed=embedding(proj, dataset.dim, lanes),
        meta={
            "construction": "kim23",
            "theorem": THEOREM,
            "options": {k: v for k, v in options.items()},
            "sequence_length": n,
            "position_aware": positional,
            "temperature": temperature,
        },
    )
    parts = resources_by_part(model)
    model.meta["resources_by_part"] = parts
    witness = Kim23Witness(
        token_bound=T,
        alphas=tuple(alpha),
        betas=tuple(beta),
        draws=draws,
        distinct_contexts=len(first),
        distinct_values=len(set(S.tolist())),
        collisions=tuple(collisions),
        memorizer=mem_witness,
        parts=parts,
    )
    steps.done()
    return model, witness


def _item(i: int, k: int, seq2seq: bool) -> str:
    return f"sequences[{i}][{k}]" if seq2seq else f"sequences[{i}]"
