"""The margin checklist of Kajitsuka & Sato 2025 (Theorem 4.1 and its variants), measured on
the evaluated network (Kajitsuka & Sato 2025, Theorem 4.1 and Lemmas B.1–B.3, C.1, C.2;
items 3–9 of docs/theorem-4-1.md's checklist).

Every figure comes from the trace: φ̃ and the token id are read from the stream before the
attention layer (F^(FF)_1's output, or the embedding table's for token-id inputs, Theorem E.1),
the sequence id and the context id from the stream after it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np
from gmpy2 import mpq

from exactmem.checks.certificate import MAX_EXAMPLES, Check, ChecklistStructureError, _examples
from exactmem.checks.dataflow import (
    cut_check,
    graph,
    lane_units,
    memorizer_cut,
    memorizer_dataflow,
    merged,
)
from exactmem.checks.memorizer import check_any_memorizer
from exactmem.core.exact import format_rational
from exactmem.core.exact_arrays import (
    exact,
    first_occurrences,
    int_array,
    multiset_ids,
    ratio_equal,
    rational_table,
    unique_first,
)
from exactmem.core.model import MLP
from exactmem.datasets.dataset import SEPARATION_LIMIT, Dataset, radius_and_separation
from exactmem.datasets.sequences import (
    SequenceView,
    describe_multiset,
    sequence_tokens,
    token_geometry,
)
from exactmem.evaluate.records import Stream, Trace

__all__ = ["check_ks25"]


def _is_nonneg_int(v: mpq) -> bool:
    return v.denominator == 1 and v >= 0


def _min_gap(values) -> mpq | None:
    ordered = sorted(set(values))
    return min((b - a for a, b in zip(ordered, ordered[1:], strict=False)), default=None)


def _fmt(v) -> str | None:
    return None if v is None else format_rational(v)


def check_ks25(
    trace: Trace,
    model,
    ds: Dataset,
    sv: SequenceView,
    variant: str = "ks25-next-token",
    budget: int | None = None,
) -> list[Check]:
    """Items 3–9 of the checklist, plus the Lemma C.1 invariants of both memorizers.

    Works for every variant: seq-to-seq (Corollary 4.1) is judged at every position; deep sets
    (Theorem D.1) read only the sum; split memorizers (Theorem F.1) are checked per sub-network.
    Per-sequence checks run on whole arrays (exactmem.core.exact_arrays): exact integers, int64
    only where the values are proved to fit. ``variant`` is the construction the user demands
    (never read from the model file); a model without the lanes or stages it reads raises
    (the caller refutes the checklist). ``budget``: the bit budget B the user states
    (``verify --set bit_budget=B``) against which the split is judged (``split.budget``, in
    every variant when stated; for ks25-bit-budget undecided without it).
    """
    if (variant == "ks25-token-ids") != bool(model.token_inputs):
        raise ChecklistStructureError(
            "Theorem E.1 reads token ids through an embedding table; the other variants "
            "read token vectors"
        )
    # the architecture of Theorem 4.1 (eq. (4)): F1, one attention layer, F2 — Theorem E.1's
    # embedding table in place of F1 — and nothing else: a sub-layer outside the checklist's
    # reach would let an unchecked network decide the outputs
    shape = tuple(type(s).__name__ for s in model.sublayers)
    want = ("Attention", "MLP") if variant == "ks25-token-ids" else ("MLP", "Attention", "MLP")
    if shape != want:
        raise ChecklistStructureError(
            f"sub-layers {' → '.join(shape) or 'none'}; {variant} is "
            f"{' → '.join(want)}" + (" (with an embedding table)" if model.token_inputs else "")
        )
    if model.unembed is not None or (model.embed is not None and not model.token_inputs):
        raise ChecklistStructureError(f"{variant} has no input or output map besides its layers")
    at = shape.index("Attention")
    phi_mlp = model.sublayers[0] if at == 1 else None
    f2_mlp = model.sublayers[at + 1]
    # Theorem F.1's split is judged whenever a budget is stated (every variant builds it under
    # --set bit_budget=B), and always for ks25-bit-budget (undecided without B); a memorizer
    # left unsplit is a split into one network, held to B² inputs like any other
    judge_budget = variant == "ks25-bit-budget" or budget is not None
    n = len(ds.sequences[0])
    first = trace.streams[at - 1] if at else trace.embedded
    mixed = _exact_lanes(trace.streams[at], ("phi", "tid", "seq"))
    if first is None:
        raise ChecklistStructureError("the evaluation kept no stream before the attention layer")
    positions = list(range(n)) if variant == "ks25-seq2seq" else [n - 1]

    canon = sequence_tokens(ds, sv)  # (N, n) canonical tokens (narrow ints)
    tokens, at_first = unique_first(canon.reshape(-1))  # (no sort of the N·n tokens)
    token_rows = first.index.reshape(-1)[at_first]
    row_of = dict(zip(tokens.tolist(), token_rows.tolist(), strict=True))
    phi_rows, tid_rows = first.lane("phi"), first.lane("tid")
    phi = {t: phi_rows[r] for t, r in row_of.items()}
    tid = {t: tid_rows[r] for t, r in row_of.items()}
    ms_id, ms_first = sv.multiset_ids, sv.first_of_multiset  # multisets, first-seen order

    checks = [_phi_values(phi, len(ms_first))]
    A = {t for t, v in phi.items() if v != 0}
    # the ids' distinct values and least gap, on their numerators over the stream's denominator
    ids = np.unique(exact(first.numerators("tid"))[token_rows])
    token_gap = _ratio((ids[1:] - ids[:-1]).min(), first.den) if len(ids) > 1 else None
    # Lemma C.2 separates token ids by 2; Theorem E.1's embedding table by 1 (its ids are the
    # vocabulary indices themselves)
    required = 1 if variant == "ks25-token-ids" else 2
    checks.append(_token_ids(tid, token_gap, required, distinct=len(ids)))
    checks.append(_witness_set(canon[ms_first], A, ms_first))
    sums, sden = _sums(canon, phi)
    checks.append(_sequence_sums(sums[ms_first], sden, ms_first, sv))
    tok = canon[:, positions].astype(np.int64)  # multiplied into (token, multiset) keys
    checks.append(_attention(trace.attention[0], mixed, tok, positions, phi, tid, sums, sden * n))
    if variant == "ks25-deep-sets":
        checks.append(_set_ids(mixed, ms_id, n))
    else:
        key = tok * len(ms_first) + ms_id[:, None]  # (token, multiset) as one id
        checks.append(_context_ids(mixed, key, positions, n, token_gap))

    checks.append(_phi_range(phi, sums[ms_first], sden, len(ms_first), n))
    if variant == "ks25-token-ids":
        checks.append(_embedding_ids(tid, len(ds.vocab)))
    else:
        vectors = [ds.vocab[t] for t in tokens.tolist()]  # the view's tokens: δ measured there
        checks.append(_token_id_range(tid, vectors, lambda: token_geometry(ds, sv)))

    if isinstance(phi_mlp, MLP) and A:  # φ̃ ≠ 0 somewhere: F1 must hold Lemma B.3's memorizer
        expected = {r: int(phi[t]) for t, r in row_of.items() if _is_nonneg_int(phi[t])}
        checks += check_any_memorizer(
            trace,
            phi_mlp,
            expected,
            lambda r: f"token row {r}",
            budget=budget,
            judge_budget=judge_budget,
        )
    labels = int_array(ds.labels).reshape(ds.size, -1)
    rows, where = first_occurrences(mixed.index)
    expected2 = dict(zip(rows.tolist(), labels.reshape(-1)[where].tolist(), strict=True))
    checks += check_any_memorizer(
        trace,
        f2_mlp,
        expected2,
        lambda r: f"context id row {r}",
        budget=budget,
        judge_budget=judge_budget,
    )
    read = ("seq",) if variant == "ks25-deep-sets" else ("phi", "tid", "seq")
    checks += _dataflow(model, at, first.names, mixed.names, read, bool(A))
    return checks


def _dataflow(model, at: int, before, after, read, phi_used: bool) -> list[Check]:
    """The checked lanes produce the output (:mod:`exactmem.checks.dataflow`): F2's output is
    computed
    from its checked read-out; F2 reads only the lanes ``read`` of the stream after the
    attention (the context ids checked above, located by the trace's names: a lane named
    falsely fails here), and those lanes read only φ̃ and the token id before it; φ̃ is
    F1's checked read-out (constant when A is empty)."""
    g = graph(model)
    checks = [memorizer_dataflow("ks25.dataflow.f2", model, at + 1)]
    ids = lane_units(g, at + 1, after, read)
    inputs = lane_units(g, at, before, ("phi", "tid"))
    lanes = [
        cut_check(
            "ks25.dataflow.lanes",
            model,
            ids,
            what=f"the checked context-id lanes {', '.join(read)}",
            missing=[x for x in read if x not in after],
            g=g,
        ),
        cut_check(
            "ks25.dataflow.lanes",
            model,
            inputs,
            targets=ids,
            what="the checked lanes φ̃ and token id before the attention",
            missing=[x for x in ("phi", "tid") if x not in before],
            g=g,
            require_use=False,
        ),
    ]
    checks.append(merged("ks25.dataflow.lanes", lanes))
    f1 = model.sublayers[0] if at == 1 else None
    if isinstance(f1, MLP):
        cut, missing = memorizer_cut(g, 0, f1) if phi_used else (set(), [])
        checks.append(
            cut_check(
                "ks25.dataflow.f1",
                model,
                cut,
                targets=lane_units(g, at, before, ("phi",)),
                what="F1's checked read-out (Lemma B.3's memorizer of φ̃)"
                if phi_used
                else "nothing (A is empty: φ̃ must be constant)",
                missing=missing,
                g=g,
                require_use=phi_used,
            )
        )
    return checks


