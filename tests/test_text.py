"""Your own text as next-token windows (exactmem.datasets.text, `generate text`)."""

import json

import numpy as np
import pytest
from gmpy2 import mpq
from hypothesis import given, settings
from hypothesis import strategies as st
from support import text_windows as windows

from exactmem.checks.certify import certify
from exactmem.commands.main import main
from exactmem.constructions import ks25
from exactmem.core.errors import InputError
from exactmem.datasets import text as text_mod
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import check_consistency
from exactmem.datasets.text import _first_clash, read_text, split
from exactmem.files.dataset_files import load_dataset

CAT = "the cat sat on the mat. the mat sat on the cat!"


def test_char_units_keep_every_character():
    u = split("ab c\nd", "char")
    assert u.symbols == ("a", "b", " ", "c", "\n", "d")
    assert u.span(1, 3) == "b c"
    assert u.place(5) == "line 2, column 1"


def test_word_units_split_on_white_space_and_punctuation():
    u = split("Don't panic — it's well-known: naïve café, 42 times_2!", "word")
    assert u.symbols == (
        "Don't",
        "panic",
        "—",
        "it's",
        "well-known",
        ":",
        "naïve",
        "café",
        ",",
        "42",
        "times_2",
        "!",
    )
    assert u.span(6, 2) == "naïve café"  # the span as it stands in the text


def test_windows_label_each_window_by_the_next_unit():
    ds = windows("abcbd", 2)
    assert ds.meta["symbols"] == ["a", "b", "c", "d"]
    assert ds.vocab == tuple((mpq(i),) for i in (1, 2, 3, 4))
    assert ds.sequences == ((0, 1), (1, 2), (2, 1))
    assert ds.labels == (3, 2, 4)
    symbols = ds.meta["symbols"]
    assert [symbols[y - 1] for y in ds.labels] == ["c", "b", "d"]
    assert ds.num_classes == 4 and ds.size == 5 - 2 and ds.task == "next-token"
    assert ds.meta["position_aware"] is False and ds.meta["window"] == 2


def test_utf8_text_and_word_windows():
    ds = windows("zwölf Äpfel, zwölf Birnen; elf Äpfel.", 2, "word")
    symbols = ds.meta["symbols"]
    assert symbols[:3] == ["zwölf", "Äpfel", ","]
    window = [symbols[t] for t in ds.sequences[0]]
    assert window == ["zwölf", "Äpfel"] and symbols[ds.labels[0] - 1] == ","


def test_identical_windows_with_different_next_units_are_refused_naming_both():
    with pytest.raises(InputError) as err:
        windows("abcabd", 2, source="corpus.txt")
    msg = str(err.value)
    assert "corpus.txt" in msg
    assert 'line 1, column 1 and line 1, column 4 are both "ab"' in msg
    assert 'followed by "c" and "d"' in msg
    assert "cannot be memorized by any model" in msg
    assert "smallest window without such a pair is 3" in msg


def test_the_smallest_window_named_is_the_smallest_that_works():
    text = "to be or not to be, that is the question: to be"
    with pytest.raises(InputError, match=r"is (\d+) \(--window") as err:
        windows(text, 1)
    w = int(str(err.value).rsplit("--window ", 1)[1].rstrip(")"))
    windows(text, w)
    with pytest.raises(InputError, match="cannot be memorized"):
        windows(text, w - 1)


def test_positions_when_permuted_windows_need_them():
    plain = windows("the cat sat on the mat", 3, "word")
    assert plain.meta["position_aware"] is False and plain.dim == 1
    ds = windows(CAT, 6, "word")
    assert ds.meta["position_aware"] is True and ds.dim == 2
    because = ds.meta["positions_because"]
    assert because == (
        'the windows at line 1, column 9 ("sat on the mat. the") and at line 1, column 23 '
        '(". the mat sat on the") have the same last word and the same words in another order, '
        'but are followed by "mat" and "cat"'
    )
    # token k of a window is (symbol id, k)
    first = [ds.vocab[t] for t in ds.sequences[0]]
    assert [v[1] for v in first] == [mpq(k) for k in range(1, 7)]
    assert [int(v[0]) for v in first] == [1, 2, 3, 4, 1, 5]
    with pytest.raises(InputError, match="without positional encoding cannot tell them apart"):
        windows(CAT, 6, "word", positions="never")
    always = windows("the cat sat on the mat", 3, "word", positions="always")
    assert always.meta["position_aware"] is True and always.dim == 2


