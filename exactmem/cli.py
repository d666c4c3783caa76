"""``python -m exactmem <command>`` — a thin layer over the library (DESIGN.md §5).

Results go to stdout (JSON with ``--json``), progress and logs to stderr. Exit codes:
0 verified, 1 refuted, 2 usage or invalid input, 3 internal error, 4 inconclusive,
5 nothing selected. Heavy modules are imported inside the commands so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence

from exactmem.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_REFUTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_VERIFIED,
    ExactmemError,
    InputError,
    Terminated,
)

CONSTRUCTIONS = {
    "vys": "Vardi, Yehudai & Shamir 2022, Theorem 3.1 / Kajitsuka & Sato 2025, Lemma C.1 "
    "(task points)",
    "ks25-next-token": "Kajitsuka & Sato 2025, Theorem 4.1: FFN + uniform attention + FFN, "
    "width 14 (task next-token)",
    "ks25-seq2seq": "Kajitsuka & Sato 2025, Corollary 4.1: labels at every position (task seq2seq)",
    "ks25-token-ids": "Kajitsuka & Sato 2025, Theorem E.1: an embedding table replaces F1 "
    "(task next-token; tokens are vocabulary indices)",
    "ks25-deep-sets": "Kajitsuka & Sato 2025, Theorem D.1: rho(sum phi) on multisets "
    "(task next-token, labels by multiset)",
    "ks25-bit-budget": "Kajitsuka & Sato 2025, Theorem F.1: memorizers split into sub-networks "
    "of B^2 points (needs --set bit_budget=B)",
}
CONSTRUCTIONS["mahdavi24"] = (
    "Mahdavi, Liao & Thrampoulidis 2024: one multi-head attention layer memorizes "
    "H(min(n, d_h) - 1) + 1 examples (task next-token: n context tokens, then the query)"
)
CONSTRUCTIONS["dana25"] = (
    "Dana, Pydi & Chevaleyre 2025: an attention-only Transformer memorizes H*d_h + d "
    "associations (task next-token over token ids)"
)


NUMBER_CHARS = 64  # --set numbers: 2⁶⁴ and p/q with p, q < 2⁶⁴ fit, 10⁷-digit strings do not
VALUE_CHARS = 10_000  # any --set value (paper_direction lists a rational per coordinate)


def _choice(*allowed: str):
    def parse(key: str, value: str):
        if value not in allowed:
            raise InputError(f"--set {key}={value}: expected one of {', '.join(allowed)}")
        return value

    return parse


def _positive(key: str, value: str) -> int:
    # ASCII only: str.isdigit also accepts "²" (which int() refuses) and "١٢" (which it reads)
    if not (value.isascii() and value.isdigit()) or len(value) > NUMBER_CHARS or int(value) < 1:
        raise InputError(
            f"--set {key}={value:.{NUMBER_CHARS}}: expected a positive integer in ASCII digits "
            f"(at most {NUMBER_CHARS} characters)"
        )
    return int(value)


def _boolean(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise InputError(f"--set {key}={value}: expected true or false")
    return value.lower() in ("true", "1", "yes")


MEMORIZER_OPTIONS = {
    "gadget": (
        "keyed (integer bit-peel with assembled keys, default; fast-evaluable) | peel "
        "(bit-peel matched on the packed integer) | tent (paper-style tent map)",
        _choice("keyed", "peel", "tent"),
    ),
    "group_size": ("slots per group K (default: the K of least depth)", _positive),
}
KS25_OPTIONS = {
    "gadget": MEMORIZER_OPTIONS["gadget"],
    "sequence_weights": (
        "random (default) | union (Lemma B.2's statement by a union bound) | paper (the "
        "printed construction, which fails)",
        _choice("random", "union", "paper"),
    ),
    "paper_direction": (
        "unit direction for sequence_weights=paper, e.g. 4/5,-3/5 (default: random, checked "
        "against Park's inequality)",
        lambda k, v: v,
    ),
    "attention": (
        "softmax (default) | hardmax | uniform: all scores are 0 either way",
        _choice("softmax", "hardmax", "uniform"),
    ),
    "position_aware": ("true: append the position k to every token (real text)", _boolean),
    "bit_budget": (
        "B: split each memorizer into sub-networks of B² points whose groups hold at most "
        "⌈B/√log₂B⌉ slots (Theorem F.1)",
        _positive,
    ),
}
OPTIONS = {
    "vys": {
        **MEMORIZER_OPTIONS,
        "direction_bound": ("|w_i| bound of the Stage I direction (default N²)", _positive),
        "bit_widths": (
            "corrected (default) | paper (ρ and c swapped as printed in Lemma C.1)",
            _choice("corrected", "paper"),
        ),
    },
    "ks25-next-token": KS25_OPTIONS,
    "ks25-seq2seq": KS25_OPTIONS,
    "ks25-deep-sets": KS25_OPTIONS,
    "ks25-bit-budget": KS25_OPTIONS,
    "ks25-token-ids": {k: v for k, v in KS25_OPTIONS.items() if k != "position_aware"},
    "dana25": {
        "d": ("embedding dimension (default 2)", _positive),
        "head_dim": ("d_h ≤ d (default d)", _positive),
        "heads": (
            "H (default: the fewest with H·d_h + min(d, k) ≥ T₀, k distinct last tokens)",
            _positive,
        ),
        "scale": ("λ_U: the target residual is λ_U·w_g (default 100)", _positive),
        "precision": ("bits of the Arb readout solve (default 256, doubled on failure)", _positive),
    },
    "mahdavi24": {
        "heads": ("H (default: the fewest with H(min(n, d_h) − 1) + 1 ≥ T)", _positive),
        "score": (
            "hardmax (default: the exact limit model) | softmax (finite temperature)",
            _choice("hardmax", "softmax"),
        ),
        "readout": (
            "regression (default: labels as real targets) | classification (C "
            "logits, certified argmax)",
            _choice("regression", "classification"),
        ),
        "temperature": (
            "softmax temperature λ (default: the least power of two that certifies)",
            lambda k, v: _rational_option(k, v),
        ),
        "readout_solve": (
            "limit (default: the exact hardmax readout) | resolve (re-solved on "
            "Arb balls at the temperature)",
            _choice("limit", "resolve"),
        ),
        "tolerance": (
            "allowed |output − label| for softmax regression (default 1/1000)",
            lambda k, v: str(_rational_option(k, v)),
        ),
        "over_capacity": (
            "true: build even when T > H(min(n, d_h) − 1) + 1 (the verifier refutes)",
            _boolean,
        ),
        "head_dim": ("d_h, 2 ≤ d_h ≤ d (default d): capacity H(min(n, d_h) − 1) + 1", _positive),
    },
}


def _rational_option(key: str, value: str):
    from exactmem.exact import parse_rational

    if len(value) > NUMBER_CHARS:
        raise InputError(f"--set {key}: more than {NUMBER_CHARS} characters")
    q = parse_rational(value, f"--set {key}")
    if q <= 0:
        raise InputError(f"--set {key}={value}: expected a positive rational")
    return str(q)


EPILOG = """exit codes: 0 verified, 1 refuted, 2 usage or invalid input (output paths are
checked before any work), 3 internal error, 4 inconclusive, 5 nothing selected,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM); files are written atomically, so an
interrupted or failed write leaves the previous file as it was"""


class Progress:
    """Throttled progress lines on stderr."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.start = time.perf_counter()
        self.last = 0.0

    def __call__(self, message: str, *, force: bool = False) -> None:
        now = time.perf_counter()
        if self.enabled and (force or now - self.last >= 1.0):
            self.last = now
            print(f"[{now - self.start:7.1f}s] {message}", file=sys.stderr, flush=True)


