"""Importing trained safetensors checkpoints exactly (no torch: the checkpoints are written with
safetensors' numpy API or byte by byte)."""

from __future__ import annotations

import json
import re
import struct
from fractions import Fraction

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.checkpoints.architectures import ARCHITECTURES, import_checkpoint
from exactmem.checkpoints.safetensors_io import DTYPES, decode, read_safetensors
from exactmem.commands.main import main
from exactmem.commands.parser import ARCHITECTURES as CLI_ARCHITECTURES
from exactmem.core.errors import InputError
from exactmem.files.model_files import load_model

safetensors_numpy = pytest.importorskip("safetensors.numpy")
save_file = safetensors_numpy.save_file


def _raw(header: dict, data: bytes, pad: int = 0) -> bytes:
    text = json.dumps(header).encode() + b" " * pad
    return struct.pack("<Q", len(text)) + text + data


# --------------------------------------------------------------------------- bit patterns


def _exact(x: float) -> mpq:
    return mpq(Fraction(x))


@pytest.mark.parametrize(
    ("dtype", "np_dtype"), [("F32", np.float32), ("F16", np.float16), ("F64", np.float64)]
)
def test_every_class_of_bit_pattern_is_read_exactly(dtype, np_dtype):
    info = np.finfo(np_dtype)
    values = np.array(
        [
            0.0,
            -0.0,
            1.0,
            -1.5,
            info.max,
            -info.max,
            info.tiny,  # smallest normal
            info.smallest_subnormal,
            -info.smallest_subnormal,
            info.tiny - info.smallest_subnormal,  # largest subnormal
            info.eps,
            1 / 3,
        ],
        dtype=np_dtype,
    )
    words = values.view(f"<u{values.itemsize}")
    m, e = decode(words, DTYPES[dtype])
    for i, v in enumerate(values):
        got = mpq(int(m[i])) * mpq(2) ** int(e[i])
        assert got == _exact(float(v)), (dtype, i, v)
    assert m[1] == 0  # −0 is 0


def test_every_float16_bit_pattern_round_trips():
    words = np.arange(1 << 16, dtype=np.uint16)
    values = words.view(np.float16)
    finite = np.isfinite(values)
    m, e = decode(words[finite], DTYPES["F16"])
    back = np.ldexp(m.astype(np.float64), e)
    assert np.array_equal(back, values[finite].astype(np.float64))
    assert np.array_equal(np.signbit(back[m != 0]), np.signbit(values[finite][m != 0]))


def test_random_float32_bit_patterns_round_trip():
    words = np.random.default_rng(0).integers(0, 1 << 32, 200_000, dtype=np.uint64)
    words = np.concatenate([words, [0, 1, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x80000000]])
    values = words.astype(np.uint32).view(np.float32)
    finite = np.isfinite(values)
    m, e = decode(words[finite].astype(np.uint32), DTYPES["F32"])
    back = np.ldexp(m.astype(np.float64), e)
    assert np.array_equal(back, values[finite].astype(np.float64))
    assert np.array_equal(np.signbit(back[m != 0]), np.signbit(values[finite][m != 0]))


def test_every_bfloat16_bit_pattern_is_the_float32_of_its_top_half():
    words = np.arange(1 << 16, dtype=np.uint32)
    as_f32 = (words << 16).view(np.float32)
    finite = np.isfinite(as_f32)
    m, e = decode(words[finite].astype(np.uint16), DTYPES["BF16"])
    assert np.array_equal(np.ldexp(m.astype(np.float64), e), as_f32[finite].astype(np.float64))
    assert (~finite).sum() == 2 * 128  # NaNs and ±inf: the exponent all ones, either sign


