"""``exactmem explain``: from a REFUTED or INCONCLUSIVE verdict to the sub-layer, lane and
example where the values leave what the proof needs.

It starts from the certificate — the failed checks, in the certificate's order, each with its
figures and the paper, result and mechanism it tests (:mod:`exactmem.checks.mechanisms`) — and,
given
the model and the dataset, walks the first example a failed check names through the trusted
reference evaluator's trace (:func:`exactmem.reports.tracing.trace`). The rule, exactly:

1. **The example.** The first ``sequences[i][k]``, ``sequences[i]`` or ``points[i]`` in the
   failed check's detail (``sequences[i]`` alone is position n − 1 on next-token data, 0 on
   points). A check that names two (two contexts with one value, two items with one id) gives
   both; a check that names one gets as its *partner* the first judged item with another label
   whose output equals its output exactly (if any: the read-out cannot give both their labels).
2. **Its walk.** For every stream — the embedding, then after each sub-layer — the lanes of the
   example's column that changed there (all lanes at the embedding), exact.
3. **Where the two merge.** With a partner: the first sub-layer after which the two columns are
   equal in every lane and stay equal to the output, and the lanes that still told them apart
   just before it, and — inside an MLP — that layer's units and probes, one value for both.
   That is where the mechanism lost the distinction the labels need. Without a
   partner the example's output differs from every differently labelled item's: the read-out
   itself gives the wrong value, and the memorizer's lanes (probes) at the example are shown.
4. **The proof's lanes.** For a memorizer stage (``memorizer.stage1.keys``, …) the probes of
   that stage at the example; for a check naming an attention sub-layer and a column, that
   head's exact scores and pattern there.
5. **An undecided check** (exact arithmetic and Arb balls cannot decide it): the first
   sub-layer where the exact evaluation ends (a softmax column with unequal scores, or a GELU
   MLP), the first such column, its exact scores and the Arb enclosures of its weights.

Lane names are shown as the model file gives them (a label for the reader): where the walk
leads is decided by the evaluated values alone.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field

import numpy as np
from gmpy2 import mpq

from exactmem.core.exact import format_rational
from exactmem.core.model import MLP, Attention, LayerNorm, PositionalEncoding, Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.reports.tracing import RunCache, trace

__all__ = ["Explanation", "explain", "render"]

MECHANISM_MODULES = ("vys", "ks25", "mahdavi24", "dana25", "kim23", "ks24", "madden24")
# a certificate is a file like any other: indices are read with at most 9 digits and checked
EXAMPLE = re.compile(r"\b(sequences|points)\[(\d{1,9})\](?:\[(\d{1,9})\])?")
SUBLAYER = re.compile(r"sublayers\[(\d{1,9})\]")
COLUMN = re.compile(r"column (\d{1,9})")
UNIT = re.compile(r"hidden unit (\d{1,9}) of layer (\d{1,9})")
STAGE_PROBES = {
    "stage1": ("key",),
    "stage2": ("step[",),
    "stage3": ("key[", "label[", "match["),
}
SHOWN_LANES = 10


@dataclass
class Explanation:
    """What :func:`explain` found: the verdict, and per failed (or undecided) check a dict of
    ``check``, ``detail``, ``figures``, ``spec`` (paper, result, mechanism) and, with a model,
    ``example``, ``walk`` (per stream the changed lanes), ``partner``, ``merge`` and
    ``lanes`` (probes, scores, patterns the proof reads there)."""

    verdict: str
    findings: list[dict] = field(default_factory=list)
    note: str = ""


def spec_of(construction: str | None, check: str) -> dict | None:
    """The paper, result and mechanism of the built-in check named ``check``."""
    if check == "labels":
        return {
            "paper": "the memorization promise of every theorem here",
            "result": "the model outputs every example's label",
            "mechanism": "every judged output equals its label exactly (or within --tolerance)",
        }
    for name in MECHANISM_MODULES:
        checks = importlib.import_module(f"exactmem.checks.mechanisms.{name}").CHECKS
        for key in ([construction] if construction in checks else []) + list(checks):
            for spec in checks[key]:
                if spec.matches(check):
                    return {"paper": spec.paper, "result": spec.result, "mechanism": spec.mechanism}
    return None


def explain(
    checks: list[dict],
    *,
    verdict: str,
    construction: str | None = None,
    model: Transformer | None = None,
    dataset: Dataset | None = None,
    inconclusive: str | None = None,
) -> Explanation:
    """Explain a verdict from its ``checks`` (the certificate's: dicts with ``name``,
    ``passed``, ``detail`` and figures). With ``model`` and ``dataset`` the first example each
    failed check names is walked through the exact trace (module docstring: the rule).
    ``inconclusive``: the message of an :class:`~exactmem.core.errors.InconclusiveError` (no
    certificate was written); the walk then finds where exact evaluation ends."""
    result = Explanation(verdict)
    failed = [c for c in checks if not c.get("passed", True) and not c.get("undecided")]
    undecided = [c for c in checks if c.get("undecided")]
    walk = model is not None and dataset is not None
    walk = walk and bool(failed or undecided or inconclusive is not None)
    # nothing to walk on a verified run
    cache = trace(model, dataset) if walk and model and dataset else None
    if inconclusive is not None:
        finding: dict = {
            "check": "inconclusive",
            "detail": inconclusive,
            "figures": {},
            "undecided": True,
        }
        if cache is not None:
            finding.update(_where_exactness_ends(cache))
        result.findings.append(finding)
        return result
    if not failed and not undecided:
        result.note = "every check passed: nothing to explain"
        return result
    for c in failed + undecided:
        skip = ("name", "passed", "detail", "undecided")
        figures = {k: v for k, v in c.items() if k not in skip}
        finding = {
            "check": c["name"],
            "detail": c["detail"],
            "figures": figures,
            "spec": spec_of(construction, c["name"]),
            "undecided": bool(c.get("undecided")),
        }
        if cache is not None:
            finding.update(_walk(cache, c["name"], c["detail"], construction))
            if finding["undecided"]:  # where exact arithmetic stops deciding
                finding["exactness"] = _where_exactness_ends(cache)
        result.findings.append(finding)
    if model is None or dataset is None:
        result.note = (
            "give the model and the dataset (--model, --data) to walk the examples through the "
            "exact trace"
        )
    return result


# --------------------------------------------------------------------------- the walk


def _items(cache: RunCache) -> list[tuple[int, int]]:
    """The judged (sequence, position) items: every position of seq2seq data, the last of
    next-token data, position 0 of points."""
    ds = cache.dataset
    if ds.task == "seq2seq":
        n = len(ds.sequences[0])
        return [(i, k) for i in range(ds.size) for k in range(n)]
    last = 0 if ds.task == "points" else len(ds.sequences[0]) - 1
    return [(i, last) for i in range(ds.size)]


def _label(ds: Dataset, item: tuple[int, int]) -> int:
    i, k = item
    y = ds.labels[i]
    return int(y[k]) if ds.task == "seq2seq" else int(y)


def _named(cache: RunCache, detail: str) -> list[tuple[int, int]]:
    """The items the check's detail names, in order (at most two: the first complaint's)."""
    ds = cache.dataset
    n = 1 if ds.task == "points" else len(ds.sequences[0])
    first = detail.split(";")[0]
    found = []
    for what, i, k in EXAMPLE.findall(first):
        i = int(i)
        if i >= ds.size or (k and int(k) >= n):
            continue  # not an item of this dataset
        if k:
            found.append((i, int(k)))
        elif what == "points" or ds.task == "points":
            found.append((i, 0))
        else:
            found.append((i, len(ds.sequences[0]) - 1))
        if len(found) == 2:
            break
    return found


def _streams(cache: RunCache) -> list[str]:
    keys = ["embed"] if "embed" in cache else []
    return keys + [
        f"sublayers.{s}" for s in range(len(cache.model.sublayers)) if f"sublayers.{s}" in cache
    ]


def describe_stream(model: Transformer, key: str) -> str:
    """``the embedding`` or ``sublayers[s] (what it is, its label)``."""
    if key == "embed":
        return "the embedding"
    s = int(key.split(".")[1])
    sub = model.sublayers[s]
    if isinstance(sub, Attention):
        kind = f"{sub.score} attention"
    elif isinstance(sub, MLP):
        kind = f"{'residual ' if sub.residual else ''}MLP of {len(sub.layers)} layers"
    elif isinstance(sub, PositionalEncoding):
        kind = "positional encoding"
    elif isinstance(sub, LayerNorm):
        kind = "LayerNorm"
    else:  # pragma: no cover - the IR has no other sub-layer
        kind = type(sub).__name__
    label = getattr(sub, "label", "")
    return f"sublayers[{s}] ({kind}{', ' + repr(label) if label else ''})"


def _fmt(v) -> str:
    return format_rational(v) if isinstance(v, type(mpq(0))) else str(v)


def _changed(cache: RunCache, key: str, prev: str | None, item) -> dict[str, str]:
    i, k = item
    now = cache[key][i, k]
    names = cache.lanes(key)
    before = cache[prev][i, k] if prev is not None else None
    out = {}
    for j, (name, v) in enumerate(zip(names, now, strict=True)):
        if before is None or len(before) != len(now) or before[j] != v:
            out[name] = _fmt(v)
    return out


def _walk(cache: RunCache, check: str, detail: str, construction: str | None = None) -> dict:
    named = _named(cache, detail)
    if not named:
        return {"example": None}
    ds, model = cache.dataset, cache.model
    item = named[0]
    keys = _streams(cache)
    walk = []
    prev = None
    for key in keys:
        changed = _changed(cache, key, prev, item)
        shown = dict(list(changed.items())[:SHOWN_LANES])
        if len(changed) > SHOWN_LANES:
            shown["…"] = f"{len(changed) - SHOWN_LANES} more lanes"
        walk.append({"where": describe_stream(model, key), "lanes": shown})
        prev = key
    out: dict = {
        "stopped": None if cache.stopped is None else _stopped(cache),
        "example": _item_name(ds, item),
        "label": _label(ds, item),
        "output": _output(cache, item),
        "walk": walk,
    }
    partner = named[1] if len(named) > 1 else _partner(cache, item)
    if partner is not None:
        out["partner"] = _item_name(ds, partner)
        out["partner_label"] = _label(ds, partner)
        out["partner_output"] = _output(cache, partner)
        out["merge"] = _merge(cache, item, partner)
    out["lanes"] = _proof_lanes(cache, check, detail, item)
    out["lanes"].update(_unit(cache, detail, item, construction))
    return out


def _unit(cache: RunCache, detail: str, item, construction: str | None) -> dict:
    """A hidden unit the check names (``sublayers[s]: hidden unit u of layer l``): its exact
    pre-activation at the example — on the model, or, where the model's trace stopped before
    it and the checklist is kim23's, on the hardmax limit that ``kim23.softmax`` compares the
    model with (marked as such)."""
    unit, where = UNIT.search(detail), SUBLAYER.search(detail)
    if unit is None or where is None:
        return {}
    s, u, layer = int(where.group(1)), int(unit.group(1)), int(unit.group(2))
    key = f"sublayers.{s}.pre.{layer}"
    source = cache
    said = f"unit {u} of layer {layer} of sublayers[{s}], pre-activation"
    if key not in cache and construction == "kim23":
        from exactmem.checks.measures.kim23 import hardmax_limit

        source = trace(hardmax_limit(cache.model), cache.dataset, attention=False)
        said += " on the hardmax limit"
    if key not in source or u >= source[key].shape[2]:
        return {}
    return {said: _fmt(source[key][item][u])}


def _stopped(cache: RunCache) -> str:
    s, why = cache.stopped  # type: ignore[misc]
    return f"the exact trace ends at {describe_stream(cache.model, f'sublayers.{s}')}: {why}"


def _item_name(ds: Dataset, item) -> str:
    i, k = item
    if ds.task == "points":
        return f"points[{i}]"
    return f"sequences[{i}][{k}]" if ds.task == "seq2seq" else f"sequences[{i}]"


def _output(cache: RunCache, item) -> list[str] | None:
    if "outputs" not in cache:
        return None
    i, k = item
    return [_fmt(v) for v in cache["outputs"][i, k]]


def _checkpoints(cache: RunCache) -> list[str]:
    """The recorded values of a column in evaluation order: the embedding, and per sub-layer
    its ReLU layers' pre-activations (inside an MLP) and the stream after it."""
    keys = ["embed"] if "embed" in cache else []
    for s, sub in enumerate(cache.model.sublayers):
        if isinstance(sub, MLP):
            keys += [f"sublayers.{s}.pre.{li}" for li in range(len(sub.layers) - 1)]
        keys.append(f"sublayers.{s}")
    return [k for k in keys if k in cache]


