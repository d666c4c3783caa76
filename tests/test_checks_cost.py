"""The cheaper paths of the checks decide as the plain ones did: Theorem 4.2 evaluated up to
the last column-mixing sub-layer, the sequence view's kept arrays, the dataset parser's
C-speed pass, the default parallelism and the library versions."""

from __future__ import annotations

import os

import numpy as np
import pytest
from gmpy2 import mpq

from exactmem.checks.certificate import library_versions
from exactmem.checks.lower_bounds import _mixing_part, _mixing_prefix, constant_sequence_check
from exactmem.constructions import ks25
from exactmem.core.errors import InputError
from exactmem.core.model import MLP, PositionalEncoding, Transformer
from exactmem.datasets.dataset import parse_dataset
from exactmem.datasets.sequences import canonical_tokens, random_sequences, sequence_tokens, view
from exactmem.runtime import parallel


@pytest.fixture(scope="module")
def model_and_data():
    ds = random_sequences(80, 4, 3, 25, 4, seed=1)
    model, _ = ks25.build(ds, {})
    return model, ds


def test_theorem_4_2_stops_at_the_last_mixing_sublayer(model_and_data):
    model, ds = model_and_data
    prefix = _mixing_prefix(model)
    assert [type(s).__name__ for s in prefix.sublayers] == ["MLP", "Attention"]
    assert prefix.unembed is None
    seen = []

    def run(m, vocab, sequences, **kw):
        from exactmem.evaluate.reference import run as reference

        seen.append(len(m.sublayers))
        return reference(m, vocab, sequences, **kw)

    assert constant_sequence_check(model, ds.vocab, list(range(25)), 4, run).passed
    # F1 once on the tokens alone, then the attention (its linear equivalent goes to the
    # reference evaluator); never F2
    assert seen == [1, 1]


def test_theorem_4_2_mixing_part_starts_at_the_attention(model_and_data):
    from exactmem.evaluate.reference import run

    model, ds = model_and_data
    part, states, ids, at = _mixing_part(model, ds.vocab, [3, 7], run)
    assert at == 1 and ids == [0, 1] and len(part.sublayers) == 1
    head = Transformer(model.input_dim, model.sublayers[:1], meta=model.meta)
    assert states == [run(head, ds.vocab, [[t]]).outputs[0][0] for t in (3, 7)]


def test_theorem_4_2_fails_on_a_positional_encoding_after_the_attention(model_and_data):
    """A mixing sub-layer after the attention extends the evaluated prefix: still caught."""
    model, ds = model_and_data
    pe = PositionalEncoding(tuple((mpq(0), mpq(0), mpq(k, 3)) for k in range(4)), "pe")
    subs = model.sublayers
    broken = Transformer(model.input_dim, subs[:2] + (pe,) + subs[2:], meta=model.meta)
    assert len(_mixing_prefix(broken).sublayers) == 3
    check = constant_sequence_check(broken, ds.vocab, list(range(25)), 4)
    assert not check.passed
    assert "columns differ after sub-layer 2" in check.detail


def test_theorem_4_2_without_mixing_sublayers_needs_no_evaluation(model_and_data):
    model, ds = model_and_data
    mlp_only = Transformer(model.input_dim, (model.sublayers[0],), meta=model.meta)
    assert _mixing_prefix(mlp_only) is None

    def run(*args, **kw):
        raise AssertionError("a token-wise network needs no evaluation here")

    assert constant_sequence_check(mlp_only, ds.vocab, list(range(25)), 4, run).passed
    assert all(isinstance(s, MLP) for s in mlp_only.sublayers)


def test_sequence_view_keeps_the_canonical_tokens(model_and_data):
    _, ds = model_and_data
    sv = view(ds)
    canon = canonical_tokens(ds, sv.canonical)
    assert np.array_equal(sequence_tokens(ds, sv), canon)
    assert sv.canonical_sequences.dtype.itemsize < 8  # narrow ints
    assert sv.tokens == tuple(np.unique(canon).tolist())
    assert np.array_equal(sv.last, canon[:, -1]) and sv.last.dtype == np.int64
    assert np.array_equal(sv.sorted_tokens, np.sort(canon, axis=1))


BASE = {"format": "exactmem.dataset/1", "task": "next-token", "vocab": [[1], [2]]}