def test_a_position_aware_text_builds_and_certifies_without_options():
    ds = windows(CAT, 6, "word")
    plain = Dataset(  # the same windows without their positions
        ds.task, ds.labels, ds.num_classes, vocab=tuple(v[:1] for v in ds.vocab),
        sequences=ds.sequences,
    )  # fmt: skip
    with pytest.raises(InputError, match="1 label conflict: "):
        ks25.build(plain, {})
    model, _ = ks25.build(ds, {"seed": 1})
    cert = certify(model, ds, construction="ks25-next-token")
    assert cert.verdict == "verified"
    assert cert.subject["criteria"]["inputs"] == "vectors"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="ab c", min_size=2, max_size=40), st.integers(1, 6))
def test_every_dataset_of_windows_is_consistent(text, window):
    """Whatever windows() returns, the Kajitsuka–Sato consistency check accepts; whatever it
    refuses is refused with an InputError."""
    try:
        ds = windows(text, window)
    except InputError:
        return
    check_consistency(ds)
    assert ds.size == len(text) - window


@pytest.mark.parametrize(
    ("window", "unit", "match"),
    [
        (0, "char", "window must be an integer ≥ 1"),
        (-3, "char", "window must be an integer ≥ 1"),
        (True, "char", "window must be an integer ≥ 1"),
        (5, "char", "5 chars, so a window of 5 leaves no char to predict"),
        (9, "char", "at most 4"),
        (2, "word", "1 words, so a window of 2"),
        (1, "byte", "unit must be one of char, word"),
    ],
)
def test_bad_windows(window, unit, match):
    with pytest.raises(InputError, match=match):
        windows("hello", window, unit)


def test_no_words_and_bad_positions():
    with pytest.raises(InputError, match="no words"):
        windows("   ", 1, "word")
    with pytest.raises(InputError, match="positions must be"):
        windows("hello", 1, positions="sometimes")


def test_too_many_tokens(monkeypatch):
    monkeypatch.setattr(text_mod, "MAX_TOKENS", 10)
    with pytest.raises(InputError, match="hold 12 tokens, at most 10"):
        windows("abcdefgh", 2)


def test_read_text_rejects_bad_files(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="cannot read"):
        read_text(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="cannot read"):
        read_text(tmp_path)  # a directory
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty.txt: empty$"):
        read_text(empty)
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b" \n\t\n")
    with pytest.raises(InputError, match="empty \\(white space only\\)"):
        read_text(blank)
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(InputError, match="binary data \\(a NUL byte at offset 8\\)"):
        read_text(binary)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8 text \\(byte 3\\)"):
        read_text(latin)
    big = tmp_path / "big.txt"
    big.write_text("x" * 101)
    monkeypatch.setattr(text_mod, "MAX_BYTES", 100)
    with pytest.raises(InputError, match="101 bytes, at most 100"):
        read_text(big)


def test_read_text_keeps_the_text_and_drops_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffnaïve\r\ntext".encode())
    assert read_text(path) == "naïve\r\ntext"


# --------------------------------------------------------------------------- CLI