def parse_options(construction: str, items: Sequence[str]) -> dict:
    """``--set KEY=VALUE`` pairs, checked against the construction's options."""
    known = OPTIONS[construction]
    options: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--set {item[:80]!r}: expected KEY=VALUE")
        if key not in known:
            raise InputError(
                f"--set {key[:80]}: unknown option for {construction!r}; known: {', '.join(known)}"
            )
        if key in options:
            raise InputError(f"--set {key}: given twice; give each option once")
        if len(value) > VALUE_CHARS:
            raise InputError(f"--set {key}: the value has more than {VALUE_CHARS} characters")
        options[key] = known[key][1](key, value)
    return options


def _items(dataset) -> int:
    """What a memorizer stores at most: N points or sequences, N·n positions for seq2seq."""
    if dataset.task == "seq2seq":
        return dataset.size * len(dataset.sequences[0])
    return dataset.size


# Upper bounds of the numeric options, checked against the dataset before building: past them
# an option only adds work (a group_size of 10⁶ on 20 points ran for minutes) or size.
OPTION_LIMITS = {
    "group_size": (_items, "a group cannot hold more slots than the {limit} items to memorize"),
    "bit_budget": (
        lambda ds: max(2, _items(ds)),
        "B = {limit} already puts every item in one sub-network (B² ≥ {limit})",
    ),
    "direction_bound": (lambda ds: max(ds.size**2, 2**64), "at most max(N², 2⁶⁴) = {limit}"),
    "heads": (lambda ds: ds.size, "more heads than the {limit} examples have nothing to store"),
    "d": (
        lambda ds: max(2, ds.size),
        "d ≥ {limit} (the number of examples) stores every association without heads",
    ),
    "head_dim": (
        lambda ds: max(2, ds.size, ds.dim),
        "a head of dimension above max(2, N, the token dimension) = {limit} has nothing to store",
    ),
    "scale": (lambda ds: 2**64, "at most 2⁶⁴"),
    "precision": (lambda ds: 2**16, "at most 65536 bits (it is doubled up to 7 times)"),
    "temperature": (lambda ds: 2**64, "at most 2⁶⁴ (the automatic search stops at 2¹³)"),
}


