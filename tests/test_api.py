"""The public Python API: lazy package attributes, dataset builders, build/run/certify, model
files, and the certificate's repr and JSON.

Every builder and entry point is also fed bad input and must raise ``InputError`` naming what
is wrong. Subprocesses check what ``import exactmem`` loads, in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from gmpy2 import mpq

import exactmem
from exactmem.checks.certificate import Certificate, Check
from exactmem.checks.certify import certificate_json
from exactmem.core.errors import InputError
from exactmem.core.model import resources
from exactmem.files.dataset_files import load_dataset, save_dataset
from exactmem.files.model_json import model_hash

ROOT = Path(__file__).resolve().parents[1]
VOCAB = {"the": [1, 0], "a": [0, 1], "cat": [2, 1], "dog": [1, 2], "sat": [3, 3], "ran": [3, -1]}
SENTENCES = ["the cat sat", "the dog ran", "a cat ran", "a dog sat"]


def _python(code: str) -> str:
    """Run ``code`` in a fresh interpreter on this checkout; returns its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def sentences():
    return exactmem.Dataset.from_tokens([s.split() for s in SENTENCES], [1, 2, 2, 1], vocab=VOCAB)


@pytest.fixture(scope="module")
def ks25_model(sentences):
    return exactmem.build(sentences, "ks25-next-token", seed=0)


@pytest.fixture(scope="module")
def points():
    return exactmem.Dataset.from_points(
        [[0, 1], [2, "1/3"], [5, 5], [-3, 4], [1, 1]], [1, 2, 3, 1, 2]
    )


@pytest.fixture(scope="module")
def vys_model(points):
    return exactmem.build(points, "vys", seed=3)


# --------------------------------------------------------------------------- the package


def test_import_loads_no_submodule():
    """``import exactmem`` loads only its version and the finder of the old module paths
    (standard library only): no NumPy, no gmpy2, no evaluator."""
    out = _python(
        """
        import sys
        import exactmem
        print(sorted(m for m in sys.modules if m.startswith("exactmem")))
        print("numpy" in sys.modules, "gmpy2" in sys.modules)
        """
    )
    assert out.split("\n")[:2] == [
        "['exactmem', 'exactmem._moved', 'exactmem.core', 'exactmem.core.version']",
        "False False",
    ]


def test_the_trusted_core_does_not_load_the_api_or_a_construction():
    out = _python(
        """
        import sys
        import exactmem.checks.certify
        print(sorted(m for m in sys.modules if m in ("exactmem.api", "exactmem.commands.main")
                     or m.startswith("exactmem.constructions")))
        """
    )
    assert out.strip() == "[]"


def test_every_public_name_resolves():
    for name in exactmem.__all__:
        assert getattr(exactmem, name) is not None, name
        assert name in dir(exactmem)
    assert exactmem.Dataset is load_dataset.__globals__["Dataset"]
    assert exactmem.Certificate is Certificate
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        exactmem.nonesuch  # noqa: B018


@pytest.mark.parametrize(
    "first",
    [
        "import exactmem.checks.certify",
        "from exactmem.checks.certify import certify",
        "import exactmem",
        "import exactmem.certify",
    ],
)
def test_certify_is_callable_whatever_was_imported_first(first):
    """``exactmem.certify`` is the trusted module, and calling it calls its ``certify``:
    the import system binds the submodule on the package whenever it is loaded first."""
    out = _python(
        f"""
        {first}
        import exactmem
        from exactmem import certify
        ds = exactmem.Dataset.from_points([[0], [3]], [1, 2])
        model = exactmem.build(ds, "vys", seed=0)
        print(certify is exactmem.certify, exactmem.checks.certify.certify.__module__)
        print(exactmem.certify(model, ds, construction="vys").verdict)
        print(certify(model, ds).verdict)
        """
    )
    assert out.split("\n")[:3] == ["True exactmem.checks.certify", "verified", "verified"]


def test_patching_the_trusted_function_reaches_the_call(monkeypatch, points, vys_model):
    import exactmem.checks.certify as module

    assert module is exactmem.certify
    monkeypatch.setattr(module, "certify", lambda *a, **k: "patched")
    assert exactmem.certify(vys_model, points) == "patched"