def test_generate_text_writes_a_dataset(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\n")
    out = tmp_path / "data.json"
    rc = main(["generate", "text", "--file", str(corpus), "--window", "8", "--out", str(out)])
    assert rc == 0
    said = capsys.readouterr()
    assert "15 windows of 8 chars" in said.out and "tokens in Q^1" in said.out
    assert said.err == ""
    ds = load_dataset(out)
    assert ds.size == 15 and ds.meta["symbols"][0] == "t" and ds.meta["generator"] == "text"
    assert json.loads(out.read_text())["meta"]["window"] == 8


def test_generate_text_says_when_tokens_carry_positions(tmp_path, capsys):
    corpus = tmp_path / "cat.txt"
    corpus.write_text(CAT)
    out = tmp_path / "data.json"
    args = ["generate", "text", "--file", str(corpus), "--window", "6", "--unit", "word"]
    assert main([*args, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: tokens carry their position (symbol id, k) in Q^2, because")
    assert load_dataset(out).meta["position_aware"] is True


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--file", "{dir}/missing.txt", "--window", "3"], "missing.txt: cannot read"),
        (["--file", "{dir}/corpus.txt"], "needs --file FILE and --window W"),
        (["--window", "3"], "needs --file FILE and --window W"),
        (["--file", "{dir}/corpus.txt", "--window", "0"], "window must be an integer ≥ 1"),
        (["--file", "{dir}/corpus.txt", "--window", "99"], "leaves no char to predict"),
        (["--file", "{dir}/corpus.txt", "--window", "1"], "cannot be memorized by any model"),
    ],
)
def test_generate_text_bad_input_exits_2(tmp_path, capsys, args, match):
    (tmp_path / "corpus.txt").write_text("the cat sat on the mat\n")
    argv = ["generate", "text", *(a.format(dir=tmp_path) for a in args)]
    assert main([*argv, "--out", str(tmp_path / "d.json")]) == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "d.json").exists()


def test_file_and_window_belong_to_generate_text(tmp_path, capsys):
    out = str(tmp_path / "d.json")
    assert main(["generate", "points", "--N", "3", "--window", "2", "--out", out]) == 2
    assert "--file and --window belong to generate text" in capsys.readouterr().err


def test_text_to_certificate(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Exact arithmetic does not round.\n")
    data, model, cert = (str(tmp_path / n) for n in ("d.json", "m.json", "c.json"))
    assert main(["generate", "text", "--file", str(corpus), "--window", "4", "--out", data]) == 0
    assert main(["build", "--construction", "ks25-next-token", "--data", data, "--out", model,
                 "--quiet"]) == 0  # fmt: skip
    rc = main(["verify", model, "--data", data, "--construction", "ks25-next-token", "--quiet",
               "--certificate", cert])  # fmt: skip
    assert rc == 0
    assert "all 29 labels reproduced exactly" in capsys.readouterr().out


def _smallest_by_brute_force(text: str) -> int:
    for w in range(1, len(text)):
        try:
            windows(text, w)
            return w
        except InputError as exc:
            if "cannot be memorized" not in str(exc):
                return w
    raise AssertionError("the last window always works")


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet="ab", min_size=3, max_size=50))
def test_the_window_named_matches_brute_force(text):
    try:
        windows(text, 1)
    except InputError as exc:
        named = int(str(exc).rsplit("--window ", 1)[1].rstrip(")"))
        assert named == _smallest_by_brute_force(text)


def test_the_window_named_on_a_thue_morse_text():
    """Thue–Morse text makes polynomial hashes mod 2⁶⁴ collide (here a single one would name
    3073); the second hash, mod 2³¹ − 1, holds. Reference: bisection with exact comparisons."""
    text = "".join("ab"[bin(i).count("1") % 2] for i in range(4096))
    stream = np.array([ord(c) for c in text], np.int64)
    lo, hi = 1, len(stream) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        rows = np.lib.stride_tricks.sliding_window_view(stream, mid)[: len(stream) - mid]
        lo, hi = (lo, mid) if _first_clash(rows, stream[mid:]) is None else (mid + 1, hi)
    assert lo == 1025
    with pytest.raises(InputError, match=r"the smallest window without such a pair is 1025 "):
        windows(text, 1)
