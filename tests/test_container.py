"""The binary container (.exm): exact round trips with the JSON files' hashes, and every way a
container can be bad (each refused with exit 2 and a message naming what is wrong)."""

import json
import struct

import pytest
from gmpy2 import mpq

from exactmem.commands.main import main
from exactmem.constructions import ks25, vys
from exactmem.core.errors import InputError
from exactmem.core.limits import Limits, use
from exactmem.datasets.dataset import Dataset, dataset_hash, random_points
from exactmem.datasets.sequences import random_sequences
from exactmem.files.container import MAGIC, read_header
from exactmem.files.dataset_files import load_dataset, save_dataset
from exactmem.files.model_files import load_model, save_model
from exactmem.files.model_json import model_hash

PAD = "x" * 400  # room in a header for the tampering below


def padded(ds: Dataset) -> Dataset:
    return Dataset(
        ds.task,
        ds.labels,
        ds.num_classes,
        ds.points,
        ds.vocab,
        ds.sequences,
        meta={**ds.meta, "pad": PAD},
    )


DATASETS = {
    "points": lambda: random_points(30, 3, 4, seed=2),
    "next-token": lambda: random_sequences(40, 5, 3, 20, 4, seed=1),
    "seq2seq": lambda: random_sequences(20, 4, 3, 15, 3, seed=3, task="seq2seq"),
    "big numbers": lambda: Dataset.from_points(
        [[2**70, "-1/3"], [-(2**200) + 1, "7/2"], [0, mpq(-(2**64), 3**50)]],
        [1, 2**65, 3],
    ),
}


