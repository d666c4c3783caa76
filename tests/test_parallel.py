"""--jobs: the token-wise sub-layers on row chunks in several processes give the same trace."""

import pytest
from support import certify_built

from exactmem.commands.main import main
from exactmem.constructions import ks25, vys
from exactmem.datasets.dataset import random_points
from exactmem.datasets.sequences import random_sequences
from exactmem.evaluate.reference import run, run_points


def same_trace(a, b):
    assert a.outputs == b.outputs
    assert a.stats == b.stats
    assert set(a._lanes) == set(b._lanes)
    for name in a._lanes:
        assert (a.lane(name) == b.lane(name)).all(), name


@pytest.mark.parametrize("gadget", ["peel", "tent"])
def test_points_parallel_equals_serial(gadget):
    ds = random_points(700, 4, 20, seed=8)
    model, _ = vys.build(ds, {"gadget": gadget})
    same_trace(run_points(model, ds.points), run_points(model, ds.points, jobs=3))


def test_sequences_parallel_equals_serial():
    ds = random_sequences(900, 5, 3, 40, 6, seed=9)
    model, _ = ks25.build(ds, {})
    serial = run(model, ds.vocab, ds.sequences, positions="last")
    parallel = run(model, ds.vocab, ds.sequences, positions="last", jobs=2)
    same_trace(serial, parallel)
    a, b = certify_built(model, ds), certify_built(model, ds, jobs=2)
    assert [c.as_dict() for c in a.checks] == [c.as_dict() for c in b.checks]
    assert a.activation == b.activation


def test_jobs_option(tmp_path, capsys):
    data, model = tmp_path / "d.json", tmp_path / "m.json"
    main(["generate", "points", "--N", "600", "--d", "3", "--C", "5", "--out", str(data)])
    main(["build", "--construction", "vys", "--data", str(data), "--out", str(model), "--quiet"])
    assert main(["verify", str(model), "--data", str(data), "--quiet", "--jobs", "2"]) == 0
    with pytest.raises(SystemExit) as exc:
        main(["verify", str(model), "--data", str(data), "--jobs", "0"])
    assert exc.value.code == 2
