"""``verify --reference-logits`` (issue 29 point 5): the framework's own logits against the
certified enclosures. The honest checkpoints of tests/data/checkpoints pass; a hand conversion
that transposed the square ``attn.c_proj`` (which imports silently: the shape is the same) and a
config naming erf GELU for a ``gelu_new`` model are refused by the check ``reference_logits``;
hostile reference files exit 2 naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem import save_dataset
from exactmem.checkpoints.architectures import import_checkpoint
from exactmem.checks.certify import certify, output_width
from exactmem.checks.reference_logits import read_reference_logits, rounding_steps
from exactmem.commands.main import main
from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset

safetensors_numpy = pytest.importorskip("safetensors.numpy")

DATA = Path(__file__).parent / "data" / "checkpoints"


def _data(name: str) -> tuple[Dataset, np.ndarray]:
    tokens = np.load(DATA / name / "tokens.npy", allow_pickle=False).tolist()
    logits = np.load(DATA / name / "logits.npy", allow_pickle=False)
    labels = [int(np.argmax(row)) + 1 for row in logits[:, -1]]
    C = logits.shape[-1]
    return Dataset.from_tokens(tokens, labels, vocab=[[t] for t in range(C)], num_classes=C), logits


def _transposed_c_proj(tmp_path: Path) -> Path:
    folder = tmp_path / "hf_gpt2_lm"
    shutil.copytree(DATA / "hf_gpt2_lm", folder)
    tensors = safetensors_numpy.load_file(str(folder / "model.safetensors"))
    name = "transformer.h.0.attn.c_proj.weight"  # [d, d]: the same shape transposed
    tensors[name] = np.ascontiguousarray(tensors[name].T)
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("name", ["hf_gpt2_lm", "hf_gpt2_base", "nanogpt_nobias"])
def test_the_honest_checkpoints_agree_with_their_frameworks_logits(name, tmp_path):
    path = DATA / name if name.startswith("hf") else DATA / name / "model.safetensors"
    model = import_checkpoint(path, None if name.startswith("hf") else "gpt")
    data, logits = _data(name)
    np.save(tmp_path / "ref.npy", logits)
    ref = read_reference_logits(tmp_path / "ref.npy", data, output_width(model))
    cert = certify(model, data, reference=ref)
    check = next(c for c in cert.checks if c.name == "reference_logits")
    assert check.passed and cert.verdict == "verified", check.detail
    assert mpq(check.figures["largest_distance"]) <= mpq(check.figures["tau"]) * (1 + 10)
    assert check.figures["k"] == rounding_steps(model, logits.shape[1])
    # the last position alone ([N, C]), in float32 as a framework computing in float32 saves it
    safetensors_numpy.save_file(
        {"logits": logits[:, -1].astype(np.float32)}, str(tmp_path / "last.safetensors")
    )
    ref = read_reference_logits(tmp_path / "last.safetensors", data, output_width(model))
    assert ref.dtype == "float32" and not ref.every_position
    assert certify(model, data, reference=ref).verdict == "verified"


def test_a_transposed_square_c_proj_is_refused_against_the_frameworks_logits(tmp_path, capsys):
    folder = _transposed_c_proj(tmp_path)
    data, logits = _data("hf_gpt2_lm")
    save_dataset(data, tmp_path / "d.json")
    np.save(tmp_path / "ref.npy", logits)
    out = tmp_path / "m.json"
    assert main(["import", str(folder), "--out", str(out), "--quiet"]) == 0  # silently
    # without the framework's logits, the labels it computes are certified as its own
    assert main(["verify", str(out), "--data", str(tmp_path / "d.json"), "--quiet"]) in (0, 1)
    capsys.readouterr()
    argv = ["verify", str(out), "--data", str(tmp_path / "d.json"), "--quiet"]
    assert main([*argv, "--reference-logits", str(tmp_path / "ref.npy")]) == 1
    text = capsys.readouterr().out
    assert "FAIL reference_logits" in text and "more than float32 rounding explains" in text
    # the honest folder passes the same command
    assert main(["import", str(DATA / "hf_gpt2_lm"), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main([*argv, "--reference-logits", str(tmp_path / "ref.npy"), "--json"]) == 0
    cert = json.loads(capsys.readouterr().out)
    assert cert["subject"]["criteria"]["reference_logits"]["tolerance"] is None
    check = next(c for c in cert["checks"] if c["name"] == "reference_logits")
    assert check["passed"] and check["positions"] == "every"


def test_erf_gelu_read_for_gelu_new_is_refused(tmp_path):
    folder = tmp_path / "gelu"
    shutil.copytree(DATA / "hf_gpt2_lm", folder)
    config = json.loads((folder / "config.json").read_text())
    config["activation_function"] = "gelu"
    (folder / "config.json").write_text(json.dumps(config))
    model = import_checkpoint(folder, None)
    data, logits = _data("hf_gpt2_lm")
    np.save(tmp_path / "ref.npy", logits)
    ref = read_reference_logits(tmp_path / "ref.npy", data, output_width(model))
    cert = certify(model, data, reference=ref)
    assert [c.name for c in cert.failed] == ["reference_logits"]


def test_an_explicit_tolerance_is_printed_and_decides(tmp_path):
    folder = _transposed_c_proj(tmp_path)
    model = import_checkpoint(folder, None)
    data, logits = _data("hf_gpt2_lm")
    np.save(tmp_path / "ref.npy", logits)
    ref = read_reference_logits(tmp_path / "ref.npy", data, output_width(model))
    loose = certify(model, data, reference=ref, reference_tolerance=mpq(10))
    check = next(c for c in loose.checks if c.name == "reference_logits")
    assert check.passed and "τ = 10 (--reference-tolerance)" in check.detail


def _npy_bytes(header: str, payload: bytes, version: int = 1) -> bytes:
    text = header.encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + len(text).to_bytes(2, "little") + text + payload


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"PK\x03\x04 not numpy", "not a .npy file"),
        (_npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (4, 11), }", b""), "'|O'"),
        (_npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (4, 11), }", b""), "<i8"),
        (_npy_bytes("__import__('os').system('true')", b""), "not a Python literal dict"),
        (_npy_bytes("{'descr': '<f8', 'shape': (4, 11)}", b""), "must hold descr"),
        (_npy_bytes("{'descr': '<f8', 'fortran_order': 0, 'shape': (4, 11), }", b""), "fortran"),
        (_npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-4, 11), }", b""), "shape"),
        (
            _npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (10000000000, 11)}", b""),
            "needs 880000000000 bytes of data, the file has 0",
        ),
        (
            _npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4, 10), }", bytes(320)),
            r"shape \[4, 10\], expected \[4, 6, 11\] or \[4, 11\]",
        ),
        (
            _npy_bytes(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (44,), }",
                np.full(44, np.nan).tobytes(),
            ),
            "entry 0 .* not finite",
        ),
    ],
)
def test_a_hostile_reference_file_is_refused_naming_it(tmp_path, content, message):
    data, _ = _data("hf_gpt2_lm")
    path = tmp_path / "ref.npy"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        read_reference_logits(path, data, 11)


def test_the_cli_refuses_a_bad_reference_with_exit_2(tmp_path, capsys):
    data, logits = _data("hf_gpt2_lm")
    save_dataset(data, tmp_path / "d.json")
    out = tmp_path / "m.json"
    assert main(["import", str(DATA / "hf_gpt2_lm"), "--out", str(out), "--quiet"]) == 0
    argv = ["verify", str(out), "--data", str(tmp_path / "d.json"), "--quiet"]
    np.save(tmp_path / "wrong.npy", logits[:3])
    assert main([*argv, "--reference-logits", str(tmp_path / "wrong.npy")]) == 2
    assert "shape [3, 6, 11]" in capsys.readouterr().err
    safetensors_numpy.save_file(
        {"a": logits.astype(np.float32), "b": logits.astype(np.float32)},
        str(tmp_path / "two.safetensors"),
    )
    assert main([*argv, "--reference-logits", str(tmp_path / "two.safetensors")]) == 2
    assert "none named 'logits'" in capsys.readouterr().err
    safetensors_numpy.save_file(
        {"logits": logits.astype(np.float16)}, str(tmp_path / "h.safetensors")
    )
    assert main([*argv, "--reference-logits", str(tmp_path / "h.safetensors")]) == 2
    assert "F16" in capsys.readouterr().err
    assert main([*argv, "--reference-tolerance", "1/100"]) == 2
    assert "with --reference-logits" in capsys.readouterr().err
    (tmp_path / "r.txt").write_text("1 2 3")
    assert main([*argv, "--reference-logits", str(tmp_path / "r.txt")]) == 2
    assert "expected a .npy or .safetensors" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "arch", "heads"), [("mha_mahdavi", "mahdavi24", 2), ("mha_dana", "dana25", 1)]
)
def test_the_attention_checkpoints_agree_at_the_last_position(name, arch, heads, tmp_path):
    model = import_checkpoint(DATA / name / "model.safetensors", arch, heads=heads)
    tokens = np.load(DATA / name / "tokens.npy", allow_pickle=False).tolist()
    logits = np.load(DATA / name / "logits.npy", allow_pickle=False)  # [N, C]: the query's
    vocab_file = DATA / name / "vocab.npy"
    vocab = (
        np.load(vocab_file, allow_pickle=False).tolist()
        if vocab_file.exists()
        else [[t] for t in range(model.input_dim)]
    )
    labels = [int(np.argmax(row)) + 1 for row in logits]
    data = Dataset.from_tokens(tokens, labels, vocab=vocab, num_classes=logits.shape[1])
    np.save(tmp_path / "ref.npy", logits.astype(np.float32))
    ref = read_reference_logits(tmp_path / "ref.npy", data, output_width(model))
    assert not ref.every_position and ref.dtype == "float32"
    cert = certify(model, data, reference=ref)
    assert cert.verdict == "verified", [c.detail for c in cert.failed]
    shifted = logits.astype(np.float32) + np.float32(1e-3)  # another function, by 10⁻³
    np.save(tmp_path / "off.npy", shifted)
    off = read_reference_logits(tmp_path / "off.npy", data, output_width(model))
    assert [c.name for c in certify(model, data, reference=off).failed] == ["reference_logits"]
