"""Sharded verification on Dask (exactmem.checks.distributed): the certificate of a LocalCluster of
two
worker processes is the single process's, check for check and figure for figure."""

from __future__ import annotations

import numpy as np
import pytest

import exactmem
from exactmem.checks.certify import certificate_json, certify
from exactmem.checks.distributed import key_order, pack_column, unpack_column
from exactmem.core.errors import InputError
from exactmem.datasets.dataset import random_points
from exactmem.datasets.sequences import random_sequences

distributed = pytest.importorskip("distributed")


def _content(cert) -> dict:
    content = certificate_json(cert)
    content["subject"].pop("argv", None)
    return content


@pytest.fixture(scope="module")
def cluster():
    from exactmem.checks.distributed import Cluster

    with Cluster.start(workers=2, rows_per_shard=40) as c:
        yield c


def test_packed_columns_round_trip_big_and_small():
    big = np.array([0, -1, 2**200, -(3**90), 7], dtype=object)
    back = unpack_column(pack_column(big))
    assert back.dtype == object and back.tolist() == big.tolist()
    small = np.array([3, -4, 0], dtype=np.int64)
    assert unpack_column(pack_column(small)).tolist() == [3, -4, 0]


@pytest.mark.parametrize(
    "construction, make",
    [
        ("vys", lambda: random_points(300, 3, 4, seed=5)),
        ("ks25-next-token", lambda: random_sequences(200, 4, 3, 12, 3, seed=2)),
    ],
)
def test_sharded_certificate_is_the_single_process_one(cluster, construction, make):
    dataset = make()
    model = exactmem.build(dataset, construction, seed=1)
    alone = certify(model, dataset, construction=construction, jobs=1)
    sharded = certify(model, dataset, construction=construction, jobs=1, cluster=cluster)
    assert alone.verdict == "verified"
    assert cluster.shards(dataset.size) > 1  # the rows really travel in several shards
    assert _content(sharded) == _content(alone)


def test_sharded_run_refutes_a_broken_model_as_one_process_does(cluster):
    from exactmem.files.model_json import model_from_json, model_to_json

    dataset = random_points(120, 3, 4, seed=6)
    good = exactmem.build(dataset, "vys", seed=1)
    obj = model_to_json(good)
    last = obj["sublayers"][0]["layers"][-1]
    last["bias"] = [hex(int(b, 0) + 1) for b in last["bias"]]  # every output moved by one
    bad = model_from_json(obj)
    alone = certify(bad, dataset, construction="vys", jobs=1)
    sharded = certify(bad, dataset, construction="vys", jobs=1, cluster=cluster)
    assert alone.verdict == "refuted"
    assert _content(sharded) == _content(alone)


def test_key_order_sorts_rows_by_the_first_pre_activation():
    from exactmem.core.model import MLP, Affine

    layer = Affine(2, (((0, 2), (1, -1)),), (0,))
    mlp = MLP((layer,), residual=False)
    X = [np.array([1, 0, 5], dtype=object), np.array([0, 3, 1], dtype=object)]
    assert key_order(mlp, X).tolist() == [1, 0, 2]  # keys 2, -3, 9


def test_missing_dask_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_dask(name, *args, **kw):
        if name == "distributed":
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    from exactmem.checks.distributed import require_dask

    with pytest.raises(InputError, match=r"exactmem\[dask\]"):
        require_dask()


def _verify(*argv: str):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "exactmem", "verify", *argv],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_cli_processes_with_the_reference_evaluator_is_a_usage_error(tmp_path):
    done = _verify("m.json", "--data", "d.json", "--evaluator", "reference", "--processes")
    assert done.returncode == 2
    assert "--processes and --scheduler shard the fast evaluator" in done.stderr


def test_cli_processes_and_scheduler_exclude_each_other():
    done = _verify("m.json", "--data", "d.json", "--processes", "--scheduler", "tcp://x:1")
    assert done.returncode == 2 and "not allowed with" in done.stderr


@pytest.mark.slow
def test_cli_processes_writes_the_single_process_certificate(tmp_path):
    import json

    from exactmem.files.dataset_files import save_dataset
    from exactmem.files.model_files import save_model

    dataset = random_points(200, 3, 4, seed=8)
    save_dataset(dataset, tmp_path / "d.json")
    save_model(exactmem.build(dataset, "vys", seed=1), tmp_path / "m.json")
    runs = []
    for extra in (["--jobs", "1"], ["--jobs", "2", "--processes"]):
        done = _verify(
            str(tmp_path / "m.json"),
            "--data",
            str(tmp_path / "d.json"),
            "--construction",
            "vys",
            "--json",
            "--quiet",
            *extra,
        )
        assert done.returncode == 0, done.stderr
        content = json.loads(done.stdout)
        content["subject"].pop("argv")
        runs.append(content)
    assert runs[0] == runs[1]


def test_an_existing_cluster_by_its_address(cluster):
    from exactmem.checks.distributed import Cluster

    dataset = random_points(90, 2, 3, seed=4)
    model = exactmem.build(dataset, "vys", seed=1)
    alone = certify(model, dataset, construction="vys", jobs=1)
    with Cluster.start(scheduler=cluster.client.scheduler.address, rows_per_shard=30) as there:
        assert there.workers == 2 and not there.own
        sharded = certify(model, dataset, construction="vys", jobs=1, cluster=there)
    assert _content(sharded) == _content(alone)


