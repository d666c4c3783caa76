"""Fuzzing the binary container and the safetensors reader (issue 27 point 7), beside the JSON
loader fuzz of tests/test_loader_fuzz.py.

Containers: a small model and a small dataset, their headers edited field by field (shapes,
dtypes, offsets, lengths, names, the header's own fields) and their arrays' bytes replaced,
each array's SHA-256 recomputed so the reader's later checks are reached, or bytes flipped and
the file cut anywhere. The reader returns or raises :class:`InputError`, never anything else;
and a model it returns has nothing hidden: writing it back gives arrays of the same values.

Safetensors: a small mahdavi24 checkpoint, its header's tensors edited (shape, dtype, offsets,
names, metadata) and its bytes cut or flipped; ``read_safetensors`` and ``import_checkpoint``
return or raise InputError.

Examples are bounded (EXACTMEM_FUZZ_EXAMPLES, default 100 a target) and derandomized, so the
default suite runs the same mutants every time.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from pathlib import Path

import numpy as np
from hostile_cases import container, container_arrays, safetensors
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from exactmem.checkpoints.architectures import import_checkpoint
from exactmem.checkpoints.safetensors_io import read_safetensors
from exactmem.core.errors import InputError
from exactmem.files.container import _Container, read_dataset, read_model, write_model_of

EXAMPLES = int(os.environ.get("EXACTMEM_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 200,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@functools.cache
def _bases(folder: str) -> dict[str, tuple[dict, dict]]:
    """The model and dataset containers, as (header, arrays), written once."""
    from exactmem.constructions import vys
    from exactmem.datasets.dataset import random_points
    from exactmem.datasets.sequences import random_sequences
    from exactmem.files.dataset_files import save_dataset
    from exactmem.files.model_files import save_model

    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    ds = random_points(4, 2, 2, seed=1)
    save_model(vys.build(ds, {"seed": 0})[0], root / "m.exm")
    save_dataset(random_sequences(5, 3, 2, 6, 2, seed=1), root / "d.exm")
    return {name: container_arrays(root / f"{name}.exm") for name in ("m", "d")}


NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.integers(0, 2**64),
    st.sampled_from([10**18, 2**63 - 1, 2**31, 255, 256]),
)
FIELD_VALUES = st.one_of(
    NUMBERS,
    st.lists(NUMBERS, max_size=3),
    st.sampled_from(["<u1", "<u2", "<i8", "big", "<f8", "", None, True, 1.5]),
    st.text(max_size=5),
)


@st.composite
def header_edits(draw, header: dict, arrays: dict):
    """(header, arrays) with one to three edits (a reshape keeps the values and may repeat
    them: the extra values of a bias of shape [R, 2] once hid under the model's hash)."""
    header = json.loads(json.dumps(header))
    arrays = dict(arrays)
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["shape", "reshape", "reshape", "dtype", "payload", "rename", "drop", "header"]
        kind = draw(st.sampled_from(kinds))
        name = draw(st.sampled_from(sorted(arrays))) if arrays else None
        if name is None:
            break
        dtype, shape, payload = arrays[name]
        if kind == "shape":
            shape = draw(st.lists(st.integers(0, 10**18) | st.integers(0, 300), max_size=3))
            arrays[name] = (dtype, shape, payload)
        elif kind == "reshape":  # the same values under another shape, or repeated k times
            count = int(np.prod(shape))
            k = draw(st.integers(1, 3))
            if dtype == "big":
                continue
            new = draw(st.sampled_from([[count * k], [count, k], [k, count], [1, count * k]]))
            arrays[name] = (dtype, new, payload * k)
        elif kind == "dtype":
            arrays[name] = (
                draw(st.sampled_from(["<u1", "<i2", "<u4", "<i8", "big"])),
                shape,
                payload,
            )
        elif kind == "payload":
            arrays[name] = (dtype, shape, draw(st.binary(max_size=64)))
        elif kind == "rename":
            arrays[draw(st.sampled_from(["bias", "col", "x", "labels"]))] = arrays.pop(name)
        elif kind == "drop":
            arrays.pop(name)
        else:
            key = draw(st.sampled_from([*header, "extra"]))
            header[key] = draw(FIELD_VALUES)
    return header, arrays


def _load(path: Path, which: str):
    return read_model(path) if which == "m" else read_dataset(path)


def _values(path: Path) -> dict[str, list[int]]:
    c = _Container(path, "model")
    try:
        return {name: list(np.ravel(c.ints(name)).tolist()) for name in c.arrays}
    finally:
        c.close()


def _nothing_hidden(path: Path, loaded, tmp: Path) -> None:
    """A model read from ``path`` written back holds the same values in the same arrays: no
    value of the file was left unread under its hash."""
    model, digest = loaded
    again = tmp / "again.exm"
    write_model_of(model, digest, again)
    assert _values(path) == _values(again)


@FUZZ
@given(data=st.data())
def test_fuzz_container_headers(tmp_path, data):
    which = data.draw(st.sampled_from(["m", "d"]))
    header, arrays = _bases(str(tmp_path.parent / "fuzz-bases"))[which]
    header, arrays = data.draw(header_edits(header, arrays))
    path = tmp_path / f"{which}.exm"
    path.write_bytes(container(header, arrays))
    try:
        loaded = _load(path, which)
    except InputError as exc:
        event(f"refused: {str(exc).split(': ', 1)[1][:28]}")
        return
    event("loaded")
    if which == "m":
        _nothing_hidden(path, loaded, tmp_path)


@FUZZ
@given(data=st.data())
def test_fuzz_container_bytes(tmp_path, data):
    which = data.draw(st.sampled_from(["m", "d"]))
    header, arrays = _bases(str(tmp_path.parent / "fuzz-bases"))[which]
    raw = bytearray(container(header, arrays))
    for _ in range(data.draw(st.integers(0, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))] if data.draw(st.booleans()) else raw
    path = tmp_path / f"{which}.exm"
    path.write_bytes(bytes(raw))
    try:
        _load(path, which)
    except InputError:
        pass


def test_the_fuzz_bases_load(tmp_path):
    for which, (header, arrays) in _bases(str(tmp_path / "bases")).items():
        path = tmp_path / f"{which}.exm"
        path.write_bytes(container(header, arrays))
        _load(path, which)


# --------------------------------------------------------------------------- safetensors


def _checkpoint() -> dict[str, tuple[str, list, bytes]]:
    rng = np.random.default_rng(0)

    def f32(*shape):
        return ("F32", list(shape), rng.standard_normal(shape).astype("<f4").tobytes())

    return {
        "attn.0.query.weight": f32(2, 3),
        "attn.0.key.weight": f32(2, 3),
        "attn.0.value.weight": f32(2, 3),
        "attn.0.output.weight": f32(2, 2),
    }


def _header_of(tensors: dict, metadata) -> dict:
    header: dict = {} if metadata is None else {"__metadata__": metadata}
    at = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    return header


@FUZZ
@given(data=st.data())
def test_fuzz_safetensors(tmp_path, data):
    tensors = _checkpoint()
    metadata = data.draw(
        st.none() | st.dictionaries(st.sampled_from(["n_head", "x"]), st.text(max_size=4))
    )
    header = _header_of(tensors, metadata)
    blob = b"".join(d for _, _, d in tensors.values())
    for _ in range(data.draw(st.integers(0, 3))):
        name = data.draw(st.sampled_from(sorted(header)))
        key = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", "name", "whole"]))
        if key == "name":
            header[data.draw(st.sampled_from(["attn.1.query.weight", "w", "attn.0.key.bias"]))] = (
                header.pop(name)
            )
        elif key == "whole" or not isinstance(header[name], dict):
            header[name] = data.draw(FIELD_VALUES)
        else:
            header[name][key] = data.draw(
                FIELD_VALUES | st.sampled_from(["F16", "BF16", "F64", "I8"])
                if key == "dtype"
                else st.lists(st.integers(0, 10**12) | st.integers(0, 40), max_size=3)
            )
    text = json.dumps(header).encode()
    raw = bytearray(struct.pack("<Q", len(text)) + text + blob)
    for _ in range(data.draw(st.integers(0, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path / "c.safetensors"
    path.write_bytes(bytes(raw))
    try:
        read_safetensors(path)
    except InputError:
        pass
    try:
        import_checkpoint(path, data.draw(st.sampled_from(["mahdavi24", "dana25", "gpt"])))
    except InputError:
        pass


def test_the_safetensors_base_imports(tmp_path):
    path = tmp_path / "c.safetensors"
    path.write_bytes(safetensors(_checkpoint()))
    assert import_checkpoint(path, "mahdavi24").input_dim == 3
