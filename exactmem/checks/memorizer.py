"""The memorizer's checks (Vardi, Yehudai & Shamir 2022's construction and the memorizer stages
the other constructions reuse): its layout read from the probes, and Stage I–III measured on the
evaluated lanes — the projection's distinct values, the step and match lanes folded per row
(:mod:), the label read-out."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from flint import arb, ctx
from gmpy2 import mpq

from exactmem.checks.certificate import Check, ChecklistStructureError, _examples
from exactmem.checks.folds import (
    MAX_EXAMPLES,
    StepFold,
    _lane_counts,
    _match_fold,
)
from exactmem.core.errors import InconclusiveError
from exactmem.core.exact import format_rational
from exactmem.core.exact_arrays import Gathered, exact, first_seen_ids
from exactmem.core.model import MLP
from exactmem.evaluate.records import Trace

__all__ = ["check_any_memorizer", "check_memorizer", "check_split_memorizer", "memorizer_layout"]

GADGETS = ("keyed", "peel", "tent")


def _rows(trace: Trace, lane: str) -> list:
    """Exact value of ``lane`` for every distinct row of the phase it was recorded in."""
    numerators, den, _ = trace.lane_raw(lane)
    return [int(v) if den == 1 else mpq(int(v), den) for v in numerators]


def _is_int(v) -> bool:
    return isinstance(v, int) or mpq(v).denominator == 1


def _segments(trace: Trace, prefix: str, lane: str, K: int, bits: int, rows: int, describe):
    """Peel gadget: segment k = (X[k] − X[k+1]) / 2^{bits·(K−1−k)}, checked to be exact."""
    states = [_rows(trace, f"{prefix}{lane}[{k}]") for k in range(K)]
    segs = [[0] * K for _ in range(rows)]
    bad = []
    for r in range(rows):
        for k in range(K):
            shift = bits * (K - 1 - k)
            hi = states[k][r]
            lo = states[k + 1][r] if k + 1 < K else 0
            diff = hi - lo
            ok = (
                _is_int(hi)
                and _is_int(lo)
                and 0 <= lo < 2**shift
                and diff >= 0
                and int(diff) % 2**shift == 0
                and int(diff) >> shift < 2**bits
            )
            if not ok:
                bad.append(
                    f"{describe(r)}: {lane}[{k}] = {format_rational(hi)} is not a peeled state"
                )
                break
            segs[r][k] = int(diff) >> shift
    return segs, bad


def check_any_memorizer(
    trace: Trace,
    mlp: MLP,
    expected: Mapping[int, int],
    describe: Callable[[int], str] = str,
    *,
    budget: int | None = None,
    judge_budget: bool = False,
) -> list[Check]:
    """Lemma C.1 checks for a memorizer, or for each sub-network of a Theorem F.1 split one
    (with ``judge_budget``, the split judged against the bit budget ``budget`` the user states,
    :func:`check_split_memorizer`).

    Which of the two the model is comes from its lanes (a split memorizer's probes are named
    ``net{j}.``), and every layout number is checked against them (:func:`memorizer_layout`)."""
    if any(p.name.startswith("net0.") for p in mlp.probes):
        return check_split_memorizer(
            trace, mlp, expected, describe, budget=budget, judge_budget=judge_budget
        )
    checks = check_memorizer(trace, mlp, expected, describe)
    if judge_budget:  # one network is a split into one: it too holds at most B² inputs
        base = f"{mlp.label}." if mlp.label else ""
        try:
            K = memorizer_layout(mlp, mlp.meta, base)["group_size"]
        except ChecklistStructureError:
            return checks  # its layout check has failed already
        total = sum(1 for y in expected.values() if y)
        checks.append(_split_budget(base, total, [total], [K], budget))
    return checks


def _within_group_cap(K: int, B: int) -> bool:
    """K ≤ K_B = ⌈B/√log₂ B⌉ (log₂ of max(B, 2)), decided exactly: K − 1 < B/√L, i.e.
    (K − 1)²·L < B². L is an integer when B is a power of two, else irrational — never equal
    to a rational, so Arb balls at rising precision decide it."""
    if K <= 1:
        return True
    two = max(B, 2)  # the argument of the logarithm
    lhs = (K - 1) ** 2
    if two & (two - 1) == 0:
        return lhs * (two.bit_length() - 1) < B * B
    old = ctx.prec
    try:
        for prec in (64, 256, 1024, 4096, 16384):
            ctx.prec = prec
            gap = arb(B * B) - arb(lhs) * arb(two).log() / arb(2).log()
            if gap > 0 or gap < 0:
                return bool(gap > 0)
    finally:
        ctx.prec = old
    raise InconclusiveError(f"split.budget: K = {K} against K_B at B = {B} stays undecided")


def _split_budget(
    base: str, total: int, owned: list[int], sizes: list[int], budget: int | None
) -> Check:
    """Theorem F.1's split at bit budget B (Kajitsuka & Sato 2025, App. F): the ``total``
    labelled inputs of a memorizer fall into ⌈N/B²⌉ sub-networks of at most B² each, whose
    groups hold at most K_B = ⌈B/√log₂ B⌉ slots (what caps a packed integer at K_B·max(ρ, c)
    bits) — ``owned`` counts the labelled inputs each sub-network matches (read from the
    evaluated match lanes), ``sizes`` its group size (K match lanes, checked against the
    layout), B is the user's ``--set bit_budget`` (never the model file's)."""
    name = f"{base}split.budget"
    if budget is None:
        return Check(
            name,
            False,
            "undecided: the split is judged against the bit budget B the model was built with; "
            "give --set bit_budget=B to decide it",
            {"needs": ["bit_budget"]},
            undecided=True,
        )
    size = budget * budget
    allowed = -(-total // size)
    over = [j for j, k in enumerate(owned) if k > size]
    wide = [K for K in sizes if not _within_group_cap(K, budget)]
    ok = len(owned) <= max(allowed, 1) and not over and not wide
    largest = max(owned, default=0)
    detail = (
        f"{len(owned)} sub-network(s) for {total} labelled inputs at B = {budget} (at most "
        f"⌈{total}/{size}⌉ = {allowed}), the largest holding {largest} "
        f"{'>' if over else '≤'} B² = {size}; "
        + (
            f"groups of {max(wide)} slots > K_B = ⌈B/√log₂ B⌉"
            if wide
            else f"groups of at most {max(sizes, default=0)} slots ≤ K_B = ⌈B/√log₂ B⌉"
        )
    )
    return Check(name, ok, detail, {"subnetworks": len(owned), "allowed": allowed})


def check_split_memorizer(
    trace: Trace,
    mlp: MLP,
    expected: Mapping[int, int],
    describe: Callable[[int], str] = str,
    *,
    budget: int | None = None,
    judge_budget: bool = False,
) -> list[Check]:
    """Theorem F.1: each labelled input is claimed (matched) by exactly one sub-network and
    extra inputs by none; then every sub-network satisfies Lemma C.1 with its own points
    labelled and all others as extra points. Ownership is read from the match lanes. With
    ``judge_budget``, ``split.budget`` judges the number and size of the sub-networks against
    the bit budget ``budget`` (undecided when it is None)."""
    base = f"{mlp.label}." if mlp.label else ""
    subs = mlp.meta.get("subnetworks") if isinstance(mlp.meta, dict) else None
    nets = len({p.name.split(".", 1)[0] for p in mlp.probes if p.name.startswith("net")})
    if not isinstance(subs, list) or len(subs) != nets:
        return [
            Check(
                f"{base}split.layout",
                False,
                f"the model has {nets} sub-networks' lanes but its layout lists "
                f"{len(subs) if isinstance(subs, list) else 'none'}",
            )
        ]
    for j, layout in enumerate(subs):
        try:
            memorizer_layout(mlp, layout, f"{base}net{j}.")
        except ChecklistStructureError as exc:
            return [Check(f"{base}net{j}.layout", False, str(exc))]
    claims: dict[int, list[int]] = {r: [] for r in expected}
    for j, layout in enumerate(subs):
        hits = _match_fold(trace, f"{base}net{j}.", layout["group_size"]).hits
        for r in expected:
            if hits is not None and hits[r] > 0:
                claims[r].append(j)
    bad = [
        f"{describe(r)}: claimed by sub-networks {claims[r]}"
        for r in sorted(expected)
        if (expected[r] and len(claims[r]) != 1) or (not expected[r] and claims[r])
    ]
    checks = [
        Check(
            f"{base}split.ownership",
            not bad,
            _examples(bad)
            if bad
            else f"each labelled input is matched by exactly one of {len(subs)} sub-networks",
            {"subnetworks": len(subs)},
        )
    ]
    if judge_budget:
        total = sum(1 for y in expected.values() if y)
        owned = [sum(1 for r, y in expected.items() if y and j in claims[r]) for j in range(nets)]
        sizes = [layout["group_size"] for layout in subs]  # each checked against its lanes
        checks.append(_split_budget(base, total, owned, sizes, budget))
    for j, layout in enumerate(subs):
        own = {r: (y if claims[r] == [j] else 0) for r, y in expected.items()}
        checks += check_memorizer(trace, mlp, own, describe, layout=layout, prefix=f"{base}net{j}.")
    return checks


def _values(trace: Trace, lane: str) -> np.ndarray:
    """A lane's exact values per distinct row, as an array: integers (NumPy int8/int64 from the
    fast evaluator, Python ints otherwise) or mpq where the denominator is not 1."""
    numerators, den, _ = trace.lane_raw(lane)
    if den == 1:
        return numerators
    return np.array([mpq(int(v), den) for v in numerators], dtype=object)


def _integral(a: np.ndarray) -> np.ndarray:
    if a.dtype != object:
        return np.ones(a.shape, bool)
    return np.vectorize(_is_int, otypes=[bool])(a) if a.size else np.ones(a.shape, bool)


def _fmt(v) -> str:
    return format_rational(v if not isinstance(v, np.integer) else int(v))


def memorizer_layout(mlp: MLP, layout, prefix: str) -> dict:
    """The layout a memorizer's checks read (group size K, groups m, bit widths ρ and c, the
    gadget), validated against the lanes the model actually probes: K match lanes, m − 1 step
    lanes, and the gadget's segment lanes. The layout is written by the (untrusted)
    construction; a missing or inconsistent one refutes the checklist (ChecklistStructureError)."""
    who = f"memorizer {prefix.rstrip('.')}" if prefix else "the memorizer"
    if not isinstance(layout, dict) or not layout:
        raise ChecklistStructureError(f"{who}: no memorizer layout")
    need = {"group_size": int, "groups": int, "key_bits": int, "label_bits": int, "gadget": str}
    for key, kind in need.items():
        value = layout.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ChecklistStructureError(
                f"{who}: layout field {key!r} is missing or not "
                f"{'an integer' if kind is int else 'a string'}"
            )
    K, m = layout["group_size"], layout["groups"]
    if K < 0 or m < 1 or layout["key_bits"] < 1 or layout["label_bits"] < 1:
        raise ChecklistStructureError(f"{who}: layout out of range")
    # ρ and c come from the file and are raised to powers below: bound them first by the
    # largest value an evaluation may produce (a peeled state holds all K segments at once)
    from exactmem.core import limits

    cap = limits.current().max_value_bits
    span = max(K, 1) if layout["gadget"] == "peel" else 1
    for key in ("key_bits", "label_bits"):
        if layout[key] * span > cap:
            raise ChecklistStructureError(
                f"{who}: layout field {key!r} = {layout[key]} bits"
                + (f" × K = {K} slots" if span > 1 else "")
                + f" exceeds --max-value-bits {cap}, the largest value an evaluation produces"
            )
    if layout["gadget"] not in GADGETS:
        raise ChecklistStructureError(
            f"{who}: gadget {layout['gadget']!r} not one of {', '.join(GADGETS)}"
        )
    lanes_K, lanes_steps = _lane_counts(mlp, prefix)
    if (lanes_K, lanes_steps) != (K, m - 1):
        raise ChecklistStructureError(
            f"{who}: the layout says K = {K} slots and {m} groups, the "
            f"model probes {lanes_K} match lanes and {lanes_steps} step lanes"
        )
    base = f"{mlp.label}." if mlp.label else ""
    local = prefix[len(base) :]
    names = {p.name for p in mlp.probes}
    segments = ("U", "W") if layout["gadget"] == "peel" else ("key", "label")
    missing = [
        f"{local}{lane}[{k}]"
        for lane in segments
        for k in range(K)
        if f"{local}{lane}[{k}]" not in names
    ]
    if f"{local}key" not in names:
        missing.insert(0, f"{local}key")
    if missing:
        raise ChecklistStructureError(
            f"{who}: the {layout['gadget']} gadget's lanes {', '.join(missing[:3])} are not probed"
        )
    return layout


def check_memorizer(
    trace: Trace,
    mlp: MLP,
    expected: Mapping[int, int],
    describe: Callable[[int], str] = str,
    *,
    layout: dict | None = None,
    prefix: str | None = None,
) -> list[Check]:
    """The Lemma C.1 invariants of one memorizing MLP, measured on its lanes.

    ``expected`` maps each row (distinct input of the MLP) to its label, 0 for the extra points
    of Lemma C.1. ``describe(row)`` names a row in messages. ``layout`` and ``prefix`` select a
    sub-network of a split memorizer. Every check runs on whole arrays of rows (the fast
    evaluator's lanes are NumPy integers), messages name the first offending rows.
    """
    if prefix is None:
        prefix = f"{mlp.label}." if mlp.label else ""
    try:
        layout = memorizer_layout(mlp, mlp.meta if layout is None else layout, prefix)
    except ChecklistStructureError as exc:
        return [Check(prefix + "layout", False, str(exc))]
    K, m = layout["group_size"], layout["groups"]
    rho, c = layout["key_bits"], layout["label_bits"]
    if not expected:
        return [
            Check(
                prefix + "inputs",
                False,
                "no input has an exact expected label, so no invariant can be checked",
            )
        ]
    # rows ascending, their labels beside them, without a Python int per row (10⁶ rows)
    keys = np.fromiter(expected.keys(), np.int64, len(expected))
    order = np.argsort(keys, kind="stable")
    rows = keys[order]
    # labels are exact integers of any size: int64 only when they fit (exact_arrays.exact)
    labels = np.empty(len(expected), dtype=object)
    labels[:] = list(expected.values())
    want = exact(labels[order])
    checks: list[Check] = []

    # Stage I: keys are integers ≥ 2, pairwise ≥ 2 apart across distinct labels.
    keys = _values(trace, prefix + "key")[rows]
    wrong = ~_integral(keys) | (keys < 2)
    bad = [
        f"{describe(int(r))}: key {_fmt(k)}"
        for r, k in zip(rows[wrong][: MAX_EXAMPLES + 1], keys[wrong], strict=False)
    ]
    # rows sharing a key must share the label; the first row (in row order) owns the key
    order = np.lexsort((rows, keys)) if keys.dtype != object else _object_order(keys, rows)
    owner = _first_of_runs(keys[order])
    owners = order[owner]
    clash = np.sort(order[want[order] != want[owners]])
    owner_of = np.empty(len(order), np.int64)
    owner_of[order] = owners
    bad += [
        f"{describe(int(rows[owner_of[i]]))} and {describe(int(rows[i]))} share key {_fmt(keys[i])}"
        for i in clash[: MAX_EXAMPLES + 1]
    ]
    failed = int(np.count_nonzero(wrong)) + len(clash)
    distinct = keys[order][owner == np.arange(len(order))]
    gap = (distinct[1:] - distinct[:-1]).min() if len(distinct) > 1 else None
    if gap is not None and gap < 2:
        bad.append(f"two keys only {_fmt(gap)} apart")
        failed += 1
    labelled = keys[want != 0]
    top = labelled.max() if labelled.size else None
    top = int(top) if isinstance(top, np.integer) else top
    top = int(top) if top is not None and _is_int(top) else None
    if top is not None and top.bit_length() != rho:
        # ρ is not taken on the layout's word: Lemma C.1 packs keys in ρ = bitlen(max key) bits
        bad.append(
            f"the layout says ρ = {rho} key bits; the largest labelled key {_fmt(top)} has "
            f"{top.bit_length()} (Lemma C.1: ρ is the bit length of the largest key)"
        )
        failed += 1
    if want.size and int(want.max()).bit_length() > c:
        bad.append(f"label {int(want.max())} needs more than c = {c} label bits")
        failed += 1
    figures = {
        "min_key": _fmt(keys.min()),
        "max_key": _fmt(keys.max()),
        "min_key_gap": None if gap is None else _fmt(gap),
    }
    checks.append(
        Check(
            prefix + "stage1.keys",
            not bad,
            _examples(bad, failed) if bad else "keys ≥ 2, pairwise ≥ 2 apart",
            figures,
        )
    )

    # Stage II: every step exactly 0 or 1, monotone, so exactly one group indicator is 1.
    fold = trace.folds.get(prefix)
    if fold is None or fold.steps != m - 1:
        fold = StepFold.of_lanes(trace, prefix, m - 1)
    n = len(rows)
    ramp = fold.ramp[rows] if fold.ones is not None else np.zeros(n, np.int64)
    rise = fold.rise[rows] if fold.ones is not None else np.zeros(n, np.int64)
    ones = fold.ones[rows] if fold.ones is not None else np.zeros(n, np.int64)
    off = (ramp > 0) | (rise > 0)
    bad = []
    if fold.seen != m - 1:
        bad.append(f"{fold.seen} of {m - 1} step lanes were computed")
    for i in np.flatnonzero(off)[: MAX_EXAMPLES + 1]:
        r = int(rows[i])
        if ramp[i]:
            value = fold.ramp_values.get(r)
            shown = format_rational(value) if value is not None else "not 0 or 1"
            bad.append(f"{describe(r)}: step[{int(ramp[i])}] = {shown} (on a ramp)")
        else:
            j = int(rise[i])
            bad.append(
                f"{describe(r)}: step[{j}] = 1 after step[{j - 1}] = 0, not monotone — two "
                "group indicators"
            )
    failed = int(np.count_nonzero(off)) + (fold.seen != m - 1)
    group = np.where(off, -1, ones).astype(np.int64)
    checks.append(
        Check(
            prefix + "stage2.groups",
            not bad,
            _examples(bad, failed) if bad else f"each input selects exactly one of {m} groups",
            {"groups": m, "group_size": K},
        )
    )

    # Stage III: matches are 0/1; extracted segments are exact and agree with the data.
    # One slot at a time: K lanes × a million rows stacked would cost gigabytes.
    tables = None
    if layout["gadget"] == "peel":
        everything = len(_values(trace, prefix + "key"))
        key_all, bad_u = _segments(trace, prefix, "U", K, rho, everything, describe)
        lab_all, bad_w = _segments(trace, prefix, "W", K, c, everything, describe)
        key_seg = np.array([[key_all[r][k] for r in rows] for k in range(K)], dtype=object)
        lab_seg = np.array([[lab_all[r][k] for r in rows] for k in range(K)], dtype=object)
        bad = bad_u + bad_w
        failed = len(bad)

        def segment(k: int) -> tuple[np.ndarray, np.ndarray]:
            return key_seg[k], lab_seg[k]
    else:

        def segment(k: int) -> tuple[np.ndarray, np.ndarray]:
            return (
                _values(trace, f"{prefix}key[{k}]")[rows],
                _values(trace, f"{prefix}label[{k}]")[rows],
            )

        tables = _class_tables(trace, prefix, K)
        if tables is not None:  # one test per class, read by each row
            classes, key_tab, lab_tab = tables
            classes = classes[rows]
            fits = np.all(
                (key_tab >= 0) & (key_tab < 2**rho) & (lab_tab >= 0) & (lab_tab < 2**c), axis=0
            )[classes]
        else:
            fits = np.ones(n, bool)
        for k in range(K if tables is None else 0):
            ks, ls = segment(k)
            fits &= (
                _integral(ks) & _integral(ls) & (ks >= 0) & (ks < 2**rho) & (ls >= 0) & (ls < 2**c)
            )
        bad = [
            f"{describe(int(r))}: extracted segment not a {rho}/{c}-bit integer"
            for r in rows[~fits][: MAX_EXAMPLES + 1]
        ]
        failed = int(np.count_nonzero(~fits))
    # peers: every row of a group extracts the segments of the group's first row
    order = np.lexsort((rows, group))
    order = order[group[order] >= 0]
    ref = order[_first_of_runs(group[order])]
    differs = np.zeros(len(order), bool)
    # matches (folded as they came): the first slot whose indicator is 1, and what it holds
    matched = _match_fold(trace, prefix, K)
    if matched.hits is None:  # K = 0: no lane
        binary, hits, slot = np.ones(n, bool), np.zeros(n, np.int64), np.zeros(n, np.int64)
    else:
        binary = matched.off[rows] < 0
        hits = matched.hits[rows].astype(np.int64)
        slot = np.maximum(matched.slot[rows], 0)  # no slot matches: slot 0, never read
    computed = len(matched.seen)
    held_key = held_label = None
    if layout["gadget"] != "peel" and tables is not None:
        # classes with equal segments in every slot get equal ids: a row differs from its
        # group's first row exactly when their classes' ids differ
        ids, _ = first_seen_ids(np.concatenate([key_tab, lab_tab]).T)
        differs = ids[classes[order]] != ids[classes[ref]]
        at = np.where(slot < K, slot, 0)  # the loop below: slot k's segments, else slot 0's
        held_key, held_label = key_tab[at, classes], lab_tab[at, classes]
    for k in range(K if layout["gadget"] == "peel" or tables is None else 0):
        ks, ls = segment(k)
        differs |= (ks[order] != ks[ref]) | (ls[order] != ls[ref])
        at = slot == k
        held_key = ks if held_key is None else np.where(at, ks, held_key)
        held_label = ls if held_label is None else np.where(at, ls, held_label)
    peers = np.sort(order[differs]).tolist()
    failed += len(peers)
    bad += [
        f"{describe(int(rows[i]))}: group {int(group[i])} extracts other segments than its peers"
        for i in peers[: MAX_EXAMPLES + 1]
    ]
    checks.append(
        Check(
            prefix + "stage3.segments",
            not bad,
            _examples(bad, failed) if bad else "extracted segments are exact and per-group",
            {"key_bits": rho, "label_bits": c},
        )
    )

    if held_key is None:  # K = 0 slots: nothing can match
        held_key, held_label = keys, want
    labelled = want != 0
    wrong = (
        ~binary
        | (labelled & (hits != 1))
        | (labelled & (hits == 1) & ((held_key != keys) | (held_label != want)))
        | (~labelled & (hits != 0))
    )
    bad = [f"{computed} of {K} match lanes were computed"] if computed < K else []
    for i in np.flatnonzero(wrong)[: MAX_EXAMPLES + 1]:
        r = int(rows[i])
        if not binary[i]:
            k, value = matched.off_values.get(r, (int(matched.off[r]), None))
            shown = format_rational(value) if value is not None else "not 0 or 1"
            bad.append(f"{describe(r)}: match[{k}] = {shown} (an indicator must be 0 or 1)")
        elif labelled[i] and hits[i] != 1:
            bad.append(f"{describe(r)}: {int(hits[i])} slots match (exactly one required)")
        elif labelled[i]:
            bad.append(
                f"{describe(r)}: slot {int(slot[i])} holds key {_fmt(held_key[i])}, "
                f"label {_fmt(held_label[i])}; expected {_fmt(keys[i])}, {int(want[i])}"
            )
        else:
            bad.append(f"{describe(r)}: extra point matches slot {int(slot[i])} (must match none)")
    checks.append(
        Check(
            prefix + "stage3.match",
            not bad,
            _examples(bad, int(np.count_nonzero(wrong)) + (computed < K))
            if bad
            else "exactly one slot matches each labelled input, none an extra one",
        )
    )
    return checks


def _class_tables(
    trace: Trace, prefix: str, K: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The Stage III segments as (class of each distinct row, K × classes keys, K × classes
    labels) when every ``key[k]`` and ``label[k]`` lane is class-shared over one class index
    with integer (not object) values; ``None`` otherwise (the lanes are then read row by row)."""
    try:
        lanes = [
            _values(trace, f"{prefix}{name}[{k}]") for name in ("key", "label") for k in range(K)
        ]
    except KeyError:  # a lane not computed: the row-by-row path reports it as it always did
        return None
    if not lanes or not all(isinstance(v, Gathered) for v in lanes):
        return None
    index = lanes[0].index
    if any(v.index is not index or v.table.dtype == object for v in lanes):
        return None
    if len({len(v.table) for v in lanes}) != 1:
        return None
    key_tab = np.stack([v.table.astype(np.int64, copy=False) for v in lanes[:K]])
    lab_tab = np.stack([v.table.astype(np.int64, copy=False) for v in lanes[K:]])
    return index, key_tab, lab_tab


def _first_of_runs(sorted_values: np.ndarray) -> np.ndarray:
    """For each position of a sorted array, the position where its run of equal values starts."""
    n = len(sorted_values)
    if n == 0:
        return np.zeros(0, np.int64)
    starts = np.ones(n, bool)
    starts[1:] = sorted_values[1:] != sorted_values[:-1]
    return np.maximum.accumulate(np.where(starts, np.arange(n), 0))


def _object_order(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.array(sorted(range(len(rows)), key=lambda i: (keys[i], rows[i])), dtype=np.int64)
