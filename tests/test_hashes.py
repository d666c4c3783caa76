"""The hashes and loaders with the cyclic collector paused compute what they computed before:
the canonical SHA-256 of a dataset or model equals the plain definition (``json.dumps`` with
sorted keys, no whitespace) on JSON and .exm files alike, values past 2⁶³ included; a file
with a wrong stated hash is still refused; the collector's state is restored."""

import gc
import hashlib
import json

import pytest
from gmpy2 import mpq

from exactmem.constructions import ks25, vys
from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset, dataset_hash, dataset_to_json, random_points
from exactmem.datasets.sequences import random_sequences
from exactmem.files.dataset_files import load_dataset, save_dataset
from exactmem.files.model_files import load_model, save_model
from exactmem.files.model_json import model_hash, model_to_json
from exactmem.runtime.gcpause import paused_gc


def plain_sha256(obj: dict) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def plain_dataset_hash(ds: Dataset) -> str:
    obj = dataset_to_json(ds)
    obj.pop("meta", None)
    return plain_sha256(obj)


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
@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".exm"])
def test_dataset_hash_is_the_plain_definition(name, suffix, tmp_path):
    ds = DATASETS[name]()
    save_dataset(ds, tmp_path / f"d{suffix}")
    loaded = load_dataset(tmp_path / f"d{suffix}")
    assert loaded == ds
    assert dataset_hash(loaded) == plain_dataset_hash(ds) == dataset_hash(ds)


@pytest.fixture(scope="module")
def models():
    """A VYS model (points) and a Theorem 4.1 model whose weights pass 2⁶³."""
    return {
        "vys": vys.build(random_points(40, 3, 5, seed=1), {"seed": 0})[0],
        "ks25": ks25.build(random_sequences(400, 6, 4, 30, 5, seed=0), {"seed": 0})[0],
    }


@pytest.mark.parametrize("name", ["vys", "ks25"])
@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".exm"])
def test_model_hash_is_the_plain_definition(name, suffix, models, tmp_path):
    model = models[name]
    expected = plain_sha256(model_to_json(model))
    assert save_model(model, tmp_path / f"m{suffix}") == expected
    loaded, stated = load_model(tmp_path / f"m{suffix}")
    assert loaded == model
    assert stated == model_hash(loaded) == model_hash(model) == expected
    if name == "ks25":
        assert max(abs(v) for _, v in _weights(model)) >= 2**63


def _weights(model):
    for s in model.sublayers:
        for a in getattr(s, "layers", ()):
            for row in a.rows:
                yield from row


def test_a_wrong_stated_hash_is_still_refused(models, tmp_path):
    path = tmp_path / "m.json"
    save_model(models["vys"], path)
    obj = json.loads(path.read_text())
    obj["sha256"] = "0" * 64
    path.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="SHA-256 mismatch"):
        load_model(path)
    assert gc.isenabled()


def test_paused_gc_restores_the_collectors_state():
    assert gc.isenabled()
    with pytest.raises(ValueError), paused_gc():
        assert not gc.isenabled()
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