def test_the_model_travels_as_container_bytes_checked_on_arrival():
    from exactmem.checks.distributed import model_bytes, model_from_bytes
    from exactmem.files.model_json import model_hash

    model = exactmem.build(random_points(40, 2, 3, seed=2), "vys", seed=1)
    blob, digest = model_bytes(model)
    assert blob.startswith(b"EXMB")  # the binary container, not JSON text
    assert digest == model_hash(model) == model_hash(model_from_bytes(blob))
    with pytest.raises(InputError):
        model_from_bytes(blob[: len(blob) // 2])  # truncated on the way: refused, named


def test_folds_on_workers_keep_the_first_offending_rows_as_one_process(cluster):
    """Stage II steps off {0, 1} and Stage III slots that never match: the folds run on the
    workers and their examples (the first offending rows) merge into the same certificate."""
    from exactmem.files.model_json import model_from_json, model_to_json

    dataset = random_points(300, 3, 4, seed=5)
    obj = model_to_json(exactmem.build(dataset, "vys", seed=1))
    layers = obj["sublayers"][0]["layers"]
    for li in (0, 5, 9):  # a step's upper unit moved by one: the step becomes 2
        layers[li]["bias"][3] = hex(int(layers[li]["bias"][3], 0) + 1)
    bad = model_from_json(obj)
    alone = certify(bad, dataset, construction="vys", jobs=1)
    failed = {c.name for c in alone.checks if not c.passed}
    assert {"memorizer.stage2.groups", "memorizer.stage3.match"} <= failed
    sharded = certify(bad, dataset, construction="vys", jobs=1, cluster=cluster)
    assert _content(sharded) == _content(alone)


def test_place_brings_shards_over_their_least_common_denominator():
    from exactmem.checks.distributed import place

    rows = [np.array([0, 2]), np.array([1, 3])]
    same = place([(np.array([1, 3]), 2), (np.array([5, 7]), 2)], rows, 4)
    assert same[0].dtype == np.int64 and same[0].tolist() == [1, 5, 3, 7] and same[1] == 2
    big = 2**62  # rescaled int64 would overflow: the values become Python integers
    mixed = place([(np.array([big, 1]), 3), (np.array([1, 1]), 2)], rows, 4)
    assert mixed[1] == 6 and mixed[0].tolist() == [2 * big, 3, 2, 3]


def test_class_shared_lanes_come_back_class_shared_with_one_index():
    """Stage III's read-outs travel as a table per class and one class index per shard; the
    parent joins them into lanes sharing one index, and a lane stored per row in one shard (its
    values small before the shard kept classes) is put back per row."""
    from exactmem.checks.distributed import join_classes, put
    from exactmem.core.exact_arrays import Gathered

    rows = [np.array([0, 2, 3]), np.array([1, 4])]
    classes = [[np.array([0, 1, 0])], [np.array([1, 0])]]
    shared = {
        "key[0]": [(0, 0, np.array([5, 7], np.int8), 1), (1, 0, np.array([9, 11]), 2)],
        "label[0]": [(0, 0, np.array([1, 2]), 1), (1, 0, np.array([3, 4]), 1)],
        "mixed": [(1, 0, np.array([300, 400]), 1)],
    }
    per_row: dict = {}
    put(per_row, "mixed", np.array([1, 2, 3], np.int8), 1, rows[0], 5)
    lanes = join_classes(shared, classes, rows, 5, per_row)
    key, kden = lanes["key[0]"]
    label, lden = lanes["label[0]"]
    assert isinstance(key, Gathered) and key.index is label.index
    assert kden == 2 and key.tolist() == [10, 11, 14, 10, 9]  # 5, 5.5, 7, 5, 4.5 over 2
    assert lden == 1 and label.tolist() == [1, 4, 2, 1, 3]
    mixed, mden = per_row["mixed"]
    assert mden == 1 and mixed.dtype == np.int64 and mixed.tolist() == [1, 400, 2, 3, 300]


def test_put_widens_a_narrow_first_shard():
    from exactmem.checks.distributed import put

    acc: dict = {}
    put(acc, 0, np.array([1, -2], np.int8), 1, np.array([0, 1]), 3)
    put(acc, 0, np.array([1000]), 1, np.array([2]), 3)
    assert acc[0][0].tolist() == [1, -2, 1000]  # not 1000 wrapped into int8


def test_key_order_with_numerators_past_int64():
    from exactmem.core.model import MLP, Affine

    mlp = MLP((Affine(2, (((0, 3), (1, 1)),), (0,)),), residual=False)
    big = 2**70
    X = [np.array([big, -big, 0], dtype=object), np.array([1, 0, -1], dtype=object)]
    assert key_order(mlp, X).tolist() == [1, 2, 0]  # keys 3·2⁷⁰ + 1, −3·2⁷⁰, −1


@pytest.mark.parametrize(
    "construction, make",
    [
        ("vys", lambda: random_points(300, 3, 4, seed=5)),
        ("ks25-next-token", lambda: random_sequences(200, 4, 3, 12, 3, seed=2)),
    ],
)
def test_relabelled_rows_are_reported_at_the_same_indices(cluster, construction, make):
    """A model judged on labels it was not built for: the label check and Stage III's match
    (read from the class-shared key[k]/label[k] lanes joined over the shards) name the same
    first offending rows, with the same values, as one process."""
    import dataclasses

    dataset = make()
    model = exactmem.build(dataset, construction, seed=1)
    labels = list(dataset.labels)
    for i in (7, 150, 151, len(labels) - 1):  # rows in different shards
        labels[i] = labels[i] % dataset.num_classes + 1
    moved = dataclasses.replace(dataset, labels=tuple(labels))
    alone = certify(model, moved, construction=construction, jobs=1)
    sharded = certify(model, moved, construction=construction, jobs=1, cluster=cluster)
    failed = [c for c in alone.checks if not c.passed]
    assert alone.verdict == "refuted" and any("stage3.match" in c.name for c in failed)
    assert any("[7]" in c.detail for c in failed)
    assert _content(sharded) == _content(alone)