# --------------------------------------------------------------------------- datasets


def test_from_tokens_with_a_mapping(sentences):
    assert sentences.task == "next-token" and sentences.num_classes == 2
    assert sentences.sequences == ((0, 2, 4), (0, 3, 5), (1, 2, 5), (1, 3, 4))
    assert sentences.vocab[4] == (mpq(3), mpq(3))
    assert sentences.meta["symbols"] == list(VOCAB)


def test_from_tokens_with_a_list_is_the_dataset_a_file_gives(tmp_path):
    built = exactmem.Dataset.from_tokens(
        [[0, 1, 2], [2, 1, 0]],
        [(1, 2, 3), (3, 2, 1)],
        vocab=[[Fraction(1, 3)], [mpq(2, 5)], [np.int64(7)]],
        task="seq2seq",
        num_classes=4,
    )
    assert built.vocab == ((mpq(1, 3),), (mpq(2, 5),), (mpq(7),))
    assert built.labels == ((1, 2, 3), (3, 2, 1)) and built.num_classes == 4
    save_dataset(built, tmp_path / "d.json")
    assert load_dataset(tmp_path / "d.json") == built


def test_from_points_exact_and_floats_only_by_opt_in():
    ds = exactmem.Dataset.from_points([[1, "0.25"], [Fraction(-1, 3), 2]], [2, 1])
    assert ds.points == ((mpq(1), mpq(1, 4)), (mpq(-1, 3), mpq(2)))
    with pytest.raises(InputError, match=r"points\[1\]\[0\]: float 0.5 is not exact"):
        exactmem.Dataset.from_points([[1, 2], [0.5, 1]], [1, 2])
    dyadic = exactmem.Dataset.from_points([[1, 2], [0.5, 1]], [1, 2], allow_floats=True)
    assert dyadic.points[1][0] == mpq(1, 2)


TOKENS = {"vocab": [[1], [2]]}  # from_tokens over two tokens in Q^1


@pytest.mark.parametrize(
    ("builder", "args", "options", "message"),
    [
        ("tokens", ([["the", "cow"]], [1]), {"vocab": VOCAB}, r"\[0\]\[1\]: token 'cow' is not in"),
        ("tokens", ([[["the"]]], [1]), {"vocab": VOCAB}, r"sequences\[0\]\[0\]: token \['the'\]"),
        ("tokens", (["the cat"], [1]), {"vocab": VOCAB}, r"sequences\[0\]: expected a list of"),
        ("tokens", ([[0, 5]], [1]), TOKENS, r"sequences\[0\]\[1\]: 5 is not an index into"),
        ("tokens", ([[0, 1], [1]], [1, 2]), TOKENS, r"sequences\[1\]: length 1, expected 2"),
        ("tokens", ([[0, 1]], [1, 2]), TOKENS, "2 labels for 1 sequence "),
        ("tokens", ([[0, 1]], [0]), TOKENS, r"labels\[0\]: label 0 is outside 1..C"),
        ("tokens", ([[0, 1]], [3]), {**TOKENS, "num_classes": 2}, r"label 3 is outside 1..C"),
        ("tokens", ([[0, 1]], [1]), {"vocab": [[1], [2, 3]]}, r"vocab\[1\]: has 2 coordinates"),
        ("tokens", ([[0, 1]], [1]), {"vocab": [[1], ["x"]]}, r"vocab\[1\]\[0\]: 'x' is not an"),
        ("tokens", ([[0, 1]], [1]), {**TOKENS, "task": "pairs"}, "field 'task' is 'pairs'"),
        ("tokens", ([[0, 1]], "1"), TOKENS, "labels: expected a list"),
        ("points", (5, [1]), {}, "points: expected a list"),
        ("points", ([[1], [True]], [1, 2]), {}, r"points\[1\]\[0\]: expected a number, got a"),
        ("points", ([[1], [2]], [1, 1.0]), {}, r"labels\[1\]: label must be an integer"),
        ("points", ([[1], [2]], [1, 2]), {"num_classes": 0}, "field 'C' must be a positive"),
    ],
)
def test_builders_refuse_bad_input(builder, args, options, message):
    build = exactmem.Dataset.from_tokens if builder == "tokens" else exactmem.Dataset.from_points
    with pytest.raises(InputError, match=message):
        build(*args, **options)


