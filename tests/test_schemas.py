"""The published JSON schemas (exactmem/files/schemas/*.schema.json, copied to docs/examples for the
site) and the example dataset.

Generated dataset, model and certificate files must validate; each schema must reject broken
files. Validation uses ``jsonschema`` (draft 2020-12) where it is installed, and always a small
validator of the keywords the schemas use (so the test runs without it)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from support import text_windows as windows

from exactmem.checks.certify import certificate_json, certify
from exactmem.commands.main import main
from exactmem.constructions import ks25, vys
from exactmem.core.errors import InputError
from exactmem.core.exact import parse_rational
from exactmem.datasets.dataset import dataset_to_json, parse_dataset, random_points
from exactmem.datasets.sequences import random_sequences
from exactmem.files import schemas
from exactmem.files.dataset_files import load_dataset
from exactmem.files.model_files import save_certificate, save_model

# the copies shipped inside the package (an installed or unpacked copy reads these)
EXAMPLES = Path(schemas.__file__).resolve().parent
DOCS_EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
SCHEMAS = ("dataset", "model", "certificate")

try:
    import jsonschema
except ImportError:  # the small validator below still runs
    jsonschema = None


def schema(name: str) -> dict:
    return json.loads((EXAMPLES / f"{name}.schema.json").read_text())


# --------------------------------------------------------------------------- a small validator

ANNOTATIONS = {"$schema", "$id", "title", "description", "$comment", "$defs"}
KEYWORDS = ANNOTATIONS | {
    "$ref",
    "type",
    "const",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "minimum",
    "pattern",
    "oneOf",
    "allOf",
    "if",
    "then",
}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def errors(value, s: dict | bool, root: dict, where: str = "$") -> list[str]:
    """Where ``value`` breaks schema ``s`` (the subset of draft 2020-12 in :data:`KEYWORDS`)."""
    if s is True:
        return []
    if s is False:
        return [f"{where}: not allowed"]
    out: list[str] = []
    if "$ref" in s:
        target = root
        for part in s["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        out += errors(value, target, root, where)
    if "type" in s:
        kinds = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(TYPES[k](value) for k in kinds):
            return out + [f"{where}: not of type {s['type']}"]
    if "const" in s and (value != s["const"] or type(value) is not type(s["const"])):
        out.append(f"{where}: not {s['const']!r}")
    if "enum" in s and value not in s["enum"]:
        out.append(f"{where}: not one of {s['enum']}")
    if "pattern" in s and isinstance(value, str) and not re.search(s["pattern"], value):
        out.append(f"{where}: does not match {s['pattern']}")
    if "minimum" in s and TYPES["integer"](value) and value < s["minimum"]:
        out.append(f"{where}: below {s['minimum']}")
    if isinstance(value, dict):
        props = s.get("properties", {})
        out += [f"{where}: missing {k!r}" for k in s.get("required", []) if k not in value]
        for k, v in value.items():
            if k in props:
                out += errors(v, props[k], root, f"{where}.{k}")
            elif "additionalProperties" in s:
                out += errors(v, s["additionalProperties"], root, f"{where}.{k}")
    if isinstance(value, list):
        if len(value) < s.get("minItems", 0):
            out.append(f"{where}: fewer than {s['minItems']} items")
        prefix = s.get("prefixItems", [])
        for i, v in enumerate(value):
            if i < len(prefix):
                out += errors(v, prefix[i], root, f"{where}[{i}]")
            elif "items" in s:
                out += errors(v, s["items"], root, f"{where}[{i}]")
    for sub in s.get("allOf", []):
        out += errors(value, sub, root, where)
    if "oneOf" in s:
        passing = sum(not errors(value, sub, root, where) for sub in s["oneOf"])
        if passing != 1:
            out.append(f"{where}: matches {passing} of oneOf, not exactly one")
    if "if" in s and not errors(value, s["if"], root, where) and "then" in s:
        out += errors(value, s["then"], root, where)
    return out


def keywords_used(s) -> set[str]:
    if isinstance(s, list):
        return set().union(*map(keywords_used, s)) if s else set()
    if not isinstance(s, dict):
        return set()
    found = set(s)
    for k, v in s.items():
        if k in ("properties", "$defs"):
            found |= set().union(*map(keywords_used, v.values())) if v else set()
        elif k not in ("const", "enum", "required"):
            found |= keywords_used(v)
    return found


def problems(obj, name: str) -> list[str]:
    """Both validators' findings; they must agree on whether ``obj`` is valid."""
    s = schema(name)
    found = errors(obj, s, s)
    if jsonschema is not None:
        validator = jsonschema.Draft202012Validator(s)
        assert bool(found) == (not validator.is_valid(obj)), found
    return found


def assert_valid(obj, name: str) -> None:
    assert problems(obj, name) == []


# --------------------------------------------------------------------------- the schemas


@pytest.mark.parametrize("name", SCHEMAS)
def test_schemas_are_draft_2020_12_in_the_checked_subset(name):
    s = schema(name)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert keywords_used(s) <= KEYWORDS, keywords_used(s) - KEYWORDS
    if jsonschema is not None:
        jsonschema.Draft202012Validator.check_schema(s)


