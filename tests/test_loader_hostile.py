"""Hostile model and dataset files: every one is refused with exit 2 and a message naming the
JSON path or index — shapes that do not fit, repeated keys, unknown fields, non-ASCII or
underscored digits, malformed meta, and inputs past the size limits (exactmem.core.limits)."""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
import zlib

import pytest

from exactmem.constructions import mahdavi24, vys
from exactmem.core.errors import InputError
from exactmem.core.limits import Limits, json_depth, use
from exactmem.datasets.dataset import random_points
from exactmem.files.dataset_files import load_dataset, save_dataset
from exactmem.files.model_files import load_model, save_model
from exactmem.files.model_json import canonical_hash


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A Mahdavi hardmax model and a VYS points model with their datasets, as JSON objects."""
    d = tmp_path_factory.mktemp("hostile")
    seq = mahdavi24.random_instance(5, 3, 5, 3, seed=1)
    attention, _ = mahdavi24.build(seq, {"heads": 2})
    pts = random_points(12, 2, 3, seed=1)
    points, _ = vys.build(pts, {"seed": 0})
    out = {}
    for name, model, ds in (("attention", attention, seq), ("points", points, pts)):
        save_model(model, d / f"{name}.json")
        save_dataset(ds, d / f"{name}-data.json")
        out[name] = json.loads((d / f"{name}.json").read_text())
        out[name + "-data"] = json.loads((d / f"{name}-data.json").read_text())
    out["dir"] = d
    return out


def write_model(tmp_path, obj, *, rehash=True):
    """The model file of ``obj``, its hash recomputed: a hostile editor can do that too."""
    obj = copy.deepcopy(obj)
    if rehash:
        obj["sha256"] = canonical_hash(obj["model"])
    path = tmp_path / "m.json"
    path.write_text(json.dumps(obj))
    return path


def cli(*args, timeout=120):
    """Run the command line in a fresh process; returns (exit code, stderr)."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    r = subprocess.run(
        [sys.executable, "-m", "exactmem", *args],
        capture_output=True,
        text=True,
        timeout=timeout,  # a safety net against hangs, not a timed assertion
        env=env,
    )
    return r.returncode, r.stderr


def head(o, i=0):
    return o["model"]["sublayers"][0]["heads"][i]


def add_row(affine):
    """One more row reading column 0 (a non-zero entry, so it matters)."""
    affine["rows"].append([[0, "0x1"]])
    affine["bias"].append("0x0")
    if affine["names"]:
        affine["names"].append("extra")


def widen(affine, extra):
    """``extra`` more input columns with an entry in the last one."""
    affine["in"] += extra
    affine["rows"][0].append([affine["in"] - 1, "0x3"])


def _key_taller(o):
    add_row(head(o)["key"])


def _key_wider(o):
    widen(head(o)["key"], 2)


def _value_taller(o):
    add_row(head(o)["value"])


def _query_wider(o):
    widen(head(o, 1)["query"], 1)


def _output_taller(o):
    add_row(head(o)["output"])


def _output_wider(o):
    widen(head(o)["output"], 1)


def _value_narrower(o):
    v = head(o)["value"]
    v["in"] -= 1
    v["rows"] = [[e for e in row if e[0] < v["in"]] for row in v["rows"]]


def _embed_wider(o):
    widen(o["model"]["embed"], 1)


def _unembed_wider(o):
    widen(o["model"]["unembed"], 1)


def _unsorted(o):
    row = head(o)["query"]["rows"][0]
    row.insert(0, [5, "0x1"])


def _repeated_column(o):
    row = head(o)["query"]["rows"][0]
    row.append(list(row[-1]))


def _bias_in_attention(o):
    head(o)["value"]["bias"][0] = "0x1"