# --------------------------------------------------------------------------- build


def test_build_is_deterministic_in_its_seed(points):
    a, b = exactmem.build(points, "vys", seed=5), exactmem.build(points, "vys", seed=5)
    assert model_hash(a) == model_hash(b)
    assert a.meta["options"] == {"seed": 5}


def test_build_takes_options_as_python_values(sentences, points):
    peel = exactmem.build(points, "vys", seed=0, gadget="peel", group_size=2)
    assert peel.meta["options"] == {"gadget": "peel", "group_size": 2, "seed": 0}
    assert peel.sublayers[0].meta["gadget"] == "peel"
    aware = exactmem.build(sentences, "ks25-next-token", position_aware=True)
    assert aware.input_dim == sentences.dim + 1
    assert exactmem.certify(aware, sentences, construction="ks25-next-token").verdict == (
        "verified"
    )


@pytest.mark.parametrize(
    ("construction", "options", "message"),
    [
        ("nonesuch", {}, "construction 'nonesuch' is unknown; available: vys, "),
        ("vys", {"gadget": "fancy"}, "option gadget=fancy: expected one of keyed, peel, tent"),
        ("vys", {"colour": "red"}, "option colour: unknown option for 'vys'"),
        ("vys", {"group_size": 0}, "option group_size=0: expected a positive integer"),
        ("vys", {"group_size": 99}, "option group_size=99: too large for this dataset"),
        ("vys", {"group_size": 2.0}, "option group_size=2.0: expected an int, a bool"),
        ("vys", {"seed": "1"}, "seed must be an integer"),
        ("ks25-next-token", {}, "ks25-next-token needs task 'next-token'"),
        ("ks25-bit-budget", {}, "ks25-bit-budget needs option bit_budget=B"),
    ],
)
def test_build_refuses_bad_input(points, construction, options, message):
    with pytest.raises(InputError, match=message):
        exactmem.build(points, construction, **options)


def test_build_refuses_what_is_not_a_dataset():
    with pytest.raises(InputError, match="dataset must be an exactmem.Dataset, got dict"):
        exactmem.build({"points": [[1]]}, "vys")  # type: ignore[arg-type]


def test_build_mahdavi_takes_a_fraction(tmp_path):
    from exactmem.constructions.mahdavi24 import random_instance

    ds = random_instance(5, 3, 6, 3, seed=1)
    model = exactmem.build(ds, "mahdavi24", score="softmax", tolerance=Fraction(1, 100))
    assert model.meta["options"]["tolerance"] == "1/100"


# --------------------------------------------------------------------------- run


def test_run_points_both_evaluators(points, vys_model):
    expected = [[(mpq(y),)] for y in points.labels]
    assert exactmem.run(vys_model, points) == expected
    assert exactmem.run(vys_model, points, evaluator="reference") == expected
    raw = [[p] for p in [[0, 1], [2, Fraction(1, 3)], ["5", 5]]]
    assert exactmem.run(vys_model, raw, evaluator="reference") == expected[:3]


def test_run_sequences_matches_the_certificate(sentences, ks25_model):
    last = exactmem.run(ks25_model, sentences, positions="last")
    assert last == [[(mpq(y),)] for y in sentences.labels]
    every = exactmem.run(ks25_model, sentences)
    assert [len(seq) for seq in every] == [3] * 4 and [seq[-1] for seq in every] == [
        seq[0] for seq in last
    ]
    raw = [[VOCAB[w] for w in s.split()] for s in SENTENCES]
    assert exactmem.run(ks25_model, raw, positions="last") == last


def test_run_appends_positions_as_certification_does(sentences):
    aware = exactmem.build(sentences, "ks25-next-token", seed=1, position_aware=True)
    want = [[(mpq(y),)] for y in sentences.labels]
    assert exactmem.run(aware, sentences, positions="last") == want
    raw = [[VOCAB[w] for w in s.split()] for s in SENTENCES]
    assert exactmem.run(aware, raw, positions="last") == want
    with_k = [[[*VOCAB[w], k + 1] for k, w in enumerate(s.split())] for s in SENTENCES]
    assert exactmem.run(aware, with_k, positions="last") == want