def _exact_lanes(stream: Stream, names) -> Stream:
    """``stream`` with the lanes ``names`` (those it has) already :func:`exact`: the checks
    below read each of them more than once."""
    if len(stream.names) != len(stream.columns):
        return stream
    columns = [
        exact(col) if name in names else col
        for name, col in zip(stream.names, stream.columns, strict=True)
    ]
    return replace(stream, columns=columns)


def _sums(canon: np.ndarray, phi: dict[int, mpq]) -> tuple[np.ndarray, int]:
    """Σ φ̃ over each sequence (= over its multiset): numerators and their denominator."""
    tab, den = rational_table(phi, width=canon.shape[1])
    return tab[canon].sum(axis=1), den


def _ratio(num, den: int) -> mpq:
    return mpq(int(num), den)


def _phi_values(phi: dict, distinct: int) -> Check:
    """Lemma B.3: φ̃ is a non-negative integer on every token; A = its support, |A| < N'."""
    bad = [f"vocab[{t}]: φ̃ = {format_rational(v)}" for t, v in phi.items() if not _is_nonneg_int(v)]
    A = [t for t, v in phi.items() if v != 0]
    if len(A) > max(distinct - 1, 0):
        bad.append(f"|A| = {len(A)} exceeds the {distinct - 1} of Lemma B.1")
    detail = f"φ̃ is a non-negative integer on all {len(phi)} tokens; |A| = {len(A)}"
    figures = {
        "witness_tokens": len(A),
        "distinct_multisets": distinct,
        "max_phi": format_rational(max(phi.values())),
    }
    return Check("ks25.phi_values", not bad, _examples(bad) if bad else detail, figures)