SHAPES = [
    (_key_taller, r"sublayers\[0\]\.heads\[0\]\.key: \d+ rows, the query map has \d+"),
    (_key_wider, r"heads\[0\]\.key: \d+ input columns, the stream width is \d+"),
    (_value_taller, r"heads\[0\]\.output: \d+ input columns, the value map outputs \d+"),
    (_query_wider, r"heads\[1\]\.query: \d+ input columns"),
    (_output_taller, r"heads\[0\]\.output: \d+ rows, the stream has width \d+"),
    (_output_wider, r"heads\[0\]\.output: \d+ input columns, the value map outputs \d+"),
    (_value_narrower, r"heads\[0\]\.value: \d+ input columns"),
    (_embed_wider, r"model\.embed: \d+ input columns, input_dim is \d+"),
    (_unembed_wider, r"model\.unembed: \d+ input columns, the final stream width is \d+"),
    (_unsorted, r"heads\[0\]\.query\.rows\[0\]: columns .* not strictly increasing"),
    (_repeated_column, r"query\.rows\[0\]: columns .* not strictly increasing"),
    (_bias_in_attention, r"heads\[0\]\.value\.bias: attention maps are linear"),
]


@pytest.mark.parametrize("mutate, message", SHAPES, ids=[m.__name__[1:] for m, _ in SHAPES])
def test_attention_shapes_are_checked_naming_the_path(files, tmp_path, mutate, message):
    obj = copy.deepcopy(files["attention"])
    mutate(obj)
    with pytest.raises(InputError, match=message):
        load_model(write_model(tmp_path, obj))


def test_issue_shapes_exit_2_with_both_evaluators(files, tmp_path):
    """Issue 16, finding 3: these loaded, then fast said VERIFIED and reference crashed."""
    data = files["dir"] / "attention-data.json"
    for mutate in (_key_taller, _key_wider, _value_taller):
        obj = copy.deepcopy(files["attention"])
        mutate(obj)
        path = write_model(tmp_path, obj)
        for evaluator in ("fast", "reference"):
            code, err = cli("verify", str(path), "--data", str(data), "--evaluator", evaluator)
            assert code == 2, err
            assert err.startswith("error: model file") and "sublayers[0].heads[0]" in err


def _mlp(o):
    return o["model"]["sublayers"][0]


def _break_chain(o):
    widen(_mlp(o)["layers"][1], 1)


def _probe_unit(o):
    _mlp(o)["probes"][0][2].append([10**6, "0x1"])


def _probe_layer(o):
    _mlp(o)["probes"][0][1] = len(_mlp(o)["layers"]) - 1


def _residual(o):
    _mlp(o)["residual"] = True


def _no_layers(o):
    _mlp(o)["layers"] = []


def _first_layer(o):
    widen(_mlp(o)["layers"][0], 1)


def _probe_twice(o):
    probes = _mlp(o)["probes"]
    probes[3][0] = probes[1][0]


MLP_SHAPES = [
    (_probe_twice, r"sublayers\[0\]\.probes\[3\]: probe 'memorizer\.\S+' is defined twice"),
    (
        _break_chain,
        r"sublayers\[0\]\.layers\[1\]: \d+ input columns, the layer before outputs \d+",
    ),
    (_probe_unit, r"sublayers\[0\]\.probes\[0\]: unit 1000000 is outside hidden layer"),
    (_probe_layer, r"probes\[0\]: layer \d+ is not a hidden layer"),
    (_residual, r"a residual MLP must give back the stream width 2"),
    (_no_layers, r"sublayers\[0\]\.layers: an MLP needs at least one layer"),
    (_first_layer, r"sublayers\[0\]\.layers\[0\]: 3 input columns, the stream width is 2"),
]


@pytest.mark.parametrize("mutate, message", MLP_SHAPES, ids=[m.__name__[1:] for m, _ in MLP_SHAPES])
def test_mlp_shapes_are_checked_naming_the_path(files, tmp_path, mutate, message):
    obj = copy.deepcopy(files["points"])
    mutate(obj)
    with pytest.raises(InputError, match=message):
        load_model(write_model(tmp_path, obj))


def test_positional_table_must_fit_the_stream(files, tmp_path):
    obj = copy.deepcopy(files["attention"])
    width = len(obj["model"]["embed"]["rows"])
    row = [["0x1", "0x2"]] * width
    table = {"kind": "positional", "label": "pos", "table": [row, row[:-1]]}
    obj["model"]["sublayers"].insert(0, table)
    with pytest.raises(InputError, match=r"sublayers\[0\]\.table\[1\]: rows must be lists"):
        load_model(write_model(tmp_path, obj))
    table["table"] = [row[:-1], row[:-1]]
    with pytest.raises(InputError, match=r"sublayers\[0\]\.table\[0\]: \d+ entries, the stream"):
        load_model(write_model(tmp_path, obj))
    table["table"] = [row, [["0x1", "0x0"]] * width]
    with pytest.raises(InputError, match=r"table\[1\]\[0\]: denominator must be positive"):
        load_model(write_model(tmp_path, obj))
    table["table"] = [row, row]
    assert load_model(write_model(tmp_path, obj))[0].sublayers[0].width == width