def test_run_refuses_a_dataset_that_does_not_fit(points, vys_model, sentences, ks25_model):
    wide = exactmem.Dataset.from_points([[0, 1, 2], [2, 3, 4]], [1, 2])
    with pytest.raises(InputError, match="dimension 2, the dataset's points have 3"):
        exactmem.run(vys_model, wide)
    line = exactmem.build(exactmem.Dataset.from_points([[0], [3]], [1, 2]), "vys")
    with pytest.raises(InputError, match="dimension 1, the dataset's tokens have 2 .or 3 with"):
        exactmem.run(line, sentences)


def test_run_token_ids():
    ds = exactmem.Dataset.from_tokens(
        [[0, 1], [1, 0], [2, 2]], [1, 2, 2], vocab=[[1, 0], [0, 1], [1, 1]]
    )
    model = exactmem.build(ds, "ks25-token-ids", seed=0)
    assert model.token_inputs
    want = [[(mpq(y),)] for y in ds.labels]
    assert exactmem.run(model, ds, positions="last") == want
    assert exactmem.run(model, [[0, 1], [1, 0], [2, 2]], positions="last") == want
    with pytest.raises(InputError, match=r"inputs\[1\]\[0\]: 3 is not a token id .*\(0..2\)"):
        exactmem.run(model, [[0, 1], [3, 0]])
    more = replace(ds, vocab=(*ds.vocab, (mpq(5), mpq(5))))
    with pytest.raises(InputError, match="embedding table has 3 tokens, the dataset has 4 tokens"):
        exactmem.run(model, more)
    flat = exactmem.Dataset.from_points([[0], [1]], [1, 2])
    with pytest.raises(InputError, match="embedding table has 3 tokens, the dataset has points"):
        exactmem.run(model, flat)


@pytest.mark.parametrize(
    ("inputs", "options", "message"),
    [
        ([[[1, 0], [2, 1]], [[0, 1]]], {}, r"inputs\[1\]: length 1, expected 2"),
        ([[[1, 0, 0, 0]]], {}, r"inputs\[0\]\[0\]: a token of dimension 4; the model reads 2"),
        ([[[1, 0], [2, 0.5]]], {}, r"inputs\[0\]\[1\]\[1\]: float 0.5 is not exact"),
        ([[[1, 0], [2]]], {}, r"inputs\[0\]\[1\]: has 1 coordinates, the model reads 2"),
        ([[[1, 0], "ab"]], {}, r"inputs\[0\]\[1\]: expected a token vector"),
        ([], {}, "inputs: expected a Dataset or a non-empty list"),
        (["abc"], {}, r"inputs\[0\]: expected a non-empty list of tokens"),
        ([[[1, 0]]], {"positions": "first"}, "positions must be 'all' or 'last'"),
        ([[[1, 0]]], {"evaluator": "gpu"}, "evaluator must be 'fast' or 'reference'"),
    ],
)
def test_run_refuses_bad_input(ks25_model, inputs, options, message):
    with pytest.raises(InputError, match=message):
        exactmem.run(ks25_model, inputs, **options)


# --------------------------------------------------------------------------- certificates


def test_certificate_to_json_is_the_certificate_json(sentences, ks25_model):
    cert = exactmem.certify(ks25_model, sentences, construction="ks25-next-token")
    assert cert.to_json() == certificate_json(cert)
    assert json.loads(json.dumps(cert.to_json()))["verdict"] == "verified"