LIMITS_HELP = """option limits (exit 2 beyond them): group_size ≤ the items to memorize (N, or N·n
for seq2seq), bit_budget ≤ max(2, items); heads ≤ N; d ≤ max(2, N); head_dim ≤ max(2, N, the
token dimension); direction_bound ≤ max(N², 2⁶⁴); scale, temperature ≤ 2⁶⁴; precision ≤ 65536;
numbers ≤ 64 characters"""


def check_option_limits(options: dict, dataset) -> None:
    """Refuse option values beyond what the dataset can use (exit 2 naming the limit)."""
    from fractions import Fraction

    for key, (limit_of, why) in OPTION_LIMITS.items():
        if options.get(key) is None:
            continue
        limit = limit_of(dataset)
        if Fraction(options[key]) > limit:
            raise InputError(
                f"--set {key}={options[key]}: too large for this dataset of {dataset.size} "
                f"items; " + why.format(limit=limit)
            )


# --------------------------------------------------------------------------- commands


# the N = 10⁷ benchmark dataset fits; 10¹² points would run until memory is exhausted
GENERATE_LIMITS = {"N": 10**8, "n": 10**4, "d": 10**4, "vocab": 10**8}


def cmd_generate(args: argparse.Namespace) -> int:
    from exactmem.data import random_points, save_dataset
    from exactmem.outputs import check_output
    from exactmem.sequences import random_sequences, zen_of_python

    check_output(args.out, "--out")
    if (args.file is not None or args.window is not None) and args.family != "text":
        raise InputError("--file and --window belong to generate text")
    for name in ("N", "n", "d", "C", "vocab"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise InputError(f"--{name} must be ≥ 1")
    if args.coord_bound < 0:
        raise InputError(f"--coord-bound must be ≥ 0, got {args.coord_bound}")
    for name, limit in GENERATE_LIMITS.items():
        if (getattr(args, name) or 0) > limit:
            raise InputError(
                f"--{name} {getattr(args, name)}: at most {limit} (the random generators keep "
                "every item in memory; write larger datasets with your own tools)"
            )
    if args.family == "points":
        if args.N is None:
            raise InputError("generate points needs --N")
        ds = random_points(args.N, args.d, args.C, args.seed, coord_bound=args.coord_bound)
        what = f"{ds.size} points in Q^{ds.dim}"
    elif args.family == "attention":
        from exactmem.constructions.mahdavi24 import random_instance

        if args.N is None:
            raise InputError("generate attention needs --N (examples)")
        ds = random_instance(
            args.N, args.n or 6, args.d, args.C, args.seed, shared_context=args.shared_context
        )
        what = (
            f"{ds.size} examples (n = {args.n or 6} context tokens + a query in Q^{ds.dim}"
            f"{', shared context' if args.shared_context else ''})"
        )
    elif args.family == "associations":
        from exactmem.constructions.dana25 import random_associations

        if args.N is None:
            raise InputError("generate associations needs --N (associations)")
        ds = random_associations(args.vocab or 50, args.n or 2, args.N, args.seed)
        what = f"{ds.size} associations of {args.n or 2} tokens over {len(ds.vocab)} tokens"
    elif args.family == "zen":
        ds = zen_of_python(args.n or 32, unit=args.unit)
        what = f"{ds.size} windows of {args.n or 32} {args.unit}s of the Zen of Python"
    elif args.family == "text":
        what, ds = _generate_text(args)
    else:
        if args.N is None:
            raise InputError(f"generate {args.family} needs --N")
        ds = random_sequences(
            args.N,
            args.n or 16,
            args.d,
            args.vocab or 500,
            args.C,
            args.seed,
            family=args.sequences,
            coord_bound=args.coord_bound,
            task="seq2seq" if args.family == "seq2seq" else "next-token",
            labels_by="multiset" if args.family == "multisets" else "key",
        )
        what = f"{ds.size} sequences of {args.n or 16} tokens in Q^{ds.dim}"
    save_dataset(ds, args.out)
    print(f"wrote {args.out}: {what}, C = {ds.num_classes}")
    return EXIT_VERIFIED


def _generate_text(args: argparse.Namespace):
    """``generate text``: the windows of a text file (:mod:`exactmem.text`); says on stderr when
    the tokens carry their positions, and why."""
    from exactmem.text import read_text, windows

    if args.file is None or args.window is None:
        raise InputError("generate text needs --file FILE and --window W")
    ds = windows(read_text(args.file), args.window, args.unit, source=args.file)
    if ds.meta["position_aware"]:
        print(
            f"note: tokens carry their position (symbol id, k) in Q^2, because "
            f"{ds.meta['positions_because']}",
            file=sys.stderr,
        )
    what = (
        f"{ds.size} windows of {args.window} {args.unit}s of {args.file} "
        f"({len(ds.meta['symbols'])} symbols, tokens in Q^{ds.dim})"
    )
    return what, ds


def cmd_build(args: argparse.Namespace) -> int:
    from exactmem.constructions import ks25, vys
    from exactmem.data import load_dataset
    from exactmem.io import save_model
    from exactmem.model import resources
    from exactmem.outputs import check_output

    check_output(args.out, "--out", [args.data])
    if args.construction not in CONSTRUCTIONS:
        raise InputError(
            f"--construction {args.construction!r} is unknown; available: "
            f"{', '.join(CONSTRUCTIONS)}"
        )
    progress = Progress(not args.quiet)
    options = parse_options(args.construction, args.set or [])
    options["seed"] = args.seed
    dataset = load_dataset(args.data, allow_floats=args.allow_floats)
    check_option_limits(options, dataset)
    progress(f"building {args.construction} for {dataset.size} {dataset.task} items", force=True)
    if args.construction == "vys":
        model, _ = vys.build(dataset, options)
    elif args.construction == "mahdavi24":
        from exactmem.constructions import mahdavi24

        model, _ = mahdavi24.build(dataset, options)
    elif args.construction == "dana25":
        from exactmem.constructions import dana25

        model, _ = dana25.build(dataset, options)
    else:
        model, _ = ks25.build(dataset, options, args.construction)
    digest = save_model(model, args.out)
    res = resources(model)
    print(
        f"wrote {args.out} (sha256 {digest[:16]}…): width {res.width}, depth {res.depth}, "
        f"{res.dense_parameters} dense / {res.nonzero_parameters} non-zero parameters, "
        f"max {res.max_bits} bits per parameter"
    )
    return EXIT_VERIFIED


def _print_certificate(cert) -> None:
    res = cert.resources
    data = cert.data
    print(f"verdict: {cert.verdict.upper()}")
    if "tokens" in data:
        aware = ", position-aware" if data.get("position_aware") else ""
        what = (
            f"{data['N']} sequences of n = {data['n']} tokens in Q^{data['d']} "
            f"({data['tokens']} distinct tokens, {data['distinct_multisets']} distinct "
            f"multisets{aware})"
        )
    else:
        what = f"{data['N']} points in Q^{data['d']}"
    print(f"dataset: {what}, C = {data['C']}, r² = {data['r2']}, δ² = {data['delta2']}")
    said = cert.subject.get("model_says", {})
    print(
        f"model: sha256 {cert.subject['model_sha256'][:16]}… (its file says construction "
        f"{said.get('construction')}; a label only, never a criterion)"
    )
    crit = cert.subject["criteria"]
    print(f"criteria: {crit['checklist']}")
    tol = crit["tolerance"]
    print(
        f"  readout {crit['readout']}"
        + (f", within --tolerance {tol}" if tol is not None else ", exact")
        + f"; inputs: {crit['inputs']}"
    )
    print(
        f"resources: width {res.width}, depth {res.depth}, {res.dense_parameters} dense / "
        f"{res.nonzero_parameters} non-zero parameters, max {res.max_bits} bits per parameter, "
        f"{res.total_bits} bits in all"
    )
    for c in cert.checks:
        print(f"  {'ok  ' if c.passed else 'FAIL'} {c.name:<28} {c.detail}")
    act = cert.activation
    print(
        f"activation: {act['relu_layers']} ReLU layers, smallest non-zero |pre-activation| "
        f"{act['min_nonzero_preactivation']}, {act['zero_preactivations']} of "
        f"{act['preactivations']} pre-activations exactly 0"
    )


def cmd_verify(args: argparse.Namespace) -> int:
    from exactmem.certify import certificate_json, certify
    from exactmem.data import load_dataset
    from exactmem.io import load_model, save_certificate
    from exactmem.outputs import OutputError, check_output

    tolerance = None  # the criteria are checked before any work, like the output path
    if args.tolerance is not None:
        from exactmem.exact import parse_rational

        tolerance = parse_rational(args.tolerance, "--tolerance")
        if tolerance < 0:
            raise InputError(f"--tolerance {args.tolerance}: must be ≥ 0")
    if args.construction is not None and args.construction not in CONSTRUCTIONS:
        raise InputError(
            f"--construction {args.construction!r} is unknown; available: "
            f"{', '.join(CONSTRUCTIONS)}"
        )
    if args.certificate:
        check_output(args.certificate, "--certificate", [args.model, args.data])
    progress = Progress(not args.quiet)
    model, _ = load_model(args.model)
    dataset = load_dataset(args.data, allow_floats=args.allow_floats)
    progress(f"verifying on {dataset.size} inputs with the {args.evaluator} evaluator", force=True)
    cert = certify(
        model,
        dataset,
        construction=args.construction,
        tolerance=tolerance,
        progress=progress,
        jobs=args.jobs,
        evaluator=args.evaluator,
    )
    content = certificate_json(cert)
    unwritten = None
    if args.certificate:  # before stdout, which may be a pipe closed early
        try:
            save_certificate(content, args.certificate)
            progress(f"certificate written to {args.certificate}", force=True)
        except OutputError as exc:  # the verdict is still printed: the work is not lost
            unwritten = exc
    args.pending_exit = EXIT_VERIFIED if cert.verdict == "verified" else EXIT_REFUTED
    if unwritten is not None:
        args.pending_exit = EXIT_USAGE
    if args.json:
        json.dump(content, sys.stdout, indent=1)
        print()
    else:
        _print_certificate(cert)
    if unwritten is not None:
        sys.stdout.flush()
        print(f"error: {unwritten} (the verdict above was not saved)", file=sys.stderr)
    return args.pending_exit


def _latex(rows: list[dict], measured: list[dict], sizes: dict | None = None) -> str:
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


def _print_columns(head: tuple, table: list[tuple]) -> None:
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    for t in (head, *table):
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip())