def test_the_example_dataset_loads_validates_and_is_memorized():
    path = EXAMPLES / "dataset.json"
    assert_valid(json.loads(path.read_text()), "dataset")
    ds = load_dataset(path)
    assert (ds.task, ds.size, ds.dim, ds.num_classes) == ("next-token", 5, 2, 3)
    assert [str(x) for v in ds.vocab for x in v] == ["0", "1", "1/2", "-3", "1/4", "2", "2", "0"]
    model, _ = ks25.build(ds, {"seed": 0})
    assert certify(model, ds, construction="ks25-next-token").verdict == "verified"


def saved(tmp_path, model) -> dict:
    path = tmp_path / "model.json"
    save_model(model, path)
    return json.loads(path.read_text())


def test_generated_datasets_validate():
    for ds in (
        random_points(20, 3, 4, seed=1),
        random_sequences(20, 4, 2, 10, 3, seed=1),
        random_sequences(20, 4, 2, 10, 3, seed=1, task="seq2seq"),
        windows("the cat sat on the mat. the mat sat on the cat!", 6, "word"),
    ):
        assert_valid(json.loads(json.dumps(dataset_to_json(ds))), "dataset")


def test_generated_models_and_certificates_validate(tmp_path, capsys):
    pts = random_points(12, 2, 3, seed=4)
    seqs = random_sequences(12, 3, 2, 8, 3, seed=4)
    vys_model, _ = vys.build(pts, {})
    ks_model, _ = ks25.build(seqs, {"seed": 1})
    ids_model, _ = ks25.build(seqs, {"seed": 1}, "ks25-token-ids")
    for model in (vys_model, ks_model, ids_model):
        assert_valid(saved(tmp_path, model), "model")
    for model, ds, construction in (
        (vys_model, pts, "vys"),
        (ks_model, seqs, "ks25-next-token"),
        (ids_model, seqs, "ks25-token-ids"),
    ):
        cert = certify(model, ds, construction=construction)
        path = tmp_path / "cert.json"
        save_certificate(certificate_json(cert), path)
        assert_valid(json.loads(path.read_text()), "certificate")


def test_softmax_seq2seq_and_refuted_certificates_validate(tmp_path):
    from exactmem.constructions import mahdavi24

    attention = mahdavi24.random_instance(5, 4, 8, 3, 1)
    pairs = random_sequences(8, 3, 2, 6, 3, seed=3, task="seq2seq")
    seqs = random_sequences(8, 3, 2, 6, 3, seed=3)
    other = random_sequences(8, 3, 2, 6, 3, seed=4)
    cases = [
        (mahdavi24.build(attention, {})[0], attention, "mahdavi24", "verified"),
        (ks25.build(pairs, {}, "ks25-seq2seq")[0], pairs, "ks25-seq2seq", "verified"),
        (ks25.build(seqs, {})[0], other, None, "refuted"),  # another dataset's labels
    ]
    for model, ds, construction, verdict in cases:
        assert_valid(json.loads(json.dumps(dataset_to_json(ds))), "dataset")
        assert_valid(saved(tmp_path, model), "model")
        cert = certify(model, ds, construction=construction)
        assert cert.verdict == verdict
        save_certificate(certificate_json(cert), tmp_path / "cert.json")
        assert_valid(json.loads((tmp_path / "cert.json").read_text()), "certificate")


def test_the_cli_files_validate(tmp_path, capsys):
    data, model, cert = (str(tmp_path / n) for n in ("d.json", "m.json", "c.json"))
    assert main(["generate", "points", "--N", "10", "--d", "2", "--C", "3", "--out", data]) == 0
    assert main(["build", "--construction", "vys", "--data", data, "--out", model, "--quiet"]) == 0
    args = ["verify", model, "--data", data, "--quiet", "--tolerance", "1/2", "--certificate"]
    assert main([*args, cert]) == 0
    for path, name in ((data, "dataset"), (model, "model"), (cert, "certificate")):
        assert_valid(json.loads(Path(path).read_text()), name)
    said = json.loads(Path(cert).read_text())["certificate"]["subject"]["criteria"]
    assert said["tolerance"] == "1/2"


# --------------------------------------------------------------------------- broken files


def broken(obj: dict, path: str, value=None, *, delete: bool = False) -> dict:
    """A copy of ``obj`` with the field at dotted ``path`` (list indices as numbers) replaced
    or deleted."""
    out = copy.deepcopy(obj)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    target = out
    for p in parents:
        target = target[p]
    if delete:
        del target[last]
    else:
        target[last] = value
    return out


DATASET_BREAKS = [
    ("format", "exactmem.dataset/2", False),
    ("task", "images", False),
    ("labels", None, True),
    ("labels.0", 0, False),
    ("labels", [], False),
    ("C", 0, False),
    ("vocab.1.0", 0.5, False),
    ("vocab.1.0", "1/x", False),
    ("vocab.1.0", "nan", False),
    ("vocab.0", [], False),
    ("sequences", None, True),
    ("sequences.0.0", -1, False),
    ("sequences.0.0", "0", False),
]