@pytest.mark.parametrize("name", DATASETS)
def test_dataset_round_trip_has_the_json_files_hash(name, tmp_path):
    ds = DATASETS[name]()
    save_dataset(ds, tmp_path / "d.json")
    save_dataset(ds, tmp_path / "d.exm")
    from_json, from_binary = load_dataset(tmp_path / "d.json"), load_dataset(tmp_path / "d.exm")
    assert from_binary == from_json == ds
    assert from_binary.meta == ds.meta
    assert dataset_hash(from_binary) == dataset_hash(from_json)
    save_dataset(from_binary, tmp_path / "back.json")  # and back, byte for byte
    assert (tmp_path / "back.json").read_bytes() == (tmp_path / "d.json").read_bytes()
    if name == "big numbers":
        dtypes = {k: a["dtype"] for k, a in read_header(tmp_path / "d.exm")["arrays"].items()}
        assert dtypes == {"numerator": "big", "denominator": "big", "labels": "big"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A VYS model (points) and a Theorem 4.1 model, whose weights pass 2⁶³."""
    out = {}
    for name, build, ds in (
        ("vys", vys.build, random_points(40, 3, 5, seed=1)),
        ("ks25", ks25.build, random_sequences(400, 6, 4, 30, 5, seed=0)),
    ):
        model, _ = build(ds, {"seed": 0})
        out[name] = (model, ds)
    return out


@pytest.mark.parametrize("name", ["vys", "ks25"])
def test_model_round_trip_has_the_json_files_hash(name, models, tmp_path):
    model, _ = models[name]
    digest = save_model(model, tmp_path / "m.json")
    assert save_model(model, tmp_path / "m.exm") == digest
    loaded, stated = load_model(tmp_path / "m.exm")
    assert loaded == model and stated == digest == model_hash(loaded)
    assert (tmp_path / "m.exm").stat().st_size < (tmp_path / "m.json").stat().st_size
    if name == "ks25":
        assert read_header(tmp_path / "m.exm")["arrays"]["value"]["dtype"] == "big"


def test_cli_certificate_hashes_are_the_same_whichever_format(models, tmp_path, capsys):
    """generate, build and verify through files of either form: one certificate subject."""
    hashes = {}
    for ext in (".json", ".exm"):
        data, model, cert = (tmp_path / f"{stem}{ext}" for stem in ("d", "m", "c"))
        cert = tmp_path / f"c{ext}.json"
        gen = ["generate", "next-token", "--N", "40", "--n", "5", "--vocab", "20", "--C", "4"]
        assert main([*gen, "--d", "3", "--out", str(data), "--quiet"]) == 0
        build = ["build", "--construction", "ks25-next-token", "--data", str(data)]
        assert main([*build, "--out", str(model), "--quiet"]) == 0
        verify = ["verify", str(model), "--data", str(data), "--evaluator", "reference"]
        assert main([*verify, "--certificate", str(cert), "--quiet"]) == 0
        subject = json.loads(cert.read_text())["certificate"]["subject"]
        hashes[ext] = (subject["dataset_sha256"], subject["model_sha256"])
    assert hashes[".json"] == hashes[".exm"]
    capsys.readouterr()
    for command in (
        ["inspect", str(tmp_path / "m.exm"), "--json"],
        [
            "predict",
            str(tmp_path / "m.exm"),
            "--data",
            str(tmp_path / "d.exm"),
            "--evaluator",
            "reference",
            "--json",
            "--quiet",
        ],
    ):
        assert main(command) == 0
        json.loads(capsys.readouterr().out)
    # convert both ways gives the JSON file back byte for byte
    assert main(["convert", str(tmp_path / "m.json"), str(tmp_path / "m2.exm"), "--quiet"]) == 0
    assert main(["convert", str(tmp_path / "m2.exm"), str(tmp_path / "m2.json"), "--quiet"]) == 0
    assert (tmp_path / "m2.json").read_bytes() == (tmp_path / "m.json").read_bytes()
    assert main(["convert", str(tmp_path / "d.exm"), str(tmp_path / "d2.json"), "--quiet"]) == 0
    assert (tmp_path / "d2.json").read_bytes() == (tmp_path / "d.json").read_bytes()


def test_convert_refuses_a_file_of_another_format(tmp_path, capsys):
    (tmp_path / "x.json").write_text('{"format": "exactmem.certificate/2"}')
    assert main(["convert", str(tmp_path / "x.json"), str(tmp_path / "y.exm")]) == 2
    assert "neither" in capsys.readouterr().err


# --------------------------------------------------------------------------- hostile files


def layout(raw: bytes) -> tuple[dict, int]:
    _, _, _, length = struct.unpack_from("<8sIIQ", raw)
    return json.loads(raw[24 : 24 + length]), length


def tamper(path, mutate) -> None:
    """Rewrite the header in place (the arrays stay where they are): the padding in meta
    makes room for what ``mutate`` adds."""
    raw = bytearray(path.read_bytes())
    header, length = layout(raw)
    if "meta" in header:
        header["meta"] = {}
    mutate(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= length
    raw[24 : 24 + length] = text + b" " * (length - len(text))
    path.write_bytes(bytes(raw))


@pytest.fixture()
def container(tmp_path):
    path = tmp_path / "d.exm"
    save_dataset(padded(random_sequences(40, 5, 3, 20, 4, seed=1)), path)
    return path


def refused(path, *needles, what="dataset"):
    with pytest.raises(InputError) as info:
        load_dataset(path) if what == "dataset" else load_model(path)
    message = str(info.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, message
    return message


def test_intact_container_loads(container):
    assert load_dataset(container).size == 40


def test_truncated_files(container):
    raw = container.read_bytes()
    for size in (0, 10, 30, len(raw) - 1, len(raw) // 2):
        container.write_bytes(raw[:size])
        with pytest.raises(InputError) as info:
            load_dataset(container)
        assert any(w in str(info.value) for w in ("too short", "past the end", "truncated")), str(
            info.value
        )


def test_bad_magic_version_and_flags(container):
    raw = bytearray(container.read_bytes())
    container.write_bytes(b"{" + bytes(raw[1:]))
    refused(container, "not an exactmem binary container")
    raw2 = bytearray(raw)
    raw2[8:12] = struct.pack("<I", 2)
    container.write_bytes(bytes(raw2))
    refused(container, "version 2 is not supported")
    raw2 = bytearray(raw)
    raw2[12:16] = struct.pack("<I", 1)
    container.write_bytes(bytes(raw2))
    refused(container, "flags")


def test_header_too_big_or_past_the_end(container):
    raw = bytearray(container.read_bytes())
    raw[16:24] = struct.pack("<Q", 2**40)
    container.write_bytes(bytes(raw))
    refused(container, "header of 1099511627776 bytes, more than")
    raw[16:24] = struct.pack("<Q", len(raw))
    container.write_bytes(bytes(raw))
    refused(container, "runs past the end of the file")


def test_header_not_json_or_not_strict(container):
    raw = bytearray(container.read_bytes())
    _, length = layout(raw)
    raw[24 : 24 + length] = b"[" * length
    container.write_bytes(bytes(raw))
    refused(container, "header")


def set_array(name, **fields):
    def mutate(header):
        header["arrays"][name].update(fields)

    return mutate


@pytest.mark.parametrize(
    "mutate, needles",
    [
        (set_array("labels", offset=2**50), ("header.arrays.labels", "past the end")),
        (set_array("labels", offset=3), ("header.arrays.labels.offset", "multiple of 8")),
        (set_array("labels", offset=0), ("header.arrays.labels.offset", "overlaps")),
        (set_array("labels", bytes=2**50), ("header.arrays.labels", "bytes")),
        (set_array("sequences", shape=[10**12, 10**6]), ("header.arrays.sequences", "shape")),
        (set_array("sequences", shape=[-1, 5]), ("header.arrays.sequences.shape",)),
        (set_array("sequences", shape=[[1]]), ("header.arrays.sequences.shape",)),
        (set_array("sequences", dtype="object"), ("header.arrays.sequences.dtype",)),
        (set_array("sequences", dtype="<i8"), ("header.arrays.sequences", "bytes")),
        (set_array("sequences", sha256="0" * 64), ("sequences", "damaged")),
        (set_array("labels", extra=1), ("header.arrays.labels", "exactly")),
        (lambda h: h["arrays"].pop("labels"), ("missing array 'labels'",)),
        (lambda h: h.update(arrays={**h["arrays"], "more": h["arrays"]["labels"]}), ("more",)),
        (lambda h: h.update(task="points"), ("unknown array 'sequences'",)),
        (lambda h: h.update(format="exactmem.dataset/9"), ("header.format",)),
        (lambda h: h.update(C=0), ("header.C",)),
        (lambda h: h.update(C=2), ("labels[", "outside 1..C with C = 2")),
        (lambda h: h.update(surprise=1), ("unknown field 'surprise'",)),
        (lambda h: h.update(meta=[]), ("header.meta",)),
    ],
)
def test_bad_headers_are_named(container, mutate, needles):
    tamper(container, mutate)
    refused(container, *needles)


def test_huge_counts_are_refused_before_allocating(container):
    """A shape of 10¹⁸ big integers declares a length table far past the file's end."""
    tamper(container, set_array("labels", dtype="big", shape=[10**18]))
    refused(container, "header.arrays.labels", "big integers need")


def write_raw(path, header: dict, payload: bytes) -> None:
    """A container of one hand-made array region (offsets as given)."""
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<8sIIQ", MAGIC, 1, 0, len(text)) + text + payload)


def hand_made(tmp_path, sequences: bytes, labels: bytes, labels_dtype="<u1", n_labels=2):
    import hashlib

    arrays, blob = {}, b""
    start = -(-(24 + 2000) // 8) * 8
    for name, dtype, shape, data in (
        ("sequences", "<u1", [2, 2], sequences),
        ("numerator", "<u1", [3, 1], bytes([1, 2, 3])),
        ("denominator", "<u1", [3, 1], bytes([1, 1, 1])),
        ("labels", labels_dtype, [n_labels], labels),
    ):
        blob += bytes(-len(blob) % 8)
        arrays[name] = {
            "dtype": dtype,
            "shape": shape,
            "offset": start + len(blob),
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        blob += data
    header = {"format": "exactmem.dataset/1", "task": "next-token", "C": 3, "arrays": arrays}
    text = json.dumps(header).encode()
    text += b" " * (start - 24 - len(text))
    path = tmp_path / "h.exm"
    path.write_bytes(struct.pack("<8sIIQ", MAGIC, 1, 0, len(text)) + text + blob)
    return path


def test_hand_made_container_loads(tmp_path):
    ds = load_dataset(hand_made(tmp_path, bytes([0, 1, 2, 0]), bytes([1, 3])))
    assert ds.sequences == ((0, 1), (2, 0)) and ds.labels == (1, 3)


@pytest.mark.parametrize(
    "sequences, labels, dtype, needles",
    [
        (bytes([0, 1, 3, 0]), bytes([1, 3]), "<u1", ("sequences[1][0]", "not an index")),
        (bytes([0, 1, 2, 0]), bytes([0, 3]), "<u1", ("labels[0]", "outside 1..C")),
        # big labels: lengths (1, 1) then the magnitudes 1 and 0 (a leading zero byte)
        (bytes([0, 1, 2, 0]), struct.pack("<qq", 1, 1) + b"\x01\x00", "big", ("labels[1]",)),
        # lengths that add up to more than the array holds
        (bytes([0, 1, 2, 0]), struct.pack("<qq", 1, 5) + b"\x01\x02", "big", ("add up",)),
        # a negative label
        (bytes([0, 1, 2, 0]), struct.pack("<qq", -1, 1) + b"\x01\x02", "big", ("labels[0]",)),
    ],
)
def test_bad_values_are_named(tmp_path, sequences, labels, dtype, needles):
    refused(hand_made(tmp_path, sequences, labels, dtype), *needles)


def test_big_integers_within_max_digits(tmp_path):
    path = tmp_path / "d.exm"
    save_dataset(DATASETS["big numbers"](), path)
    with use(Limits(max_digits=20)):
        refused(path, "--max-digits")


def test_bad_denominator_is_named(tmp_path):
    path = tmp_path / "d.exm"
    save_dataset(padded(random_points(5, 2, 2, seed=0)), path)
    raw = bytearray(path.read_bytes())
    header, _ = layout(raw)
    den = header["arrays"]["denominator"]
    assert den["dtype"] == "<u1"
    raw[den["offset"]] = 0
    import hashlib

    tamper_bytes = bytes(raw[den["offset"] : den["offset"] + den["bytes"]])
    path.write_bytes(bytes(raw))
    tamper(path, set_array("denominator", sha256=hashlib.sha256(tamper_bytes).hexdigest()))
    refused(path, "points[0][0]", "denominator 0")


# --------------------------------------------------------------------------- models


@pytest.fixture()
def model_file(models, tmp_path):
    path = tmp_path / "m.exm"
    save_model(models["ks25"][0], path)
    return path


def walk_packed(obj):
    if isinstance(obj, dict):
        if "packed" in obj:
            yield obj
        for k, v in obj.items():
            if k != "meta":
                yield from walk_packed(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from walk_packed(v)


def test_model_hash_mismatch_and_packing_errors(model_file):
    raw = model_file.read_bytes()

    def swap(h):
        maps = list(walk_packed(h["model"]))
        maps[0]["packed"], maps[1]["packed"] = 1, 0

    tamper(model_file, swap)
    refused(model_file, "packed: expected 0", what="model")
    model_file.write_bytes(raw)
    tamper(model_file, lambda h: h.update(sha256="0" * 64))
    refused(model_file, "SHA-256 mismatch", what="model")
    model_file.write_bytes(raw)

    def bad_in(h):
        next(walk_packed(h["model"]))["in"] = 0

    tamper(model_file, bad_in)
    refused(model_file, "header.model.", "bad entry", what="model")
    model_file.write_bytes(raw)
    tamper(model_file, lambda h: h["arrays"].pop("bias"))
    refused(model_file, "missing array 'bias'", what="model")


def test_cli_exit_2_names_the_file(container, capsys):
    raw = container.read_bytes()
    container.write_bytes(raw[: len(raw) - 3])
    assert (
        main(
            [
                "build",
                "--construction",
                "vys",
                "--data",
                str(container),
                "--out",
                str(container.with_suffix(".json")),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert str(container) in err and "past the end" in err and "Traceback" not in err


def test_convert_checks_a_json_dataset_as_load_dataset_does(tmp_path, capsys):
    bad = {"format": "exactmem.dataset/1", "task": "points", "points": [[1], [2]], "labels": [1, 0]}
    (tmp_path / "d.json").write_text(json.dumps(bad))
    assert main(["convert", str(tmp_path / "d.json"), str(tmp_path / "d.exm")]) == 2
    err = capsys.readouterr().err
    assert f"dataset file {tmp_path / 'd.json'}" in err and "labels[1]" in err
    assert not (tmp_path / "d.exm").exists()