def cmd_bounds(args: argparse.Namespace) -> int:
    from exactmem.field import evaluate_rows, measure

    for name in ("N", "n", "d", "vocab", "C"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name} must be ≥ 1")
    if args.n < 2:
        raise InputError("--n must be ≥ 2 (several rows divide by n − 1)")
    sizes = {"N": args.N, "n": args.n, "d": args.d, "omega": args.vocab, "C": args.C}
    rows = evaluate_rows(sizes)
    measured = []
    if args.measure:
        Progress(not args.quiet)("building and certifying exactmem's constructions", force=True)
        measured = measure(sizes, seed=args.seed)
    if args.json:
        json.dump({"sizes": sizes, "bounds": rows, "measured": measured}, sys.stdout, indent=1)
        print()
    elif args.latex:
        print(_latex(rows, measured, sizes))
    else:
        at = "N = {N}, n = {n}, d = {d}, ω = {omega}, C = {C}".format(**sizes)
        print(f"{at}, r = δ = 1; logarithms to base 2\n")
        head = ("#", "work", "setting", "bound", "constant", "value")
        table = [
            (
                str(k),
                r["work"],
                r["setting"],
                f"{r['kind']}, {r['quantity']}",
                r["constant"],
                r["value"] or r["status"],
            )
            for k, r in enumerate(rows, 1)
        ]
        _print_columns(head, table)
        print("\n#   source; order; formula")
        for k, r in enumerate(rows, 1):
            print(f"{k:<3} {r['source']}; {r['order']}\n    {r['formula']}")
        if measured:
            print("\nmeasured (exactmem, random data of these sizes):")
            keys = (
                "construction",
                "task",
                "width",
                "depth",
                "dense_parameters",
                "nonzero_parameters",
                "max_bits",
                "eq72_max_N",
                "verdict",
            )
            _print_columns(keys, [tuple(str(m[k]) for k in keys) for m in measured])
            print(
                "eq72_max_N: the largest N the model's block architecture could shatter by "
                "the eq. (72) count (labels per sequence: n for seq2seq, 1 otherwise)"
            )
            print(
                "\nagainst the papers (dense parameters / the row's bound at the measured "
                "dataset's sizes) and the constants our runs need (the claims' [tight] tables, "
                "fitted on sweeps; no paper states them):"
            )
            head = ("construction", "row", "measured/paper", "fitted constants")
            table = [
                (
                    m["construction"],
                    m["paper_row"] or "—",
                    m["measured_over_paper"] or "—",
                    ", ".join(f"{k} {v}" for k, v in m["fitted_constants"].items()) or "—",
                )
                for m in measured
            ]
            _print_columns(head, table)
    return EXIT_VERIFIED


