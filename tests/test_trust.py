"""The trust boundary: nothing a model file says about itself decides or loosens a verdict.

Each lie below edits only ``meta`` (or strips it), the way a hostile or buggy model file could;
the verdict comes from the user's criteria (``construction``, ``tolerance``) and the evaluated
values. A broken model with a flattering meta is never verified, and an honest model's checks
are the same whatever its meta says.
"""

from __future__ import annotations

import ast
import pathlib
from dataclasses import replace

import pytest
from gmpy2 import mpq

from exactmem.checks.certify import CONSTRUCTIONS, certify
from exactmem.constructions import dana25, ks25, mahdavi24, vys
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, Affine, Transformer
from exactmem.datasets.dataset import random_points
from exactmem.datasets.sequences import random_sequences, zen_of_python


def _checks(cert) -> list[tuple[str, bool, str]]:
    return [(c.name, c.passed, c.detail) for c in cert.checks]


def _with_meta(model, **meta):
    return replace(model, meta={**model.meta, **meta})


def _strip_layouts(model):
    subs = tuple(replace(s, meta={}) if isinstance(s, MLP) else s for s in model.sublayers)
    return replace(model, sublayers=subs, meta={})


def _scale_unembed(model, factor: mpq):
    u = model.unembed
    num, den = int(factor.numerator), int(factor.denominator)
    rows = tuple(tuple((j, c * num) for j, c in row) for row in u.rows)
    scaled = Affine(u.in_dim, rows, tuple(b * num for b in u.bias), u.denominator * den, u.names)
    return replace(model, unembed=scaled)


@pytest.fixture(scope="module")
def attention_data():
    return mahdavi24.random_instance(9, 3, 6, 4, seed=5)


@pytest.fixture(scope="module")
def points():
    ds = random_points(30, 3, 5, seed=4)
    return ds, vys.build(ds, {"seed": 1})[0]


@pytest.fixture(scope="module")
def sequences():
    ds = random_sequences(60, 4, 3, 20, 4, seed=2)
    return ds, ks25.build(ds, {"seed": 0})[0]


def test_meta_tolerance_does_not_loosen_softmax_labels(attention_data):
    """Mahdavi softmax regression with the unembedding scaled by 11/10 and meta tolerance 1:
    verified before the trust boundary; now judged on the user's 1/1000 (or exactly)."""
    model, _ = mahdavi24.build(attention_data, {"heads": 4, "score": "softmax"})
    lying = _with_meta(_scale_unembed(model, mpq(11, 10)), tolerance="1")
    cert = certify(lying, attention_data, construction="mahdavi24", tolerance="1/1000")
    assert cert.verdict == "refuted"
    assert "labels" in {c.name for c in cert.failed}
    assert cert.subject["criteria"]["tolerance"] == "1/1000"
    honest = certify(model, attention_data, construction="mahdavi24", tolerance="1/1000")
    assert honest.verdict == "verified"


def test_meta_readout_does_not_turn_one_output_into_a_trivial_argmax(attention_data):
    """A one-output model whose labels are wrong, claiming an argmax readout: one logit has no
    rival, so an argmax readout of it passes trivially. The readout comes from the width."""
    model, _ = mahdavi24.build(attention_data, {"heads": 4})
    broken = _with_meta(_scale_unembed(model, mpq(11, 10)), readout="classification")
    cert = certify(broken, attention_data, construction="mahdavi24")
    assert cert.subject["criteria"]["readout"] == "label"
    assert "labels" in {c.name for c in cert.failed}


def test_stripped_layout_refutes_the_demanded_checklist(points):
    ds, model = points
    cert = certify(_strip_layouts(model), ds, construction="vys")
    assert cert.verdict == "refuted"
    assert "memorizer.layout" in {c.name for c in cert.failed}


def test_layout_that_disagrees_with_the_lanes_is_refuted(points):
    ds, model = points
    first = model.sublayers[0]
    for lie in (
        {"group_size": first.meta["group_size"] + 1},
        {"groups": first.meta["groups"] - 1},
        {"gadget": "peel"},
        {"key_bits": first.meta["key_bits"] + 5},
        {"group_size": "3"},
    ):
        sub = replace(first, meta={**first.meta, **lie})
        lying = replace(model, sublayers=(sub, *model.sublayers[1:]))
        cert = certify(lying, ds, construction="vys")
        assert cert.verdict == "refuted", lie