def _token_ids(tid: dict, gap, required: int, distinct: int | None = None) -> Check:
    """Lemma C.2: distinct tokens get integer ids at least ``required`` apart. ``distinct``:
    how many different ids there are, if the caller counted them."""
    bad = [
        f"vocab[{t}]: token id {format_rational(v)}" for t, v in tid.items() if v.denominator != 1
    ]
    if (len(set(tid.values())) if distinct is None else distinct) != len(tid):
        bad.append("two distinct tokens share a token id")
    if gap is not None and gap < required:
        bad.append(f"token ids only {format_rational(gap)} apart")
    detail = f"token ids distinct, ≥ {required} apart"
    return Check(
        "ks25.token_ids",
        not bad,
        _examples(bad) if bad else detail,
        {"min_token_id_gap": _fmt(gap)},
    )


def _witness_set(distinct: np.ndarray, A: set, ms_first: np.ndarray) -> Check:
    """Lemma B.1: the restrictions to A of distinct multisets stay distinct.

    ``distinct``: one sequence per distinct multiset (canonical tokens), in first-seen order."""
    in_A = np.zeros(int(distinct.max(initial=0)) + 1, bool)
    in_A[list(A)] = True
    ids, owners = multiset_ids(distinct, keep=in_A)
    clash = np.nonzero(owners[ids] != np.arange(len(ids)))[0]
    bad = [
        f"sequences[{ms_first[owners[ids[k]]]}] and sequences[{ms_first[k]}]: restrictions "
        "to A coincide"
        for k in clash[: MAX_EXAMPLES + 1]
    ]
    return Check(
        "ks25.witness_set",
        not bad,
        _examples(bad, len(clash)) if bad else "restricted multisets pairwise distinct",
    )