@pytest.mark.parametrize(("path", "value", "delete"), DATASET_BREAKS)
def test_the_dataset_schema_and_the_loader_reject_broken_datasets(path, value, delete):
    bad = broken(json.loads((EXAMPLES / "dataset.json").read_text()), path, value, delete=delete)
    assert problems(bad, "dataset")
    with pytest.raises(InputError):
        parse_dataset(bad)


def test_the_dataset_schema_rejects_unknown_fields_and_wrong_label_shapes():
    example = json.loads((EXAMPLES / "dataset.json").read_text())
    assert problems({**example, "extra": 1}, "dataset")
    assert problems({**example, "task": "seq2seq"}, "dataset")  # seq2seq labels are lists
    assert problems({**example, "task": "points"}, "dataset")  # points needs 'points'


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("schemas")
    seqs = random_sequences(10, 3, 2, 8, 3, seed=2)
    model, _ = ks25.build(seqs, {"seed": 1})
    save_model(model, tmp / "m.json")
    save_certificate(certificate_json(certify(model, seqs, construction="ks25-next-token")),
                     tmp / "c.json")  # fmt: skip
    return {n: json.loads((tmp / f"{n[0]}.json").read_text()) for n in ("model", "certificate")}


MODEL_BREAKS = [
    ("format", "exactmem.model/2", False),
    ("sha256", "abc", False),
    ("model", None, True),
    ("model.input_dim", -1, False),
    ("model.token_inputs", "no", False),
    ("model.sublayers.0.kind", "conv", False),
    ("model.sublayers.0.layers.0.den", "12", False),
    ("model.sublayers.0.layers.0.bias.0", 3, False),
    ("model.sublayers.0.layers.0.rows.0.0", [0, "0x1", 2], False),
    ("model.sublayers.0.layers", [], False),
    ("model.sublayers.1.score", "max", False),
    ("model.sublayers.1.heads.0.query", None, True),
    ("model.meta", None, False),
]

CERTIFICATE_BREAKS = [
    ("format", "exactmem.certificate/1", False),
    ("certificate.verdict", "maybe", False),
    ("certificate.subject.criteria", None, True),
    ("certificate.subject.model_says", None, True),
    ("certificate.subject.criteria.tolerance", "0.5", False),
    ("certificate.subject.criteria.inputs", "whatever the model says", False),
    ("certificate.resources.width", None, True),
    ("certificate.resources.depth", -1, False),
    ("certificate.checks.0.passed", "yes", False),
    ("certificate.checks", [], False),
    ("certificate.activation.min_nonzero_preactivation", 0.5, False),
]


@pytest.mark.parametrize(
    ("name", "path", "value", "delete"),
    [("model", *b) for b in MODEL_BREAKS] + [("certificate", *b) for b in CERTIFICATE_BREAKS],
)
def test_model_and_certificate_schemas_reject_broken_files(files, name, path, value, delete):
    assert problems(files[name], name) == []
    assert problems(broken(files[name], path, value, delete=delete), name)


# --------------------------------------------------------------------------- exact numbers


@pytest.mark.parametrize(
    "text",
    ["-3", "+3", "1/2", " 1/2 ", "0.25", ".5", "5.", "1e-3", "2.5E+4", "1_000", "-0"]
    + ["", "1/", "/2", "1.2.3", "0x10", "nan", "inf", "1/2.5", "e3", "1 2", "½", "--1"],
)
def test_the_rational_pattern_accepts_what_the_loader_parses(text):
    pattern = schema("dataset")["$defs"]["rational"]["oneOf"][1]["pattern"]
    try:
        parse_rational(text, "x")
        parsed = True
    except InputError:
        parsed = False
    assert bool(re.search(pattern, text)) == parsed


# --------------------------------------------------------------------------- one source of truth


@pytest.mark.parametrize("name", schemas.names())
def test_the_docs_copy_is_the_shipped_file(name):
    file, _ = schemas.FILES[name]
    docs_copy = DOCS_EXAMPLES / file
    if not docs_copy.exists():  # an installed copy without the docs
        pytest.skip("no docs/examples beside the tests")
    assert docs_copy.read_bytes() == (EXAMPLES / file).read_bytes(), (
        f"docs/examples/{file} differs from exactmem/files/schemas/{file} (what the package ships "
        f"and `exactmem schema` prints): make them the same file, cp docs/examples/{file} "
        "exactmem/files/schemas/"
    )


def test_schema_command_lists_and_prints(capsys):
    assert main(["schema"]) == 0
    listed = capsys.readouterr().out.split("\n")
    assert [line.split()[0] for line in listed if line] == schemas.names()
    for name in schemas.names():
        assert main(["schema", name]) == 0
        printed = capsys.readouterr().out
        assert json.loads(printed) == json.loads(schemas.text(name))
    assert main(["schema", "modle"]) == 2
    assert "did you mean model?" in capsys.readouterr().err
