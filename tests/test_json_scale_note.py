"""Above 10⁵ rows, generate, build and convert point to the binary container: a note on stderr
names the JSON files and the convert command (README: "Which file format")."""

from exactmem.commands.main import main
from exactmem.core.outputs import JSON_ROWS_NOTE, note_json_at_scale


def test_the_note_names_the_json_files_above_the_threshold(capsys):
    note_json_at_scale(JSON_ROWS_NOTE, {"--out": "data.json"})
    assert capsys.readouterr().err == ""  # at 10⁵ rows JSON is still fine
    note_json_at_scale(JSON_ROWS_NOTE + 1, {"--data": "big.json.gz", "--out": "model.exm"})
    err = capsys.readouterr().err
    assert err.startswith("note: 100001 rows in JSON (--data big.json.gz)")
    assert "`exactmem convert big.json.gz big.exm`" in err and "model.exm" not in err
    note_json_at_scale(JSON_ROWS_NOTE + 1, {"--data": "big.exm", "--out": "model.exm"})
    assert capsys.readouterr().err == ""  # nothing to say when every file is .exm


def test_generate_says_it_when_writing_json(tmp_path, capsys):
    argv = ["generate", "points", "--N", str(JSON_ROWS_NOTE + 1), "--d", "2", "--C", "2"]
    assert main([*argv, "--out", str(tmp_path / "big.exm"), "--quiet"]) == 0
    assert "note:" not in capsys.readouterr().err
    assert main([*argv, "--out", str(tmp_path / "big.json"), "--quiet"]) == 0
    said = capsys.readouterr()
    assert "note: 100001 rows in JSON (--out " in said.err and "big.exm`" in said.err
    assert "note" not in said.out  # results on stdout, notes on stderr
    assert main(["convert", str(tmp_path / "big.exm"), str(tmp_path / "back.json"), "--quiet"]) == 0
    assert "note: 100001 rows in JSON (OUT " in capsys.readouterr().err
