"""``exactmem bounds --latex``: the table of the field as a standalone LaTeX document."""

from __future__ import annotations


def latex_document(rows: list[dict], measured: list[dict], sizes: dict | None = None) -> str:
    """The table as a standalone LaTeX document (pdflatex; packages booktabs and geometry):
    every special character escaped, every formula in math mode, every character ASCII. The
    table alone is the ``tabular`` environment (it needs the booktabs package)."""
    import re

    symbols = {
        "ω": r"\omega", "Ω": r"\Omega", "Θ": r"\Theta", "π": r"\pi", "δ": r"\delta",
        "φ": r"\varphi", "ρ": r"\rho", "λ": r"\lambda", "ε": r"\varepsilon", "ℓ": r"\ell",
        "Õ": r"\tilde{O}", "≥": r"\geq", "≤": r"\leq", "≠": r"\neq", "≈": r"\approx",
        "×": r"\times", "·": r"\cdot", "⌈": r"\lceil", "⌉": r"\rceil", "⌊": r"\lfloor",
        "⌋": r"\rfloor", "′": "'", "−": "-", "∞": r"\infty", "→": r"\to", "<": "<", ">": ">",
        "|": "|",
    }  # fmt: skip
    text_only = {
        "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "#": r"\#", "$": r"\$",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "_": r"\_",
        "^": r"\textasciicircum{}", "–": "--", "—": "---", "…": r"\dots{}",
    }  # fmt: skip
    math_only = {
        "\\": r"\backslash{}", "&": r"\&", "%": r"\%", "#": r"\#", "$": r"\$", "{": r"\{",
        "}": r"\}", "~": r"\sim{}", "–": "-", "—": "-", "…": r"\dots{}", " ": " ",
    }  # fmt: skip
    scripts = {
        "^": dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789", strict=True)),
        "_": dict(zip("₀₁₂₃₄₅₆₇₈₉", "0123456789", strict=True)),
    }
    functions = {"log", "min", "max", "exp"}

    def tex(text: str, math: bool = False) -> str:
        """``text`` in LaTeX; formulas (√, Greek, super- and subscripts, R^d) in math mode."""

        def wrap(body: str) -> str:
            return body if math else rf"\ensuremath{{{body}}}"

        out, i = [], 0
        while i < len(text):
            ch = text[i]
            script = re.match(r"([A-Za-z])([\^_])([A-Za-z0-9]+)", text[i:])
            if ch == "√":  # √x or √(…): the argument under the root
                j = i + 1
                if text[j : j + 1] == "(":
                    depth, k = 0, j
                    while k < len(text):
                        depth += {"(": 1, ")": -1}.get(text[k], 0)
                        if depth == 0:
                            break
                        k += 1
                    arg, i = text[j + 1 : k], k + 1
                else:
                    arg = (re.match(r"[A-Za-z0-9]+|.?", text[j:], re.S) or [""])[0]
                    i = j + len(arg)
                out.append(wrap(rf"\sqrt{{{tex(arg, True)}}}"))
                continue
            if script and (i == 0 or not text[i - 1].isalnum()):  # R^d, d_h
                base, mark, arg = script.groups()
                out.append(wrap(f"{base}{mark}{{{arg}}}"))
                i += script.end()
                continue
            marks = [m for m, table in scripts.items() if ch in table]
            if marks:  # a run of ² or ₂ characters
                table, j = scripts[marks[0]], i
                while j < len(text) and text[j] in table:
                    j += 1
                digits = "".join(table[c] for c in text[i:j])
                if math:
                    out.append(f"{marks[0]}{{{digits}}}")
                else:
                    out.append(rf"\text{'super' if marks[0] == '^' else 'sub'}script{{{digits}}}")
                i = j
                continue
            word = re.match(r"[A-Za-z]+", text[i:])
            if math and word:
                out.append(rf"\{word[0]} " if word[0] in functions else word[0])
                i += word.end()
                continue
            if ch in symbols:  # a macro gets a space, so that \omega N is not \omegaN
                macro = symbols[ch] + (" " if symbols[ch].startswith("\\") else "")
                out.append(macro if math else rf"\ensuremath{{{symbols[ch]}}}")
            elif math and text[i : i + 2] == ", ":
                out.append(r",\ ")
                i += 1
            else:
                out.append((math_only if math else text_only).get(ch, ch))
            i += 1
        return "".join(out)

    def plain(text: str) -> str:
        return "".join(text_only.get(ch, ch) for ch in text)

    head = ["#", "work", "setting", "bound", "constant", "value"]
    ragged = r">{\raggedright\arraybackslash}p"
    widths = ("4.6cm", "5.4cm", "8cm", "3.2cm")  # landscape A4 less 1.5 cm margins: 26.7 cm
    lines = [r"\begin{tabular}{@{}r " + " ".join(f"{ragged}{{{w}}}" for w in widths) + " r@{}}"]
    lines += [r"\toprule", " & ".join(plain(h) for h in head) + r" \\", r"\midrule"]
    for k, r in enumerate(rows, 1):
        bound = f"{r['kind']}, {tex(r['quantity'])}: ${tex(r['order'], True)}$"
        lines.append(
            f"{k} & {tex(r['work'])} & {tex(r['setting'])} & {bound} & "
            f"{tex(r['constant'])} & {tex(r['value'] or r['status'])} \\\\"
        )
    if measured:
        lines.append(r"\midrule")
        for m in measured:
            lines.append(
                f" & exactmem {tex(m['construction'])} & {tex(m['task'])} & measured dense "
                f"parameters; {tex(m['verdict'])} & exact count & {m['dense_parameters']} \\\\"
            )
    lines += [r"\bottomrule", r"\end{tabular}"]

    at = (
        ", ".join(f"${tex(k if k != 'omega' else 'ω', True)} = {v}$" for k, v in sizes.items())
        if sizes
        else "the sizes given"
    )
    notes = [
        rf"\item[{k}] {tex(r['source'])}; ${tex(r['order'], True)}$"
        + (f"; {tex(r['note'])}" if r.get("note") else "")
        + rf"\\ \texttt{{{plain(r['formula'])}}}"
        for k, r in enumerate(rows, 1)
    ]
    return "\n".join(
        [
            "% exactmem bounds --latex: a standalone document (pdflatex). The table alone is the",
            r"% tabular environment; it needs \usepackage{array,booktabs} in your preamble.",
            r"\documentclass[10pt]{article}",
            r"\usepackage[a4paper,landscape,margin=1.5cm]{geometry}",
            r"\usepackage{array,booktabs}",
            r"\begin{document}",
            r"\small",
            r"\noindent Parameter bounds of memorization results at " + at + r", with "
            r"$r = \delta = 1$ and logarithms to base 2. ``Order only, constant 1'' rows show "
            r"the stated order with every hidden constant set to 1: for comparing growth, "
            r"never as a bound."
            + (
                " Measured rows: exactmem's own constructions, built and certified on random "
                "data of these sizes."
                if measured
                else ""
            ),
            r"\par\medskip",
            r"\noindent",
            *lines,
            r"\par\medskip",
            r"\noindent Sources, orders and the formulas evaluated (as \texttt{exactmem} "
            r"parses them):",
            r"\begin{description}\sloppy",
            *notes,
            r"\end{description}",
            r"\end{document}",
            "",
        ]
    )
