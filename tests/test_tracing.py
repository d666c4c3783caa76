"""A look inside a run: the reference evaluator's optional recording, ``exactmem.trace``,
``exactmem explain`` and the pictures of docs/inside-a-run.md.

The pictures are regenerated here by :func:`make_doc_images`; to refresh the committed ones,
run ``python tests/test_tracing.py`` from the repository root.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from flint import arb
from gmpy2 import mpq

import exactmem
from exactmem.commands.main import main
from exactmem.core.errors import InconclusiveError
from exactmem.core.model import MLP, Affine, Attention, AttentionHead, Transformer
from exactmem.datasets.sequences import random_sequences
from exactmem.evaluate import fast, reference
from exactmem.evaluate.records import Recording

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
VOCAB = [(mpq(1), mpq(0)), (mpq(2), mpq(1)), (mpq(-1), mpq(3))]


def one_head(score: str, mask: str = "none", query=((1, 0),), key=((0, 1),)) -> Transformer:
    """Q^2 → one head of size 1 (query lane 0 scaled, key lane 1), writing its mix to lane 0."""
    head = AttentionHead(
        Affine.from_dense([list(query[0])]),
        Affine.from_dense([list(key[0])]),
        Affine.from_dense([[1, 1]]),
        Affine.from_dense([[1], [0]]),
    )
    return Transformer(2, (Attention((head,), score, "att", mask),))


def kim23_data():
    return random_sequences(20, 4, 2, 5, 3, seed=1, task="seq2seq")


# --------------------------------------------------------------------------- recording


@pytest.mark.parametrize("module", [reference, fast])
def test_recording_changes_no_value_and_is_off_by_default(module):
    ds = kim23_data()
    model = exactmem.build(ds, "kim23")
    plain = module.run(model, ds.vocab, ds.sequences)
    record = Recording(attention=True, preactivations=True)
    recorded = module.run(model, ds.vocab, ds.sequences, record=record)
    assert recorded.outputs == plain.outputs
    assert [s.min_nonzero for s in recorded.stats] == [s.min_nonzero for s in plain.stats]
    assert record.trace is recorded and record.stopped is None
    attention = [i for i, s in enumerate(model.sublayers) if isinstance(s, Attention)]
    assert [h.sublayer for h in record.heads] == attention
    relu_layers = sum(len(s.layers) - 1 for s in model.sublayers if isinstance(s, MLP))
    assert len(record.pre) == relu_layers


@pytest.mark.parametrize("module", [reference, fast])
@pytest.mark.parametrize("mask", ["none", "causal", "context"])
def test_scores_are_q_dot_k_and_patterns_the_hardmax_ties(mask, module):
    model = one_head("hardmax", mask)
    seqs = [[0, 1, 2], [2, 2, 1], [1, 0, 0]]
    record = Recording(attention=True)
    module.run(model, VOCAB, seqs, record=record)
    (head,) = record.heads
    n = 3
    for i, seq in enumerate(seqs):
        for q in range(n):
            visible = [k for k in range(n) if head.visible[q, k]]
            expect = {"none": list(range(n)), "causal": list(range(q + 1)), "context": [0, 1]}
            assert visible == expect[mask]
            scores = {k: VOCAB[seq[q]][0] * VOCAB[seq[k]][1] for k in visible}
            for k in range(n):
                got = mpq(int(head.scores[i, q, k]), head.score_den)
                assert got == scores.get(k, 0)  # 0 where masked
            top = max(scores.values())
            tied = [k for k in visible if scores[k] == top]
            weights = [mpq(int(w), head.weight_den) for w in head.weights[i, q]]
            assert weights == [mpq(1, len(tied)) if k in tied else 0 for k in range(n)]
            assert mpq(int(head.values[i, q, 0]), head.value_den) == sum(VOCAB[seq[q]])
            assert head.exact[i, q]


def test_a_softmax_column_of_unequal_scores_is_recorded_then_given_up():
    model = one_head("softmax")
    record = Recording(attention=True)
    with pytest.raises(InconclusiveError):
        reference.run(model, VOCAB, [[0, 0, 0], [0, 1, 2]], record=record)
    (head,) = record.heads
    assert record.stopped[0] == 0 and record.trace.streams == []
    assert head.exact[0, 0] and not head.exact[1, 0]  # key lane 0 everywhere: equal scores
    assert [mpq(int(w), head.weight_den) for w in head.weights[0, 0]] == [mpq(1, 3)] * 3
    assert [mpq(int(x), head.score_den) for x in head.scores[1, 0]] == [0, 1, 3]


# --------------------------------------------------------------------------- trace


def test_trace_lays_out_streams_heads_probes_and_outputs():
    ds = kim23_data()
    model = exactmem.build(ds, "kim23")
    cache = exactmem.trace(model, ds)
    assert cache.exact and cache.feed == "vectors"
    N, n = ds.size, 4
    assert cache["embed"].shape == (N, n, 6) and cache.lanes("embed")[4] == "S"
    out = reference.run(model, ds.vocab, ds.sequences).outputs
    assert [[tuple(c) for c in row] for row in cache["outputs"]] == [list(r) for r in out]
    for s, sub in enumerate(model.sublayers):
        assert cache[f"sublayers.{s}"].shape[:2] == (N, n)
        if isinstance(sub, Attention):
            pattern = cache[f"sublayers.{s}.pattern"]
            assert pattern.shape == (N, 1, n, n)
            assert all(sum(pattern[i, 0, q]) == 1 for i in range(N) for q in range(n))
            q, k = cache[f"sublayers.{s}.heads.0.q"], cache[f"sublayers.{s}.heads.0.k"]
            scores = cache[f"sublayers.{s}.scores"]
            assert scores[3, 0, 1, 2] == q[3, 1, 0] * k[3, 2, 0]
    key = cache["probes.memorizer.key"]
    assert key.shape == (N, n)
    with pytest.raises(KeyError, match="was not recorded"):
        cache["sublayers.1.pattern"]
    with pytest.raises(KeyError, match="has no lane 'T'"):
        cache.lane("embed", "T")


def test_trace_stops_at_softmax_with_enclosures_and_before_gelu():
    ds = kim23_data()
    soft = exactmem.build(ds, "kim23", attention="softmax")
    cache = exactmem.trace(soft, ds)
    assert not cache.exact and cache.stopped[0] == 0
    assert "outputs" not in cache and "sublayers.0" not in cache
    pattern, scores = cache["sublayers.0.pattern"], cache["sublayers.0.scores"]
    for i in range(ds.size):
        row = pattern[i, 0, 0]
        if all(isinstance(w, type(mpq(0))) for w in row):
            continue  # all scores equal: exactly 1/n
        assert all(isinstance(w, arb) for w in row)
        assert sum(row, arb(0)).contains(1)
        top = max(scores[i, 0, 0])
        assert all((w > 0.3) == (s == top) for w, s in zip(row, scores[i, 0, 0], strict=True))
    gelu = Transformer(
        2,
        (
            one_head("hardmax").sublayers[0],
            MLP((Affine.from_dense([[1, 0]]), Affine.from_dense([[1]])), False, activation="gelu"),
        ),
    )
    from exactmem.datasets.dataset import Dataset

    data = Dataset("next-token", (1, 2), 2, vocab=VOCAB, sequences=((0, 1), (1, 2)))
    cache = exactmem.trace(gelu, data)
    assert cache.stopped[0] == 1 and "GELU" in cache.stopped[1]
    assert "sublayers.0" in cache and "sublayers.0.pattern" in cache


def test_softmax_enclosures_divide_the_scores_by_the_root_of_the_scale():
    from exactmem.datasets.dataset import Dataset

    model = one_head("softmax")
    scaled = Transformer(2, (replace(model.sublayers[0], scale=4),))
    data = Dataset("next-token", (1, 2), 2, vocab=VOCAB, sequences=((0, 1, 2), (1, 2, 0)))
    plain, halved = exactmem.trace(model, data), exactmem.trace(scaled, data)
    assert (plain["sublayers.0.scores"] == halved["sublayers.0.scores"]).all()  # ⟨q, k⟩ both
    scores = plain["sublayers.0.scores"][0, 0, 0]  # query 0: lane 0 of token 0 is 1
    for trace_, root in ((plain, 1), (halved, 2)):
        w = trace_["sublayers.0.pattern"][0, 0, 0]
        exps = [math.exp(float(x) / root) for x in scores]
        for ball, e in zip(w, exps, strict=True):
            assert abs(float(ball.mid()) - e / sum(exps)) < 1e-12


def test_trace_of_points_and_of_positions():
    from exactmem.datasets.dataset import random_points

    pts = random_points(12, 2, 3, seed=1)
    cache = exactmem.trace(exactmem.build(pts, "vys"), pts)
    assert cache.feed == "points" and cache["outputs"].shape == (12, 1, 1)
    assert [int(cache["outputs"][i, 0, 0]) for i in range(12)] == list(pts.labels)
    ds = random_sequences(30, 4, 2, 8, 3, seed=2, task="seq2seq")
    model = exactmem.build(ds, "kim23", position_aware=True)
    assert exactmem.trace(model, ds).feed == "vectors"  # kim23 adds positions in the model


# --------------------------------------------------------------------------- explain


@pytest.fixture(scope="module")
def weak(tmp_path_factory):
    """kim23 with A = T − 1 on the adversarial data of the claim kim23_id_multiplier."""
    tmp = tmp_path_factory.mktemp("explain")
    ds = random_sequences(20, 4, 2, 5, 3, seed=3, task="seq2seq")
    model = exactmem.build(ds, "kim23", functional_bound=1, seed=3, id_multiplier=1965)
    exactmem.save_dataset(ds, tmp / "data.json")
    exactmem.save_model(model, tmp / "weak.json")
    return tmp


def test_explain_walks_a_collision_to_the_memorizers_key(weak, capsys):
    cert = weak / "cert.json"
    argv = ["verify", str(weak / "weak.json"), "--data", str(weak / "data.json")]
    assert main([*argv, "--construction", "kim23", "--certificate", str(cert), "--quiet"]) == 1
    capsys.readouterr()
    files = ["--model", str(weak / "weak.json"), "--data", str(weak / "data.json")]
    assert main(["explain", str(cert), *files, "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    by = {f["check"]: f for f in found["findings"]}
    assert set(by) >= {"labels", "kim23.token_ids", "memorizer.stage1.keys"}
    labels = by["labels"]
    assert labels["example"] == "sequences[13][0]" and labels["partner"] == "sequences[1][0]"
    assert labels["label"] != labels["partner_label"]
    merge = labels["merge"]
    assert merge["where"].startswith("sublayers[12]") and "layer 0" in merge["where"]
    assert merge["apart"]["S"] == "1 vs 0" and merge["apart"]["t"] == "1 vs 1966"
    assert merge["shared"]["memorizer.t"] == "13181222"  # Stage I: the key, one for both
    ids = by["kim23.token_ids"]  # names both items: no partner search
    assert (ids["example"], ids["partner"]) == ("sequences[1][0]", "sequences[13][0]")
    assert by["memorizer.stage1.keys"]["lanes"] == {"key": "13181222"}
    assert by["kim23.token_ids"]["spec"]["result"].startswith("the (context, token) ids")


def test_explain_from_the_certificate_alone_and_refusals(weak, capsys, tmp_path):
    cert = weak / "cert2.json"
    argv = ["verify", str(weak / "weak.json"), "--data", str(weak / "data.json"), "--quiet"]
    assert main([*argv, "--construction", "kim23", "--certificate", str(cert)]) == 1
    capsys.readouterr()
    assert main(["explain", str(cert)]) == 1
    out = capsys.readouterr().out
    assert "FAIL kim23.token_ids" in out and "give the model and the dataset" in out
    other = random_sequences(20, 4, 2, 5, 3, seed=4, task="seq2seq")
    exactmem.save_dataset(other, tmp_path / "other.json")
    wrong = ["--model", str(weak / "weak.json"), "--data", str(tmp_path / "other.json")]
    assert main(["explain", str(cert), *wrong]) == 2
    assert "sha256 is not the one certificate" in capsys.readouterr().err
    assert main(["explain"]) == 2
    assert main(["explain", "--model", str(weak / "weak.json")]) == 2
    assert main(["explain", str(cert), "--construction", "kim23"]) == 2


def test_explain_reads_a_crafted_certificate_as_data(weak, capsys, tmp_path):
    """A certificate is a file like any other: its texts name items and units that do not
    exist, carry terminal escapes, or huge numbers; explain walks none of them and exits with
    the recorded verdict, escaping what it prints."""
    from exactmem.files.model_json import canonical_hash

    cert = tmp_path / "cert.json"
    argv = ["verify", str(weak / "weak.json"), "--data", str(weak / "data.json"), "--quiet"]
    assert main([*argv, "--construction", "kim23", "--certificate", str(cert)]) == 1
    capsys.readouterr()
    obj = json.loads(cert.read_text())
    checks = obj["certificate"]["checks"]
    checks[0]["detail"] = (
        "sequences[999999][0] and sequences[1][99]: \x1b[31mred\x1b[0m; "
        f"sublayers[3]: hidden unit 99 of layer 0; column {'9' * 5000}"
    )
    obj["sha256"] = canonical_hash(obj["certificate"])
    cert.write_text(json.dumps(obj))
    files = ["--model", str(weak / "weak.json"), "--data", str(weak / "data.json")]
    assert main(["explain", str(cert), *files]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "red" in out
    first = out.split("\nFAIL ", 2)[1]
    assert "  example " not in first  # no item of this dataset named: nothing walked


def test_explain_a_verified_and_an_inconclusive_run(weak, capsys, tmp_path):
    ds = kim23_data()
    exactmem.save_dataset(ds, tmp_path / "d.json")
    exactmem.save_model(exactmem.build(ds, "kim23"), tmp_path / "ok.json")
    files = ["--data", str(tmp_path / "d.json")]
    assert main(["explain", "--model", str(tmp_path / "ok.json"), *files]) == 0
    assert "nothing to explain" in capsys.readouterr().out
    cold = exactmem.build(ds, "kim23", attention="softmax", temperature=4)
    exactmem.save_model(cold, tmp_path / "cold.json")
    assert main(["explain", "--model", str(tmp_path / "cold.json"), *files]) == 4
    out = capsys.readouterr().out
    assert "exact evaluation ends at sublayers[0] (softmax attention, 'max0')" in out
    assert "first column with unequal scores: sequences[0], query 0, head 0" in out
    argv = ["explain", "--model", str(tmp_path / "cold.json"), *files, "--construction", "kim23"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "FAIL kim23.softmax" in out
    assert "unit 0 of layer 0 of sublayers[7], pre-activation on the hardmax limit:" in out


# --------------------------------------------------------------------------- pictures


def make_doc_images(out: Path) -> dict[str, Path]:
    """The pictures of docs/inside-a-run.md, written into ``out``."""
    from exactmem.reports.plot_trace import plot_patterns

    ds = kim23_data()
    made = {}
    cache = exactmem.trace(exactmem.build(ds, "kim23"), ds)
    made["inside-a-run-patterns.png"] = out / "inside-a-run-patterns.png"
    plot_patterns(cache, made["inside-a-run-patterns.png"], sublayers=[0, 2, 3])
    soft = exactmem.trace(exactmem.build(ds, "kim23", attention="softmax"), ds)
    made["inside-a-run-softmax.png"] = out / "inside-a-run-softmax.png"
    plot_patterns(soft, made["inside-a-run-softmax.png"], sublayers=[0])
    return made


def test_the_doc_images_regenerate(tmp_path):
    pytest.importorskip("matplotlib")
    from tests.test_plot import check_png

    for name, path in make_doc_images(tmp_path).items():
        committed = IMAGES / name
        assert committed.exists(), f"docs/images/{name} is not committed"
        # pixel sizes agree; bytes may differ across matplotlib and FreeType versions
        assert check_png(path) == check_png(committed), name


def test_plot_patterns_refuses_what_was_not_recorded(tmp_path):
    pytest.importorskip("matplotlib")
    from exactmem.core.errors import InputError
    from exactmem.reports.plot_trace import plot_patterns

    ds = kim23_data()
    cache = exactmem.trace(exactmem.build(ds, "kim23"), ds)
    with pytest.raises(InputError, match="no attention pattern"):
        plot_patterns(cache, tmp_path / "p.png", sublayers=[1])
    with pytest.raises(InputError, match="sequence 99"):
        plot_patterns(cache, tmp_path / "p.png", sublayers=[0], sequence=99)
    with pytest.raises(InputError, match="unknown picture format"):
        plot_patterns(cache, tmp_path / "p.jpg", sublayers=[0])
    assert np.all(cache["sublayers.0.pattern"] != None)  # noqa: E711 - every weight recorded


if __name__ == "__main__":  # python tests/test_tracing.py: rewrite the committed pictures
    for path in make_doc_images(IMAGES).values():
        print(f"wrote {path}")