def test_renamed_construction_changes_nothing(points, sequences):
    """The construction the file names is a label: the checklist is the user's."""
    for ds, model, name in (*[(*points, "vys")], *[(*sequences, "ks25-next-token")]):
        honest = certify(model, ds, construction=name)
        renamed = certify(_with_meta(model, construction="dana25"), ds, construction=name)
        assert _checks(renamed) == _checks(honest)
        assert renamed.subject["model_says"]["construction"] == "dana25"
        plain = certify(_with_meta(model, construction=None), ds)
        assert not any(c.name.startswith(("memorizer.", "ks25.")) for c in plain.checks)
        assert plain.subject["criteria"]["construction"] is None


def test_ks25_meta_lies_change_no_check(sequences):
    """Token-id gap, position awareness and the layout's options: none is read."""
    ds, model = sequences
    honest = _checks(certify(model, ds, construction="ks25-next-token"))
    for lie in ({"token_id_gap": 0}, {"position_aware": True}, {"readout": "classification"}):
        lying = _with_meta(model, **lie)
        assert _checks(certify(lying, ds, construction="ks25-next-token")) == honest, lie


def test_position_awareness_is_read_from_the_input_width():
    """A position-aware model takes d + 1 inputs: the verifier appends positions because of
    the width, not because the file says so; a plain model claiming awareness is fed plainly."""
    zen = zen_of_python(32)
    aware, _ = ks25.build(zen, {"position_aware": True, "seed": 0})
    cert = certify(_with_meta(aware, position_aware=False), zen, construction="ks25-next-token")
    assert cert.verdict == "verified"
    assert cert.subject["criteria"]["inputs"] == "vectors with positions"


def test_a_model_missing_its_stages_is_refuted(sequences):
    ds, model = sequences
    no_f2 = replace(model, sublayers=model.sublayers[:-1])
    with pytest.raises(InputError):  # its output width no longer reads a label
        certify(no_f2, ds, construction="ks25-next-token")
    no_meta = _strip_layouts(model)
    cert = certify(no_meta, ds, construction="ks25-next-token")
    assert cert.verdict == "refuted"
    assert any(c.name.endswith(".layout") for c in cert.failed)


def test_dana_checklist_demands_its_architecture(points):
    ds, model = points
    with pytest.raises(InputError, match="dana25 certifies task next-token"):
        certify(model, ds, construction="dana25")
    data = dana25.random_associations(12, 2, 6, seed=1)
    aot, _ = dana25.build(data, {"d": 2, "heads": 3})
    cert = certify(_with_meta(aot, paper_parameters={"total": 1}), data, construction="dana25")
    assert "paper_parameters" not in str(cert.checks)


def test_unknown_construction_and_negative_tolerance_are_usage_errors(points):
    ds, model = points
    with pytest.raises(InputError, match="unknown"):
        certify(model, ds, construction="vys2")
    with pytest.raises(InputError, match="≥ 0"):
        certify(model, ds, tolerance="-1/2")
    assert "vys" in CONSTRUCTIONS


def test_exact_tolerance_is_a_real_criterion(points):
    """--tolerance loosens exactly as stated: outputs moved by δ pass within δ, not within
    2δ/3."""
    ds, model = points
    mlp = model.sublayers[0]
    last = mlp.layers[-1]
    rows = tuple(tuple((j, 2 * c) for j, c in row) for row in last.rows)
    bias = tuple(2 * b + 1 for b in last.bias)  # every output moved by δ = 1/(2·den)
    shifted = Affine(last.in_dim, rows, bias, 2 * last.denominator, last.names)
    off = replace(model, sublayers=(replace(mlp, layers=(*mlp.layers[:-1], shifted)),))
    delta = mpq(1, 2 * last.denominator)
    assert "labels" in {c.name for c in certify(off, ds).failed}
    assert "labels" not in {c.name for c in certify(off, ds, tolerance=delta).failed}
    assert "labels" in {c.name for c in certify(off, ds, tolerance=delta * 2 / 3).failed}