# --------------------------------------------------------------------------- strict parsing


def test_duplicate_keys_are_refused_naming_the_path(files, tmp_path):
    text = json.dumps(files["attention"])
    inner = '"score": "hardmax"'
    assert inner in text
    path = tmp_path / "dup.json"
    path.write_text(text.replace(inner, inner + ', "score": "uniform"'))
    with pytest.raises(InputError, match=r"model\.sublayers\[0\]: key 'score' appears twice"):
        load_model(path)
    data = tmp_path / "d.json"
    data.write_text(
        '{"format": "exactmem.dataset/1", "task": "points", "labels": [1], '
        '"points": [["1"]], "labels": [2]}'
    )
    with pytest.raises(InputError, match="the top-level object: key 'labels' appears twice"):
        load_dataset(data)


@pytest.mark.parametrize(
    "where, edit",
    [
        ("the top-level object", lambda o: o.update(comment="hi")),
        ("model", lambda o: o["model"].update(extra=1)),
        (r"model\.sublayers\[0\]", lambda o: o["model"]["sublayers"][0].update(tolerance="1")),
        (r"model\.sublayers\[0\]\.heads\[1\]", lambda o: head(o, 1).update(bias=[])),
        (r"model\.sublayers\[0\]\.heads\[0\]\.key", lambda o: head(o)["key"].update(scale="0x2")),
        (r"model\.embed", lambda o: o["model"]["embed"].update(Rows=[])),
    ],
)
def test_unknown_fields_are_refused(files, tmp_path, where, edit):
    obj = copy.deepcopy(files["attention"])
    edit(obj)
    with pytest.raises(InputError, match=f"{where}: unknown field"):
        load_model(write_model(tmp_path, obj))


@pytest.mark.parametrize("text", ["0x_1f", "0x1_f", "0x１f", "0X1f", "+0x1", "0x", " 0x1", "1f"])
def test_hex_weights_are_ascii_without_separators(files, tmp_path, text):
    obj = copy.deepcopy(files["attention"])
    head(obj)["key"]["rows"][0][0][1] = text
    with pytest.raises(InputError, match=r"heads\[0\]\.key\.rows\[0\]\[0\]\[1\]: '"):
        load_model(write_model(tmp_path, obj))


@pytest.mark.parametrize(
    "text, why",
    [
        ("0x_1f", "underscore"),
        ("1_000", "underscore"),
        ("１/２", "non-ASCII"),
        ("١٢", "non-ASCII"),
        ("1e1_0", "underscore"),
        ("1/-2", "is not an exact rational"),
        ("1 000", "is not an exact rational"),
        ("3/0", "denominator 0"),
        ("1e", "is not an exact rational"),
        (".", "is not an exact rational"),
    ],
)
def test_dataset_numbers_are_ascii(tmp_path, text, why):
    p = tmp_path / "d.json"
    p.write_text(
        json.dumps(
            {
                "format": "exactmem.dataset/1",
                "task": "points",
                "points": [["1", "2"], ["3", text]],
                "labels": [1, 2],
            }
        )
    )
    with pytest.raises(InputError, match=rf"points\[1\]\[1\]: .*{why}"):
        load_dataset(p)


def test_dataset_unknown_fields_and_bad_meta(tmp_path):
    base = {"format": "exactmem.dataset/1", "task": "points", "points": [["1"]], "labels": [1]}
    p = tmp_path / "d.json"
    for extra, message in (
        ({"lables": [1]}, "unknown field 'lables'"),
        ({"vocab": [["1"]]}, "unknown field 'vocab' for task 'points'"),
        ({"meta": 5}, "'meta' must be an object"),
    ):
        p.write_text(json.dumps({**base, **extra}))
        with pytest.raises(InputError, match=message):
            load_dataset(p)
    p.write_text(json.dumps({**base, "meta": {"anything": [1, {"goes": None}]}}))
    assert load_dataset(p).meta == {"anything": [1, {"goes": None}]}


def _meta(o):
    return o["model"]["meta"]


