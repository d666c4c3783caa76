"""Fuzzing the loaders.

Models: small VYS (points), Theorem 4.1 (ks25-next-token), Mahdavi (hardmax) and Dana
(positional encoding, softmax; see FUZZED) models are saved, mutated at the JSON level — rows
and columns added to or removed from any map (the attention maps included), positional tables
reshaped, denominators set to 0 or negative, weights changed, fields dropped or added, keys or
probe names repeated, digits made non-ASCII, meta retyped — and loaded with the real loader.
Each mutant is either refused with an InputError, or certified by the fast and the reference
evaluator with identical certificates (or the same input error from both).

Datasets: random JSON structures, near-valid datasets with junk in every field, and random
bytes: ``load_dataset`` returns a Dataset or raises InputError, never anything else.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from exactmem.checks.certify import certificate_json, certify
from exactmem.core.errors import ExactmemError, InputError
from exactmem.datasets.dataset import Dataset, random_points
from exactmem.files.dataset_files import load_dataset
from exactmem.files.model_files import load_model
from exactmem.files.model_json import MODEL_FORMAT, canonical_hash, model_to_json

EXAMPLES = int(os.environ.get("EXACTMEM_FUZZ_EXAMPLES", "200"))  # raise for a longer hunt
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 200,  # the suite runs the same mutants every time
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@functools.cache
def bases() -> dict:
    """name → (model file object, dataset), built once."""
    from exactmem.constructions import dana25, ks25, mahdavi24, vys
    from exactmem.datasets.sequences import random_sequences

    out = {}
    ds = random_points(8, 2, 3, seed=1)
    out["vys"] = (vys.build(ds, {"seed": 0})[0], ds)
    ds = random_sequences(10, 3, 2, 8, 3, seed=1)
    out["ks25"] = (ks25.build(ds, {}, "ks25-next-token")[0], ds)
    ds = mahdavi24.random_instance(5, 3, 5, 3, seed=1)
    out["mahdavi"] = (mahdavi24.build(ds, {"heads": 2})[0], ds)
    ds = dana25.random_associations(6, 3, 8, seed=1)
    out["dana"] = (dana25.build(ds, {"d": 2, "heads": 3})[0], ds)
    return {
        name: ({"format": MODEL_FORMAT, "sha256": "", "model": model_to_json(m)}, ds)
        for name, (m, ds) in out.items()
    }


# --------------------------------------------------------------------------- model mutations


def _affines(model: dict) -> list[dict]:
    """Every affine map of a model object (embedding, MLP layers, attention maps, unembedding)."""
    found = [model.get(k) for k in ("embed", "unembed")]
    for s in model.get("sublayers", []):
        found += s.get("layers", [])
        for h in s.get("heads", []):
            found += [h.get(k) for k in ("query", "key", "value", "output")]
    return [
        a for a in found if isinstance(a, dict) and set(a) == {"in", "den", "names", "rows", "bias"}
    ]


def _objects(obj) -> list[dict]:
    stack, found = [obj], []
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            found.append(x)
            stack += x.values()
        elif isinstance(x, list):
            stack += x
    return found


HEX = st.one_of(st.integers(-3, 3), st.sampled_from([2**62, -(2**63), 2**64 + 1, 2**200])).map(hex)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from(["3", "0x5", "-1", "", "uniform", "peel", "1/0", "١٢", [1], {}, 0.5]),
)


def _add_row(draw, a):
    col = draw(st.integers(0, max(a["in"] - 1, 0)))
    a["rows"].append([[col, draw(HEX)]] if a["in"] else [])
    a["bias"].append("0x0")
    if a["names"]:
        a["names"].append("extra")


def _remove_row(draw, a):
    if a["rows"]:
        i = draw(st.integers(0, len(a["rows"]) - 1))
        del a["rows"][i], a["bias"][i]
        if a["names"]:
            del a["names"][i]


def _add_column(draw, a):
    a["in"] += draw(st.integers(1, 2))
    if a["rows"] and draw(st.booleans()):
        a["rows"][draw(st.integers(0, len(a["rows"]) - 1))].append([a["in"] - 1, draw(HEX)])


def _remove_column(draw, a):
    if a["in"] > 0:
        a["in"] -= 1
        a["rows"] = [[e for e in row if e[0] < a["in"]] for row in a["rows"]]


def _denominator(draw, a):
    a["den"] = hex(draw(st.sampled_from([0, -1, -2, 1, 2, 3, 2**64])))


def _weight(draw, a):
    rows = [r for r in a["rows"] if r]
    if rows:
        row = draw(st.sampled_from(rows))
        row[draw(st.integers(0, len(row) - 1))][1] = draw(HEX)


def _bias(draw, a):
    if a["bias"]:
        a["bias"][draw(st.integers(0, len(a["bias"]) - 1))] = draw(HEX)


AFFINE_OPS = [_add_row, _remove_row, _add_column, _remove_column, _denominator, _weight, _bias]
VALUE_OPS = [_weight, _weight, _bias, _denominator]  # mostly loadable: the evaluators then run


def _drop_field(draw, model):
    obj = draw(st.sampled_from(_objects(model)))
    if obj:
        del obj[draw(st.sampled_from(sorted(obj)))]


def _add_field(draw, model):
    draw(st.sampled_from(_objects(model)))["extra"] = draw(JUNK)


def _sublayer(draw, model):
    if not model.get("sublayers"):
        return
    s = draw(st.sampled_from(model["sublayers"]))
    key = draw(st.sampled_from(["residual", "score", "mask", "probes", "kind", "label"]))
    if key in s:
        values = {
            "residual": st.booleans(),
            "score": st.sampled_from(["uniform", "hardmax", "softmax", "max"]),
            "mask": st.sampled_from(["none", "context", "causal"]),
            "kind": st.sampled_from(["mlp", "attention", "positional"]),
        }
        if key == "probes" and len(s["probes"]) > 1 and draw(st.booleans()):
            p, q = draw(st.permutations(s["probes"]))[:2]
            p[0] = q[0]  # two lanes of one name
        elif key == "probes" and s["probes"]:
            p = draw(st.sampled_from(s["probes"]))
            p[draw(st.integers(1, 2))] = draw(
                st.one_of(st.integers(-1, 40), st.just([[0, "0x1"], [0, "0x2"]]), JUNK)
            )
        elif key in values:
            s[key] = draw(values[key])


def _meta(draw, model):
    metas = [model.get("meta", {})] + [s["meta"] for s in model.get("sublayers", []) if "meta" in s]
    meta = draw(st.sampled_from(metas))
    key = draw(
        st.sampled_from(
            [
                "group_size",
                "groups",
                "key_bits",
                "label_bits",
                "gadget",
                "subnetworks",
                "construction",
                "options",
                "readout",
                "tolerance",
                "position_aware",
                "token_id_gap",
            ]
        )
    )
    meta[key] = draw(st.one_of(JUNK, st.integers(0, 40)))


def _model_level(draw, model):
    key = draw(st.sampled_from(["input_dim", "token_inputs", "embed", "unembed"]))
    if key == "input_dim" and key in model:
        model[key] += draw(st.sampled_from([-1, 1]))
    elif key == "token_inputs":
        model[key] = not model.get(key)
    else:
        model[key] = None


def _positional(draw, model):
    tables = [s["table"] for s in model.get("sublayers", []) if isinstance(s.get("table"), list)]
    if not tables or not tables[0]:
        return
    table = draw(st.sampled_from(tables))
    k = draw(st.integers(0, len(table) - 1))
    change = draw(st.sampled_from(["entry", "drop entry", "add entry", "drop row", "add row"]))
    if change == "entry" and table[k]:
        j = draw(st.integers(0, len(table[k]) - 1))
        table[k][j] = [draw(HEX), hex(draw(st.sampled_from([0, -1, 1, 3, 2**64])))]
    elif change == "drop entry" and table[k]:
        table[k].pop()
    elif change == "add entry":
        table[k].append(["0x1", "0x1"])
    elif change == "drop row":
        table.pop(k)
    else:
        table.append(list(table[k]))


MODEL_OPS = [_drop_field, _add_field, _sublayer, _meta, _model_level, _positional]


def _text_mutation(draw, text: str) -> str:
    """Mutations JSON objects cannot hold: repeated keys, non-ASCII or underscored digits."""
    kind = draw(st.sampled_from(["duplicate", "digit"]))
    if kind == "duplicate":
        starts = [m.start() for m in re.finditer(r'\{"', text)]
        if not starts:
            return text
        at = draw(st.sampled_from(starts))
        key = re.match(r'\{"([^"]*)"', text[at:])[1]
        return text[: at + 1] + f'"{key}": null, ' + text[at + 1 :]
    spots = [m.end() - 1 for m in re.finditer(r'"-?0x[0-9a-f]+', text)]
    if not spots:
        return text
    at = draw(st.sampled_from(spots))
    new = draw(st.sampled_from(["_1", "\uff11", "\u0661", " 1", "\uff58"]))
    return text[:at] + new + text[at + 1 :]


CHECKLISTS = {"vys": "vys", "ks25": "ks25-next-token", "mahdavi": "mahdavi24", "dana": "dana25"}


def outcome(model, ds, evaluator: str, construction: str | None = None):
    """The certificate (minus which evaluator ran and the command line), or the input error;
    with ``construction``, its full checklist."""
    try:
        cert = certify(model, ds, evaluator=evaluator, jobs=1, construction=construction)
    except ExactmemError as exc:
        return type(exc).__name__, str(exc)
    content = certificate_json(cert)
    content["subject"].pop("evaluator")
    content["subject"].pop("argv")
    return "certificate", content


FUZZED = ("ks25", "mahdavi", "vys", "dana")


@FUZZ
@given(st.data())
def test_mutated_models_are_refused_or_judged_alike(tmp_path, data):
    name = data.draw(st.sampled_from(FUZZED), label="base")
    base, ds = bases()[name]
    obj = json.loads(json.dumps(base))
    model = obj["model"]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        affines = _affines(model)
        if affines and data.draw(st.integers(0, 2)) > 0:
            ops = VALUE_OPS if data.draw(st.integers(0, 2)) > 0 else AFFINE_OPS
            data.draw(st.sampled_from(ops))(data.draw, data.draw(st.sampled_from(affines)))
        else:
            data.draw(st.sampled_from(MODEL_OPS))(data.draw, model)
    if isinstance(obj.get("model"), dict):
        obj["sha256"] = canonical_hash(obj["model"])
    text = json.dumps(obj)
    if data.draw(st.integers(0, 9)) == 0:
        text = _text_mutation(data.draw, text)
    path = tmp_path / "m.json"
    path.write_text(text)
    try:
        loaded, _ = load_model(path)
    except InputError:
        event("refused by the loader")
        return
    checklist = CHECKLISTS[name] if data.draw(st.booleans(), label="checklist") else None
    fast = outcome(loaded, ds, "fast", checklist)
    assert fast == outcome(loaded, ds, "reference", checklist)
    event(f"loaded: {fast[0]} {fast[1]['verdict'] if fast[0] == 'certificate' else ''}")


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["vys", "ks25", "mahdavi", "dana"]), st.integers(0, 10**6))
def test_unmutated_models_load_and_verify(name, seed):
    """The fuzz above starts from models both evaluators verify."""
    base, ds = bases()[name]
    obj = json.loads(json.dumps(base))
    obj["sha256"] = canonical_hash(obj["model"])
    from exactmem.files.model_json import model_from_json

    model = model_from_json(obj["model"])
    kind, content = outcome(model, ds, "fast", CHECKLISTS[name])
    assert kind == "certificate" and content["verdict"] == "verified"


# --------------------------------------------------------------------------- datasets

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["1/2", "-3", "0.25", "1e-3", "1e99999", "1_0", "１", "٣", "0x1f", "1/0"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
NUMBER = st.one_of(
    st.integers(-5, 5).map(str),
    st.sampled_from(["1/2", "-7/3", "0.5", "2e3", "1e-2", " 3 ", "1_0", "٣", "3/0", "x"]),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    JSON,
)


@st.composite
def near_datasets(draw):
    """Datasets of every task with junk mixed into each field."""
    task = draw(st.sampled_from(["points", "next-token", "seq2seq", "images", 3]))
    n = draw(st.integers(1, 3))
    vectors = st.lists(st.lists(NUMBER, min_size=1, max_size=3), min_size=1, max_size=4)
    labels = st.one_of(st.integers(-1, 4), st.lists(st.integers(0, 4), max_size=3), JSON)
    obj = {
        "format": draw(st.sampled_from(["exactmem.dataset/1", "exactmem.dataset/2", None])),
        "task": task,
        "labels": draw(st.lists(labels, min_size=0, max_size=4)),
    }
    if task == "points":
        obj["points"] = draw(vectors)
    else:
        obj["vocab"] = draw(vectors)
        tokens = st.one_of(st.integers(-1, 4), JSON)
        obj["sequences"] = draw(st.lists(st.lists(tokens, min_size=n, max_size=n), max_size=4))
    for key, value in draw(st.dictionaries(st.sampled_from(["C", "meta", "extra"]), JSON)).items():
        obj[key] = value
    if draw(st.booleans()) and "labels" in obj:
        size = len(obj.get("points", obj.get("sequences", [])))
        obj["labels"] = [draw(st.integers(1, 3)) for _ in range(size)]
    return obj


def _load(tmp_path, raw: bytes, allow_floats: bool):
    path = tmp_path / ("d.json.gz" if raw[:2] == b"\x1f\x8b" else "d.json")
    path.write_bytes(raw)
    try:
        ds = load_dataset(path, allow_floats=allow_floats)
    except InputError:
        return None
    assert isinstance(ds, Dataset)
    return ds


@FUZZ
@given(st.one_of(near_datasets(), JSON), st.booleans(), st.booleans())
def test_datasets_load_or_raise_input_errors(tmp_path, obj, allow_floats, compress):
    raw = json.dumps(obj).encode()
    _load(tmp_path, gzip.compress(raw) if compress else raw, allow_floats)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=64), st.booleans())
def test_random_bytes_are_input_errors(tmp_path, raw, compress):
    _load(tmp_path, gzip.compress(raw) if compress else raw, False)


def test_found_by_the_fuzz_uniform_attention_beyond_int64():
    """The fast evaluator's equal-score shortcut multiplied int64 sums by the output map's
    weights: 2⁶² wrapped around (a different refutation), 2⁶⁴ + 1 overflowed (exit 3)."""
    from exactmem.files.model_json import model_from_json

    base, ds = bases()["mahdavi"]
    for weight in (2**62, 2**64 + 1, -(2**63)):
        obj = json.loads(json.dumps(base))
        obj["model"]["sublayers"][0]["score"] = "uniform"
        output = obj["model"]["sublayers"][0]["heads"][0]["output"]
        next(row for row in output["rows"] if row)[0][1] = hex(weight)
        model = model_from_json(obj["model"])
        fast = outcome(model, ds, "fast")
        assert fast == outcome(model, ds, "reference")
        assert fast[1]["verdict"] == "refuted"


def test_found_by_the_fuzz_zeros_times_a_factor_beyond_int64():
    """``times`` checked max|a|·|k| < 2⁶² only: with a all zeros, k ≥ 2⁶³ did not convert."""
    import numpy as np

    from exactmem.core.exact_arrays import ratio_equal, times

    zeros = np.zeros(3, np.int64)
    assert times(zeros, 2**64 + 1).tolist() == [0, 0, 0]
    assert ratio_equal(zeros, 2**70, zeros, 3).all()


NUMERALS = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
    st.sampled_from(["", "-", "+"]),
    st.from_regex(r"[0-9]{0,30}", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,30}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"[eE][+-]?[0-9]{1,3}", fullmatch=True)),
)
FRACTIONS = st.from_regex(r"[+-]?[0-9]{1,30}/[0-9]{1,30}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.one_of(NUMERALS, FRACTIONS))
def test_strict_numbers_agree_with_fraction_on_ascii(text):
    """The ASCII grammar gives Python's exact value wherever Python's Fraction accepts the
    text, and an InputError (never another exception) wherever it does not."""
    from fractions import Fraction

    from exactmem.core.exact import parse_rational

    try:
        expected = Fraction(text)
    except (ValueError, ZeroDivisionError):
        expected = None
    try:
        got = parse_rational(text, "x")
    except InputError:
        got = None
    assert (got is None) == (expected is None)
    if got is not None:
        assert Fraction(int(got.numerator), int(got.denominator)) == expected


def test_found_by_the_fuzz_softmax_balls_that_are_not_finite():
    """A softmax score so large that its ball is not finite decides nothing: inconclusive (or
    a verdict from the other checks), never a crash."""
    from exactmem.files.model_json import model_from_json

    base, ds = bases()["dana"]
    obj = json.loads(json.dumps(base))
    query = obj["model"]["sublayers"][1]["heads"][0]["query"]
    next(row for row in query["rows"] if row)[0][1] = hex(2**200)
    kind, _ = outcome(model_from_json(obj["model"]), ds, "reference")
    assert kind in ("certificate", "InconclusiveError")