def _merge_at(cache: RunCache, keys: list[str], a, b) -> int | None:
    """The first checkpoint from which the columns of ``a`` and ``b`` are equal to the end."""
    if not keys or tuple(cache[keys[-1]][a]) != tuple(cache[keys[-1]][b]):
        return None
    start = len(keys) - 1
    while start > 0 and tuple(cache[keys[start - 1]][a]) == tuple(cache[keys[start - 1]][b]):
        start -= 1
    return start


def describe_checkpoint(model: Transformer, key: str) -> str:
    parts = key.split(".")
    if len(parts) == 4:  # sublayers.s.pre.l
        where = describe_stream(model, f"sublayers.{parts[1]}")
        return f"{where}, layer {parts[3]} (its pre-activations)"
    return describe_stream(model, key)


def _partner(cache: RunCache, item) -> tuple[int, int] | None:
    """Of the judged items with another label and exactly the same output, the one whose
    column merges with the example's earliest (the first such in order on a tie)."""
    if "outputs" not in cache:
        return None
    out = cache["outputs"]
    y = _label(cache.dataset, item)
    mine = tuple(out[item])
    keys = _checkpoints(cache)
    best, best_at = None, None
    for other in _items(cache):
        if other == item or _label(cache.dataset, other) == y or tuple(out[other]) != mine:
            continue
        at = _merge_at(cache, keys, item, other)
        if at is not None and (best_at is None or at < best_at):
            best, best_at = other, at
    return best