def _sequence_sums(sums: np.ndarray, den: int, ms_first: np.ndarray, sv) -> Check:
    """Lemmas B.2/B.3: sums of φ̃ over distinct multisets are pairwise ≥ 1 apart.

    ``sums``: numerators over ``den``, one per distinct multiset in first-seen order."""
    order = np.argsort(sums, kind="stable")
    ordered = sums[order]
    same = ordered[1:] == ordered[:-1]
    starts = np.nonzero(same & ~np.concatenate(([False], same[:-1])))[0]
    pairs = sorted((int(order[k]), int(order[k + 1])) for k in starts)  # by first appearance
    bad = []
    for a, b in pairs[: MAX_EXAMPLES + 1]:
        i, j = int(ms_first[a]), int(ms_first[b])
        bad.append(
            f"sequences[{i}] {describe_multiset(sv.multisets[i])} and "
            f"sequences[{j}] {describe_multiset(sv.multisets[j])} have equal φ̃ sums "
            f"{format_rational(_ratio(sums[a], den))}"
        )
    values = ordered[np.concatenate(([True], ~same))]
    gap = _ratio((values[1:] - values[:-1]).min(), den) if len(values) > 1 else None
    if gap is not None and gap < 1 and not bad:
        bad.append(f"two sequence sums only {format_rational(gap)} apart")
    return Check(
        "ks25.sequence_sums",
        not bad,
        _examples(bad, max(len(pairs), len(bad)))
        if bad
        else "sums of φ̃ pairwise ≥ 1 apart across distinct multisets",
        {"min_sum_gap": _fmt(gap)},
    )


def _attention(att, mixed: Stream, tok, positions, phi, tid, sums, sums_den) -> Check:
    """Eqs. (39), (53): all scores equal (weights exactly 1/n), output (φ̃, id, mean φ̃).

    ``tok``: canonical token at each judged (sequence, position); ``sums / sums_den`` the mean
    φ̃ of each sequence."""
    bad = []
    if att.unequal_columns:
        bad.append(f"{att.unequal_columns} of {att.columns} query columns have unequal scores")
    phi_tab, phi_den = rational_table(phi)
    tid_tab, tid_den = rational_table(tid)
    wanted = {
        "phi": (phi_tab[tok], phi_den),
        "tid": (tid_tab[tok], tid_den),
        "seq": (np.repeat(sums[:, None], tok.shape[1], axis=1), sums_den),
    }
    got = {name: exact(mixed.numerators(name))[mixed.index] for name in wanted}
    ok = np.ones(tok.shape, bool)
    for name, (want, den) in wanted.items():
        ok &= ratio_equal(got[name], mixed.den, want, den)
    wrong = np.argwhere(~ok)
    for i, col in wrong[: MAX_EXAMPLES + 1]:
        have = tuple(_ratio(got[x][i, col], mixed.den) for x in wanted)
        want = tuple(_ratio(w[i, col], d) for w, d in wanted.values())
        bad.append(
            f"sequences[{i}][{positions[col]}]: context id {tuple(map(format_rational, have))}, "
            f"eq. (53) gives {tuple(map(format_rational, want))}"
        )
    return Check(
        "ks25.attention",
        not bad,
        _examples(bad, len(wrong) + bool(att.unequal_columns))
        if bad
        else "all scores equal, weights exactly 1/n; output is (φ̃, id, mean φ̃)",
        {"unequal_columns": att.unequal_columns},
    )


