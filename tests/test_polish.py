"""The small things a first user meets (issue 30 point 7): "did you mean" for a mistyped
option, command or construction; the construction that fits the dataset's task; no progress
line before an error; a pointer to ``generate text`` for a text file given as a dataset; counted
nouns in the singular."""

from __future__ import annotations

import json

import pytest

from exactmem.commands.main import main
from exactmem.commands.suggest import closest, plural, wrong_task
from exactmem.commands.verify import print_certificate
from exactmem.core.errors import InputError
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import check_consistency


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def points(tmp_path):
    path = str(tmp_path / "p.json")
    assert main(["generate", "points", "--N", "12", "--d", "2", "--out", path, "--quiet"]) == 0
    return path


@pytest.fixture
def sequences(tmp_path):
    path = str(tmp_path / "s.json")
    argv = ["generate", "next-token", "--N", "12", "--n", "4", "--vocab", "10", "--out", path]
    assert main([*argv, "--quiet"]) == 0
    return path


def test_a_mistyped_option_is_named_with_the_closest_one(capsys, sequences, tmp_path):
    code, _, err = _cli(
        capsys, "build", "--contruction", "vys", "--data", sequences, "--out", "m.json"
    )
    assert code == 2
    assert "unrecognized option --contruction; did you mean --construction?" in err
    assert "required" not in err  # the cause, not its consequence
    assert "exactmem build: error" in err


def test_an_unknown_option_besides_every_required_one_is_named(capsys, points, tmp_path):
    out = str(tmp_path / "m.json")
    code, _, err = _cli(
        capsys, "build", "--construction", "vys", "--data", points, "--out", out, "--sed", "3"
    )
    assert code == 2 and "unrecognized option --sed; did you mean --seed?" in err
    assert "usage: exactmem build" in err  # the command's usage, not the top level's


def test_abbreviations_still_work_and_values_are_not_options(capsys, points, tmp_path):
    out = str(tmp_path / "m.json")
    code, _, _ = _cli(capsys, "build", "--construct", "vys", "--dat", points, "--out", out)
    assert code == 0


def test_a_mistyped_command_is_named_with_the_closest_one(capsys):
    code, _, err = _cli(capsys, "biuld")
    assert code == 2 and "did you mean build?" in err


def test_an_unknown_construction_suggests_the_closest(capsys, points, tmp_path):
    out = str(tmp_path / "m.json")
    code, _, err = _cli(capsys, "build", "--construction", "vyss", "--data", points, "--out", out)
    assert code == 2 and err.rstrip().endswith("did you mean vys?")
    code, _, err = _cli(capsys, "build", "--construction", "ks25", "--data", points, "--out", out)
    assert code == 2 and "did you mean ks25-next-token?" in err
    code, _, err = _cli(capsys, "verify", out, "--data", points, "--construction", "madden")
    assert code == 2 and "did you mean madden24?" in err


def test_the_construction_that_fits_the_task_is_suggested_before_any_progress(
    capsys, sequences, tmp_path
):
    out = str(tmp_path / "m.json")
    code, _, err = _cli(capsys, "build", "--construction", "vys", "--data", sequences, "--out", out)
    assert code == 2
    assert err.startswith("error: construction 'vys' needs task 'points'")  # nothing before
    assert "use --construction ks25-next-token" in err
    assert "building" not in err


def test_wrong_task_names_every_construction_that_fits():
    assert wrong_task("vys", "points") is None
    message = wrong_task("ks24", "next-token")
    assert message is not None and "needs task 'seq2seq'" in message
    assert "kim23" in message and "vys" not in message
    assert wrong_task("no-such-construction", "points") is None
    assert closest("ks25-seq", ["vys", "ks25-next-token", "ks25-seq2seq"]) == "ks25-seq2seq"
    assert closest("zzz", ["vys", "ks24"]) is None