def cmd_check(args: argparse.Namespace) -> int:
    from exactmem.proofs import run_check

    return run_check(
        args=args,
        pattern=args.k,
        tier=args.tier,
        as_json=args.json,
        proofs_dir=args.proofs,
        progress=Progress(not args.quiet),
        jobs=args.jobs,
        evaluator=args.evaluator,
    )


def cmd_plot(args: argparse.Namespace) -> int:
    from exactmem import plot

    if args.figure == "bounds":
        summary = plot.plot_bounds(
            args.out,
            N_min=args.N_min,
            N_max=args.N_max,
            n=args.n,
            d=args.d,
            omega=args.vocab,
            C=args.C,
            measure_Ns=args.measure_N,
            seed=args.seed,
        )
    else:
        summary = plot.plot_certificate(args.certificate, args.out)
    print(summary)
    return EXIT_VERIFIED


def _sizes(text: str) -> tuple[int, ...]:
    """--measure-N: comma-separated positive integers, or an empty string for none."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) > 20 or not all(p.isascii() and p.isdigit() and len(p) < 10 for p in parts):
        raise argparse.ArgumentTypeError(
            f"--measure-N {text[:40]!r}: expected up to 20 comma-separated integers"
        )
    return tuple(int(p) for p in parts)


# --------------------------------------------------------------------------- parser


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: expected a positive integer")
    return int(text)


def _add_evaluator(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--evaluator",
        choices=("fast", "reference"),
        default="fast",
        help="exact evaluator: fast (default; numba int64 rows and group-shared multi-limb "
        "lanes, the reference wherever int64 safety is not proved) | reference (plain Python "
        "integers). Both give the same values; the first fast run compiles its kernels (~30 s, "
        "cached)",
    )


def _add_jobs(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--jobs",
        type=_jobs,
        default=os.cpu_count() or 1,
        metavar="N",
        help="parallelism (default: all cores): kernel threads of the fast evaluator, "
        "processes of the reference; results are the same for every N",
    )


def _add_limits(sub: argparse.ArgumentParser) -> None:
    """``--max-digits`` and the other limits on input files (exactmem.limits)."""
    from exactmem.limits import add_limit_arguments

    add_limit_arguments(sub)


def _limits(args: argparse.Namespace):
    """The command's limits, in force while it runs (a ``with`` block)."""
    from exactmem.limits import limits_from_args, use

    return use(limits_from_args(args))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m exactmem",
        description="Build the networks of Transformer memorization theorems, run them in exact "
        "arithmetic, and certify or refute what the theorems promise.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser(
        "check",
        help="run the claim files shipped with the package (the proof regression)",
        description="Run claim files: build, verify and bound every selected instance and "
        "compare each verdict with the one the claim expects. Without --proofs, the claims "
        "shipped with the package run (never ./proofs of the current folder).",
        epilog=EPILOG,
    )
    c.add_argument("-k", metavar="PATTERN", help="only claims whose name contains PATTERN")
    c.add_argument(
        "--tier",
        choices=("quick", "full"),
        default="quick",
        help="quick (CI, minutes) or full (adds the large instances)",
    )
    c.add_argument("--json", action="store_true", help="JSON report on stdout")
    c.add_argument(
        "--proofs",
        metavar="DIR",
        help="run the claim files (*.toml) in DIR instead of the claims shipped with the "
        "package; their formulas are parsed as data (docs/check.md)",
    )
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _add_jobs(c)
    _add_evaluator(c)
    c.set_defaults(func=cmd_check)

    b = sub.add_parser(
        "build",
        help="build a construction's model for a dataset",
        epilog="constructions:\n"
        + "\n".join(f"  {k:<16} {v}" for k, v in CONSTRUCTIONS.items())
        + "".join(
            f"\n\noptions of {', '.join(c for c in OPTIONS if OPTIONS[c] is opts)} "
            "(--set KEY=VALUE):\n" + "\n".join(f"  {k:<17} {h}" for k, (h, _) in opts.items())
            for opts in {id(o): o for o in OPTIONS.values()}.values()
        )
        + "\n\n"
        + LIMITS_HELP
        + "\n\n"
        + EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("--construction", required=True, metavar="NAME")
    b.add_argument("--data", required=True, metavar="FILE", help="dataset (.json or .json.gz)")
    b.add_argument("--out", required=True, metavar="MODEL", help="model file to write")
    b.add_argument("--seed", type=int, default=0, help="seed of the random choices (default 0)")
    b.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="construction option, repeatable"
    )
    b.add_argument(
        "--allow-floats",
        action="store_true",
        help="accept JSON floats in the dataset, converted exactly (dyadic)",
    )
    b.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _add_limits(b)
    b.set_defaults(func=cmd_build)

    v = sub.add_parser(
        "verify", help="evaluate a model exactly on a dataset and certify it", epilog=EPILOG
    )
    v.add_argument("model", metavar="MODEL")
    v.add_argument("--data", required=True, metavar="FILE")
    _add_evaluator(v)
    v.add_argument(
        "--construction",
        metavar="NAME",
        help="demand NAME's full checklist (its stages, margins and lanes; a model lacking one "
        "is refuted). Without it only the construction-independent checks run (labels, lower "
        "bounds); the model file's own claims are never a criterion. NAME: "
        + ", ".join(CONSTRUCTIONS),
    )
    v.add_argument(
        "--tolerance",
        metavar="Q",
        help="judge one-value (regression) outputs within the exact rational Q of their labels "
        "(default: exactly); printed in the certificate",
    )
    v.add_argument("--json", action="store_true", help="certificate as JSON on stdout")
    v.add_argument("--certificate", metavar="OUT", help="also write the certificate file")
    v.add_argument(
        "--allow-floats",
        action="store_true",
        help="accept JSON floats in the dataset, converted exactly (dyadic)",
    )
    v.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _add_jobs(v)
    _add_limits(v)
    v.set_defaults(func=cmd_verify)

    bo = sub.add_parser(
        "bounds",
        help="the comparison table of the field at given sizes",
        description="Upper and lower parameter bounds of the memorization results, as "
        "formulas evaluated at the given sizes; --measure adds exactmem's own constructions, "
        "built and certified on random data (the Kajitsuka & Sato and VYS ones at these sizes; "
        "Mahdavi et al. at T = min(N, 41) examples of min(n, d − 1) context tokens, Dana et al. "
        "at min(N, 100) associations), with measured / paper bound and the fitted constants of "
        "the claims' tight bounds.",
        epilog=EPILOG,
    )
    bo.add_argument("--N", type=int, required=True, help="number of sequences / examples")
    bo.add_argument("--n", type=int, required=True, help="sequence length")
    bo.add_argument("--d", type=int, default=8, help="token dimension (default 8)")
    bo.add_argument("--vocab", type=int, default=1000, help="vocabulary size ω (default 1000)")
    bo.add_argument("--C", type=int, default=10, help="number of classes (default 10)")
    bo.add_argument("--seed", type=int, default=0, help="seed of the --measure datasets")
    bo.add_argument(
        "--measure",
        action="store_true",
        help="build and certify exactmem's models on random data (sizes above), with measured / "
        "paper bound and the constants the runs need",
    )
    out = bo.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON on stdout")
    out.add_argument("--latex", action="store_true", help="a LaTeX tabular on stdout")
    bo.add_argument("--quiet", action="store_true", help="no progress on stderr")
    bo.set_defaults(func=cmd_bounds)

    g = sub.add_parser("generate", help="write a random dataset file", epilog=EPILOG)
    g.add_argument(
        "family",
        choices=(
            "points",
            "next-token",
            "seq2seq",
            "multisets",
            "attention",
            "associations",
            "zen",
            "text",
        ),
        help="random points; random sequences labelled at the last position (next-token), at "
        "every position (seq2seq) or by multiset (multisets, for deep sets); windows of the Zen "
        "of Python (next character or word); windows of your own text (text: --file, --window)",
    )
    g.add_argument("--N", type=int, help="number of points or sequences")
    g.add_argument("--n", type=int, help="sequence length (next-token: 16, zen: 32)")
    g.add_argument("--d", type=int, default=8, help="dimension (default 8)")
    g.add_argument("--C", type=int, default=10, help="number of classes (default 10)")
    g.add_argument("--vocab", type=int, help="vocabulary size (next-token, default 500)")
    g.add_argument(
        "--sequences",
        default="random",
        choices=("random", "permuted", "same_multiset", "near_delta", "distinct"),
        help="next-token family (default random)",
    )
    g.add_argument(
        "--shared-context",
        action="store_true",
        help="attention: every example shares one context (Proposition 2)",
    )
    g.add_argument(
        "--unit",
        default="char",
        choices=("char", "word"),
        help="zen and text: windows of characters or of words (text: punctuation marks are units "
        "too; default char)",
    )
    g.add_argument("--file", metavar="TEXT", help="text: a UTF-8 text file (at most 1 MiB)")
    g.add_argument("--window", type=int, metavar="W", help="text: units per window (W ≥ 1)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument(
        "--coord-bound",
        type=int,
        default=1000,
        help="integer coordinates in [-B, B] (default 1000)",
    )
    g.add_argument("--out", required=True, metavar="FILE")
    g.set_defaults(func=cmd_generate)

    pl = sub.add_parser(
        "plot",
        help="draw a picture (PNG, SVG or PDF by the extension of --out; needs exactmem[plot])",
        description="Pictures of the bounds and of a certificate. The format follows the "
        "extension of --out: .png, .svg or .pdf. Needs matplotlib: pip install 'exactmem[plot]'.",
        epilog=EPILOG,
    )
    figures = pl.add_subparsers(dest="figure", required=True, metavar="FIGURE")
    pb = figures.add_parser(
        "bounds",
        help="parameters and depth against N: the table's rows beside exactmem's builds",
        description="Parameters and depth against N on log-log axes: every parameter row of "
        "`bounds` evaluated on a grid of N (order-only rows with every hidden constant set to "
        "1), beside the resources of exactmem's vys and ks25-next-token models built (not "
        "certified) on random data at the --measure-N sizes.",
        epilog=EPILOG,
    )
    pb.add_argument("--out", required=True, metavar="FILE", help="picture: .png, .svg or .pdf")
    pb.add_argument("--N-min", type=int, default=10, help="left end of the N axis (default 10)")
    pb.add_argument(
        "--N-max", type=int, default=10**6, help="right end of the N axis (default 10⁶)"
    )
    pb.add_argument("--n", type=int, default=16, help="sequence length (default 16)")
    pb.add_argument("--d", type=int, default=8, help="token dimension (default 8)")
    pb.add_argument("--vocab", type=int, default=1000, help="vocabulary size ω (default 1000)")
    pb.add_argument("--C", type=int, default=10, help="number of classes (default 10)")
    pb.add_argument(
        "--measure-N",
        type=_sizes,
        default=(100, 300, 1000, 3000, 10000),
        metavar="N,N,...",
        help="sizes at which vys and ks25-next-token are built (default "
        "100,300,1000,3000,10000; an empty string builds none)",
    )
    pb.add_argument("--seed", type=int, default=0, help="seed of the random datasets")
    pb.set_defaults(func=cmd_plot)
    pc = figures.add_parser(
        "certificate",
        help="per-layer sign margins and activation statistics of a certificate file",
        description="Per ReLU layer: the sign margin (smallest non-zero |pre-activation|), the "
        "share of pre-activations exactly 0, and the width, from a certificate file written by "
        "`verify --certificate` (its hash and fields are checked first).",
        epilog=EPILOG,
    )
    pc.add_argument("certificate", metavar="CERT", help="certificate file (.json or .json.gz)")
    pc.add_argument("--out", required=True, metavar="FILE", help="picture: .png, .svg or .pdf")
    pc.set_defaults(func=cmd_plot)
    return p