def test_certificate_repr_names_verdict_criteria_and_failures(sentences, ks25_model):
    cert = exactmem.certify(ks25_model, sentences, construction="ks25-next-token", tolerance="0")
    text = repr(cert)
    assert text.startswith(f"<Certificate VERIFIED: all {len(cert.checks)} checks passed\n")
    assert "criteria: Theorem 4.1 items 3–9" in text and "readout label, within 0" in text
    assert "FAIL" not in text
    refuted = exactmem.certify(ks25_model, replace(sentences, labels=(1, 2, 1, 2)))
    lines = repr(refuted).split("\n")
    assert lines[0] == "<Certificate REFUTED: 1 of 2 checks failed"
    assert "construction-independent checks only" in lines[1]
    assert lines[1].endswith("exact; inputs: vectors")
    assert lines[2].startswith(" FAIL labels: 2 of 4 wrong — sequences[2]: output 2, expected 1")
    assert lines[-1].endswith(">") and len(lines) == 3


def test_certificate_repr_without_a_subject(vys_model):
    cert = Certificate(
        checks=[Check("a", True, "fine"), Check("b", False, "broken")],
        resources=resources(vys_model),
        activation={},
    )
    assert repr(cert) == "<Certificate REFUTED: 1 of 2 checks failed\n FAIL b: broken>"
    assert cert.to_json()["checks"][1] == {"name": "b", "passed": False, "detail": "broken"}


# --------------------------------------------------------------------------- model files


@pytest.mark.parametrize("name", ["model.json", "model.json.gz"])
def test_save_and_load_model(tmp_path, ks25_model, sentences, name):
    path = tmp_path / name
    digest = exactmem.save_model(ks25_model, path)
    assert digest == model_hash(ks25_model)
    loaded = exactmem.load_model(path)
    assert loaded == ks25_model and model_hash(loaded) == digest
    assert exactmem.run(loaded, sentences, positions="last") == exactmem.run(
        ks25_model, sentences, positions="last"
    )


def test_load_model_refuses_a_modified_file(tmp_path, vys_model):
    path = tmp_path / "m.json"
    exactmem.save_model(vys_model, path)
    obj = json.loads(path.read_text())
    obj["model"]["meta"]["construction"] = "something else"
    path.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="SHA-256 mismatch"):
        exactmem.load_model(path)
    with pytest.raises(InputError, match="cannot read"):
        exactmem.load_model(tmp_path / "missing.json")


# --------------------------------------------------------------------------- types


def test_the_api_is_typed_for_its_users(tmp_path):
    """mypy sees the public names with their signatures: a misspelt keyword is an error."""
    pytest.importorskip("mypy")
    user = tmp_path / "user.py"
    user.write_text(
        textwrap.dedent(
            """
            import exactmem

            ds = exactmem.Dataset.from_points([[1], [2]], [1, 2])
            model = exactmem.build(ds, "vys", seed=1)
            cert: exactmem.Certificate = exactmem.certify(model, ds, construction="vys")
            outputs = exactmem.run(model, ds)
            exactmem.certify(model, ds, constructoin="vys")
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir",
         str(tmp_path / "cache"), str(user)],
        capture_output=True,
        text=True,
        env={**os.environ, "MYPYPATH": str(ROOT)},
        cwd=tmp_path,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'Unexpected keyword argument "constructoin"' in errors[0]


STORY = "the cat sat on the mat. the cat ran."


def test_from_text_is_the_text_windows():
    from exactmem.datasets.text import windows

    ds = exactmem.Dataset.from_text(STORY, window=3, unit="word")
    found = windows(STORY, 3, "word")
    assert [list(s) for s in ds.sequences] == found.rows.tolist()
    assert list(ds.labels) == found.labels.tolist() and found.positions_because is None
    assert ds.meta["symbols"] == ["the", "cat", "sat", "on", "mat", ".", "ran"]
    assert ds.meta["source"] == "Dataset.from_text"
    with pytest.raises(InputError, match="window must be an integer ≥ 1, got 0"):
        exactmem.Dataset.from_text(STORY, window=0)
    with pytest.raises(InputError, match="unit must be one of char, word"):
        exactmem.Dataset.from_text(STORY, window=2, unit="line")
    with pytest.raises(InputError, match="Dataset.from_text: the windows at line 1, column 1"):
        exactmem.Dataset.from_text("aab aac", window=1)


def test_build_with_its_arguments_swapped_says_so_briefly(points):
    with pytest.raises(InputError, match=r"got str and Dataset \(the arguments swapped\?\)$"):
        exactmem.build("vys", points)
