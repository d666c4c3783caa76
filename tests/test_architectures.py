"""The architectures added for the experiments (``ks25``, ``madden24``, ``gpt``): tiny
checkpoints written through safetensors' NumPy API, imported exactly, run and certified — no
PyTorch involved."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.api import run
from exactmem.checkpoints.architectures import import_checkpoint
from exactmem.checks.certify import certify
from exactmem.core.errors import InputError
from exactmem.core.model import Attention
from exactmem.datasets.dataset import Dataset
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


# ---- madden24 and gpt: GELU and causal attention (the ball and float evaluators) ------------

_erf = np.vectorize(math.erf)


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def madden_tensors(N=6, S=3, d=4, m=5, C=6, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def r(*shape):
        return (rng.standard_normal(shape) * 0.7).astype(np.float32)

    t = {"embed.weight": r(N, d), "pos.weight": r(S, d)}
    for name in ("query", "key", "value"):
        t[f"attn.0.{name}.weight"], t[f"attn.0.{name}.bias"] = r(d, d), r(d)
    t["attn.0.output.weight"], t["attn.output.bias"] = r(d, d), r(d)
    t["fnn.fc.weight"], t["fnn.fc.bias"] = r(m, d), r(m)
    t["fnn.proj.weight"], t["fnn.proj.bias"] = r(C, m), r(C)
    return t


def _madden_reference(t, seq):
    f = {k: v.astype(np.float64) for k, v in t.items()}
    X = f["embed.weight"][seq] + f["pos.weight"][: len(seq)]
    q = X[-1] @ f["attn.0.query.weight"].T + f["attn.0.query.bias"]
    k = X @ f["attn.0.key.weight"].T + f["attn.0.key.bias"]
    v = X @ f["attn.0.value.weight"].T + f["attn.0.value.bias"]
    h = _softmax(k @ q) @ v @ f["attn.0.output.weight"].T + f["attn.output.bias"]
    return (
        _gelu(h @ f["fnn.fc.weight"].T + f["fnn.fc.bias"]) @ f["fnn.proj.weight"].T
        + f["fnn.proj.bias"]
    )


def gpt_tensors(V=7, S=4, d=4, blocks=2, hidden=8, tied=True, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def r(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t = {"transformer.wte.weight": r(V, d, scale=1.0), "transformer.wpe.weight": r(S, d)}
    for i in range(blocks):
        at = f"transformer.h.{i}"
        for ln in ("ln_1", "ln_2"):
            t[f"{at}.{ln}.weight"], t[f"{at}.{ln}.bias"] = 1 + r(d, scale=0.1), r(d, scale=0.1)
        t[f"{at}.attn.c_attn.weight"], t[f"{at}.attn.c_attn.bias"] = r(3 * d, d), r(3 * d)
        t[f"{at}.attn.c_proj.weight"], t[f"{at}.attn.c_proj.bias"] = r(d, d), r(d)
        t[f"{at}.mlp.c_fc.weight"], t[f"{at}.mlp.c_fc.bias"] = r(hidden, d), r(hidden)
        t[f"{at}.mlp.c_proj.weight"], t[f"{at}.mlp.c_proj.bias"] = r(d, hidden), r(d)
    t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = 1 + r(d, scale=0.1), r(d)
    if not tied:
        t["lm_head.weight"] = r(V, d)
    return t


def _ln(x, g, b, eps=1e-5):
    c = x - x.mean(-1, keepdims=True)
    return g * c / np.sqrt((c * c).mean(-1, keepdims=True) + eps) + b


def _gpt_reference(t, seq, H):
    """nanoGPT's forward in float64 (scores scaled by 1/√d_h, causal), the last position."""
    f = {k: v.astype(np.float64) for k, v in t.items()}
    X = f["transformer.wte.weight"][seq] + f["transformer.wpe.weight"][: len(seq)]
    n, d = X.shape
    dh = d // H
    i = 0
    while f"transformer.h.{i}.ln_1.weight" in f:
        at = f"transformer.h.{i}"
        z = _ln(X, f[f"{at}.ln_1.weight"], f[f"{at}.ln_1.bias"])
        qkv = z @ f[f"{at}.attn.c_attn.weight"].T + f[f"{at}.attn.c_attn.bias"]
        q, k, v = qkv[:, :d], qkv[:, d : 2 * d], qkv[:, 2 * d :]
        heads = []
        for h in range(H):
            sl = slice(h * dh, (h + 1) * dh)
            s = q[:, sl] @ k[:, sl].T / math.sqrt(dh)
            s = np.where(np.tril(np.ones((n, n))) > 0, s, -np.inf)
            heads.append(_softmax(s) @ v[:, sl])
        X = (
            X
            + np.concatenate(heads, 1) @ f[f"{at}.attn.c_proj.weight"].T
            + f[f"{at}.attn.c_proj.bias"]
        )
        z = _ln(X, f[f"{at}.ln_2.weight"], f[f"{at}.ln_2.bias"])
        hidden = _gelu(z @ f[f"{at}.mlp.c_fc.weight"].T + f[f"{at}.mlp.c_fc.bias"])
        X = X + hidden @ f[f"{at}.mlp.c_proj.weight"].T + f[f"{at}.mlp.c_proj.bias"]
        i += 1
    z = _ln(X, f["transformer.ln_f.weight"], f["transformer.ln_f.bias"])
    head = f.get("lm_head.weight", f["transformer.wte.weight"])
    return z[-1] @ head.T