def _context_ids(mixed: Stream, key: np.ndarray, positions, n, token_gap) -> Check:
    """Eq. (55): distinct keys (token, multiset) give context ids ≥ 1/n apart in ℓ2.

    Ids sharing (φ̃, id) differ only in the sequence id and are compared exactly; ids of
    different tokens are at least the token-id gap apart. ``key``: one id per (token,
    multiset) at each judged (sequence, position)."""
    P = key.shape[1]
    rows, first, inverse = first_occurrences(mixed.index, inverse=True)
    flat = key.reshape(-1)
    clash = np.nonzero(flat != flat[first][inverse.reshape(-1)])[0]
    bad = []
    for m in clash[: MAX_EXAMPLES + 1]:
        j, jc = divmod(int(first[inverse.reshape(-1)[m]]), P)
        i, ic = divmod(int(m), P)
        bad.append(
            f"sequences[{j}][{positions[jc]}] and sequences[{i}][{positions[ic]}] have "
            "different (token, multiset) but the same context id"
        )
    lanes = [exact(mixed.numerators(x))[rows] for x in ("phi", "tid", "seq")]
    gap = _gap_within(*lanes)
    within = _ratio(gap, mixed.den) ** 2 if gap is not None else None
    cross = token_gap * token_gap if token_gap is not None else None
    candidates = [x for x in (within, cross) if x is not None]
    bound = min(candidates) if candidates else None
    required = mpq(1, n * n)
    if bound is not None and bound < required and not bad:
        bad.append(f"two context ids only {format_rational(bound)} apart in ℓ2² (< 1/n²)")
    detail = (
        f"distinct keys give context ids with ℓ2² ≥ {_fmt(bound) or 'none'} ≥ 1/n² = "
        f"{format_rational(required)}"
    )
    return Check(
        "ks25.context_ids",
        not bad,
        _examples(bad, max(len(clash), len(bad))) if bad else detail,
        {
            "min_context_gap2_same_token": _fmt(within),
            "context_gap2_lower_bound": _fmt(bound),
            "required": format_rational(required),
        },
    )


def _gap_within(phi: np.ndarray, tid: np.ndarray, seq: np.ndarray):
    """The least positive difference of ``seq`` between rows with equal (phi, tid), or None."""
    if any(a.dtype == object for a in (phi, tid, seq)):
        groups: dict = defaultdict(list)
        for p, t, v in zip(phi.tolist(), tid.tolist(), seq.tolist(), strict=True):
            groups[(p, t)].append(v)
        gaps = [g for g in (_min_gap(v) for v in groups.values()) if g is not None]
        return min(gaps) if gaps else None
    order = np.lexsort((seq, tid, phi))
    p, t, v = phi[order], tid[order], seq[order]
    d = v[1:] - v[:-1]  # both below 2⁶² in magnitude: no overflow
    d = d[(p[1:] == p[:-1]) & (t[1:] == t[:-1]) & (d > 0)]
    return int(d.min()) if d.size else None


def _set_ids(mixed: Stream, ms_id: np.ndarray, n) -> Check:
    """Theorem D.1: distinct multisets have set ids (mean φ̃) at least 1/n apart."""
    value = exact(mixed.numerators("seq"))[mixed.index[:, -1]]
    distinct, first, inverse = np.unique(value, return_index=True, return_inverse=True)
    owner = first[inverse.reshape(-1)]
    clash = np.nonzero(ms_id != ms_id[owner])[0]
    bad = [
        f"sequences[{owner[i]}] and sequences[{i}] are different multisets with the same "
        f"set id {format_rational(_ratio(value[i], mixed.den))}"
        for i in clash[: MAX_EXAMPLES + 1]
    ]
    gap = _ratio((distinct[1:] - distinct[:-1]).min(), mixed.den) if len(distinct) > 1 else None
    if gap is not None and gap < mpq(1, n) and not bad:
        bad.append(f"two set ids only {format_rational(gap)} apart (< 1/n)")
    return Check(
        "deepsets.set_ids",
        not bad,
        _examples(bad, max(len(clash), len(bad)))
        if bad
        else "distinct multisets have set ids ≥ 1/n apart",
        {"min_set_id_gap": _fmt(gap)},
    )


_PI_BELOW, _PI_ABOVE = mpq(3141592653589793, 10**15), mpq(3141592653589794, 10**15)


def _below_pi(q: mpq) -> bool:
    """q < π, decided on Arb balls at rising precision (π is irrational: never equal); first
    against π's 16-digit rational bracket, which settles all but a q within 10⁻¹⁵ of π without
    importing flint."""
    if q < _PI_BELOW:
        return True
    if q > _PI_ABOVE:
        return False
    from flint import arb, ctx, fmpq

    precision = 64
    while True:
        old = ctx.prec
        ctx.prec = precision
        try:
            pi, x = arb.pi(), arb(fmpq(int(q.numerator), int(q.denominator)))
            if x < pi or x > pi:
                return bool(x < pi)
        finally:
            ctx.prec = old
        precision *= 2