def _lane_names(cache: RunCache, key: str) -> tuple[str, ...]:
    """A stream's lane names, or an MLP layer's unit names (``unit j`` where unnamed)."""
    if ".pre." in key:
        _, s, _, layer = key.split(".")
        names = cache.model.sublayers[int(s)].layers[int(layer)].names
        width = cache[key].shape[2]
        return tuple(names) if len(names) == width else tuple(f"unit {j}" for j in range(width))
    return cache.lanes(key)


def _merge(cache: RunCache, a, b) -> dict:
    """Where the columns of ``a`` and ``b`` become equal for good (:func:`_checkpoints`), the
    lanes that told them apart just before, and the probes of the sub-layer where they merge
    that hold one value for both (the proof's lanes that no longer tell them apart)."""
    keys = _checkpoints(cache)
    start = _merge_at(cache, keys, a, b)
    if start is None:
        return {"where": None, "why": "their columns differ at the last stream"}
    merged = {"where": describe_checkpoint(cache.model, keys[start]), "apart": {}}
    if start == 0:
        merged["why"] = "their columns are equal from the first stream on (equal inputs)"
        return merged
    merged["why"] = "from here to the output the two columns are equal in every lane"
    before = keys[start - 1]
    apart = {
        name: f"{_fmt(x)} vs {_fmt(y)}"
        for name, x, y in zip(
            _lane_names(cache, before), cache[before][a], cache[before][b], strict=True
        )
        if x != y
    }
    merged["apart"] = dict(list(apart.items())[:SHOWN_LANES])
    parts = keys[start].split(".")
    sub = cache.model.sublayers[int(parts[1])]
    if isinstance(sub, MLP) and len(parts) == 4:  # merged at a layer inside an MLP
        layer = int(parts[3])
        prefix = f"{sub.label}." if sub.label else ""
        # the layer's units and the probes it computes: the proof's lanes that now hold one
        # value for both (for a Lemma C.1 memorizer's first layer: the key, Stage I)
        names = _lane_names(cache, keys[start])
        shared = {
            f"{prefix}{name}": _fmt(v) for name, v in zip(names, cache[keys[start]][a], strict=True)
        }
        shared.update(
            {
                prefix + probe.name: _fmt(cache[f"probes.{prefix}{probe.name}"][a])
                for probe in sub.probes
                if probe.layer == layer and f"probes.{prefix}{probe.name}" in cache
            }
        )
        merged["shared"] = dict(list(shared.items())[:SHOWN_LANES])
    return merged