def _layout(o):
    return o["model"]["sublayers"][0]["meta"]


META = [
    (lambda o: _meta(o).update(options=5), r"model\.meta\.options: expected an object, got int"),
    (lambda o: _meta(o).update(construction=5), r"meta\.construction: expected a string"),
    (lambda o: _meta(o).update(theorem=["a"]), r"meta\.theorem: expected a string, got list"),
]


@pytest.mark.parametrize("edit, message", META)
def test_meta_labels_are_typed(files, tmp_path, edit, message):
    """Malformed meta the certificate shows (``options = 5`` once exited 3) is an input
    error naming it."""
    obj = copy.deepcopy(files["attention"])
    edit(obj)
    with pytest.raises(InputError, match=message):
        load_model(write_model(tmp_path, obj))


@pytest.mark.parametrize(
    "edit",
    [
        lambda o: _layout(o).update(group_size="3"),
        lambda o: _layout(o).update(groups=10**18, key_bits=-1),
        lambda o: _layout(o).update(subnetworks=5),
        lambda o: _meta(o).update(tolerance="1", readout=None, position_aware="no"),
    ],
)
def test_other_meta_loads_and_decides_nothing(files, tmp_path, edit):
    """Anything else a construction wrote loads as it is; a memorizer layout is checked where
    the checks read it (a malformed one refutes: exit 1, never 3)."""
    obj = copy.deepcopy(files["points"])
    edit(obj)
    path = write_model(tmp_path, obj)
    load_model(path)
    code, err = cli("verify", str(path), "--data", str(files["dir"] / "points-data.json"))
    assert code in (0, 1), err


def test_malformed_meta_exits_2_on_the_command_line(files, tmp_path):
    obj = copy.deepcopy(files["attention"])
    _meta(obj)["options"] = 5
    path = write_model(tmp_path, obj)
    code, err = cli("verify", str(path), "--data", str(files["dir"] / "attention-data.json"))
    assert code == 2 and "meta.options" in err, err


# --------------------------------------------------------------------------- limits


def _dataset(tmp_path, name, text: str | bytes):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def _points_with(coordinate: str) -> str:
    return (
        '{"format": "exactmem.dataset/1", "task": "points", "points": [['
        + coordinate
        + ', "1"]], "labels": [1]}'
    )


def hostile_inputs(tmp_path):
    """The hostile inputs of issue 16 (findings 4 and 5) that concern files, and what each
    message must name."""
    big = "7" * 10**7
    deep = b"[" * 10**6 + b"]" * 10**6
    return [
        ("exponent", _dataset(tmp_path, "e.json", _points_with('"1e100000000"')), "exponent"),
        (
            "negative exponent",
            _dataset(tmp_path, "ne.json", _points_with('"1e-99999999"')),
            "exponent",
        ),
        ("10^7-digit string", _dataset(tmp_path, "s.json", _points_with(f'"{big}"')), "digits"),
        ("10^7-digit rational", _dataset(tmp_path, "r.json", _points_with(f'"1/{big}"')), "digits"),
        ("10^7-digit JSON integer", _dataset(tmp_path, "i.json", _points_with(big)), "digits"),
        (
            "10^7-digit label",
            _dataset(
                tmp_path,
                "l.json",
                _points_with('"1"').replace('"labels": [1]', f'"labels": [{big}]'),
            ),
            "digits",
        ),
        ("10^6-deep JSON", _dataset(tmp_path, "deep.json", deep), "nested deeper"),
        (
            "10^6-deep JSON gzip",
            _dataset(tmp_path, "deep.json.gz", gzip.compress(deep)),
            "nested deeper",
        ),
        ("gzip bomb", _dataset(tmp_path, "bomb.json.gz", _bomb(40 << 20)), "expands beyond"),
    ]