def _at_most_sqrt_pi_times(x: mpq, c: mpq) -> bool:
    """x ≤ c·√π for c > 0 (x² < c²π when x > 0)."""
    return x <= 0 or _below_pi(x * x / (c * c))


def _phi_range(phi: dict, sums: np.ndarray, den: int, distinct: int, M: int) -> Check:
    """Lemma B.3's range on the evaluated φ̃: every value in [⌈4N³√π⌉] ∪ {0} and every sum
    over a sequence (a multiset of M = n tokens) at most 4MN³√π, N the number of distinct
    multisets (the lemma's N)."""
    cube = mpq(4 * distinct**3)
    top = max(phi.values(), default=mpq(0))
    top_sum = _ratio(sums.max(), den) if len(sums) else mpq(0)
    bad = []
    # φ̃ ≤ ⌈4N³√π⌉ ⇔ ⌈φ̃⌉ − 1 < 4N³√π (the bound is irrational)
    if not _at_most_sqrt_pi_times(mpq(-((-top.numerator) // top.denominator) - 1), cube):
        bad.append(f"φ̃ reaches {format_rational(top)} > ⌈4N³√π⌉ (N = {distinct} multisets)")
    if not _at_most_sqrt_pi_times(top_sum, M * cube):
        bad.append(
            f"a sequence sums φ̃ to {format_rational(top_sum)} > 4MN³√π "
            f"(M = {M}, N = {distinct} multisets)"
        )
    return Check(
        "ks25.phi_range",
        not bad,
        "; ".join(bad)
        if bad
        else f"φ̃ ≤ ⌈4N³√π⌉ and sums ≤ 4MN³√π (M = {M}, N = {distinct} distinct multisets)",
        {"max_phi": format_rational(top), "max_sum": format_rational(top_sum)},
    )


def _token_id_range(tid: dict, vectors: list, geometry=None) -> Check:
    """Lemma C.2's range on the evaluated token ids of the M distinct tokens:
    0 ≤ F(x) ≤ 10·r·M²·δ⁻¹·√(πd), r the largest norm, δ the least distance (exact), taken as
    Theorem B.1 takes them: r ≥ 1 and δ ≤ 1 (tokens further apart are also 1-separated).
    ``geometry``: returns (r², δ²) of ``vectors`` (default: measured here)."""
    M, d = len(vectors), len(vectors[0]) if vectors else 0
    low, high = min(tid.values(), default=mpq(0)), max(tid.values(), default=mpq(0))
    bad = [f"a token id is {format_rational(low)} < 0"] if low < 0 else []
    figures = {"max_token_id": format_rational(high)}
    if M > SEPARATION_LIMIT:
        detail = (
            f"token ids ≥ 0; the upper end is not checked (δ of more than {SEPARATION_LIMIT} "
            "tokens is not measured)"
        )
        return Check("ks25.token_id_range", not bad, "; ".join(bad) or detail, figures)
    r2, delta2 = geometry() if geometry else radius_and_separation(vectors)
    r2 = max(r2, mpq(1))
    if delta2 is not None and high > 0:
        delta2 = min(delta2, mpq(1))
        # F ≤ 10rM²√(πd)/δ ⇔ F²δ²/(100 r² M⁴ d) < π
        if not _below_pi(high * high * delta2 / (100 * r2 * M**4 * d)):
            bad.append(
                f"a token id is {format_rational(high)} > 10rM²√(πd)/δ "
                f"(M = {M} tokens, r² = {format_rational(r2)}, δ² = {format_rational(delta2)})"
            )
    detail = f"0 ≤ token ids ≤ 10rM²√(πd)/δ (M = {M} distinct tokens, r ≥ 1, δ ≤ 1)"
    return Check("ks25.token_id_range", not bad, "; ".join(bad) or detail, figures)


def _embedding_ids(tid: dict, omega: int) -> Check:
    """Theorem E.1: the embedding column of token x carries its index, an integer in [1, ω]."""
    bad = [
        f"vocab[{t}]: token id {format_rational(v)} outside [1, {omega}]"
        for t, v in tid.items()
        if not (1 <= v <= omega)
    ]
    return Check(
        "ks25.token_id_range",
        not bad,
        _examples(bad) if bad else f"token ids in [1, ω] = [1, {omega}]",
        {"max_token_id": format_rational(max(tid.values(), default=mpq(0)))},
    )