def test_a_text_file_given_as_data_points_to_generate_text(capsys, tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat on the mat\n", encoding="utf-8")
    out = str(tmp_path / "m.json")
    code, _, err = _cli(capsys, "build", "--construction", "vys", "--data", str(text), "--out", out)
    assert code == 2 and "not valid JSON" in err
    assert f"exactmem generate text --file {text} --window W" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"task": ', encoding="utf-8")  # broken JSON is not called text
    code, _, err = _cli(
        capsys, "build", "--construction", "vys", "--data", str(broken), "--out", out
    )
    assert code == 2 and "not valid JSON" in err and "generate text" not in err


def test_plural():
    assert plural(1, "pair") == "1 pair"
    assert plural(0, "pair") == "0 pairs"
    assert plural(2, "ReLU layer") == "2 ReLU layers"
    assert plural(3, "child", "children") == "3 children"


def test_one_label_conflict_is_singular():
    vocab = ((1,), (2,), (3,))
    ds = Dataset("next-token", (1, 2), 2, vocab=vocab, sequences=((0, 1, 2), (1, 0, 2)), meta={})
    with pytest.raises(InputError) as info:
        check_consistency(ds, "next-token")
    message = str(info.value)
    assert message.startswith("1 label conflict: ") and "(the only such pair)" in message
    assert "such pairs" not in message


def test_the_verdict_table_counts_in_the_singular_and_names_no_construction(
    capsys, points, tmp_path
):
    model, cert = str(tmp_path / "m.json"), str(tmp_path / "c.json")
    build = ["build", "--construction", "vys", "--data", points, "--out", model, "--quiet"]
    assert main(build) == 0
    argv = ["verify", model, "--data", points, "--certificate", cert, "--quiet"]
    assert main(argv) == 0
    capsys.readouterr()
    content = json.loads(open(cert).read())["certificate"]
    content["subject"]["model_says"] = {}
    content["activation"]["relu_layers"] = 1
    print_certificate(content)
    out = capsys.readouterr().out
    assert "its file names no construction" in out and "None" not in out
    assert "activation: 1 ReLU layer," in out


CAT = "the cat sat on the mat. the mat sat on the cat!\n"


@pytest.fixture(scope="module")
def cat_model(tmp_path_factory):
    """Position-aware word windows (``generate text`` finds two windows that need positions)
    and Theorem 4.1's model of them."""
    tmp = tmp_path_factory.mktemp("cat")
    text, data, model = tmp / "cat.txt", str(tmp / "cat.json"), str(tmp / "m.json")
    text.write_text(CAT, encoding="utf-8")
    argv = ["generate", "text", "--file", str(text), "--window", "6", "--unit", "word"]
    assert main([*argv, "--out", data, "--quiet"]) == 0
    argv = ["build", "--construction", "ks25-next-token", "--data", data, "--out", model]
    assert main([*argv, "--quiet"]) == 0
    return data, model


def test_recite_gives_back_a_position_aware_text(cat_model):
    from exactmem.datasets.text import split
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model
    from exactmem.reports.recite import recite

    data, model = cat_model
    ds = load_dataset(data)
    assert ds.meta["position_aware"] and len(ds.vocab[0]) == 2
    net, _ = load_model(model)
    assert recite(net, ds) == list(split(CAT, "word").symbols)
    assert recite(net, ds, steps=1) == list(split(CAT, "word").symbols[:7])


def test_recite_refuses_a_dataset_without_text(points):
    from exactmem.files.dataset_files import load_dataset
    from exactmem.reports.recite import recite

    with pytest.raises(InputError, match="generate text"):
        recite(None, load_dataset(points))


def test_predict_shows_the_units_of_a_text_dataset(capsys, cat_model):
    data, model = cat_model
    code, out, _ = _cli(capsys, "predict", model, "--data", data, "--quiet")
    assert code == 0
    rows = out.splitlines()[1:]
    assert rows[0] == 'sequences[0] "the cat sat on the mat": 6 "."  label 6 "."'
    assert rows[-1].endswith('"!"  label 7 "!"')
    assert len(rows) == 8


def test_predict_shows_numbers_where_the_meta_names_no_symbols(capsys, sequences, tmp_path):
    model = str(tmp_path / "m.json")
    build = ["build", "--construction", "ks25-next-token", "--data", sequences, "--out", model]
    assert main([*build, "--quiet"]) == 0
    capsys.readouterr()
    code, out, _ = _cli(capsys, "predict", model, "--data", sequences, "--quiet")
    assert code == 0 and out.splitlines()[1].startswith("sequences[0]: ")
    assert '"' not in out


def test_bounds_latex_names_the_tex_packages_it_needs(capsys):
    from pathlib import Path

    code, out, _ = _cli(capsys, "bounds", "--help")
    assert code == 0 and "texlive-latex-recommended" in " ".join(out.split())
    plots = (Path(__file__).parents[1] / "docs" / "plots.md").read_text(encoding="utf-8")
    assert "texlive-latex-recommended" in plots


def test_verify_and_predict_print_no_progress_before_an_input_error(capsys, points, sequences):
    model = points.replace("p.json", "pm.json")
    assert main(["build", "--construction", "vys", "--data", points, "--out", model]) == 0
    capsys.readouterr()
    for argv in (
        ["verify", model, "--data", sequences],  # dimension 2 against 8
        ["verify", model, "--data", sequences, "--construction", "vys"],
        ["predict", model, "--data", sequences],
    ):
        code, out, err = _cli(capsys, *argv)
        assert code == 2 and out == "" and err.startswith("error: "), (argv, err)
        assert err.count("\n") == 1, err  # the message alone
    code, _, err = _cli(capsys, "verify", model, "--data", sequences, "--construction", "vys")
    assert "certifies task 'points'" in err and "use --construction ks25-next-token" in err


def test_verify_and_predict_still_say_what_they_did(capsys, points):
    model = points.replace("p.json", "pm.json")
    assert main(["build", "--construction", "vys", "--data", points, "--out", model]) == 0
    capsys.readouterr()
    code, _, err = _cli(capsys, "verify", model, "--data", points, "--construction", "vys")
    assert code == 0 and "verifying on 12 inputs with the fast evaluator" in err
    code, _, err = _cli(capsys, "predict", model, "--data", points)
    assert code == 0 and "evaluating on 12 inputs with the fast evaluator" in err


def test_a_held_milestone_comes_before_the_first_report_and_never_after_an_error():
    import io

    from exactmem.runtime.progress import Progress

    stream = io.StringIO()
    p = Progress(True, stream=stream, bars=False)
    p.later("verifying on 3 inputs")
    assert stream.getvalue() == ""
    p("a step")  # not drawn without a terminal, but the work has started
    assert stream.getvalue().endswith("verifying on 3 inputs\n")
    p.flush()
    assert stream.getvalue().count("verifying") == 1
    quiet = Progress(False, stream=stream, bars=False)
    quiet.later("x")
    quiet.flush()
    assert "x" not in stream.getvalue()


def test_a_mistyped_construction_option_names_the_closest(capsys, points, tmp_path):
    out = str(tmp_path / "m.json")
    argv = ["build", "--construction", "vys", "--data", points, "--out", out]
    code, _, err = _cli(capsys, *argv, "--set", "gadgte=peel")
    assert code == 2 and err.rstrip().endswith("did you mean gadget?")


def test_one_point_is_counted_in_the_singular_everywhere(capsys, tmp_path):
    data, model = str(tmp_path / "one.json"), str(tmp_path / "m.json")
    code, out, _ = _cli(capsys, "generate", "points", "--N", "1", "--d", "2", "--out", data)
    assert code == 0 and "1 point in Q^2" in out
    code, _, err = _cli(capsys, "build", "--construction", "vys", "--data", data, "--out", model)
    assert code == 0 and "building vys for 1 point\n" in err
    code, out, err = _cli(capsys, "verify", model, "--data", data, "--construction", "vys")
    assert code == 0 and "dataset: 1 point in Q^2" in out and "on 1 input with" in err
    code, out, err = _cli(capsys, "predict", model, "--data", data)
    assert code == 0 and out.startswith("1 point of ") and "on 1 input with" in err