def _proof_lanes(cache: RunCache, check: str, detail: str, item) -> dict:
    """What the proof reads at the example: a memorizer stage's probes, or an attention
    head's scores and pattern at the column the check names."""
    i, k = item
    lanes: dict[str, object] = {}
    parts = check.split(".")
    stage = next((p for p in parts if p in STAGE_PROBES), None)
    if stage is not None:
        prefix = check[: check.index(stage)]  # e.g. "memorizer."
        for key in cache.names:
            if not key.startswith("probes." + prefix):
                continue
            local = key[len("probes." + prefix) :]
            if any(
                local.startswith(p) if p.endswith("[") else local == p for p in STAGE_PROBES[stage]
            ):
                lanes[local] = _fmt(cache[key][i, k])
            if len(lanes) >= SHOWN_LANES:
                break
    where = SUBLAYER.search(detail)
    column = COLUMN.search(detail)
    if where is not None:
        s = int(where.group(1))
        if f"sublayers.{s}.scores" in cache:
            q = int(column.group(1)) if column else k
            if q >= cache[f"sublayers.{s}.scores"].shape[2]:
                return lanes
            lanes["scores"] = [_fmt(v) for v in cache[f"sublayers.{s}.scores"][i, 0, q]]
            lanes["pattern"] = [_fmt(v) for v in cache[f"sublayers.{s}.pattern"][i, 0, q]]
            lanes["column"] = f"sublayers[{s}], sequences[{i}], query {q}, head 0"
    return lanes