@pytest.mark.parametrize(
    ("sequences", "labels", "message"),
    [
        ([[0, 1], [1, True]], [1, 2], "sequences[1][1]: True is not an index"),
        ([[0, 1], [1, 1.0]], [1, 2], "sequences[1][1]: 1.0 is not an index"),
        ([[0, 1], [1, 2]], [1, 2], "sequences[1][1]: 2 is not an index"),
        ([[0, 1], [-1, 0]], [1, 2], "sequences[1][0]: -1 is not an index"),
        ([[0, 1], [1]], [1, 2], "sequences[1]: length 1, expected 2"),
        ([[0, 1], "01"], [1, 2], "sequences[1]: expected a non-empty list"),
        ([[0, 1], [1, 0]], [1, True], "labels[1]: label must be an integer"),
        ([[0, 1], [1, 0]], [1, 0], "labels[1]: label 0 is outside"),
    ],
)
def test_dataset_parse_still_names_every_bad_entry(sequences, labels, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_dataset({**BASE, "sequences": sequences, "labels": labels})


def test_dataset_parse_plain_rows():
    ds = parse_dataset({**BASE, "sequences": [[0, 1], [1, 0]], "labels": [1, 2**70]})
    assert ds.sequences == ((0, 1), (1, 0)) and ds.labels == (1, 2**70)


def test_default_jobs_counts_the_processes_runnable_now_not_the_load_average(monkeypatch):
    """A load average of 5 left by finished processes leaves every core idle; three other
    runnable processes (four with this one) take them all."""
    cores = os.sched_getaffinity(0)
    monkeypatch.setattr(parallel, "_loadavg", lambda: "5.00 5.00 5.00 1/300 999")
    assert parallel.default_jobs() == len(cores)
    monkeypatch.setattr(parallel, "_loadavg", lambda: "0.00 0.00 0.00 4/300 999")
    assert parallel.default_jobs() == max(1, len(cores) - 3)
    looks = iter(["0 0 0 9/300 1", "0 0 0 1/300 1", "0 0 0 1/300 1"])  # a blip: the median
    monkeypatch.setattr(parallel, "_loadavg", lambda: next(looks))
    assert parallel.default_jobs() == len(cores)


def test_the_cli_parser_reads_no_load():
    from exactmem.commands import main as cli

    args = cli.parser().parse_args(["verify", "m.json", "--data", "d.json"])
    assert args.jobs is None  # (the parser itself reads no load)


def test_default_jobs_leaves_busy_cores(monkeypatch):
    cores = os.sched_getaffinity(0)
    monkeypatch.setattr(parallel, "_busy", lambda: 0.0)
    assert parallel.default_jobs() == len(cores)
    monkeypatch.setattr(parallel, "_busy", lambda: 1000.0)
    assert parallel.default_jobs() == 1


def test_wait_policy_is_set_unless_the_user_set_one(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    parallel.configure()
    assert os.environ["OMP_WAIT_POLICY"] == "passive"
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    parallel.configure()
    assert os.environ["OMP_WAIT_POLICY"] == "active"


def test_library_versions_match_the_modules():
    import flint
    import mpmath

    versions = library_versions()
    assert versions["mpmath"] == mpmath.__version__
    assert versions["python-flint"] == flint.__version__


def test_theorem_4_2_reads_the_entry_columns_from_the_dataset_trace(model_and_data):
    from exactmem.checks.lower_bounds import _entry_columns
    from exactmem.evaluate.reference import run

    model, ds = model_and_data
    sv = view(ds)
    trace = run(model, ds.vocab, ds.sequences, positions="last")
    tokens = list(sv.tokens)[:10]
    entry = _entry_columns(model, trace, sv, tokens)
    _, states, _, at = _mixing_part(model, ds.vocab, tokens, run)
    assert at == 1 and entry == states
    assert _entry_columns(model, None, sv, tokens) is None
    calls = []

    def counted(m, *args, **kw):
        calls.append(len(m.sublayers))
        return run(m, *args, **kw)

    check = constant_sequence_check(model, ds.vocab, tokens, 4, counted, entry)
    assert check.passed and calls == [1]  # the attention only
    bad = [tuple(v + 1 for v in col) for col in entry]  # columns F1 does not output
    assert constant_sequence_check(model, ds.vocab, tokens, 4, run, bad).passed  # still equal