def _balls_agree(model, seqs, want):
    from exactmem.evaluate.softmax import ball_bounds, run_balls

    trace = run_balls(model, None, seqs, precision=128, positions="last")
    for out, w in zip(trace.outputs, want, strict=True):
        for ball, x in zip(out[-1], w, strict=True):
            lo, hi = ball_bounds(ball)
            assert lo - mpq(1, 10**9) <= mpq(float(x)) <= hi + mpq(1, 10**9)


def test_a_madden24_checkpoint_runs_as_the_decoder_and_is_certified(tmp_path):
    t = madden_tensors()
    safetensors_numpy.save_file(t, str(tmp_path / "m.safetensors"))
    model = import_checkpoint(tmp_path / "m.safetensors", "madden24")
    seqs = [[0, 1, 2], [5, 4, 3], [2, 2, 0], [1, 3, 5]]
    want = [_madden_reference(t, s) for s in seqs]
    assert np.allclose(float_logits(model, None, seqs), want, rtol=1e-9, atol=1e-9)
    _balls_agree(model, seqs, want)
    labels = [int(np.argmax(w)) + 1 for w in want]
    ds = Dataset.from_tokens(seqs, labels, vocab=[[k] for k in range(6)], num_classes=6)
    assert certify(model, ds).verdict == "verified"
    wrong = [labels[0] % 6 + 1, *labels[1:]]
    bad = Dataset.from_tokens(seqs, wrong, vocab=[[k] for k in range(6)], num_classes=6)
    assert certify(model, bad).verdict == "refuted"


@pytest.mark.parametrize(("H", "tied"), [(1, True), (4, False)])
def test_a_gpt_checkpoint_runs_as_nanogpt_and_is_certified(tmp_path, H, tied):
    t = gpt_tensors(tied=tied)
    safetensors_numpy.save_file(t, str(tmp_path / "g.safetensors"), metadata={"n_head": str(H)})
    model = import_checkpoint(tmp_path / "g.safetensors", "gpt")
    assert model.meta["options"]["tied"] is tied and model.meta["options"]["heads"] == H
    seqs = [[0, 1, 2, 3], [6, 5, 4, 3], [2, 2, 0, 1]]
    want = [_gpt_reference(t, s, H) for s in seqs]
    assert np.allclose(float_logits(model, None, seqs), want, rtol=1e-9, atol=1e-9)
    _balls_agree(model, seqs, want)
    labels = [int(np.argmax(w)) + 1 for w in want]
    ds = Dataset.from_tokens(seqs, labels, vocab=[[k] for k in range(7)], num_classes=7)
    assert certify(model, ds).verdict == "verified"


def test_gpt_heads_from_the_option_and_refusals(tmp_path):
    t = gpt_tensors(blocks=1)
    path = tmp_path / "g.safetensors"
    safetensors_numpy.save_file(t, str(path))
    with pytest.raises(InputError, match="number of heads"):
        import_checkpoint(path, "gpt")  # no --heads, no n_head
    assert import_checkpoint(path, "gpt", heads=4).meta["options"]["heads"] == 4
    with pytest.raises(InputError, match="must divide d = 4"):
        import_checkpoint(path, "gpt", heads=3)
    with pytest.raises(InputError, match="--heads is for --arch gpt"):
        import_checkpoint(path, "dana25", heads=2)
    odd = gpt_tensors(d=6, blocks=1)
    safetensors_numpy.save_file(odd, str(path), metadata={"n_head": "2"})  # d_h = 3
    scaled = import_checkpoint(path, "gpt")  # 1/√3 is irrational: the attention's own scale
    assert {s.scale for s in scaled.sublayers if isinstance(s, Attention)} == {3}
    safetensors_numpy.save_file(t, str(path), metadata={"n_head": "two"})
    with pytest.raises(InputError, match="n_head = 'two' is not a head count"):
        import_checkpoint(path, "gpt")
    bad = dict(t)
    bad["transformer.h.0.attn.c_attn.weight"] = np.zeros((8, 4), np.float32)
    safetensors_numpy.save_file(bad, str(path), metadata={"n_head": "1"})
    with pytest.raises(InputError, match="c_attn.weight'"):
        import_checkpoint(path, "gpt")
    safetensors_numpy.save_file(t, str(path), metadata={"n_head": "1", "ln_eps": "-1"})
    with pytest.raises(InputError, match="ln_eps must be positive"):
        import_checkpoint(path, "gpt")


def test_a_madden24_checkpoint_without_its_fnn_is_refused(tmp_path):
    t = madden_tensors()
    t.pop("fnn.proj.weight")
    safetensors_numpy.save_file(t, str(tmp_path / "m.safetensors"))
    with pytest.raises(InputError, match="'fnn.proj.weight' is missing"):
        import_checkpoint(tmp_path / "m.safetensors", "madden24")