def _where_exactness_ends(cache: RunCache) -> dict:
    """The first sub-layer where exact evaluation ends, and there the first column whose
    softmax scores are unequal (exact scores, Arb enclosures of its weights)."""
    if cache.stopped is None:
        return {"where": None, "why": "the exact trace runs to the output"}
    s, why = cache.stopped
    out: dict = {"where": describe_stream(cache.model, f"sublayers.{s}"), "why": why}
    key = f"sublayers.{s}.pattern"
    if key in cache:
        pattern = cache[key]
        exact = np.vectorize(lambda w: isinstance(w, type(mpq(0))), otypes=[bool])(pattern)
        hit = np.argwhere(~exact.all(axis=3))
        if len(hit):
            i, h, q = hit[0].tolist()
            out["column"] = f"sequences[{i}], query {q}, head {h}"
            out["scores"] = [_fmt(v) for v in cache[f"sublayers.{s}.scores"][i, h, q]]
            out["pattern"] = [_fmt(v) for v in pattern[i, h, q]]
    return out


# --------------------------------------------------------------------------- text


def _brief(value: object) -> str:
    """A figure as the certificate has it; a long exact rational with its decimal beside (for
    reading only: the figure is the rational)."""
    text = str(value)
    if isinstance(value, str) and len(value) > 24 and re.fullmatch(r"-?\d+/\d+", value):
        p, q = value.split("/")
        return f"{text} (≈ {int(p) / int(q):.3g})"
    return text


def render(expl: Explanation) -> list[str]:
    """The explanation as lines of text."""
    lines = [f"verdict: {expl.verdict.upper()}"]
    walked: dict[str, str] = {}
    for f in expl.findings:
        if f["check"] == "inconclusive":
            lines.append(f"undecided: {f['detail']}")
        else:
            lines.append(
                f"{'undecided' if f.get('undecided') else 'FAIL'} {f['check']}: {f['detail']}"
            )
        figures = {k: _brief(v) for k, v in f.get("figures", {}).items() if v is not None}
        if figures:
            lines.append("  figures: " + ", ".join(f"{k} = {v}" for k, v in figures.items()))
        spec = f.get("spec")
        if spec:
            lines.append(f"  tests: {spec['result']} — {spec['paper']}")
            lines.append(f"  needs: {spec['mechanism']}")
        ends = f if f["check"] == "inconclusive" else f.get("exactness") or {}
        if ends.get("where"):
            lines.append(f"  exact evaluation ends at {ends['where']}: {ends['why']}")
            if "column" in ends:
                lines.append(f"  first column with unequal scores: {ends['column']}")
                lines.append(f"    scores  {', '.join(ends['scores'])}")
                lines.append(f"    weights {', '.join(ends['pattern'])}")
        if f.get("example") is None:
            continue
        out = ", ".join(f["output"]) if f.get("output") else "—"
        lines.append(f"  example {f['example']}: label {f['label']}, output {out}")
        if f["example"] in walked:
            lines.append(f"    its lanes: as under {walked[f['example']]} above")
        else:
            walked[f["example"]] = f["check"]
            for step in f["walk"]:
                shown = ", ".join(f"{k} = {v}" for k, v in step["lanes"].items()) or "unchanged"
                lines.append(f"    after {step['where']}: {shown}")
            if f.get("stopped"):
                lines.append(f"    {f['stopped']}")
        if "partner" in f:
            pout = ", ".join(f["partner_output"]) if f.get("partner_output") else "—"
            lines.append(f"  partner {f['partner']}: label {f['partner_label']}, output {pout}")
            merge = f["merge"]
            if merge["where"] is None:
                lines.append(f"  they do not merge: {merge['why']}")
            else:
                lines.append(f"  they merge at {merge['where']}: {merge['why']}")
                if merge.get("apart"):
                    apart = ", ".join(f"{k}: {v}" for k, v in merge["apart"].items())
                    lines.append(f"    told apart just before by {apart}")
                if merge.get("shared"):
                    shared = ", ".join(f"{k} = {v}" for k, v in merge["shared"].items())
                    lines.append(f"    one value for both there: {shared}")
        elif f.get("output"):
            lines.append(
                "  no item with another label has the same output: the read-out itself gives "
                "the wrong value"
            )
        for name, value in f.get("lanes", {}).items():
            shown = ", ".join(value) if isinstance(value, list) else value
            lines.append(f"    {name}: {shown}")
    if expl.note:
        lines.append(expl.note)
    return lines
