"""The margin checklist of Kajitsuka & Sato 2025 (Theorem 4.1 and its variants), measured on
the evaluated network (kajitsuka_sato_2025.md §5.3, items 3–9).

Every figure comes from the trace: φ̃ and the token id are read from the stream before the
attention layer (F^(FF)_1's output, or the embedding table's for token-id inputs, Theorem E.1),
the sequence id and the context id from the stream after it.
"""

from __future__ import annotations

from collections import defaultdict

from gmpy2 import mpq

from exactmem.data import Dataset
from exactmem.evaluate.reference import Stream, Trace
from exactmem.exact import format_rational
from exactmem.model import MLP, Attention
from exactmem.sequences import SequenceView, describe_multiset, restrict
from exactmem.verify import Check, _examples, check_any_memorizer

__all__ = ["check_ks25"]


def _is_nonneg_int(v: mpq) -> bool:
    return v.denominator == 1 and v >= 0


def _min_gap(values) -> mpq | None:
    ordered = sorted(set(values))
    return min((b - a for a, b in zip(ordered, ordered[1:], strict=False)), default=None)


def _fmt(v) -> str | None:
    return None if v is None else format_rational(v)


def check_ks25(trace: Trace, model, ds: Dataset, sv: SequenceView) -> list[Check]:
    """Items 3–9 of the checklist, plus the Lemma C.1 invariants of both memorizers.

    Works for every variant: seq-to-seq (Corollary 4.1) is judged at every position; deep sets
    (Theorem D.1) read only the sum; split memorizers (Theorem F.1) are checked per sub-network.
    """
    variant = model.meta.get("construction")
    at = next(i for i, s in enumerate(model.sublayers) if isinstance(s, Attention))
    phi_mlp = model.sublayers[0] if at == 1 else None
    f2_mlp = model.sublayers[at + 1]
    n = len(ds.sequences[0])
    first = trace.streams[at - 1] if at else trace.embedded
    mixed = trace.streams[at]
    positions = list(range(n)) if variant == "ks25-seq2seq" else [n - 1]

    row_of: dict[int, int] = {}
    for i, seq in enumerate(ds.sequences):
        for k, tok in enumerate(seq):
            row_of.setdefault(sv.canonical[tok], int(first.index[i, k]))
    phi_rows, tid_rows = first.lane("phi"), first.lane("tid")
    phi = {t: phi_rows[r] for t, r in row_of.items()}
    tid = {t: tid_rows[r] for t, r in row_of.items()}
    distinct = list(dict.fromkeys(sv.multisets))
    first_seq = {}
    for i, ms in enumerate(sv.multisets):
        first_seq.setdefault(ms, i)

    checks = [_phi_values(phi, len(distinct))]
    A = {t for t, v in phi.items() if v != 0}
    token_gap = _min_gap(tid.values())
    checks.append(_token_ids(tid, token_gap, model.meta.get("token_id_gap", 2)))
    checks.append(_witness_set(distinct, A, first_seq))
    sums = {ms: sum((c * phi[t] for t, c in ms), mpq(0)) for ms in distinct}
    checks.append(_sequence_sums(sums, first_seq))
    checks.append(_attention(trace.attention[0], mixed, ds, sv, positions, phi, tid, sums, n))
    if variant == "ks25-deep-sets":
        checks.append(_set_ids(mixed, ds, sv, n))
    else:
        checks.append(_context_ids(mixed, ds, sv, positions, n, token_gap))

    if isinstance(phi_mlp, MLP) and ("group_size" in phi_mlp.meta or "subnetworks" in phi_mlp.meta):
        expected = {r: int(phi[t]) for t, r in row_of.items() if _is_nonneg_int(phi[t])}
        checks += check_any_memorizer(trace, phi_mlp, expected, lambda r: f"token row {r}")
    expected2: dict[int, int] = {}
    for i in range(ds.size):
        for col, k in enumerate(positions):
            y = ds.labels[i][k] if variant == "ks25-seq2seq" else ds.labels[i]
            expected2.setdefault(int(mixed.index[i, col]), y)
    checks += check_any_memorizer(trace, f2_mlp, expected2, lambda r: f"context id row {r}")
    return checks


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


def _token_ids(tid: dict, gap, required: int) -> Check:
    """Lemma C.2: distinct tokens get integer ids at least ``required`` apart."""
    bad = [
        f"vocab[{t}]: token id {format_rational(v)}" for t, v in tid.items() if v.denominator != 1
    ]
    if len(set(tid.values())) != len(tid):
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


def _witness_set(distinct, A: set, first_seq: dict) -> Check:
    """Lemma B.1: the restrictions to A of distinct multisets stay distinct."""
    owner: dict = {}
    bad = []
    for ms in distinct:
        j = owner.setdefault(restrict(ms, A), ms)
        if j != ms:
            bad.append(
                f"sequences[{first_seq[j]}] and sequences[{first_seq[ms]}]: restrictions "
                "to A coincide"
            )
    return Check(
        "ks25.witness_set",
        not bad,
        _examples(bad) if bad else "restricted multisets pairwise distinct",
    )


