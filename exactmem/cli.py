"""``python -m exactmem <command>`` — a thin layer over the library (DESIGN.md §5).

Results go to stdout (JSON with ``--json``), progress and logs to stderr. Exit codes:
0 verified, 1 refuted, 2 usage or invalid input, 3 internal error, 4 inconclusive,
5 nothing selected. Heavy modules are imported inside the commands so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from exactmem.errors import (
    EXIT_INTERNAL,
    EXIT_REFUTED,
    EXIT_VERIFIED,
    ExactmemError,
    InputError,
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
    "H(n - 1) + 1 examples (task next-token: n context tokens, then the query)"
)
CONSTRUCTIONS["dana25"] = (
    "Dana, Pydi & Chevaleyre 2025: an attention-only Transformer memorizes H*d_h + d "
    "associations (task next-token over token ids)"
)


def _choice(*allowed: str):
    def parse(key: str, value: str):
        if value not in allowed:
            raise InputError(f"--set {key}={value}: expected one of {', '.join(allowed)}")
        return value

    return parse


def _positive(key: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise InputError(f"--set {key}={value}: expected a positive integer")
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
        "random (default; Lemma B.2 fixed) | paper (Lemma B.2 as printed)",
        _choice("random", "paper"),
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
        "heads": ("H (default: the fewest with H·d_h + d ≥ T₀)", _positive),
        "scale": ("λ_U: the target residual is λ_U·w_g (default 100)", _positive),
        "precision": ("bits of the Arb readout solve (default 256, doubled on failure)", _positive),
    },
    "mahdavi24": {
        "heads": ("H (default: the fewest with H(n − 1) + 1 ≥ T)", _positive),
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
            "true: build even when T > H(n − 1) + 1 (the verifier refutes)",
            _boolean,
        ),
    },
}


def _rational_option(key: str, value: str):
    from exactmem.exact import parse_rational

    q = parse_rational(value, f"--set {key}")
    if q <= 0:
        raise InputError(f"--set {key}={value}: expected a positive rational")
    return str(q)


EPILOG = """exit codes: 0 verified, 1 refuted, 2 usage or invalid input, 3 internal error,
4 inconclusive, 5 nothing selected"""


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
            raise InputError(f"--set {item!r}: expected KEY=VALUE")
        if key not in known:
            raise InputError(
                f"--set {key}: unknown option for {construction!r}; known: {', '.join(known)}"
            )
        options[key] = known[key][1](key, value)
    return options


# --------------------------------------------------------------------------- commands


def cmd_generate(args: argparse.Namespace) -> int:
    from exactmem.data import random_points, save_dataset
    from exactmem.sequences import random_sequences, zen_of_python

    for name in ("N", "n", "d", "C", "vocab"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise InputError(f"--{name} must be ≥ 1")
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


def cmd_build(args: argparse.Namespace) -> int:
    from exactmem.constructions import ks25, vys
    from exactmem.data import load_dataset
    from exactmem.io import save_model
    from exactmem.model import resources

    if args.construction not in CONSTRUCTIONS:
        raise InputError(
            f"--construction {args.construction!r} is unknown; available: "
            f"{', '.join(CONSTRUCTIONS)}"
        )
    progress = Progress(not args.quiet)
    options = parse_options(args.construction, args.set or [])
    options["seed"] = args.seed
    dataset = load_dataset(args.data, allow_floats=args.allow_floats)
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
    print(
        f"model: sha256 {cert.subject['model_sha256'][:16]}…, "
        f"construction {cert.subject.get('construction')}"
    )
    for layout in cert.subject.get("layout") or []:
        if "group_size" in layout:
            skip = ("lemma", "bit_widths", "label")
            shown = [f"{k} {v}" for k, v in layout.items() if k not in skip]
            print(f"  memorizer {layout['label']}: " + ", ".join(shown))
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

    progress = Progress(not args.quiet)
    model, _ = load_model(args.model)
    dataset = load_dataset(args.data, allow_floats=args.allow_floats)
    progress(f"verifying on {dataset.size} inputs with the {args.evaluator} evaluator", force=True)
    cert = certify(model, dataset, progress=progress, jobs=args.jobs, evaluator=args.evaluator)
    content = certificate_json(cert)
    if args.certificate:
        save_certificate(content, args.certificate)
        progress(f"certificate written to {args.certificate}", force=True)
    args.pending_exit = EXIT_VERIFIED if cert.verdict == "verified" else EXIT_REFUTED
    if args.json:
        json.dump(content, sys.stdout, indent=1)
        print()
    else:
        _print_certificate(cert)
    return args.pending_exit


def _latex(rows: list[dict], measured: list[dict]) -> str:
    def esc(text: str) -> str:
        return text.replace("&", r"\&").replace("_", r"\_").replace("%", r"\%")

    lines = [
        r"\begin{tabular}{llllr}",
        r"\toprule",
        r"work & setting & bound & constants & parameters \\",
        r"\midrule",
    ]
    for r in rows:
        kind = "explicit" if r["explicit"] else "order only"
        lines.append(
            f"{esc(r['work'])} & {esc(r['setting'])} & {r['kind']} & {kind} & {r['value']} \\\\"
        )
    if measured:
        lines.append(r"\midrule")
        for m in measured:
            lines.append(
                f"exactmem {esc(m['construction'])} & {m['task']} & measured & "
                f"{m['verdict']} & {m['dense_parameters']} \\\\"
            )
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


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
        print(_latex(rows, measured))
    else:
        print(
            "parameters at N = {N}, n = {n}, d = {d}, ω = {omega}, C = {C} "
            "(order-only rows set hidden constants to 1)\n".format(**sizes)
        )
        head = ("work", "setting", "bound", "constants", "parameters")
        table = [
            (
                r["work"],
                r["setting"],
                r["kind"],
                "explicit" if r["explicit"] else "order only",
                r["value"] or "?",
            )
            for r in rows
        ]
        widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
        for t in (head, *table):
            print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip())
        print(
            "\nTheorem 4.3 exactly: "
            + next(r["exact"] for r in rows if r["work"].endswith("Theorem 4.3"))
        )
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
            table = [tuple(str(m[k]) for k in keys) for m in measured]
            widths = [max(len(k), *(len(t[i]) for t in table)) for i, k in enumerate(keys)]
            for t in (keys, *table):
                print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip())
            print(
                "eq72_max_N: the largest N the model's block architecture could shatter by "
                "the eq. (72) count (labels per sequence: n for seq2seq, 1 otherwise)"
            )
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
        "check", help="run the claim files in proofs/ (the proof regression)", epilog=EPILOG
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
        help="claim directory (default: ./proofs or the copy shipped with the package)",
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
        "built and certified on random data of the same sizes.",
        epilog=EPILOG,
    )
    bo.add_argument("--N", type=int, required=True, help="number of sequences / examples")
    bo.add_argument("--n", type=int, required=True, help="sequence length")
    bo.add_argument("--d", type=int, default=8, help="token dimension (default 8)")
    bo.add_argument("--vocab", type=int, default=1000, help="vocabulary size ω (default 1000)")
    bo.add_argument("--C", type=int, default=10, help="number of classes (default 10)")
    bo.add_argument("--seed", type=int, default=0, help="seed of the --measure datasets")
    bo.add_argument("--measure", action="store_true", help="build and certify exactmem's models")
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
        ),
        help="random points; random sequences labelled at the last position (next-token), at "
        "every position (seq2seq) or by multiset (multisets, for deep sets); windows of the Zen "
        "of Python (next character or word)",
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
    g.add_argument("--unit", default="char", choices=("char", "word"), help="zen tokens")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument(
        "--coord-bound",
        type=int,
        default=1000,
        help="integer coordinates in [-B, B] (default 1000)",
    )
    g.add_argument("--out", required=True, metavar="FILE")
    g.set_defaults(func=cmd_generate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    sys.set_int_max_str_digits(0)
    try:
        with _limits(args):
            return args.func(args)
    except ExactmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERNAL
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
