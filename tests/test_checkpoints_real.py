"""Real checkpoints as their libraries saved them (issue 29): Hugging Face GPT-2 folders
(``GPT2LMHeadModel`` and ``GPT2Model``, sharded), nanoGPT (``bias=False``, tied weight kept as
``lm_head.weight``, non-flash ``attn.bias`` buffers) and ``nn.MultiheadAttention`` state dicts,
written by tests/data/checkpoints/make_checkpoints.py with the framework's float64 logits beside
them. Each is imported, its logits' Arb enclosures are compared with the framework's, and its
argmax labels are certified; hostile variants are refused naming the tensor or the field, or —
where no file-local check can see the difference (a transposed square matrix, erf GELU for
``gelu_new``) — disagree with the framework's logits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.checkpoints.architectures import import_checkpoint
from exactmem.checks.certify import certify
from exactmem.commands.main import main
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Attention
from exactmem.datasets.dataset import Dataset
from exactmem.evaluate.softmax import ball_bounds, run_balls

safetensors_numpy = pytest.importorskip("safetensors.numpy")

DATA = Path(__file__).parent / "data" / "checkpoints"
F32_ULP = mpq(1, 1 << 24)  # float32's relative rounding unit, 2⁻²⁴

# (folder, --arch, heads, the model's positions the logits are saved for)
CASES = {
    "hf_gpt2_lm": ("gpt2", None, "all"),
    "hf_gpt2_base": (None, None, "all"),  # auto-detected from config.json
    "nanogpt_nobias": ("gpt", None, "all"),
    "mha_mahdavi": ("mahdavi24", 2, "last"),
    "mha_dana": ("dana25", 1, "last"),
}


def _arrays(folder: Path):
    tokens = np.load(folder / "tokens.npy", allow_pickle=False)
    logits = np.load(folder / "logits.npy", allow_pickle=False)
    vocab_file = folder / "vocab.npy"
    vocab = np.load(vocab_file, allow_pickle=False).tolist() if vocab_file.exists() else None
    return tokens.tolist(), logits, vocab


def _import(name: str, path: Path | None = None):
    arch, heads, _ = CASES[name]
    target = DATA / name if path is None else path
    if name.startswith(("nanogpt", "mha")):
        target = target / "model.safetensors"
    return import_checkpoint(target, arch, heads=heads)


def largest_excess(model, name: str) -> mpq:
    """How far the framework's float64 logits lie outside the certified enclosures (64 bits),
    beyond float32 rounding distance: 0 when every one is within it."""
    _, _, positions = CASES[name]
    seqs, logits, vocab = _arrays(DATA / name)
    trace = run_balls(model, vocab, seqs, precision=64, positions=positions)
    worst = mpq(0)
    for i, out in enumerate(trace.outputs):
        want = logits[i] if positions == "all" else logits[i][None, :]
        for k, column in enumerate(out):
            for ball, x in zip(column, want[k], strict=True):
                lo, hi = ball_bounds(ball)
                x = mpq(float(x))
                slack = F32_ULP * (1 + abs(x))
                worst = max(worst, lo - slack - x, x - hi - slack)
    return worst


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_saved_checkpoint_imports_agrees_with_its_framework_and_certifies(name):
    model = _import(name)
    assert largest_excess(model, name) <= 0
    seqs, logits, vocab = _arrays(DATA / name)
    last = logits[:, -1] if logits.ndim == 3 else logits
    labels = [int(np.argmax(row)) + 1 for row in last]
    C = last.shape[1]
    vocab = vocab if vocab is not None else [[k] for k in range(model.input_dim)]
    data = Dataset.from_tokens(seqs, labels, vocab=vocab, num_classes=C)
    assert certify(model, data).verdict == "verified"
    wrong = [labels[0] % C + 1, *labels[1:]]
    bad = Dataset.from_tokens(seqs, wrong, vocab=vocab, num_classes=C)
    assert certify(model, bad).verdict == "refuted"


def test_what_each_checkpoint_is_read_as():
    lm = _import("hf_gpt2_lm")
    opts = lm.meta["options"]
    assert (opts["arch"], opts["model"], opts["tied"]) == ("gpt2", "GPT2LMHeadModel", True)
    assert {s.activation for s in lm.sublayers if isinstance(s, MLP)} == {"gelu_tanh"}
    assert {s.scale for s in lm.sublayers if isinstance(s, Attention)} == {8}  # d_h = 8
    assert opts["eps"] == "1/100000" and opts["layout"] == "Conv1D [in, out]"
    base = _import("hf_gpt2_base")
    assert base.meta["options"]["model"] == "GPT2Model"
    assert base.meta["options"]["notes"][0].startswith("GPT2Model has no head")
    assert base.meta["options"]["score_scale"] == "1/2 (exact), 1/(layer + 1)"
    assert {s.activation for s in base.sublayers if isinstance(s, MLP)} == {"relu"}
    assert {s.scale for s in base.sublayers if isinstance(s, Attention)} == {1}  # d_h = 4: 1/2
    nano = _import("nanogpt_nobias").meta["options"]
    assert nano["absent_biases"] == 7 and nano["tied"] is True
    assert "token embedding read from lm_head.weight (tied)" in nano["notes"]
    mha = _import("mha_mahdavi")
    assert mha.meta["options"]["score_scale"] == "1/sqrt(3) (Arb)"


def test_import_names_the_folder_form_and_says_what_it_read_otherwise(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["import", str(DATA / "hf_gpt2_base"), "--out", str(out), "--quiet"]) == 0
    assert "gpt2, width 17" in capsys.readouterr().out
    path = DATA / "nanogpt_nobias" / "model.safetensors"
    assert main(["import", str(path), "--arch", "gpt", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "note: 7 biases absent, read as 0" in text
    assert "note: token embedding read from lm_head.weight (tied)" in text
    assert main(["import", str(path), "--out", str(out), "--quiet"]) == 2  # no config.json
    assert "give --arch" in capsys.readouterr().err
    folder = DATA / "hf_gpt2_lm"
    assert main(["import", str(folder), "--arch", "gpt", "--out", str(out), "--quiet"]) == 2
    assert "--arch gpt reads no config.json" in capsys.readouterr().err


def test_import_never_writes_over_a_file_of_the_folder(tmp_path, capsys):
    folder = _copy("hf_gpt2_lm", tmp_path)
    before = (folder / "model.safetensors").read_bytes()
    out = folder / "model.safetensors"
    assert main(["import", str(folder), "--out", str(out), "--quiet"]) == 2
    assert "is the input file" in capsys.readouterr().err
    assert (folder / "model.safetensors").read_bytes() == before


# --------------------------------------------------------------------------- hostile variants


def _copy(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    return folder


def _rewrite(path: Path, change) -> None:
    tensors = safetensors_numpy.load_file(str(path))
    change(tensors)
    safetensors_numpy.save_file(tensors, str(path))


def _config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def test_a_hand_conversion_to_linear_layout_is_refused_naming_conv1d(tmp_path):
    folder = _copy("hf_gpt2_lm", tmp_path)

    def to_linear(t):
        for name in list(t):
            if name.endswith(".weight") and ("c_attn" in name or "c_fc" in name):
                t[name] = np.ascontiguousarray(t[name].T)

    _rewrite(folder / "model.safetensors", to_linear)
    with pytest.raises(InputError, match=r"c_attn.weight'.*\[48, 16\].*Conv1D stores"):
        import_checkpoint(folder, "gpt2")


def test_a_transposed_square_matrix_is_seen_against_the_frameworks_logits(tmp_path):
    folder = _copy("hf_gpt2_lm", tmp_path)
    name = "transformer.h.0.attn.c_proj.weight"  # [d, d]: the same shape either way

    def transpose(t):
        t[name] = np.ascontiguousarray(t[name].T)

    _rewrite(folder / "model.safetensors", transpose)
    assert largest_excess(import_checkpoint(folder, "gpt2"), "hf_gpt2_lm") > 1 / 1000


def test_the_activation_is_read_by_name_never_replaced(tmp_path):
    folder = _copy("hf_gpt2_lm", tmp_path)
    _config(folder, activation_function="silu")
    with pytest.raises(InputError, match="activation_function = 'silu' is not one exactmem"):
        import_checkpoint(folder, "gpt2")
    _config(folder, activation_function="gelu_fast")  # another constant: another function
    with pytest.raises(InputError, match="'gelu_fast'"):
        import_checkpoint(folder, "gpt2")
    _config(folder, activation_function="gelu_pytorch_tanh")  # the same function, by name
    assert largest_excess(import_checkpoint(folder, "gpt2"), "hf_gpt2_lm") <= 0
    _config(folder, activation_function="gelu")  # erf GELU for the tanh one it was trained with
    erf = import_checkpoint(folder, "gpt2")
    assert {s.activation for s in erf.sublayers if isinstance(s, MLP)} == {"gelu"}
    assert largest_excess(erf, "hf_gpt2_lm") > 0  # the framework computed another function


def test_config_fields_are_typed_and_checked_against_the_tensors(tmp_path):
    folder = _copy("hf_gpt2_lm", tmp_path)
    for change, message in (
        ({"n_embd": 32}, "n_embd = 32, but the tensors give 16"),
        ({"n_layer": 2}, "n_layer = 2, but the tensors give 1"),
        ({"n_head": "2"}, "n_head = 2 is not a positive integer"),
        ({"n_head": 3}, "must divide d = 16"),
        ({"layer_norm_epsilon": -1}, "layer_norm_epsilon must be positive"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings = yes is not true or false"),
        ({"tie_word_embeddings": False}, "'lm_head.weight' is missing"),
        ({"model_type": "llama"}, "model_type = 'llama', not 'gpt2'"),
        ({"add_cross_attention": True}, "cross-attention"),
        ({"n_head": 10**600}, "n_head = 1000000000000000000000000000000000000000 is not a pos"),
        ({"layer_norm_epsilon": "1e-99999999999"}, "layer_norm_epsilon"),
    ):
        shutil.copy(DATA / "hf_gpt2_lm" / "config.json", folder / "config.json")
        _config(folder, **change)
        with pytest.raises(InputError, match=message):
            import_checkpoint(folder, "gpt2")
    (folder / "config.json").write_text('{"n_head": 2, "n_head": 2}')
    with pytest.raises(InputError, match="appears twice"):
        import_checkpoint(folder, "gpt2")


def test_the_layer_norm_epsilon_is_the_decimal_written(tmp_path):
    folder = _copy("hf_gpt2_lm", tmp_path)
    text = (folder / "config.json").read_text().replace("1e-05", "1.00000000000000000001e-05")
    (folder / "config.json").write_text(text)
    assert import_checkpoint(folder, "gpt2").meta["options"]["eps"] == str(
        mpq(100000000000000000001, 10**25)
    )


def test_a_mask_buffer_that_is_not_causal_is_refused_naming_it(tmp_path):
    folder = _copy("nanogpt_nobias", tmp_path)
    name = "transformer.h.0.attn.bias"

    def leak(t):
        t[name][0, 0, 1, 2] = 1.0  # position 1 would see position 2

    _rewrite(folder / "model.safetensors", leak)
    with pytest.raises(InputError, match=rf"'{name}' is not the causal mask: entry \[0, 0, 1, 2\]"):
        import_checkpoint(folder / "model.safetensors", "gpt", heads=2)

    def reshape(t):
        t[name] = np.tril(np.ones((8, 8), np.float32))

    _rewrite(folder / "model.safetensors", reshape)
    with pytest.raises(InputError, match=rf"'{name}': shape \[8, 8\], expected \[1, 1, 8, 8\]"):
        import_checkpoint(folder / "model.safetensors", "gpt", heads=2)


def test_shards_must_hold_what_the_index_says(tmp_path):
    folder = _copy("hf_gpt2_base", tmp_path)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    moved = dict(index)
    moved["weight_map"] = dict(index["weight_map"])
    name = next(iter(moved["weight_map"]))
    moved["weight_map"][name] = "model-00005-of-00005.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(moved))
    with pytest.raises(InputError, match=f"tensor {name!r} is not listed for this shard"):
        import_checkpoint(folder, None)
    outside = dict(index, weight_map={**index["weight_map"], name: "../model.safetensors"})
    (folder / "model.safetensors.index.json").write_text(json.dumps(outside))
    with pytest.raises(InputError, match="a shard is a plain file name"):
        import_checkpoint(folder, None)
    for value in ([], 3, None, {"a": 1}):
        odd = dict(index, weight_map={**index["weight_map"], name: value})
        (folder / "model.safetensors.index.json").write_text(json.dumps(odd))
        with pytest.raises(InputError, match=r"weight_map\[.*\] is not a file name"):
            import_checkpoint(folder, None)
    for body in ("[]", '{"weight_map": []}', '{"weight_map": {}}', '{"weight_map": {"a": "b"}'):
        (folder / "model.safetensors.index.json").write_text(body)
        with pytest.raises(InputError, match="index file"):
            import_checkpoint(folder, None)


def test_shape_lies_are_refused_naming_the_tensor(tmp_path):
    folder = _copy("mha_mahdavi", tmp_path)
    path = folder / "model.safetensors"

    def wrong(t):
        t["in_proj_weight"] = t["in_proj_weight"][:12]

    _rewrite(path, wrong)
    with pytest.raises(InputError, match=r"'in_proj_weight': shape \[12, 6\], expected \[18, 6\]"):
        import_checkpoint(path, "mahdavi24", heads=2)
    folder = _copy("hf_gpt2_lm", tmp_path)

    def short_bias(t):
        t["transformer.h.0.mlp.c_fc.bias"] = t["transformer.h.0.mlp.c_fc.bias"][:20]

    _rewrite(folder / "model.safetensors", short_bias)
    with pytest.raises(InputError, match=r"'transformer.h.0.mlp.c_fc.bias': shape \[20\]"):
        import_checkpoint(folder, "gpt2")
    folder = _copy("hf_gpt2_lm", tmp_path / "narrow")

    def narrow(t):
        t["transformer.h.0.attn.c_attn.weight"] = t["transformer.h.0.attn.c_attn.weight"][:, :40]

    _rewrite(folder / "model.safetensors", narrow)
    with pytest.raises(InputError, match=r"\[16, 40\], expected \[16, 48\]: .*Conv1D stores"):
        import_checkpoint(folder, "gpt2")


def test_an_encoder_layers_other_tensors_are_no_part_of_the_attention(tmp_path):
    tensors = safetensors_numpy.load_file(str(DATA / "mha_mahdavi" / "model.safetensors"))
    layer = {f"self_attn.{k}": v for k, v in tensors.items()}
    layer["linear1.weight"] = np.ones((12, 6), np.float32)
    safetensors_numpy.save_file(layer, str(tmp_path / "enc.safetensors"))
    with pytest.raises(InputError, match="'linear1.weight' is not part of this architecture"):
        import_checkpoint(tmp_path / "enc.safetensors", "mahdavi24", heads=2)
    del layer["linear1.weight"]
    safetensors_numpy.save_file(layer, str(tmp_path / "enc.safetensors"))
    assert (
        largest_excess(
            import_checkpoint(tmp_path / "enc.safetensors", "mahdavi24", heads=2), "mha_mahdavi"
        )
        <= 0
    )
    with pytest.raises(InputError, match="head count is not in its shapes"):
        import_checkpoint(DATA / "mha_dana" / "model.safetensors", "dana25")


@pytest.mark.parametrize(
    "key",
    [
        "n_head",
        "n_embd",
        "n_layer",
        "n_positions",
        "n_inner",
        "vocab_size",
        "layer_norm_epsilon",
        "activation_function",
        "tie_word_embeddings",
        "scale_attn_weights",
        "scale_attn_by_inverse_layer_idx",
        "add_cross_attention",
        "model_type",
    ],
)
def test_any_value_of_a_config_field_imports_or_is_refused_naming_it(tmp_path, key):
    """Every JSON type in every field that decides the function: an import or an InputError
    naming the field (or the tensor it contradicts), never another exception."""
    folder = _copy("hf_gpt2_lm", tmp_path)
    for value in (None, True, False, 0, -1, 2, 16, 10**30, 0.5, 1e-300, "", "2", "1/3", [], {}):
        shutil.copy(DATA / "hf_gpt2_lm" / "config.json", folder / "config.json")
        _config(folder, **{key: value})
        try:
            import_checkpoint(folder, None)
        except InputError as exc:
            assert key in str(exc) or "tensor" in str(exc) or "give --arch" in str(exc), exc


def test_the_score_scaling_flags_change_the_function_read(tmp_path):
    """hf_gpt2_base was trained with scale_attn_by_inverse_layer_idx: read without it (or
    without scale_attn_weights) the enclosures miss the framework's logits."""
    folder = _copy("hf_gpt2_base", tmp_path)
    assert largest_excess(import_checkpoint(folder, None), "hf_gpt2_base") <= 0
    for flag in ("scale_attn_by_inverse_layer_idx", "scale_attn_weights"):
        shutil.copy(DATA / "hf_gpt2_base" / "config.json", folder / "config.json")
        _config(folder, **{flag: False})
        assert largest_excess(import_checkpoint(folder, None), "hf_gpt2_base") > 0, flag


