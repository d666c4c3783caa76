"""Checks and the certificate: verdicts computed only from the evaluated network.

A construction is untrusted; the verifier reads the model's outputs and its named lanes from
the :class:`~exactmem.evaluate.reference.Trace` and the labels from the dataset, never what
the construction says it built. The layout numbers it needs to read lanes (group size, bit
widths) come from the model file; if they are wrong, checks fail — they can never turn a wrong
model into a verified one, because the output check stands on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gmpy2 import mpq

from exactmem.evaluate.reference import LayerStat, Trace
from exactmem.exact import format_rational
from exactmem.model import MLP, Resources

__all__ = [
    "Certificate",
    "Check",
    "activation_summary",
    "check_any_memorizer",
    "check_memorizer",
    "check_outputs",
    "check_split_memorizer",
]

MAX_EXAMPLES = 5


@dataclass(frozen=True)
class Check:
    """One verdict-bearing check. ``figures`` holds measured values (exact, as text)."""

    name: str
    passed: bool
    detail: str
    figures: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"name": self.name, "passed": self.passed, "detail": self.detail, **self.figures}


@dataclass
class Certificate:
    """Everything a verification established; written by :mod:`exactmem.io`."""

    checks: list[Check]
    resources: Resources
    activation: dict
    subject: dict = field(default_factory=dict)  # dataset/model hashes, construction, options
    data: dict = field(default_factory=dict)  # measured dataset figures (r², δ², N, …)

    @property
    def verdict(self) -> str:
        return "verified" if all(c.passed for c in self.checks) else "refuted"

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


def _examples(bad: list[str], total: int | None = None) -> str:
    total = len(bad) if total is None else total
    more = f" (and {total - MAX_EXAMPLES} more)" if total > MAX_EXAMPLES else ""
    return "; ".join(bad[:MAX_EXAMPLES]) + more


def check_outputs(name: str, outputs: Iterable[tuple[str, mpq, int]], what: str = "label") -> Check:
    """Every (where, output, expected) pair must agree exactly."""
    bad, count = [], 0
    for where, got, expected in outputs:
        count += 1
        if got != expected:
            bad.append(f"{where}: output {format_rational(got)}, expected {expected}")
    if bad:
        return Check(name, False, f"{len(bad)} of {count} wrong — " + _examples(bad))
    return Check(name, True, f"all {count} {what}s reproduced exactly", {"count": count})


# --------------------------------------------------------------------------- Lemma C.1


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
    trace: Trace, mlp: MLP, expected: Mapping[int, int], describe: Callable[[int], str] = str
) -> list[Check]:
    """Lemma C.1 checks for a memorizer, or for each sub-network of a Theorem F.1 split one."""
    if "subnetworks" in mlp.meta:
        return check_split_memorizer(trace, mlp, expected, describe)
    return check_memorizer(trace, mlp, expected, describe)


def check_split_memorizer(
    trace: Trace, mlp: MLP, expected: Mapping[int, int], describe: Callable[[int], str] = str
) -> list[Check]:
    """Theorem F.1: each labelled input is claimed (matched) by exactly one sub-network and
    extra inputs by none; then every sub-network satisfies Lemma C.1 with its own points
    labelled and all others as extra points. Ownership is read from the match lanes."""
    base = f"{mlp.label}." if mlp.label else ""
    subs = mlp.meta["subnetworks"]
    claims: dict[int, list[int]] = {r: [] for r in expected}
    for j, layout in enumerate(subs):
        matches = [_rows(trace, f"{base}net{j}.match[{k}]") for k in range(layout["group_size"])]
        for r in expected:
            if any(m[r] == 1 for m in matches):
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
            {"subnetworks": len(subs), "budget": mlp.meta.get("budget")},
        )
    ]
    for j, layout in enumerate(subs):
        own = {r: (y if claims[r] == [j] else 0) for r, y in expected.items()}
        checks += check_memorizer(trace, mlp, own, describe, layout=layout, prefix=f"{base}net{j}.")
    return checks


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
    sub-network of a split memorizer.
    """
    layout = layout or mlp.meta
    if prefix is None:
        prefix = f"{mlp.label}." if mlp.label else ""
    K, m = layout["group_size"], layout["groups"]
    rho, c = layout["key_bits"], layout["label_bits"]
    rows = sorted(expected)
    checks: list[Check] = []
    if not rows:
        return [
            Check(
                prefix + "inputs",
                False,
                "no input has an exact expected label, so no invariant can be checked",
            )
        ]

    # Stage I: keys are integers ≥ 2, pairwise ≥ 2 apart across distinct labels.
    keys = _rows(trace, prefix + "key")
    bad = [
        f"{describe(r)}: key {format_rational(keys[r])}"
        for r in rows
        if not _is_int(keys[r]) or keys[r] < 2
    ]
    owner: dict = {}
    for r in rows:
        prev = owner.setdefault(keys[r], r)
        if prev != r and expected[prev] != expected[r]:
            bad.append(f"{describe(prev)} and {describe(r)} share key {keys[r]}")
    distinct = sorted(owner)
    gap = min((b - a for a, b in zip(distinct, distinct[1:], strict=False)), default=None)
    if gap is not None and gap < 2:
        bad.append(f"two keys only {format_rational(gap)} apart")
    labelled = [keys[r] for r in rows if expected[r]]
    if labelled and max(labelled) >= 2**rho:
        bad.append(f"key {max(labelled)} needs more than ρ = {rho} bits")
    figures = {
        "min_key": format_rational(min(keys[r] for r in rows)),
        "max_key": format_rational(max(keys[r] for r in rows)),
        "min_key_gap": None if gap is None else format_rational(gap),
    }
    checks.append(
        Check(
            prefix + "stage1.keys",
            not bad,
            _examples(bad) if bad else "keys ≥ 2, pairwise ≥ 2 apart",
            figures,
        )
    )

    # Stage II: every step exactly 0 or 1, monotone, so exactly one group indicator is 1.
    steps = [_rows(trace, f"{prefix}step[{j}]") for j in range(1, m)]
    group = {}
    bad = []
    for r in rows:
        values = [s[r] for s in steps]
        if any(v not in (0, 1) for v in values):
            j = next(j for j, v in enumerate(values, 1) if v not in (0, 1))
            bad.append(f"{describe(r)}: step[{j}] = {format_rational(values[j - 1])} (on a ramp)")
            continue
        if any(a < b for a, b in zip(values, values[1:], strict=False)):
            bad.append(f"{describe(r)}: steps {values} not monotone — two group indicators")
            continue
        group[r] = sum(values)
    checks.append(
        Check(
            prefix + "stage2.groups",
            not bad,
            _examples(bad) if bad else f"each input selects exactly one of {m} groups",
            {"groups": m, "group_size": K},
        )
    )

    # Stage III: matches are 0/1; extracted segments are exact and agree with the data.
    if layout["gadget"] == "peel":
        key_seg, bad_u = _segments(trace, prefix, "U", K, rho, len(keys), describe)
        lab_seg, bad_w = _segments(trace, prefix, "W", K, c, len(keys), describe)
        bad = bad_u + bad_w
    else:
        kl = [_rows(trace, f"{prefix}key[{k}]") for k in range(K)]
        ll = [_rows(trace, f"{prefix}label[{k}]") for k in range(K)]
        key_seg = [[kl[k][r] for k in range(K)] for r in range(len(keys))]
        lab_seg = [[ll[k][r] for k in range(K)] for r in range(len(keys))]
        bad = [
            f"{describe(r)}: extracted segment not a {rho}/{c}-bit integer"
            for r in rows
            if any(not _is_int(v) or not 0 <= v < 2**rho for v in key_seg[r])
            or any(not _is_int(v) or not 0 <= v < 2**c for v in lab_seg[r])
        ]
    packed: dict[int, tuple] = {}
    for r in rows:
        if r in group:
            seen = packed.setdefault(group[r], (tuple(key_seg[r]), tuple(lab_seg[r])))
            if seen != (tuple(key_seg[r]), tuple(lab_seg[r])):
                bad.append(
                    f"{describe(r)}: group {group[r]} extracts other segments than its peers"
                )
    checks.append(
        Check(
            prefix + "stage3.segments",
            not bad,
            _examples(bad) if bad else "extracted segments are exact and per-group",
            {"key_bits": rho, "label_bits": c},
        )
    )

    matches = [_rows(trace, f"{prefix}match[{k}]") for k in range(K)]
    bad = []
    for r in rows:
        ms = [mk[r] for mk in matches]
        if any(v not in (0, 1) for v in ms):
            bad.append(f"{describe(r)}: match indicators {list(map(format_rational, ms))}")
            continue
        hits = [k for k, v in enumerate(ms) if v == 1]
        if expected[r]:
            if len(hits) != 1:
                bad.append(f"{describe(r)}: {len(hits)} slots match (exactly one required)")
            elif key_seg[r][hits[0]] != keys[r] or lab_seg[r][hits[0]] != expected[r]:
                bad.append(
                    f"{describe(r)}: slot {hits[0]} holds key {key_seg[r][hits[0]]}, "
                    f"label {lab_seg[r][hits[0]]}; expected {keys[r]}, {expected[r]}"
                )
        elif hits:
            bad.append(f"{describe(r)}: extra point matches slot {hits[0]} (must match none)")
    checks.append(
        Check(
            prefix + "stage3.match",
            not bad,
            _examples(bad)
            if bad
            else "exactly one slot matches each labelled input, none an extra one",
        )
    )
    return checks


# --------------------------------------------------------------------------- margins


def activation_summary(stats: list[LayerStat], *, per_layer: bool = True) -> dict:
    """Sign margins of the ReLU layers: smallest non-zero |pre-activation| and exact zeros."""
    margins = [s.min_nonzero for s in stats if s.min_nonzero is not None]
    summary = {
        "relu_layers": len(stats),
        "min_nonzero_preactivation": format_rational(min(margins)) if margins else None,
        "zero_preactivations": int(sum(s.zeros for s in stats)),
        "preactivations": int(sum(s.units * s.inputs for s in stats)),
    }
    if per_layer:
        summary["layers"] = [
            [
                s.sublayer,
                s.layer,
                s.units,
                s.inputs,
                s.zeros,
                None if s.min_nonzero is None else format_rational(s.min_nonzero),
            ]
            for s in stats
        ]
    return summary
