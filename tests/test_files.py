"""Model, certificate and dataset files: round trips and every way they can be bad."""

import gzip
import json

import pytest

from exactmem.commands.main import main
from exactmem.constructions import vys
from exactmem.core.errors import InputError
from exactmem.datasets.dataset import random_points
from exactmem.files.dataset_files import load_dataset, save_dataset
from exactmem.files.model_files import load_model, save_model
from exactmem.files.model_json import model_hash


@pytest.fixture()
def files(tmp_path):
    ds = random_points(40, 3, 5, seed=1)
    data = tmp_path / "d.json"
    save_dataset(ds, data)
    model, _ = vys.build(ds, {"seed": 0})
    path = tmp_path / "m.json"
    save_model(model, path)
    return ds, model, data, path


def test_model_round_trip_is_identical(files, tmp_path):
    ds, model, data, path = files
    loaded, digest = load_model(path)
    assert loaded == model and digest == model_hash(model)
    gz = tmp_path / "m.json.gz"
    save_model(model, gz)
    assert load_model(gz)[0] == model


def test_dataset_round_trip(files, tmp_path):
    ds, _, data, _ = files
    assert load_dataset(data) == ds
    gz = tmp_path / "d.json.gz"
    save_dataset(ds, gz)
    assert load_dataset(gz) == ds


def test_one_edited_byte_is_rejected_with_hash_mismatch(files, capsys):
    ds, model, data, path = files
    raw = bytearray(path.read_bytes())
    i = raw.index(b'"0x') + 3
    raw[i] = ord("1") if raw[i] != ord("1") else ord("2")
    path.write_bytes(bytes(raw))
    assert main(["verify", str(path), "--data", str(data), "--quiet"]) == 2
    assert "SHA-256 mismatch" in capsys.readouterr().err


def test_tampered_model_with_recomputed_hash_loads_and_is_refuted(files, capsys):
    ds, model, data, path = files
    obj = json.loads(path.read_text())
    layer = obj["model"]["sublayers"][0]["layers"][-1]
    layer["bias"][0] = hex(int(layer["bias"][0], 16) + 1)
    from exactmem.files.model_json import canonical_hash

    obj["sha256"] = canonical_hash(obj["model"])
    path.write_text(json.dumps(obj))
    assert main(["verify", str(path), "--data", str(data), "--quiet"]) == 1
    assert "REFUTED" in capsys.readouterr().out


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda o: o.update(format="exactmem.model/9"), "not supported"),
        (lambda o: o.pop("sha256"), "sha256"),
        (lambda o: o["model"].update(sublayers=[{"kind": "rnn", "label": ""}]), "kind"),
        (lambda o: o["model"]["sublayers"][0]["layers"][0].update(den="0x0"), "denominator"),
        (
            lambda o: o["model"]["sublayers"][0]["layers"][0]["rows"][0].append([99, "0x1"]),
            r"layers\[0\]",
        ),
        (lambda o: o["model"]["sublayers"][0]["layers"][0]["bias"].__setitem__(0, 7), "hex"),
    ],
)
def test_malformed_models_name_the_field(files, mutate, message):
    from exactmem.files.model_json import canonical_hash

    _, _, _, path = files
    obj = json.loads(path.read_text())
    mutate(obj)
    if "sha256" in obj and "model" in obj:
        obj["sha256"] = canonical_hash(obj["model"])
    path.write_text(json.dumps(obj))
    with pytest.raises(InputError, match=message):
        load_model(path)


def test_truncated_and_non_json_files(files, tmp_path):
    _, _, data, path = files
    cut = tmp_path / "cut.json"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(InputError, match="not valid JSON"):
        load_model(cut)
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes())[:100])
    with pytest.raises(InputError, match="gzip"):
        load_model(gz)
    with pytest.raises(InputError, match="cannot read"):
        load_model(tmp_path / "missing.json")


def write(tmp_path, obj):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return p


BASE = {
    "format": "exactmem.dataset/1",
    "task": "points",
    "points": [["1", "2"], ["3", "4"]],
    "labels": [1, 2],
}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"labels": [1, 0]}, r"labels\[1\]: label 0 is outside 1..C"),
        ({"labels": [1, 5], "C": 3}, r"labels\[1\]: label 5 is outside 1..C with C = 3"),
        ({"labels": [1, 2.0]}, r"labels\[1\]"),
        ({"points": [["1", "2"], ["NaN", "4"]]}, r"points\[1\]\[0\].*not a finite"),
        ({"points": [["1", "2"], [1.5, "4"]]}, r"points\[1\]\[0\].*float"),
        ({"points": [["1", "2"], ["3"]]}, r"points\[1\]: has 1 coordinates, expected 2"),
        ({"labels": [1]}, "1 label for 2 points"),
        ({"format": "other/1"}, "format"),
        ({"task": "images"}, "task"),
    ],
)
def test_bad_datasets_name_index_and_exit_2(tmp_path, files, capsys, change, message):
    p = write(tmp_path, {**BASE, **change})
    with pytest.raises(InputError, match=message):
        load_dataset(p)
    _, _, _, model = files
    assert main(["verify", str(model), "--data", str(p), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err


def test_json_nan_literal_is_rejected(tmp_path):
    p = write(
        tmp_path,
        '{"format": "exactmem.dataset/1", "task": "points", "points": [[NaN, 1]], "labels": [1]}',
    )
    with pytest.raises(InputError, match="finite"):
        load_dataset(p, allow_floats=True)


def test_duplicate_points_with_different_labels_exit_2(tmp_path, capsys):
    p = write(
        tmp_path, {**BASE, "points": [["1", "2"], ["3", "4"], ["1", "2"]], "labels": [1, 2, 3]}
    )
    out = tmp_path / "m.json"
    assert (
        main(["build", "--construction", "vys", "--data", str(p), "--out", str(out), "--quiet"])
        == 2
    )
    assert "points[0] and points[2]" in capsys.readouterr().err


def test_certificate_file(files, tmp_path):
    _, _, data, path = files
    cert = tmp_path / "c.json"
    assert (
        main(["verify", str(path), "--data", str(data), "--quiet", "--certificate", str(cert)]) == 0
    )
    obj = json.loads(cert.read_text())
    assert obj["format"] == "exactmem.certificate/2"
    body = obj["certificate"]
    assert body["verdict"] == "verified"
    assert body["subject"]["model_sha256"] == load_model(path)[1]
    assert body["subject"]["versions"]["gmpy2"]


@pytest.mark.parametrize("which", ["dana", "mahdavi", "token_ids"])
def test_round_trip_of_attention_features(tmp_path, which):
    """Positional encodings, attention masks and token inputs survive the model file."""
    from support import certify_built

    from exactmem.constructions import dana25, ks25, mahdavi24
    from exactmem.datasets.sequences import random_sequences

    if which == "dana":
        ds = dana25.random_associations(6, 3, 8, seed=1)
        model, _ = dana25.build(ds, {"d": 2, "heads": 3})
    elif which == "mahdavi":
        ds = mahdavi24.random_instance(5, 3, 5, 3, seed=1)
        model, _ = mahdavi24.build(ds, {"heads": 2})
    else:
        ds = random_sequences(20, 3, 1, 9, 3, seed=1)
        model, _ = ks25.build(ds, {}, "ks25-token-ids")
    path = tmp_path / "m.json"
    save_model(model, path)
    loaded, _ = load_model(path)
    assert loaded == model
    assert certify_built(loaded, ds).verdict == "verified"