def test_bfloat16_is_the_top_half_of_float32():
    f32 = np.array(
        [1.0, -2.5, 3.0e38, 1.0e-38, 9.2e-41, 0.0, -0.0, 0.15625], dtype=np.float32
    ).view(np.uint32)
    top = (f32 >> 16).astype(np.uint16)
    m, e = decode(top, DTYPES["BF16"])
    expected = (top.astype(np.uint32) << 16).view(np.float32)
    for i, x in enumerate(expected):
        assert mpq(int(m[i])) * mpq(2) ** int(e[i]) == _exact(float(x))
    # the smallest bfloat16 subnormal is 2^-133
    m, e = decode(np.array([1], dtype=np.uint16), DTYPES["BF16"])
    assert mpq(int(m[0])) * mpq(2) ** int(e[0]) == mpq(1, 2**133)


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
@pytest.mark.parametrize("what", ["nan", "+inf", "-inf"])
def test_nan_and_infinities_are_refused_naming_tensor_and_index(tmp_path, dtype, what):
    fmt = DTYPES[dtype]
    top = (1 << fmt.exponent) - 1
    word = top << fmt.fraction
    if what == "nan":
        word |= 1
    if what == "-inf":
        word |= 1 << (fmt.bits - 1)
    words = np.array([0, 1, word, 0], dtype=fmt.word)
    shown = {"nan": "NaN"}.get(what, what)
    path = tmp_path / "ok.safetensors"
    path.write_bytes(
        _raw(
            {"w": {"dtype": dtype, "shape": [2, 2], "data_offsets": [0, words.nbytes]}},
            words.tobytes(),
        )
    )
    message = rf"ok.safetensors: tensor 'w': entry 2 \(flat index\) is {re.escape(shown)}"
    with pytest.raises(InputError, match=message):
        read_safetensors(path)


# --------------------------------------------------------------------------- hostile headers


def _good(tmp_path):
    path = tmp_path / "ok.safetensors"
    save_file({"a": np.ones((2, 3), np.float32), "b": np.zeros(4, np.float16)}, str(path))
    return path


def test_a_numpy_written_checkpoint_is_read(tmp_path):
    tensors, meta = read_safetensors(_good(tmp_path))
    assert set(tensors) == {"a", "b"} and meta == {}
    assert tensors["a"].shape == (2, 3) and list(tensors["a"].values()) == [mpq(1)] * 6


F32x2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize(
    ("header", "data", "message"),
    [
        ({"w": {**F32x2, "data_offsets": [0, 16]}}, bytes(8), "needs 8 bytes"),
        ({"w": {**F32x2, "shape": [4], "data_offsets": [0, 16]}}, bytes(8), "past the 8 bytes"),
        ({"w": F32x2, "v": F32x2}, bytes(8), "overlaps"),
        ({"w": {**F32x2, "data_offsets": [8, 16]}}, bytes(16), "leaves a gap"),
        ({"w": F32x2}, bytes(12), "4 bytes after the last tensor"),
        ({"w": {**F32x2, "dtype": "I64", "shape": [1]}}, bytes(8), "dtype 'I64'"),
        ({"w": {**F32x2, "dtype": "F8_E4M3"}}, bytes(8), "dtype 'F8_E4M3'"),
        ({"w": {**F32x2, "shape": [-2]}}, bytes(8), "non-negative integers"),
        ({"w": {**F32x2, "shape": [True, 2]}}, bytes(8), "non-negative integers"),
        ({"w": {**F32x2, "data_offsets": [8, 0]}}, bytes(8), "0 ≤ begin ≤ end"),
        ({"w": {**F32x2, "extra": 1}}, bytes(8), "exactly the fields"),
        ({"w": [1, 2]}, bytes(8), "exactly the fields"),
        ({"__metadata__": {"a": 1}, "w": F32x2}, bytes(8), "__metadata__ must be"),
    ],
)
def test_hostile_headers_are_refused(tmp_path, header, data, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(_raw(header, data))
    with pytest.raises(InputError, match=message):
        read_safetensors(path)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\x01\x02", "too short"),
        (struct.pack("<Q", 1 << 40) + b"{}", "exceeds the limit"),
        (struct.pack("<Q", 100) + b"{}", "runs past the end"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 7) + b'{"a":1,', "not valid JSON"),
        (struct.pack("<Q", 30) + b'{"w":1, "w":2}' + b" " * 16, "appears twice"),
        (struct.pack("<Q", 10) + b'{"w":NaN} ', "not a finite number"),
    ],
)
def test_malformed_files_are_refused(tmp_path, raw, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)
    with pytest.raises(InputError, match=message):
        read_safetensors(path)


