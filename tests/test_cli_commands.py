"""The command line as a tool: --version, help on every argument, --json on every command,
predict / inspect / show, progress on stderr, shell completion, and the README's synopsis
executed line by line."""

import argparse
import gzip
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from exactmem.commands.main import main
from exactmem.commands.parser import parser
from exactmem.files.model_json import canonical_hash
from exactmem.runtime.progress import Progress, tell

ROOT = Path(__file__).resolve().parent.parent


def leaf_parsers(p: argparse.ArgumentParser, path=()):
    """(command path, parser) of every parser that runs a command."""
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, p
    for action in subs:
        for name, child in action.choices.items():
            yield from leaf_parsers(child, (*path, name))


def all_parsers(p: argparse.ArgumentParser, path=()):
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from all_parsers(child, (*path, name))


# --------------------------------------------------------------------------- the parser


def test_every_argument_and_command_has_help():
    missing = []
    for path, p in all_parsers(parser()):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                missing += [(*path, name) for name in action.choices if name not in helped]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append((*path, action.dest))
    assert missing == []


def test_the_walk_sees_an_argument_without_help():
    """The walk above fails on an argument added without help text (it is not vacuous)."""
    p = parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["inspect"].add_argument("--bare")
    bare = [
        action.dest
        for _, q in all_parsers(p)
        for action in q._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert bare == ["bare"]


def test_every_command_takes_json():
    commands = {" ".join(path): p for path, p in leaf_parsers(parser())}
    assert set(commands) >= {
        "generate",
        "build",
        "verify",
        "bounds",
        "check",
        "predict",
        "inspect",
        "show",
        "plot bounds",
        "plot certificate",
    }
    lacking = [c for c, p in commands.items() if "--json" not in p._option_string_actions]
    assert lacking == []


def test_version_and_program_name(capsys):
    from exactmem import __version__

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"exactmem {__version__}"
    assert parser().format_usage().startswith("usage: exactmem ")


def test_the_console_script_is_main():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^exactmem = "exactmem\.commands\.main:main"$', text, re.M)


# --------------------------------------------------------------------------- files


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A verified vys model, its dataset and its certificate."""
    tmp = tmp_path_factory.mktemp("built")
    data, model, cert = tmp / "d.json", tmp / "m.json", tmp / "c.json"
    assert main(["generate", "points", "--N", "9", "--d", "3", "--C", "4", "--out", str(data)]) == 0
    argv = ["build", "--construction", "vys", "--data", str(data), "--out", str(model)]
    assert main([*argv, "--quiet"]) == 0
    verify = ["verify", str(model), "--data", str(data), "--certificate", str(cert), "--quiet"]
    assert main(verify) == 0
    return data, model, cert


def run_json(capsys, argv: list[str]) -> tuple[int, object]:
    capsys.readouterr()
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_generate_and_build_json(tmp_path, capsys):
    from exactmem.datasets.dataset import dataset_hash
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model

    data, model = tmp_path / "d.json", tmp_path / "m.json.gz"
    code, said = run_json(
        capsys,
        ["generate", "points", "--N", "7", "--d", "2", "--C", "3", "--out", str(data), "--json"],
    )
    assert code == 0 and said["path"] == str(data) and said["N"] == 7 and said["task"] == "points"
    assert said["sha256"] == dataset_hash(load_dataset(data))
    assert said["file_sha256"] == __import__("hashlib").sha256(data.read_bytes()).hexdigest()
    argv = ["build", "--construction", "vys", "--data", str(data), "--out", str(model)]
    code, said = run_json(capsys, [*argv, "--json", "--quiet", "--set", "gadget=peel"])
    assert code == 0 and said["sha256"] == load_model(model)[1]
    assert said["options"] == {"gadget": "peel"} and said["construction"] == "vys"
    assert said["resources"]["depth"] > 0 and set(said["resources"]) >= {"width", "max_bits"}


def test_show_prints_the_verdict_table(built, capsys):
    _, _, cert = built
    assert main(["show", str(cert)]) == 0
    out = capsys.readouterr().out
    assert "a RECORD, displayed as written" in out and "verdict: VERIFIED" in out
    assert "ok   labels" in out
    code, said = run_json(capsys, ["show", str(cert), "--json"])
    assert code == 0 and said == json.loads(cert.read_text())["certificate"]


def rewrite(path: Path, out: Path, change, rehash: bool = True) -> Path:
    obj = json.loads(path.read_text())
    change(obj)
    if rehash:
        obj["sha256"] = canonical_hash(obj["certificate"])
    out.write_text(json.dumps(obj))
    return out


def _set(keys, value):
    def change(obj):
        target = obj
        for k in keys[:-1]:
            target = target[k]
        if value is KeyError:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return change


@pytest.mark.parametrize(
    "change, rehash, message",  # rehash: the schema alone must refuse it
    [
        (_set(["certificate", "verdict"], "refuted"), False, "does not match the certificate"),
        (_set(["format"], "exactmem.certificate/1"), True, "expected 'exactmem.certificate/2'"),
        (_set(["certificate", "verdict"], "great"), True, "certificate.verdict"),
        (_set(["certificate", "verdict"], "refuted"), True, "every check passed"),
        (_set(["certificate", "checks"], []), True, "certificate.checks: empty"),
        (_set(["certificate", "checks", 0, "passed"], "yes"), True, "checks[0].passed"),
        (_set(["certificate", "resources", "width"], -1), True, "resources.width"),
        (_set(["certificate", "resources", "extra"], 1), True, "unexpected field 'extra'"),
        (_set(["certificate", "data", "N"], KeyError), True, "data.N: missing"),
        (_set(["certificate", "subject", "model_sha256"], "00"), True, "model_sha256"),
        (_set(["certificate", "subject", "criteria", "tolerance"], "1.5"), True, "tolerance"),
        (_set(["certificate", "activation", "min_nonzero_preactivation"], 2), True, "activation"),
        (_set(["sha256"], "A" * 64), False, "64 lowercase hex digits"),
        (_set(["certificate", "subject", "criteria", "inputs"], "pixels"), True, "inputs"),
    ],
)
def test_show_refuses_a_broken_certificate(built, tmp_path, capsys, change, rehash, message):
    _, _, cert = built
    bad = rewrite(cert, tmp_path / "bad.json", change, rehash)
    capsys.readouterr()
    assert main(["show", str(bad)]) == 2
    said = capsys.readouterr()
    assert said.out == "" and message in said.err and "Traceback" not in said.err
    verdict_only = "every check passed" in message  # a rule of the verifier, not of the schema
    if rehash and not verdict_only:  # show refuses what the published schema refuses
        from test_schemas import problems

        assert problems(json.loads(bad.read_text()), "certificate") != []


def test_show_accepts_what_the_schema_accepts(built):
    from test_schemas import problems

    from exactmem.commands.show import read

    _, _, cert = built
    assert problems(json.loads(cert.read_text()), "certificate") == []
    assert read(str(cert))["verdict"] == "verified"


def test_show_reads_gzip_and_refuses_what_is_not_a_certificate(built, tmp_path, capsys):
    _, model, cert = built
    packed = tmp_path / "c.json.gz"
    packed.write_bytes(gzip.compress(cert.read_bytes()))
    assert main(["show", str(packed)]) == 0
    capsys.readouterr()
    assert main(["show", str(model)]) == 2  # a model file
    assert "format" in capsys.readouterr().err
    assert main(["show", str(tmp_path / "missing.json")]) == 2


def test_show_escapes_control_characters(built, tmp_path, capsys):
    _, _, cert = built
    bad = rewrite(
        cert, tmp_path / "ansi.json", _set(["certificate", "checks", 0, "detail"], "\x1b[2J")
    )
    assert main(["show", str(bad)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and '"\\u001b[2J"' in out


def test_inspect_reads_the_weights_and_labels_the_files_word(built, capsys):
    _, model, _ = built
    assert main(["inspect", str(model)]) == 0
    out = capsys.readouterr().out
    assert "sha256" in out and "(checked)" in out and "mlp" in out
    assert "the file says (its own word: a label, never a criterion" in out
    assert 'construction: "vys"' in out and "resources: width" in out
    code, said = run_json(capsys, ["inspect", str(model), "--json"])
    assert code == 0 and said["file_says"]["construction"] == "vys"
    assert said["sublayers"][0]["kind"] == "mlp" and said["resources"]["depth"] > 0


def test_inspect_escapes_hostile_names_and_refuses_a_modified_file(built, tmp_path, capsys):
    _, model, _ = built
    obj = json.loads(model.read_text())
    obj["model"]["meta"] = {"\x1b]0;owned\x07": "x", "layout": ["y"] * 5000}
    obj["sha256"] = canonical_hash(obj["model"])
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(obj))
    assert main(["inspect", str(hostile)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "characters omitted" in out
    obj["model"]["meta"] = {"construction": "ks25-next-token"}  # hash not updated
    hostile.write_text(json.dumps(obj))
    assert main(["inspect", str(hostile)]) == 2
    assert "SHA-256 mismatch" in capsys.readouterr().err


def test_predict_prints_exact_outputs_beside_the_labels(built, capsys):
    from exactmem.files.dataset_files import load_dataset

    data, model, _ = built
    labels = load_dataset(data).labels
    assert main(["predict", str(model), "--data", str(data), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [f"points[{i}]: {y}  label {y}" for i, y in enumerate(labels)]
    code, said = run_json(capsys, ["predict", str(model), "--data", str(data), "--json"])
    assert code == 0 and said["positions"] == "last"
    assert said["outputs"] == [[[str(y)]] for y in labels] and said["labels"] == list(labels)


def test_predict_on_sequences_and_bad_input(tmp_path, capsys):
    data, model = tmp_path / "s.json", tmp_path / "m.json"
    gen = ["generate", "seq2seq", "--N", "4", "--n", "3", "--d", "2", "--vocab", "6", "--C", "3"]
    assert main([*gen, "--out", str(data)]) == 0
    build = ["build", "--construction", "ks25-seq2seq", "--data", str(data), "--out", str(model)]
    assert main([*build, "--quiet"]) == 0
    code, said = run_json(capsys, ["predict", str(model), "--data", str(data), "--json"])
    assert code == 0 and said["positions"] == "all"
    assert [[int(v[0]) for v in seq] for seq in said["outputs"]] == said["labels"]
    points = tmp_path / "p.json"
    assert main(["generate", "points", "--N", "3", "--d", "5", "--out", str(points)]) == 0
    capsys.readouterr()
    assert main(["predict", str(model), "--data", str(points)]) == 2
    assert "dimension" in capsys.readouterr().err


@pytest.fixture(scope="module")
def softmax_model(tmp_path_factory):
    """A Mahdavi et al. model with softmax attention (no exact outputs) and its dataset."""
    tmp = tmp_path_factory.mktemp("softmax")
    data, model = tmp / "a.json", tmp / "m.json"
    assert main(["generate", "attention", "--N", "6", "--n", "4", "--d", "6", "--C", "3",
                 "--out", str(data), "--quiet"]) == 0  # fmt: skip
    build = ["build", "--construction", "mahdavi24", "--data", str(data), "--out", str(model)]
    sets = ["--set", "score=softmax", "--set", "readout=classification", "--quiet"]
    assert main([*build, *sets]) == 0
    return data, model


def test_predict_on_softmax_prints_bounds_and_the_certified_argmax(softmax_model, capsys):
    from gmpy2 import mpq

    from exactmem.files.dataset_files import load_dataset

    data, model = softmax_model
    labels = load_dataset(data).labels
    assert main(["predict", str(model), "--data", str(data), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "BOUNDS" in lines[0] and "certified argmax" in lines[0]
    assert [line.split(": argmax ")[1].split()[0] for line in lines[1:]] == list(map(str, labels))
    assert all(line.endswith(f"label {y}") for line, y in zip(lines[1:], labels, strict=True))
    code, said = run_json(capsys, ["predict", str(model), "--data", str(data), "--json"])
    assert code == 0 and said["exact"] is False and "outputs" not in said
    assert said["argmax"] == [[y] for y in labels]
    for seq, (y,) in zip(said["bounds"], said["argmax"], strict=True):
        (col,) = seq  # the last position
        lo_hi = [(mpq(lo), mpq(hi)) for lo, hi in col]
        assert all(lo <= hi for lo, hi in lo_hi)
        assert all(hi < lo_hi[y - 1][0] for j, (_, hi) in enumerate(lo_hi) if j != y - 1)


def test_predict_on_softmax_exits_4_when_an_argmax_cannot_be_decided(
    softmax_model, tmp_path, capsys
):
    """Two outputs read the same lane: their enclosures overlap at every precision."""
    from dataclasses import replace

    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model, save_model

    data, model = softmax_model
    m, _ = load_model(model)
    rows = list(m.unembed.rows)
    rows[1] = rows[0]
    tied = tmp_path / "tied.json"
    save_model(replace(m, unembed=replace(m.unembed, rows=tuple(rows))), tied)
    assert main(["predict", str(tied), "--data", str(data), "--quiet"]) == 4
    err = capsys.readouterr().err
    named = re.search(r"sequences\[(\d+)\]: the argmax is not decided at (\d+) bits", err)
    assert named and "overlap" in err
    assert load_dataset(data).labels[int(named[1])] in (
        1,
        2,
    )  # a sequence whose top output is one of the tied


def test_predict_on_a_one_output_softmax_model_prints_enclosures(tmp_path, capsys):
    from gmpy2 import mpq

    data, model = tmp_path / "a.json", tmp_path / "m.json"
    assert main(["generate", "attention", "--N", "5", "--n", "4", "--d", "6", "--C", "3",
                 "--out", str(data), "--quiet"]) == 0  # fmt: skip
    build = ["build", "--construction", "mahdavi24", "--data", str(data), "--out", str(model)]
    assert main([*build, "--set", "score=softmax", "--quiet"]) == 0
    code, said = run_json(capsys, ["predict", str(model), "--data", str(data), "--json"])
    assert code == 0 and said["argmax"] == [[None]] * 5
    for (col,), y in zip(said["bounds"], said["labels"], strict=True):
        ((lo, hi),) = col
        assert mpq(lo) <= mpq(hi) and abs(mpq(lo) - y) < mpq(1, 100)  # within the tolerance


def test_plot_json(built, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    _, _, cert = built
    out = tmp_path / "margins.svg"
    code, said = run_json(capsys, ["plot", "certificate", str(cert), "--out", str(out), "--json"])
    assert code == 0 and said["path"] == str(out) and said["format"] == "svg"
    assert said["file_sha256"] == __import__("hashlib").sha256(out.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- progress


def test_progress_draws_percentage_and_eta_on_a_terminal():
    stream = io.StringIO()
    p = Progress(True, stream=stream, bars=True)
    for i in range(5):
        tell(p, f"layer {i}", phase="evaluating f2", done=i, total=4)
    text = stream.getvalue()
    assert "evaluating f2" in text and "%" in text and "<" in text  # [elapsed<remaining]


def test_progress_is_off_when_stderr_is_not_a_terminal_or_quiet():
    stream = io.StringIO()  # not a terminal: no bars, no throttled lines, milestones only
    p = Progress(True, stream=stream)
    assert p.bars is False
    tell(p, "layer 1", phase="x", done=1, total=4)
    p("a note")
    p("a milestone", force=True)
    with p.phase("building"):
        pass
    assert stream.getvalue().endswith("a milestone\n") and stream.getvalue().count("\n") == 1
    quiet = io.StringIO()
    q = Progress(False, stream=quiet, bars=True)
    tell(q, "layer 1", phase="x", done=1, total=4)
    q("a milestone", force=True)
    assert quiet.getvalue() == ""


def test_tell_keeps_plain_callables_working():
    said = []
    tell(said.append, "layer 3/9", phase="x", done=3, total=9)
    tell(said.append, "", phase="x", done=3, total=9)  # a fraction alone: nothing to say
    tell(None, "ignored")
    assert said == ["layer 3/9"]


def test_the_evaluators_report_fractions(built):
    from exactmem.api import load_model, run
    from exactmem.files.dataset_files import load_dataset

    data, model, _ = built

    class Reporter:
        def __init__(self):
            self.seen = []

        def __call__(self, message):
            pass

        def fraction(self, phase, done, total, message=""):
            self.seen.append((phase, done, total))

    for evaluator in ("fast", "reference"):
        reporter = Reporter()
        run(load_model(model), load_dataset(data), evaluator=evaluator, progress=reporter)
        seen = reporter.seen
        assert seen and all(0 <= d < t for _, d, t in seen), evaluator
        assert seen[0][0].startswith("evaluating")


def test_json_on_stdout_is_the_same_with_progress(built, capsys):
    data, model, _ = built
    argv = ["verify", str(model), "--data", str(data), "--json"]
    _, loud = run_json(capsys, argv)
    _, quiet = run_json(capsys, [*argv, "--quiet"])
    for said in (loud, quiet):
        said["subject"].pop("argv", None)
    assert loud == quiet


def test_help_is_fast_and_loads_no_progress_library():
    code = (
        "import sys; from exactmem.commands.main import main\n"
        "try:\n    main(['verify', '--help'])\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('tqdm', 'argcomplete', 'numpy', 'gmpy2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- completion


def test_completion_is_optional(monkeypatch, capsys):
    """Without argcomplete the parser works unchanged, even when a shell asks to complete."""
    monkeypatch.setitem(sys.modules, "argcomplete", None)  # import fails
    monkeypatch.setenv("_ARGCOMPLETE", "1")
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("exactmem ")


def test_completion_with_argcomplete(tmp_path):
    pytest.importorskip("argcomplete")
    out = tmp_path / "completions"
    line = "exactmem ver"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
    }
    subprocess.run([sys.executable, "-m", "exactmem"], env=env, check=True, timeout=60)
    assert out.read_text().split() == ["verify"]


# --------------------------------------------------------------------------- README


def has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def readme_synopsis() -> list[str]:
    """The lines of the README's command block (the fenced block after "## Command line")."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Command line", 1)[1]
    block = section.split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_says_which_synopsis_line_needs_an_extra():
    """The README's claim that every line runs as pasted holds only with the extras named
    before the block: the plot line needs matplotlib (issue 30)."""
    text = (ROOT / "README.md").read_text()
    intro = text.split("## Command line", 1)[1].split("```", 1)[0]
    if any(shlex.split(line)[1] == "plot" for line in readme_synopsis()):
        assert "[plot]" in intro, "the README's plot line needs the [plot] extra: say so"


def test_readme_synopsis_lines_run_as_pasted(tmp_path):
    lines = readme_synopsis()
    assert len(lines) >= 10 and all(line.startswith("exactmem ") for line in lines)
    commands = {shlex.split(line)[1] for line in lines}
    assert commands >= {"generate", "build", "verify", "show", "inspect", "predict", "check"}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    # the installed console script where there is one beside this Python (it is
    # exactmem.commands.main:main, as `python -m exactmem` is)
    script = Path(sys.executable).with_name("exactmem")
    program = [str(script)] if script.is_file() else [sys.executable, "-m", "exactmem"]
    for line in lines:
        argv = shlex.split(line)
        assert not any(c in line for c in "[]|<>"), f"not copy-pastable: {line}"
        if argv[1] == "plot" and not has_matplotlib():
            continue  # the [plot] extra
        done = subprocess.run(
            [*program, *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{line}\n{done.stderr[-2000:]}"


def test_an_outer_bar_stays_above_the_phases():
    stream = io.StringIO()
    p = Progress(True, stream=stream, bars=True)
    tell(p, "", phase="claim instances", done=0, total=2, outer=True)
    with p.phase("building ks25"):
        pass
    tell(p, "layer 1", phase="evaluating f2", done=1, total=3)
    tell(p, "", phase="claim instances", done=1, total=2, outer=True)
    p.close()
    text = stream.getvalue()
    assert "claim instances:  50%" in text and "building ks25: 00:00 elapsed" in text
    assert "evaluating f2:   0%" in text  # drawn at once; later steps at most 4 times a second
    assert p._ticker is None and p._bar is None and p._outer is None


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "{missing}"],
        ["inspect", "{data}"],  # a dataset is not a model
        ["predict", "{missing}", "--data", "{data}"],
        ["predict", "{model}", "--data", "{model}"],  # a model is not a dataset
        ["show", "{data}"],
    ],
)
def test_reading_commands_refuse_the_wrong_file(built, tmp_path, capsys, argv):
    data, model, _ = built
    paths = {"missing": tmp_path / "missing.json", "data": data, "model": model}
    capsys.readouterr()
    assert main([a.format(**paths) for a in argv]) == 2
    said = capsys.readouterr()
    assert said.out == "" and said.err.startswith("error:") and "Traceback" not in said.err


@pytest.mark.parametrize("value", ["٣", "１２", "1_000", "3.0", "", "9" * 31])
def test_integer_flags_take_ascii_digits_only(value, capsys):
    """``int`` alone reads Arabic-Indic and full-width digits and underscores: every integer
    flag of the command line takes ASCII digits (at most 30), else exits 2 naming the flag."""
    with pytest.raises(SystemExit) as stop:
        main(["generate", "points", "--N", value, "--d", "2", "--C", "2", "--out", "x.json"])
    assert stop.value.code == 2
    assert "argument --N: expected an integer in ASCII digits" in capsys.readouterr().err