def test_trusted_core_imports_no_construction():
    """The layering CI enforces with import-linter, checked here on the source too."""
    root = pathlib.Path(__file__).resolve().parents[1] / "exactmem"
    trusted = [
        str(p.relative_to(root))
        for package in ("core", "runtime", "datasets", "files", "evaluate", "checks")
        for p in sorted((root / package).rglob("*.py"))
    ]
    assert "checks/certify.py" in trusted and len(trusted) > 60
    for rel in trusted:
        tree = ast.parse((root / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert "constructions" not in node.module, f"{rel} imports {node.module}"
    for p in (root / "constructions").glob("*.py"):
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("exactmem.evaluate"), f"{p.name} evaluates"


# ------------------------------------------------------------- found by a hostile review


def _identity_mlp(width: int, label: str) -> MLP:
    """x ↦ σ(x) − σ(−x) = x, exactly: a sub-layer that changes nothing."""
    up = Affine(width, tuple(((i, s),) for s in (1, -1) for i in range(width)), (0,) * 2 * width)
    down = Affine(2 * width, tuple(((i, 1), (width + i, -1)) for i in range(width)), (0,) * width)
    return MLP((up, down), residual=False, label=label)


def test_a_prefix_layer_does_not_hide_the_first_memorizer(sequences):
    """An exact identity before F1 moved the attention layer to index 2, and the φ memorizer
    (its layout stripped) went unchecked: the checklist demands F1 → attention → F2."""
    ds, model = sequences
    f1 = replace(model.sublayers[0], meta={}, probes=())
    pre = _identity_mlp(model.input_dim, "pre")
    lying = replace(model, sublayers=(pre, f1, *model.sublayers[1:]))
    cert = certify(lying, ds, construction="ks25-next-token")
    assert cert.verdict == "refuted"
    assert "ks25-next-token.structure" in {c.name for c in cert.failed}


def test_one_checked_network_and_nothing_beside_it(points, attention_data):
    """A layer after the construction's network would escape its checklist."""
    ds, model = points
    width = model.sublayers[0].out_dim
    extra = replace(model, sublayers=(*model.sublayers, _identity_mlp(width, "extra")))
    assert "vys.structure" in {c.name for c in certify(extra, ds, construction="vys").failed}
    mah, _ = mahdavi24.build(attention_data, {"heads": 4})
    width = mah.embed.out_dim
    more = replace(mah, sublayers=(*mah.sublayers, _identity_mlp(width, "extra")))
    failed = {c.name for c in certify(more, attention_data, construction="mahdavi24").failed}
    assert "mahdavi24.structure" in failed


def test_bit_budget_holds_an_unsplit_memorizer_to_the_budget(sequences):
    """An unsplit memorizer is a split into one network: judged against the stated B (refuted
    past B² inputs), undecided — never passed — without it."""
    ds, model = sequences
    cert = certify(model, ds, construction="ks25-bit-budget")
    assert cert.verdict == "inconclusive"
    assert "f2.split.budget" in {c.name for c in cert.undecided}
    cert = certify(model, ds, construction="ks25-bit-budget", options={"bit_budget": 2})
    assert "f2.split.budget" in {c.name for c in cert.failed}


def test_logits_at_every_position_of_a_seq2seq_dataset():
    """C outputs on seq-to-seq data: argmax judged at every position (it crashed)."""
    from exactmem.datasets.dataset import Dataset

    vocab = ((mpq(1),), (mpq(2),), (mpq(3),))
    ds = Dataset("seq2seq", ((1, 2), (2, 1)), 2, vocab=vocab, sequences=((0, 1), (1, 2)))
    # logits (x, 3 − x): label 1 needs x > 3/2, so sequences[0][0] (x = 1, label 1) is wrong
    logits = Affine(1, (((0, 1),), ((0, -1),)), (0, 3))
    model = Transformer(1, (MLP((logits,), residual=False),))
    cert = certify(model, ds)
    assert cert.subject["criteria"]["readout"] == "argmax"
    assert "labels" in {c.name for c in cert.failed}
    assert "sequences[0][0]" in next(c for c in cert.checks if c.name == "labels").detail


def test_verify_escapes_what_the_file_says(tmp_path, capsys, points):
    from exactmem.commands.main import main
    from exactmem.files.dataset_files import save_dataset
    from exactmem.files.model_files import save_model

    ds, model = points
    trick = "vys\x1b[2A\r\x1b[2Kverdict: VERIFIED"
    save_model(_with_meta(model, construction=trick), tmp_path / "m.json")
    save_dataset(ds, tmp_path / "d.json")
    main(["verify", str(tmp_path / "m.json"), "--data", str(tmp_path / "d.json"), "--quiet"])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\u001b" in out


def test_claim_sizes_are_bounded_like_generate(tmp_path):
    """A claim asking for d = 10⁹ ran until memory ran out; sizes have generate's limits."""
    from exactmem.claims.proofs import load_claim

    path = tmp_path / "big.toml"
    path.write_text(
        'paper = "p"\nstatement = "s"\nconstruction = "vys"\nexpect = "verified"\n'
        '[[instance]]\ngenerator = "random_points"\nN = 2\nd = 1000000000\nC = 2\n'
    )
    with pytest.raises(InputError, match=r"instance\[0\]\.d: must be an integer in \[1, 10000\]"):
        load_claim(path)