def _stop_workers() -> None:
    """Kill this process's worker processes (the reference evaluator's pool): its shutdown
    would otherwise wait for every queued chunk, and the workers write nothing to disk."""
    import multiprocessing

    for child in multiprocessing.active_children():
        child.kill()


def _terminate(signum, frame) -> None:
    _stop_workers()
    raise Terminated


def _interrupt(signum, frame) -> None:
    _stop_workers()
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    sys.set_int_max_str_digits(0)
    # SIGTERM raises, as Ctrl-C does, so the atomic writer removes its temporary file
    previous = _install(signal.SIGTERM, _terminate)
    # Ctrl-C as Python's own handler, plus the workers; an ignored SIGINT stays ignored
    keyboard = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        keyboard = _install(signal.SIGINT, _interrupt)
    try:
        with _limits(args):
            return args.func(args)
    except ExactmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except BrokenPipeError:
        # stdout was closed early (`| head`): stay quiet and keep the verdict's exit code
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return getattr(args, "pending_exit", EXIT_INTERNAL)
    except Exception as exc:  # noqa: BLE001 - the contract: internal errors exit 3
        if os.environ.get("EXACTMEM_DEBUG"):
            raise
        print(
            f"internal error: {type(exc).__name__}: {exc} (set EXACTMEM_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if keyboard is not None:
            signal.signal(signal.SIGINT, keyboard)


def _install(signum: int, handler):
    """Install ``handler``; returns the handler to restore, or None off the main thread (where
    ``signal.signal`` is not allowed: the default stays)."""
    previous = signal.getsignal(signum)
    try:
        signal.signal(signum, handler)
    except ValueError:
        return None
    # None: a handler not installed from Python; the default is the closest restorable one
    return signal.SIG_DFL if previous is None else previous