def _bomb(size: int) -> bytes:
    """A gzip file that expands about 1000-fold to ``size`` bytes of spaces."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * (1 << 20)
    return b"".join([z.compress(chunk) for _ in range(size >> 20)] + [z.flush()])


def test_hostile_inputs_exit_2_naming_the_problem(files, tmp_path):
    """Issue 16: each of these hung, exhausted memory or exited 3 — now exit 2 quickly."""
    model = files["dir"] / "points.json"
    for name, data, message in hostile_inputs(tmp_path):
        code, err = cli("verify", str(model), "--data", str(data))
        assert code == 2, (name, err)
        assert message in err and "Traceback" not in err, (name, err)


def test_hostile_model_numbers_exit_2(files, tmp_path):
    obj = copy.deepcopy(files["points"])
    obj["model"]["sublayers"][0]["layers"][0]["bias"][0] = "0x" + "f" * 10**6
    path = write_model(tmp_path, obj)
    data = files["dir"] / "points-data.json"
    code, err = cli("verify", str(path), "--data", str(data))
    assert code == 2 and "--max-digits" in err and "bias[0]" in err, err
    with use(Limits(max_digits=10**6)):
        assert load_model(path)[0].sublayers[0].layers[0].bias[0] == 16**10**6 - 1


def test_each_limit_can_be_raised(tmp_path):
    p = _dataset(tmp_path, "e.json", _points_with('"1e20000"'))
    with pytest.raises(InputError, match=r"points\[0\]\[0\]: exponent 20000 .*--max-exponent"):
        load_dataset(p)
    with use(Limits(max_exponent=20000)):
        assert load_dataset(p).points[0][0] == 10**20000
    p = _dataset(tmp_path, "s.json", _points_with('"' + "9" * 200_000 + '"'))
    with pytest.raises(InputError, match=r"points\[0\]\[0\]: 200000 digits"):
        load_dataset(p)
    with use(Limits(max_digits=200_000)):
        assert load_dataset(p).points[0][0] == 10**200_000 - 1
    with use(Limits(max_digits=3)), pytest.raises(InputError, match="more than 3 digits"):
        load_dataset(_dataset(tmp_path, "i.json", _points_with("1234")))
    deep_meta = '"meta": {"x": ' + "[" * 200 + "]" * 200 + "}, "
    nested = _dataset(
        tmp_path, "n.json", _points_with('"1"').replace('"labels"', deep_meta + '"labels"')
    )
    with pytest.raises(InputError, match="nested deeper than 100 levels"):
        load_dataset(nested)
    with use(Limits(max_depth=300)):
        assert len(str(load_dataset(nested).meta["x"])) == 400
    small = _dataset(tmp_path, "small.json", _points_with('"1"'))
    with use(Limits(max_bytes=20)), pytest.raises(InputError, match="more than the limit of 20"):
        load_dataset(small)
    with pytest.raises(InputError, match="not a regular file"):
        load_dataset("/dev/zero")  # no size to check first: refused, never read (issue 27)
    bomb = _dataset(tmp_path, "b.json.gz", _bomb(20 << 20))
    with use(Limits(max_gzip_ratio=2000)), pytest.raises(InputError, match="not valid JSON"):
        load_dataset(bomb)  # decompressed in full: only spaces
    with use(Limits(max_bytes=1 << 20)), pytest.raises(InputError, match="--max-bytes"):
        load_dataset(bomb)


def test_limits_flags_are_checked(files, tmp_path):
    code, err = cli("verify", "m.json", "--data", "d.json", "--max-digits", "0")
    assert code == 2 and "--max-digits" in err
    code, err = cli("verify", "m.json", "--data", "d.json", "--max-depth", "１２")
    assert code == 2 and "--max-depth" in err


def test_json_constants_and_recursion(tmp_path):
    p = _dataset(tmp_path, "c.json", _points_with("Infinity"))
    with pytest.raises(InputError, match="Infinity is not a finite number"):
        load_dataset(p, allow_floats=True)
    p = _dataset(tmp_path, "u.json", _points_with("1e-400"))
    with pytest.raises(InputError, match="1e-400 underflows to 0"):
        load_dataset(p, allow_floats=True)
    deep = _dataset(tmp_path, "d.json", b"[" * 5000 + b"]" * 5000)
    with use(Limits(max_depth=10**7)), pytest.raises(InputError, match="nested too deeply"):
        load_dataset(deep)  # past the parser's recursion: still an input error


def test_depth_scan_ignores_brackets_in_strings():
    text = json.dumps({"a": ["[[[[", '\\"[[[', {"b": "]]]]"}], "c": "\\\\"}).encode()
    assert json_depth(text, 3) is None
    assert json_depth(text, 2) == text.index(b"{", 2)
    assert json_depth(b'["\\\\", [[1]]]', 2) == 8  # the third [
