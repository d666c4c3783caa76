"""`exactmem bounds --latex`: a standalone document that pdflatex compiles.

The structure is always checked (balanced environments and braces, math mode closed, special
characters escaped, every row of the table as many columns as its header, ASCII only); where
pdflatex is installed the document is compiled too.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from exactmem.commands.main import main
from exactmem.commands.parser import _latex
from exactmem.reports.field import evaluate_rows

SIZES = {"N": 1000, "n": 16, "d": 8, "omega": 1000, "C": 10}
HOSTILE = {  # a measured row made of every character LaTeX treats specially
    "construction": "a_b & c",
    "task": "100% #1 $x^2$ {~} \\ – R^d ≥ ω",
    "verdict": "verified",
    "dense_parameters": 42,
}
CONSTANTS = {"order only, constant 1", "paper's", "exact count", "exact count (reconstructed)"}


def _unescaped(text: str, char: str) -> list[int]:
    """Positions of ``char`` not preceded by a backslash (an escaped ``\\&`` is text)."""
    return [m.start() for m in re.finditer(rf"(?<!\\){re.escape(char)}", text)]


def _cells(line: str) -> list[str]:
    body = line.removesuffix(r"\\").strip()
    cells, start = [], 0
    for at in _unescaped(body, "&"):
        cells.append(body[start:at].strip())
        start = at + 1
    cells.append(body[start:].strip())
    return cells


def _width(cells: list[str]) -> int:
    """Columns a row spans (``\\multicolumn{k}`` counts k)."""
    spans = [re.match(r"\\multicolumn\{(\d+)\}", c) for c in cells]
    return sum(int(m.group(1)) if m else 1 for m in spans)


def check_structure(doc: str) -> list[list[str]]:
    """Assert that ``doc`` is a well-formed standalone document; returns the table's rows
    (header first) as lists of cells."""
    assert doc.isascii(), sorted({c for c in doc if not c.isascii()})
    body = "\n".join(line for line in doc.splitlines() if not line.startswith("%"))
    assert body.lstrip().startswith(r"\documentclass"), "no \\documentclass"
    assert re.search(r"\\usepackage\{[^}]*\bbooktabs\b[^}]*\}", body), "booktabs not loaded"
    stack = []
    for m in re.finditer(r"\\(begin|end)\{([^}]*)\}", body):
        if m.group(1) == "begin":
            stack.append(m.group(2))
        else:
            assert stack and stack.pop() == m.group(2), f"unbalanced \\end{{{m.group(2)}}}"
    assert not stack, f"unclosed environments {stack}"
    assert body.rstrip().endswith(r"\end{document}")
    depth = 0
    for m in re.finditer(r"(?<!\\)[{}]", body.replace("\\\\", "  ")):
        depth += 1 if m.group() == "{" else -1
        assert depth >= 0, f"unbalanced }} at {m.start()}"
    assert depth == 0, "unbalanced {"
    # outside math, the specials %, #, _, ^, ~ and $ must be escaped; math is $...$ and
    # \ensuremath{...} (the latter holds no braces of its own but a \sqrt{..} or ^{..})
    text = body.replace("\\\\", "  ")
    assert len(_unescaped(text, "$")) % 2 == 0, "math mode left open"
    text = re.sub(r"(?<!\\)\$.*?(?<!\\)\$", "", text)
    text = re.sub(r"\\ensuremath\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}", "", text)
    text = re.sub(r"\\(?:text(?:super|sub)script|texttt|usepackage|item)(\[[^]]*\])?", "", text)
    for char in "%#_^~":
        bad = _unescaped(text, char)
        assert not bad, f"unescaped {char!r} near {text[bad[0] - 30 : bad[0] + 30]!r}"
    table = re.search(r"\\begin\{tabular\}\{[^\n]*\}\n(.*?)\\end\{tabular\}", body, re.S)
    assert table, "no tabular"
    rows = [
        _cells(line)
        for line in table.group(1).splitlines()
        if not re.fullmatch(r"\\(top|mid|bottom)rule", line.strip())
    ]
    for line in table.group(1).splitlines():
        if not re.fullmatch(r"\\(top|mid|bottom)rule", line.strip()):
            assert line.rstrip().endswith(r"\\"), f"row without \\\\: {line[:60]}"
    head = _width(rows[0])
    for row in rows:
        assert _width(row) == head, f"{_width(row)} columns, the header has {head}: {row}"
    return rows


@pytest.mark.parametrize("n", [4, 16])  # n < d: every row applies; n ≥ d: Mahdavi's is n/a
def test_the_document_is_well_formed(n):
    rows = evaluate_rows({**SIZES, "n": n})
    table = check_structure(_latex(rows, [HOSTILE], {**SIZES, "n": n}))
    assert table[0] == [r"\#", "work", "setting", "bound", "constant", "value"]
    assert len(table) == 1 + len(rows) + 1
    for cells in table[1:]:  # the constants column holds constants, never a verdict
        assert cells[4] in CONSTANTS, cells
    assert "verified" in table[-1][3] and table[-1][5] == "42"
    cells = " | ".join(" | ".join(row) for row in table)
    if n >= SIZES["d"]:
        assert r"n/a: needs n \ensuremath{<} d" in cells
    else:
        assert "n/a" not in cells


def test_formulas_are_in_math_mode():
    doc = _latex(evaluate_rows(SIZES), [], SIZES)
    assert r"N points in \ensuremath{R^{d}}" in doc  # R^d was outside math mode
    assert r"$\tilde{O} (d + \sqrt{N})$" in doc
    assert r"$\Omega (\sqrt{nN / \log (nN)})$" in doc
    assert r"\ensuremath{\sqrt{{\pi}d}}" not in doc and r"\ensuremath{\sqrt{\pi d}}" in doc
    assert r"$N = 1000$, $n = 16$, $d = 8$, $\omega  = 1000$, $C = 10$" in doc
    assert r"\usepackage{array,booktabs}" in doc


def test_the_cli_prints_the_document(capsys):
    assert main(["bounds", "--N", "100", "--n", "4", "--latex"]) == 0
    doc = capsys.readouterr().out
    check_structure(doc)
    assert "$N = 100$, $n = 4$" in doc


@pytest.mark.parametrize(
    "broken, said",
    [
        (r"\begin{document}x\end{document}", r"no \documentclass"),
        ("\\documentclass{article}\n\\begin{document}\nR^d\n\\end{document}", "booktabs"),
        (
            "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\\begin{tabular}"
            "{ll}\n\\toprule\na & b \\\\\nc \\\\\n\\bottomrule\n\\end{tabular}\\end{document}",
            "1 columns, the header has 2",
        ),
        (
            "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\nN in R^d\n"
            "\\end{document}",
            "unescaped '^'",
        ),
        (
            "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n100%\n"
            "\\end{document}",
            "unescaped '%'",
        ),
        ("\\documentclass{article}\\usepackage{booktabs}\\begin{document}$x", "unclosed"),
        (
            "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n$x\n\\end{document}",
            "math mode left open",
        ),
        ("\\documentclass{a}\\usepackage{booktabs}\\begin{document}ω\\end{document}", "'ω'"),
    ],
)
def test_the_structure_check_catches_broken_documents(broken, said):
    with pytest.raises(AssertionError, match=re.escape(said)):
        check_structure(broken)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize("n", [4, 16])
def test_pdflatex_compiles_the_document(tmp_path, n):
    doc = _latex(evaluate_rows({**SIZES, "n": n}), [HOSTILE], {**SIZES, "n": n})
    (tmp_path / "table.tex").write_text(doc)
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "table.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (tmp_path / "table.log").read_text(errors="replace")
    assert run.returncode == 0, log[-3000:]
    assert (tmp_path / "table.pdf").read_bytes()[:5] == b"%PDF-"
    for problem in ("Missing character", "Undefined control sequence", "Overfull \\hbox"):
        assert problem not in log, problem