# --------------------------------------------------------------------------- architectures


def mahdavi_checkpoint(path, *, d=4, d_h=3, C=3, H=2, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    tensors = {}
    for h in range(H):
        tensors[f"attn.{h}.query.weight"] = rng.standard_normal((d_h, d)).astype(dtype)
        tensors[f"attn.{h}.key.weight"] = rng.standard_normal((d_h, d)).astype(dtype)
        tensors[f"attn.{h}.value.weight"] = rng.standard_normal((d_h, d)).astype(dtype)
        tensors[f"attn.{h}.output.weight"] = rng.standard_normal((C, d_h)).astype(dtype)
    save_file(tensors, str(path))
    return tensors


def dana_checkpoint(path, *, N=6, S=3, d=4, d_h=2, C=5, H=2, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    tensors = {
        "embed.weight": rng.standard_normal((N, d)).astype(dtype),
        "pos.weight": rng.standard_normal((S, d)).astype(dtype),
        "unembed.weight": rng.standard_normal((C, d)).astype(dtype),
    }
    for h in range(H):
        tensors[f"attn.{h}.query.weight"] = rng.standard_normal((d_h, d)).astype(dtype)
        tensors[f"attn.{h}.key.weight"] = rng.standard_normal((d_h, d)).astype(dtype)
        tensors[f"attn.{h}.value.weight"] = rng.standard_normal((d_h, d)).astype(dtype)
        tensors[f"attn.{h}.output.weight"] = rng.standard_normal((d, d_h)).astype(dtype)
    save_file(tensors, str(path))
    return tensors


def test_the_cli_lists_the_architectures():
    assert set(CLI_ARCHITECTURES) == set(ARCHITECTURES)


def _dense(affine) -> np.ndarray:
    out = np.zeros((affine.out_dim, affine.in_dim), dtype=object)
    for i, row in enumerate(affine.rows):
        for j, c in row:
            out[i, j] = Fraction(c, affine.denominator)
    return out


def test_mahdavi_weights_are_the_checkpoints_bits(tmp_path):
    tensors = mahdavi_checkpoint(tmp_path / "m.safetensors", dtype=np.float16)
    model = import_checkpoint(tmp_path / "m.safetensors", "mahdavi24")
    (att,) = model.sublayers
    assert att.mask == "context" and att.score == "softmax" and len(att.heads) == 2
    d = 4
    for h, head in enumerate(att.heads):
        q = _dense(head.query)[:, :d]
        want = tensors[f"attn.{h}.query.weight"].astype(np.float64)
        assert all(Fraction(float(w)) == g for w, g in zip(want.ravel(), q.ravel(), strict=True))
        o = _dense(head.output)
        assert not o[:d].any()  # the heads write the logit lanes only
        want = tensors[f"attn.{h}.output.weight"].astype(np.float64)
        assert all(
            Fraction(float(w)) == g for w, g in zip(want.ravel(), o[d:].ravel(), strict=True)
        )


def test_dana_embedding_is_transposed_into_the_table(tmp_path):
    tensors = dana_checkpoint(tmp_path / "d.safetensors", dtype=np.float32)
    model = import_checkpoint(tmp_path / "d.safetensors", "dana25")
    assert model.token_inputs and model.input_dim == 6
    emb = _dense(model.embed)  # d × N
    want = tensors["embed.weight"].astype(np.float64).T
    assert all(Fraction(float(w)) == g for w, g in zip(want.ravel(), emb.ravel(), strict=True))
    pos = model.sublayers[0].table
    assert pos[2][1] == _exact(float(tensors["pos.weight"][2, 1]))


def test_import_cli_writes_a_loadable_model(tmp_path, capsys):
    dana_checkpoint(tmp_path / "d.safetensors", dtype=np.float16)
    out = tmp_path / "d.json"
    assert (
        main(
            [
                "import",
                str(tmp_path / "d.safetensors"),
                "--arch",
                "dana25",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    model, _ = load_model(out)
    assert model.meta["options"] == {"arch": "dana25", "dtypes": ["F16"]}
    assert "read exactly" in capsys.readouterr().out


def test_the_api_imports(tmp_path):
    import exactmem

    mahdavi_checkpoint(tmp_path / "m.safetensors")
    assert exactmem.import_model(tmp_path / "m.safetensors", "mahdavi24").input_dim == 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.pop("attn.1.key.weight"), "'attn.1.key.weight' is missing"),
        (
            lambda t: t.update({"extra.weight": np.ones(2, np.float32)}),
            "'extra.weight' is not part",
        ),
        (
            lambda t: t.update({"attn.0.key.weight": np.ones((2, 4), np.float32)}),
            r"'attn.0.key.weight': shape \[2, 4\], expected \[3, 4\]",
        ),
        (
            lambda t: t.update({"attn.0.output.weight": np.ones((3, 3, 1), np.float32)}),
            "'attn.0.output.weight': shape",
        ),
        (
            lambda t: t.update({"attn.3.query.weight": np.ones((3, 4), np.float32)}),
            "'attn.2.key.weight' is missing",
        ),
        (
            lambda t: t.update({"attn.0.value.weight": np.full((3, 4), np.nan, np.float32)}),
            "'attn.0.value.weight': entry 0",
        ),
    ],
)
def test_bad_mahdavi_checkpoints_exit_2_naming_the_tensor(tmp_path, capsys, change, message):
    tensors = mahdavi_checkpoint(tmp_path / "m.safetensors")
    change(tensors)
    save_file(tensors, str(tmp_path / "bad.safetensors"))
    argv = [
        "import",
        str(tmp_path / "bad.safetensors"),
        "--arch",
        "mahdavi24",
        "--out",
        str(tmp_path / "bad.json"),
        "--quiet",
    ]
    assert main(argv) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "bad.json").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.pop("pos.weight"), "'pos.weight' is missing"),
        (
            lambda t: t.update({"unembed.weight": np.ones((5, 3), np.float32)}),
            r"'unembed.weight': shape \[5, 3\], expected \[\?, 4\]",
        ),
        (
            lambda t: t.update({"attn.0.output.weight": np.ones((3, 2), np.float32)}),
            "'attn.0.output.weight': shape",
        ),
        (
            lambda t: t.update({"embed.weight": np.full((6, 4), np.inf, np.float32)}),
            r"'embed.weight': entry 0 \(flat index\) is \+inf",
        ),
    ],
)
def test_bad_dana_checkpoints_exit_2_naming_the_tensor(tmp_path, capsys, change, message):
    tensors = dana_checkpoint(tmp_path / "d.safetensors")
    change(tensors)
    save_file(tensors, str(tmp_path / "bad.safetensors"))
    argv = [
        "import",
        str(tmp_path / "bad.safetensors"),
        "--arch",
        "dana25",
        "--out",
        str(tmp_path / "bad.json"),
        "--quiet",
    ]
    assert main(argv) == 2
    assert re.search(message, capsys.readouterr().err)


def test_unknown_architecture_and_unreadable_file_exit_2(tmp_path, capsys):
    path = _good(tmp_path)
    out = str(tmp_path / "o.json")
    assert main(["import", str(path), "--arch", "gpt9", "--out", out, "--quiet"]) == 2
    assert "--arch 'gpt9' is unknown" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "nope"), "--arch", "dana25", "--out", out]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_raw({"w": {**F32x2, "data_offsets": [0, 16]}}, bytes(8)), "'w': shape"),
        (_raw({"w": F32x2, "v": F32x2}, bytes(8)), "'w': data_offsets start at 0, overlaps"),
        (_raw({"w": {**F32x2, "dtype": "I32"}}, bytes(8)), "'w': dtype 'I32'"),
        (_raw({"w": F32x2}, np.array([1.0, np.nan], np.float32).tobytes()), "'w': entry 1"),
        (struct.pack("<Q", 1 << 40) + b"{}", "header length"),
    ],
)
def test_hostile_checkpoints_exit_2_through_the_cli(tmp_path, capsys, raw, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)
    out = tmp_path / "m.json"
    assert main(["import", str(path), "--arch", "dana25", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: checkpoint ") and message in err and "Traceback" not in err
    assert not out.exists()