def _sequence_sums(sums: dict, first_seq: dict) -> Check:
    """Lemmas B.2/B.3: sums of φ̃ over distinct multisets are pairwise ≥ 1 apart."""
    by_sum: dict = defaultdict(list)
    for ms, s in sums.items():
        by_sum[s].append(ms)
    bad = []
    for s, group in by_sum.items():
        if len(group) > 1:
            a, b = group[0], group[1]
            bad.append(
                f"sequences[{first_seq[a]}] {describe_multiset(a)} and "
                f"sequences[{first_seq[b]}] {describe_multiset(b)} have equal φ̃ sums "
                f"{format_rational(s)}"
            )
    gap = _min_gap(sums.values())
    if gap is not None and gap < 1 and not bad:
        bad.append(f"two sequence sums only {format_rational(gap)} apart")
    return Check(
        "ks25.sequence_sums",
        not bad,
        _examples(bad) if bad else "sums of φ̃ pairwise ≥ 1 apart across distinct multisets",
        {"min_sum_gap": _fmt(gap)},
    )


def _attention(att, mixed: Stream, ds, sv, positions, phi, tid, sums, n) -> Check:
    """Eqs. (39), (53): all scores equal (weights exactly 1/n), output (φ̃, id, mean φ̃)."""
    bad = []
    if att.unequal_columns:
        bad.append(f"{att.unequal_columns} of {att.columns} query columns have unequal scores")
    names = mixed.names
    for i in range(ds.size):
        for col, k in enumerate(positions):
            row = mixed.rows[int(mixed.index[i, col])]
            tok = sv.canonical[ds.sequences[i][k]]
            want = (phi[tok], tid[tok], sums[sv.multisets[i]] / n)
            got = tuple(row[names.index(x)] for x in ("phi", "tid", "seq"))
            if got != want:
                bad.append(
                    f"sequences[{i}][{k}]: context id {tuple(map(format_rational, got))}, "
                    f"eq. (53) gives {tuple(map(format_rational, want))}"
                )
        if len(bad) > 5:
            break
    return Check(
        "ks25.attention",
        not bad,
        _examples(bad)
        if bad
        else "all scores equal, weights exactly 1/n; output is (φ̃, id, mean φ̃)",
        {"unequal_columns": att.unequal_columns},
    )


def _context_ids(mixed: Stream, ds, sv, positions, n, token_gap) -> Check:
    """Eq. (55): distinct keys (token, multiset) give context ids ≥ 1/n apart in ℓ2.

    Ids sharing (φ̃, id) differ only in the sequence id and are compared exactly; ids of
    different tokens are at least the token-id gap apart."""
    names = mixed.names
    owner: dict = {}
    bad = []
    for i in range(ds.size):
        for col, k in enumerate(positions):
            r = int(mixed.index[i, col])
            key = (sv.canonical[ds.sequences[i][k]], sv.multisets[i])
            j, l, other = owner.setdefault(r, (i, k, key))
            if other != key:
                bad.append(
                    f"sequences[{j}][{l}] and sequences[{i}][{k}] have different "
                    "(token, multiset) but the same context id"
                )
    groups: dict = defaultdict(list)
    for r in owner:
        row = mixed.rows[r]
        groups[(row[names.index("phi")], row[names.index("tid")])].append(row[names.index("seq")])
    same = [g for g in (_min_gap(v) for v in groups.values()) if g is not None]
    within = min(same) ** 2 if same else None
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
        _examples(bad) if bad else detail,
        {
            "min_context_gap2_same_token": _fmt(within),
            "context_gap2_lower_bound": _fmt(bound),
            "required": format_rational(required),
        },
    )


def _set_ids(mixed: Stream, ds, sv, n) -> Check:
    """Theorem D.1: distinct multisets have set ids (mean φ̃) at least 1/n apart."""
    seq = mixed.names.index("seq")
    owner: dict = {}
    bad = []
    for i in range(ds.size):
        value = mixed.rows[int(mixed.index[i, -1])][seq]
        j = owner.setdefault(value, i)
        if sv.multisets[j] != sv.multisets[i]:
            bad.append(
                f"sequences[{j}] and sequences[{i}] are different multisets with the same "
                f"set id {format_rational(value)}"
            )
    gap = _min_gap(owner)
    if gap is not None and gap < mpq(1, n) and not bad:
        bad.append(f"two set ids only {format_rational(gap)} apart (< 1/n)")
    return Check(
        "deepsets.set_ids",
        not bad,
        _examples(bad) if bad else "distinct multisets have set ids ≥ 1/n apart",
        {"min_set_id_gap": _fmt(gap)},
    )
