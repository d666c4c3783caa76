"""The margin checklist of Kajitsuka & Sato 2025, Theorem 4.1, measured on the evaluated
network (kajitsuka_sato_2025.md §5.3, items 3–9).

Every figure comes from the trace: φ̃ and the token id are read from the stream after
F^(FF)_1, the sequence id and context id from the stream after the attention layer.
"""

from __future__ import annotations

from collections import defaultdict

from gmpy2 import mpq

from exactmem.data import Dataset
from exactmem.evaluate.reference import Trace
from exactmem.exact import format_rational
from exactmem.model import MLP
from exactmem.sequences import SequenceView, describe_multiset, restrict
from exactmem.verify import Check, _examples, check_memorizer

__all__ = ["check_ks25"]


def _is_nonneg_int(v: mpq) -> bool:
    return v.denominator == 1 and v >= 0


def check_ks25(trace: Trace, model, ds: Dataset, sv: SequenceView) -> list[Check]:
    """Items 3–9 of the checklist, plus the Lemma C.1 invariants of both memorizers."""
    phi_mlp, f2_mlp = model.sublayers[0], model.sublayers[2]
    n = len(ds.sequences[0])
    first, mixed = trace.streams[0], trace.streams[1]
    phi_rows, tid_rows = first.lane("phi"), first.lane("tid")
    checks: list[Check] = []

    # φ̃ on every token: a non-negative integer; A = its support (Lemma B.3).
    row_of = {}
    for i, seq in enumerate(ds.sequences):
        for k, tok in enumerate(seq):
            row_of.setdefault(sv.canonical[tok], int(first.index[i, k]))
    phi = {t: phi_rows[r] for t, r in row_of.items()}
    tid = {t: tid_rows[r] for t, r in row_of.items()}
    bad = [f"vocab[{t}]: φ̃ = {format_rational(v)}" for t, v in phi.items() if not _is_nonneg_int(v)]
    A = {t for t, v in phi.items() if v != 0}
    distinct = list(dict.fromkeys(sv.multisets))
    if len(A) > max(len(distinct) - 1, 0):
        bad.append(f"|A| = {len(A)} exceeds the {len(distinct) - 1} of Lemma B.1")
    checks.append(
        Check(
            "ks25.phi_values",
            not bad,
            _examples(bad)
            if bad
            else f"φ̃ is a non-negative integer on all {len(phi)} tokens; |A| = {len(A)}",
            {
                "witness_tokens": len(A),
                "distinct_multisets": len(distinct),
                "max_phi": format_rational(max(phi.values())),
            },
        )
    )

    # Token ids: integers, ≥ 2 apart between distinct tokens (Lemma C.2).
    values = sorted(set(tid.values()))
    gap = min((b - a for a, b in zip(values, values[1:], strict=False)), default=None)
    bad = [
        f"vocab[{t}]: token id {format_rational(v)}" for t, v in tid.items() if v.denominator != 1
    ]
    if len(values) != len(tid):
        bad.append("two distinct tokens share a token id")
    if gap is not None and gap < 2:
        bad.append(f"token ids only {format_rational(gap)} apart")
    checks.append(
        Check(
            "ks25.token_ids",
            not bad,
            _examples(bad) if bad else "token ids distinct, ≥ 2 apart",
            {"min_token_id_gap": None if gap is None else format_rational(gap)},
        )
    )

    # Lemma B.1: restrictions to A stay distinct.
    owner: dict = {}
    bad = []
    first_seq = {ms: sv.multisets.index(ms) for ms in distinct}
    for ms in distinct:
        j = owner.setdefault(restrict(ms, A), ms)
        if j != ms:
            bad.append(
                f"sequences[{first_seq[j]}] and sequences[{first_seq[ms]}]: restrictions "
                f"to A coincide"
            )
    checks.append(
        Check(
            "ks25.witness_set",
            not bad,
            _examples(bad) if bad else "restricted multisets pairwise distinct",
        )
    )

    # Lemma B.2/B.3: whole-sequence sums of φ̃ pairwise ≥ 1 apart across distinct multisets.
    sums = {ms: sum((c * phi[t] for t, c in ms), mpq(0)) for ms in distinct}
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
    ordered = sorted(by_sum)
    sgap = min((b - a for a, b in zip(ordered, ordered[1:], strict=False)), default=None)
    if sgap is not None and sgap < 1 and not bad:
        bad.append(f"two sequence sums only {format_rational(sgap)} apart")
    checks.append(
        Check(
            "ks25.sequence_sums",
            not bad,
            _examples(bad) if bad else "sums of φ̃ pairwise ≥ 1 apart across distinct multisets",
            {"min_sum_gap": None if sgap is None else format_rational(sgap)},
        )
    )

    # The attention layer: scores all equal (weights exactly 1/n), output column eq. (53).
    att = trace.attention[0]
    bad = []
    if att.unequal_columns:
        bad.append(f"{att.unequal_columns} of {att.columns} query columns have unequal scores")
    names = mixed.names
    for i in range(ds.size):
        col = mixed.rows[int(mixed.index[i, -1])]
        last = sv.last[i]
        want = (phi[last], tid[last], sums[sv.multisets[i]] / n)
        got = tuple(col[names.index(x)] for x in ("phi", "tid", "seq"))
        if got != want:
            bad.append(
                f"sequences[{i}]: context id {tuple(map(format_rational, got))}, eq. (53) "
                f"gives {tuple(map(format_rational, want))}"
            )
            if len(bad) > 5:
                break
    checks.append(
        Check(
            "ks25.attention",
            not bad,
            _examples(bad)
            if bad
            else "all scores equal, weights exactly 1/n; output is (φ̃, id, mean φ̃)",
            {"unequal_columns": att.unequal_columns},
        )
    )

    # Context ids (eq. (55)): distinct keys give ids ≥ 1/n apart in ℓ2.
    key_of_row: dict = {}
    bad = []
    for i in range(ds.size):
        r = int(mixed.index[i, -1])
        j = key_of_row.setdefault(r, i)
        if sv.key(j) != sv.key(i):
            bad.append(
                f"sequences[{j}] and sequences[{i}] have different (last token, multiset) "
                f"but the same context id"
            )
    groups: dict = defaultdict(list)
    for r in key_of_row:
        col = mixed.rows[r]
        groups[(col[names.index("phi")], col[names.index("tid")])].append(col[names.index("seq")])
    same = [b - a for g in groups.values() for a, b in zip(sorted(g), sorted(g)[1:], strict=False)]
    within = min(same) ** 2 if same else None
    cross = gap * gap if gap is not None else None  # different last tokens: ids ≥ gap apart
    bound = min(x for x in (within, cross) if x is not None) if (within or cross) else None
    if bound is not None and bound < mpq(1, n * n) and not bad:
        bad.append(f"two context ids only {format_rational(bound)} apart in ℓ2² (< 1/n²)")
    shown = "none" if bound is None else format_rational(bound)
    checks.append(
        Check(
            "ks25.context_ids",
            not bad,
            _examples(bad)
            if bad
            else f"distinct keys give context ids with ℓ2² ≥ {shown} ≥ 1/n² = "
            f"{format_rational(mpq(1, n * n))}",
            {
                "min_context_gap2_same_token": None if within is None else format_rational(within),
                "context_gap2_lower_bound": None if bound is None else format_rational(bound),
                "required": format_rational(mpq(1, n * n)),
            },
        )
    )

    # Lemma C.1 inside both memorizers.
    if isinstance(phi_mlp, MLP) and "group_size" in phi_mlp.meta:
        expected = {}
        for t, r in row_of.items():
            if _is_nonneg_int(phi[t]):
                expected[r] = int(phi[t])
        checks += check_memorizer(trace, phi_mlp, expected, lambda r: f"token row {r}")
    expected2 = {}
    for i in range(ds.size):
        expected2.setdefault(int(mixed.index[i, -1]), ds.labels[i])
    checks += check_memorizer(trace, f2_mlp, expected2, lambda r: f"context id row {r}")
    return checks
