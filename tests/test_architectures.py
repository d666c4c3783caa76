"""The architectures added for the experiments (``ks25``): tiny checkpoints written through
safetensors' NumPy API, imported exactly, run and certified — no PyTorch involved."""

from __future__ import annotations

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.api import run
from exactmem.architectures import import_checkpoint
from exactmem.certify import certify
from exactmem.data import Dataset
from exactmem.errors import InputError
from exactmem.evaluate.floats import float_logits

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def ks_tensors(N=5, m=2, q=4, L=1, C=2, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    t = {"embed.weight": r(N, m)}
    for stack in ("ff1", "ff2"):
        for i in range(L):
            t[f"{stack}.{i}.fc.weight"] = r(q, m)
            t[f"{stack}.{i}.fc.bias"] = r(q)
            t[f"{stack}.{i}.proj.weight"] = r(m, q)
            t[f"{stack}.{i}.proj.bias"] = r(m)
    t["attn.value.weight"] = r(m, m)
    t["attn.output.weight"] = r(m, m)
    t["unembed.weight"] = r(C, m)
    t["unembed.bias"] = r(C)
    return t


def _ks_reference(t: dict, seq: list[int]) -> np.ndarray:
    """The eq. (165) model in float64 straight from the tensors (independent of the IR)."""
    f = {k: v.astype(np.float64) for k, v in t.items()}
    X = f["embed.weight"][seq]
    for stack in ("ff1", "ff2"):
        if stack == "ff2":
            X = X + X.mean(0) @ f["attn.value.weight"].T @ f["attn.output.weight"].T
        i = 0
        while f"{stack}.{i}.fc.weight" in f:
            h = np.maximum(X @ f[f"{stack}.{i}.fc.weight"].T + f[f"{stack}.{i}.fc.bias"], 0)
            X = X + h @ f[f"{stack}.{i}.proj.weight"].T + f[f"{stack}.{i}.proj.bias"]
            i += 1
    return X[-1] @ f["unembed.weight"].T + f["unembed.bias"]


def test_a_ks25_checkpoint_is_imported_exactly_and_runs_as_its_formula(tmp_path):
    t = ks_tensors(L=2)
    safetensors_numpy.save_file(t, str(tmp_path / "k.safetensors"))
    model = import_checkpoint(tmp_path / "k.safetensors", "ks25")
    seqs = [[0, 1, 2], [4, 4, 3], [2, 0, 1]]  # token ids
    exact = run(model, seqs)
    for seq, out in zip(seqs, exact, strict=True):
        want = _ks_reference(t, seq)
        got = np.array([float(v) for v in out[-1]])
        assert np.allclose(got, want, rtol=1e-9, atol=1e-9)
    # biases are exact: the readout bias as the float32 bits say
    assert mpq(float(t["unembed.bias"][0])) == mpq(model.unembed.bias[0], model.unembed.denominator)


def test_a_ks25_model_is_certified_on_the_labels_float_gives_it(tmp_path):
    t = ks_tensors(N=6, L=1, C=3, seed=3)
    safetensors_numpy.save_file(t, str(tmp_path / "k.safetensors"))
    model = import_checkpoint(tmp_path / "k.safetensors", "ks25")
    seqs = [[0, 1, 2, 3], [5, 4, 3, 2], [1, 1, 0, 5]]
    labels = [int(np.argmax(r)) + 1 for r in float_logits(model, None, seqs)]
    ds = Dataset.from_tokens(seqs, labels, vocab=[[k] for k in range(6)], num_classes=3)
    cert = certify(model, ds)
    assert cert.verdict == "verified"
    wrong = [labels[0] % 3 + 1, *labels[1:]]
    bad = Dataset.from_tokens(seqs, wrong, vocab=[[k] for k in range(6)], num_classes=3)
    assert certify(model, bad).verdict == "refuted"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: [t.pop(k) for k in list(t) if k.startswith("ff2.")], "1 blocks ff1.* but 0"),
        (lambda t: t.pop("ff1.0.fc.bias"), "'ff1.0.fc.bias' is missing"),
        (lambda t: t.update({"unembed.bias": np.zeros(3, np.float32)}), "'unembed.bias'"),
        (lambda t: t.update({"attn.output.weight": np.zeros((3, 2), np.float32)}), "output"),
        (lambda t: t.update({"ff1.0.extra": np.zeros(2, np.float32)}), "'ff1.0.extra' is not"),
        (lambda t: t.update({"ff1.0.fc.bias": np.array([np.nan] * 4, np.float32)}), "NaN"),
    ],
)
def test_a_broken_ks25_checkpoint_is_refused_naming_the_tensor(tmp_path, edit, message):
    t = ks_tensors()
    edit(t)
    safetensors_numpy.save_file(t, str(tmp_path / "k.safetensors"))
    with pytest.raises(InputError, match=message.replace("*", r"\*").replace(".", r"\.")):
        import_checkpoint(tmp_path / "k.safetensors", "ks25")