def test_a_folder_is_read_as_strictly_as_a_file(tmp_path, capsys):
    import os

    folder = _copy("hf_gpt2_lm", tmp_path)
    (folder / "config.json").write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(InputError, match="config file .*nested deeper"):
        import_checkpoint(folder, None)
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")
    with pytest.raises(InputError, match="config file .*not a regular file"):
        import_checkpoint(folder, "gpt2")
    (folder / "config.json").unlink()
    shutil.copy(DATA / "hf_gpt2_lm" / "config.json", folder / "config.json")
    (folder / "model.safetensors").unlink()
    with pytest.raises(InputError, match="neither model.safetensors nor"):
        import_checkpoint(folder, None)
    out = tmp_path / "n.json"
    path = DATA / "nanogpt_nobias" / "model.safetensors"
    assert main(["import", str(path), "--arch", "gpt", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["arch"] == "gpt" and len(report["notes"]) == 2


def test_add_zero_attn_in_the_metadata_is_refused_by_name(tmp_path):
    """``add_zero_attn`` leaves no tensor: a checkpoint whose ``__metadata__`` says it is on is
    refused naming it (never read as the attention without the zero column); "false" reads."""
    tensors = safetensors_numpy.load_file(str(DATA / "mha_mahdavi" / "model.safetensors"))
    path = tmp_path / "zero.safetensors"
    for value in ("true", "True", "1"):
        safetensors_numpy.save_file(tensors, str(path), metadata={"add_zero_attn": value})
        with pytest.raises(InputError, match="add_zero_attn = '" + value + "'.*not implemented"):
            import_checkpoint(path, "mahdavi24", heads=2)
    safetensors_numpy.save_file(tensors, str(path), metadata={"add_zero_attn": "false"})
    assert largest_excess(import_checkpoint(path, "mahdavi24", heads=2), "mha_mahdavi") <= 0
