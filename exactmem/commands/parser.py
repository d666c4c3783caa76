"""The parser of ``exactmem <command>``: every command's arguments and ``--help``; a command's
``run`` is imported only when it runs, so ``--help`` stays fast."""

from __future__ import annotations

import argparse
import re

from exactmem.checks.build_options import LIMITS_HELP
from exactmem.plugins.options import CONSTRUCTIONS, OPTIONS

PROG = "exactmem"


def ascii_int(text: str) -> int:
    """An integer flag's value in ASCII digits (``int`` alone would read ``١٢`` or
    ``1_000``), at most 30 of them."""
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
        raise argparse.ArgumentTypeError(f"expected an integer in ASCII digits, got {text[:40]!r}")
    return int(text)


EPILOG = """exit codes: 0 verified, 1 refuted, 2 usage or invalid input (output paths are
checked before any work), 3 internal error, 4 inconclusive, 5 nothing selected,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), with one line saying which output files
are complete and which untouched; files are written atomically, so an interrupted or failed
write leaves the previous file as it was. `exactmem schema` prints the files' JSON schemas."""


def _latex(rows: list[dict], measured: list[dict], sizes: dict | None = None) -> str:
    """The ``bounds --latex`` document (:func:`exactmem.commands.latex.latex_document`)."""
    from exactmem.commands.latex import latex_document

    return latex_document(rows, measured, sizes)


def _command(name: str):
    """The ``run`` of ``exactmem.commands.<name>``, imported when the command runs."""

    def run(args: argparse.Namespace) -> int:
        import importlib

        return importlib.import_module(f"exactmem.commands.{name}").run(args)

    return run


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
        "integers). Both give the same values; the first fast run compiles the kernels it "
        "needs (cached per user; `exactmem warmup` compiles all of them up front)",
    )


def _add_cluster(sub: argparse.ArgumentParser) -> None:
    """Sharded verification on Dask (exactmem.checks.distributed; the [dask] extra;
    docs/scale.md)."""
    where = sub.add_mutually_exclusive_group()
    where.add_argument(
        "--processes",
        action="store_true",
        help="run the fast evaluator's MLP sub-layers sharded on a local Dask cluster of "
        "--jobs worker processes (needs exactmem[dask]); the certificate is the same",
    )
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="as --processes, on the workers of an existing Dask cluster (e.g. tcp://host:8786)",
    )


def _add_jobs(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--jobs",
        type=_jobs,
        default=None,  # default_jobs(), looked up only by a command that runs
        metavar="N",
        help="parallelism (default: the cores other work leaves idle, at least 1): kernel "
        "threads of the fast evaluator, "
        "processes of the reference; results are the same for every N",
    )


JSON_WRITTEN = "JSON on stdout: the path written, its sha256 and what it holds"


def _version() -> str:
    from exactmem.core.version import __version__

    return __version__


def _measure_sizes(text: str) -> tuple[int, ...]:
    from exactmem.commands.plot import sizes

    return sizes(text)


def _add_plot_common(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--json", action="store_true", help=JSON_WRITTEN)
    sub.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _add_inspection(sub) -> None:
    """``predict``, ``inspect`` and ``show``: read a model or a certificate back."""
    pr = sub.add_parser(
        "predict",
        help="a model's exact outputs on every sequence of a dataset",
        description="Evaluate MODEL exactly on every sequence (or point) of a dataset file and "
        "print the outputs beside the dataset's labels. Nothing is judged: verify does that. "
        "Softmax attention has no exact outputs: there predict prints certified bounds (Arb "
        "enclosures as exact rationals) and the certified argmax, exit 4 if one stays undecided.",
        epilog=EPILOG,
    )
    pr.add_argument("model", metavar="MODEL", help="model file (.json, .json.gz or .exm)")
    pr.add_argument(
        "--data", required=True, metavar="FILE", help="dataset (.json, .json.gz or .exm)"
    )
    pr.add_argument(
        "--positions",
        choices=("last", "all"),
        help="outputs at the last position (default; what next-token prediction reads) or at "
        "every position (default for seq2seq datasets)",
    )
    _add_evaluator(pr)
    pr.add_argument(
        "--allow-floats",
        action="store_true",
        help="accept JSON floats in the dataset, converted exactly (dyadic)",
    )
    pr.add_argument(
        "--json", action="store_true", help="JSON on stdout: every output as exact rationals"
    )
    pr.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _add_limits(pr)
    pr.set_defaults(func=_command("predict"))

    ins = sub.add_parser(
        "inspect",
        help="what a model file holds: sub-layers, lanes, resources, and what it says of itself",
        description="Check a model file (format, sha256, every field) and print its sub-layers, "
        "lanes and resources, read off the weights, and what the file says built it — the "
        "file's own word, a label and never a criterion (docs/trust.md).",
        epilog=EPILOG,
    )
    ins.add_argument("model", metavar="MODEL", help="model file (.json, .json.gz or .exm)")
    ins.add_argument("--json", action="store_true", help="JSON on stdout")
    _add_limits(ins)
    ins.set_defaults(func=_command("inspect"))

    sh = sub.add_parser(
        "show",
        help="display a certificate file as the record it is (recheck re-derives it)",
        description="Display the verdict table a certificate file records, after checking its "
        "format, fields (the exactmem.certificate/2 schema) and sha256. An intact sha256 means "
        "the content is unchanged since it was hashed — not who wrote it nor that it is true "
        "(docs/trust.md). The exit code is the recorded verdict's (0 verified, 1 refuted); "
        "nothing is evaluated again: `exactmem recheck` re-derives the verdict from the files.",
        epilog=EPILOG,
    )
    sh.add_argument("certificate", metavar="CERT", help="certificate file (.json or .json.gz)")
    sh.add_argument("--json", action="store_true", help="the certificate's content on stdout")
    _add_limits(sh)
    sh.set_defaults(func=_command("show"))

    ex = sub.add_parser(
        "explain",
        help="take a REFUTED or INCONCLUSIVE verdict to the sub-layer, lane and example where "
        "the values leave what the proof needs",
        description="From a certificate file (with --model and --data, the files it was made "
        "from, to walk the examples through the exact trace) or a run (--model, --data and "
        "--construction, certified first): each failed check, the paper and mechanism it tests, "
        "the first example it names, its lanes after every sub-layer, and the sub-layer where it "
        "merges with an item labelled otherwise (docs/inside-a-run.md). The exit code is the "
        "verdict's.",
        epilog=EPILOG,
    )
    ex.add_argument(
        "certificate", metavar="CERT", nargs="?", help="certificate file (.json or .json.gz)"
    )
    ex.add_argument("--model", metavar="MODEL", help="model file (.json, .json.gz or .exm)")
    ex.add_argument("--data", metavar="FILE", help="dataset (.json, .json.gz or .exm)")
    ex.add_argument("--construction", metavar="NAME", help="without CERT: demand NAME's checklist")
    ex.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="without CERT, with --construction: a build option the model was built with, as "
        "`verify --set` takes it (repeatable)",
    )
    ex.add_argument(
        "--allow-floats",
        action="store_true",
        help="accept JSON floats in the dataset, converted exactly (dyadic)",
    )
    ex.add_argument("--json", action="store_true", help="the explanation as JSON on stdout")
    _add_limits(ex)
    ex.set_defaults(func=_command("explain"))

    rc = sub.add_parser(
        "recheck",
        help="re-derive a certificate's verdict from its model and dataset files",
        description="Re-derive CERT: check that MODEL and the dataset are the files it names "
        "(their sha256), verify them again under the criteria it records (construction, "
        "tolerance, max precision), and report every difference from the record — verdict, "
        "checks, resources, hashes. Exit 0: re-derived the same; 1: something differs (listed); "
        "2: bad input.",
        epilog=EPILOG,
    )
    rc.add_argument("certificate", metavar="CERT", help="certificate file (.json or .json.gz)")
    rc.add_argument("--model", required=True, metavar="MODEL", help="model file it names")
    rc.add_argument("--data", required=True, metavar="FILE", help="dataset file it names")
    rc.add_argument(
        "--allow-floats",
        action="store_true",
        help="accept JSON floats in the dataset, converted exactly (dyadic)",
    )
    _add_evaluator(rc)
    rc.set_defaults(evaluator=None)  # None: the evaluator the certificate records
    rc.add_argument(
        "--max-precision",
        type=ascii_int,
        metavar="BITS",
        help="allow a certificate whose max_precision is above 16384 bits, up to BITS (a "
        "large precision can take hours); default: refuse it (exit 2)",
    )
    _add_jobs(rc)
    rc.add_argument(
        "--json", action="store_true", help="JSON on stdout: the differences and both certificates"
    )
    rc.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _add_limits(rc)
    rc.set_defaults(func=_command("recheck"))


def _add_limits(sub: argparse.ArgumentParser) -> None:
    """``--max-digits`` and the other limits on input files (exactmem.core.limits)."""
    from exactmem.core.limits import add_limit_arguments

    add_limit_arguments(sub)


def _limits(args: argparse.Namespace):
    """The command's limits, in force while it runs (a ``with`` block)."""
    from exactmem.core.limits import limits_from_args, use

    return use(limits_from_args(args))


# the architectures `import --arch` reads (exactmem.checkpoints.architectures; named here so --help
# stays
# fast, and a test keeps both lists equal)
ARCHITECTURES = {
    "mahdavi24": "Mahdavi et al. 2024: one multi-head attention layer on vectors",
    "dana25": "Dana et al. 2025: attention-only Transformer on token ids",
    "ks25": "Kajitsuka & Sato 2025 (eq. 165): ReLU blocks, uniform attention, ReLU blocks",
    "madden24": "Madden et al. 2024: one-layer decoder, causal attention, GELU FNN",
    "gpt": "GPT-style pre-norm decoder (nanoGPT names): LayerNorm, causal MHA, GELU",
    "gpt2": "Hugging Face GPT-2 as save_pretrained writes it (Conv1D, config.json)",
}


def _add_import(sub) -> None:
    im = sub.add_parser(
        "import",
        help="read a trained safetensors checkpoint as an exact model file",
        description="Read a safetensors checkpoint (float32, float16, bfloat16 or float64 "
        "weights, each the exact dyadic rational its bits encode; no pickle, no PyTorch) of a "
        "known architecture and write the model file. NaN and infinite weights are refused.",
        epilog="architectures (tensor names: docs/trained.md):\n"
        + "\n".join(f"  {k:<16} {v}" for k, v in ARCHITECTURES.items())
        + "\n\n"
        + EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    im.add_argument(
        "checkpoint",
        metavar="MODEL.safetensors|DIR",
        help="the checkpoint to read: a safetensors file or a save_pretrained folder",
    )
    im.add_argument(
        "--arch",
        metavar="ARCH",
        help="its architecture: "
        + ", ".join(ARCHITECTURES)
        + " (default: the model_type of the folder's config.json)",
    )
    im.add_argument("--out", required=True, metavar="MODEL", help="model file to write")
    im.add_argument(
        "--heads",
        type=ascii_int,
        metavar="H",
        help="number of attention heads of a gpt or nn.MultiheadAttention checkpoint (default: "
        "its __metadata__ n_head)",
    )
    im.add_argument("--quiet", action="store_true", help="no progress on stderr")
    im.add_argument("--json", action="store_true", help=JSON_WRITTEN)
    _add_limits(im)
    im.set_defaults(func=_command("import_"))


TRAIN_EXPERIMENTS = ("dana", "mahdavi", "madden", "ks25")


def _add_train(sub) -> None:
    tr = sub.add_parser(
        "train",
        help="train the papers' small experiments (PyTorch: the [train] extra) and certify them",
        description="Train the models of a paper's experiment on CPU (seeded, deterministic "
        "where PyTorch allows, one thread), save each as a safetensors checkpoint, import it "
        "exactly and certify its argmax labels. Writes DIR/datasets/*.json, "
        "DIR/checkpoints/*.safetensors, DIR/results.csv (one line per model: float accuracy, "
        "certified or not, smallest certified margin) and DIR/constructed.csv (the exact "
        "construction's parameters beside the smallest model certified to memorize). Needs "
        "pip install 'exactmem[train]'.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tr.add_argument(
        "--experiment", required=True, choices=TRAIN_EXPERIMENTS, help="which paper's experiment"
    )
    tr.add_argument("--quick", action="store_true", help="a small grid (under a minute)")
    tr.add_argument("--seed", type=ascii_int, default=0, metavar="S", help="seed (default 0)")
    tr.add_argument("--out", required=True, metavar="DIR", help="directory to write")
    tr.add_argument("--quiet", action="store_true", help="no progress on stderr")
    tr.add_argument("--json", action="store_true", help="the results as JSON on stdout")
    tr.set_defaults(func=_command("train"))


def parser() -> argparse.ArgumentParser:
    from exactmem.commands.suggest import Parser  # argparse's, with "did you mean" in its errors

    p = Parser(
        prog=PROG,
        description="Build the networks of Transformer memorization theorems, run them in exact "
        "arithmetic, and certify or refute what the theorems promise.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
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
    _add_limits(c)  # (every command that evaluates bounds its values: --max-value-bits)
    c.set_defaults(func=_command("check"))

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
    b.add_argument(
        "--construction",
        required=True,
        metavar="NAME",
        help="the construction to run: a built-in (listed below) or an installed plugin's "
        "(`exactmem constructions` lists every registered one)",
    )
    b.add_argument(
        "--data", required=True, metavar="FILE", help="dataset (.json, .json.gz or .exm)"
    )
    b.add_argument(
        "--out",
        required=True,
        metavar="MODEL",
        help="model file to write (.json, .json.gz or .exm; above 10⁵ rows use .exm, for the "
        "dataset too: half the size, faster to write and read)",
    )
    b.add_argument(
        "--seed", type=ascii_int, default=0, help="seed of the random choices (default 0)"
    )
    b.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="construction option, repeatable"
    )
    b.add_argument(
        "--allow-floats",
        action="store_true",
        help="accept JSON floats in the dataset, converted exactly (dyadic)",
    )
    b.add_argument("--quiet", action="store_true", help="no progress on stderr")
    b.add_argument("--json", action="store_true", help=JSON_WRITTEN)
    _add_limits(b)
    b.set_defaults(func=_command("build"))

    v = sub.add_parser(
        "verify", help="evaluate a model exactly on a dataset and certify it", epilog=EPILOG
    )
    v.add_argument("model", metavar="MODEL", help="model file (.json, .json.gz or .exm)")
    v.add_argument(
        "--data",
        required=True,
        metavar="FILE",
        help="dataset to verify on (.json, .json.gz or .exm)",
    )
    _add_evaluator(v)
    v.add_argument(
        "--construction",
        metavar="NAME",
        help="demand NAME's full checklist (its stages, margins and lanes; a model lacking one "
        "is refuted). Without it only the construction-independent checks run (labels, lower "
        "bounds); the model file's own claims are never a criterion. NAME: a built-in ("
        + ", ".join(CONSTRUCTIONS)
        + ") or an installed plugin's; `exactmem constructions NAME` lists its checks with the "
        "paper and result each tests, and its declared bounds (judged as NAME.bounds.<metric>)",
    )
    v.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="with --construction: a build option the model was built with (as `build --set`, "
        "repeatable; e.g. --set bit_budget=4). A criterion, recorded in the certificate and "
        "never read from the model file: the declared bounds that name it are judged with it, "
        "and one whose option is not given is undecided, naming the --set that decides it",
    )
    v.add_argument(
        "--tolerance",
        metavar="Q",
        help="judge one-value (regression) outputs within the exact rational Q of their labels "
        "(default: exactly); printed in the certificate",
    )
    v.add_argument(
        "--max-precision",
        type=ascii_int,
        metavar="BITS",
        help="softmax models are judged on Arb balls, each undecided example at doubling "
        "precision up to BITS (default 16384; 4096 for --tolerance labels); still undecided "
        "there: inconclusive (exit 4), naming the example",
    )
    v.add_argument(
        "--reference-logits",
        metavar="FILE",
        help="the framework's own logits of the dataset (.npy or .safetensors, float32 or "
        "float64, [N, n, C] or [N, C] for the last position): check reference_logits fails "
        "when one lies farther from its certified enclosure than float32 rounding explains "
        "(docs/trained.md)",
    )
    v.add_argument(
        "--reference-tolerance",
        metavar="Q",
        help="with --reference-logits: the relative tolerance τ (exact rational > 0) in "
        "dist ≤ τ·(1 + |x|), replacing the default k·2^-24 counted from the model",
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
    _add_cluster(v)
    _add_limits(v)
    v.set_defaults(func=_command("verify"))

    _add_import(sub)
    _add_train(sub)
    _add_registry(sub)

    bo = sub.add_parser(
        "bounds",
        help="the comparison table of the field at given sizes",
        description="Upper and lower parameter bounds of the memorization results, as "
        "formulas evaluated at the given sizes; --measure adds exactmem's own constructions, "
        "built and certified on random data (the Kajitsuka & Sato 2025 and VYS ones at these "
        "sizes; Mahdavi et al. at T = min(N, 41) examples of min(n, d − 1) context tokens, Dana "
        "et al. at min(N, 100) associations, Kajitsuka & Sato 2024 at min(N, 1000) sequences of n "
        "distinct tokens, Madden et al. at min(N, 100) contexts over min(ω, 20) tokens), with "
        "measured / paper bound and the fitted constants of the claims' tight bounds.",
        epilog=EPILOG,
    )
    bo.add_argument("--N", type=ascii_int, required=True, help="number of sequences / examples")
    bo.add_argument("--n", type=ascii_int, required=True, help="sequence length")
    bo.add_argument("--d", type=ascii_int, default=8, help="token dimension (default 8)")
    bo.add_argument(
        "--vocab", type=ascii_int, default=1000, help="vocabulary size ω (default 1000)"
    )
    bo.add_argument("--C", type=ascii_int, default=10, help="number of classes (default 10)")
    bo.add_argument("--seed", type=ascii_int, default=0, help="seed of the --measure datasets")
    bo.add_argument(
        "--measure",
        action="store_true",
        help="build and certify exactmem's models on random data (sizes above), with measured / "
        "paper bound and the constants the runs need",
    )
    out = bo.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON on stdout")
    out.add_argument(
        "--latex",
        action="store_true",
        help="a standalone LaTeX document on stdout, for pdflatex; it loads geometry, array and "
        "booktabs (on Debian and Ubuntu: apt install texlive-latex-base "
        "texlive-latex-recommended; docs/plots.md)",
    )
    bo.add_argument("--quiet", action="store_true", help="no progress on stderr")
    bo.set_defaults(func=_command("bounds"))

    g = sub.add_parser(
        "generate",
        help="write a dataset file: random data, the Zen of Python, or your own text",
        epilog=EPILOG,
    )
    g.add_argument(
        "family",
        choices=(
            "points",
            "next-token",
            "seq2seq",
            "multisets",
            "attention",
            "associations",
            "contexts",
            "zen",
            "text",
        ),
        help="random points; random sequences labelled at the last position (next-token), at "
        "every position (seq2seq) or by multiset (multisets, for deep sets); windows of the Zen "
        "of Python (next character or word); windows of your own text (text: --file, --window); "
        "contexts: distinct contexts with next-token distributions (targets)",
    )
    g.add_argument("--N", type=ascii_int, help="number of points or sequences")
    g.add_argument("--n", type=ascii_int, help="sequence length (next-token: 16, zen: 32)")
    g.add_argument("--d", type=ascii_int, default=8, help="dimension (default 8)")
    g.add_argument("--C", type=ascii_int, default=10, help="number of classes (default 10)")
    g.add_argument("--vocab", type=ascii_int, help="vocabulary size (next-token, default 500)")
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
    g.add_argument("--window", type=ascii_int, metavar="W", help="text: units per window (W ≥ 1)")
    g.add_argument(
        "--seed", type=ascii_int, default=0, help="seed of the random choices (default 0)"
    )
    g.add_argument(
        "--coord-bound",
        type=ascii_int,
        default=1000,
        help="integer coordinates in [-B, B] (default 1000)",
    )
    g.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="dataset file to write (.json, .json.gz or .exm; above 10⁵ rows use .exm: half the "
        "size, faster to write and read)",
    )
    g.add_argument("--json", action="store_true", help=JSON_WRITTEN)
    g.add_argument("--quiet", action="store_true", help="no progress on stderr")
    g.set_defaults(func=_command("generate"))

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
        "certified) on random data at the --measure-N sizes, and those two models' rows again "
        "times the constant their builds need (dotted). Rows that coincide are drawn striped.",
        epilog=EPILOG,
    )
    pb.add_argument("--out", required=True, metavar="FILE", help="picture: .png, .svg or .pdf")
    pb.add_argument(
        "--N-min", type=ascii_int, default=10, help="left end of the N axis (default 10)"
    )
    pb.add_argument(
        "--N-max", type=ascii_int, default=10**6, help="right end of the N axis (default 10⁶)"
    )
    pb.add_argument("--n", type=ascii_int, default=16, help="sequence length (default 16)")
    pb.add_argument("--d", type=ascii_int, default=8, help="token dimension (default 8)")
    pb.add_argument(
        "--vocab", type=ascii_int, default=1000, help="vocabulary size ω (default 1000)"
    )
    pb.add_argument("--C", type=ascii_int, default=10, help="number of classes (default 10)")
    pb.add_argument(
        "--measure-N",
        type=_measure_sizes,
        default=(100, 300, 1000, 3000, 10000),
        metavar="N,N,...",
        help="sizes at which vys and ks25-next-token are built (default "
        "100,300,1000,3000,10000; an empty string builds none)",
    )
    pb.add_argument("--seed", type=ascii_int, default=0, help="seed of the random datasets")
    _add_plot_common(pb)
    pb.set_defaults(func=_command("plot"))
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
    _add_plot_common(pc)
    pc.set_defaults(func=_command("plot"))
    _add_inspection(sub)
    _add_convert(sub)
    _add_warmup(sub)
    _add_schema(sub)
    return p


def _add_registry(sub) -> None:
    """``constructions`` and ``selftest``: the registered constructions
    (exactmem.checks.registry)."""
    co = sub.add_parser(
        "constructions",
        help="every installed construction (built-ins and plugins) with package, version, paper",
        description="List every construction registered in the exactmem.constructions "
        "entry-point group — the built-ins and installed plugins — with its package, version "
        "and paper. Given NAMEs: each one's checklist — the checks with the paper, result and "
        "mechanism each tests and their breakers, the tasks, the declared bounds — and its "
        "options. A plugin that fails to import or register is named in a warning on stderr.",
        epilog=EPILOG,
    )
    co.add_argument("names", nargs="*", metavar="NAME", help="describe these constructions")
    co.add_argument("--json", action="store_true", help="JSON on stdout")
    co.set_defaults(func=_command("constructions"))

    st = sub.add_parser(
        "selftest",
        help="see every check fail: each check's breakers refute an honest model",
        description="For each construction (default: every registered one) build its honest "
        "example, which must verify, then apply every breaker of every declared check and "
        "certify under the construction's checklist: the check the breaker names must fail. "
        "Prints a table (check, paper/result, breaker, verdict, seen to fail); exit 1 when a "
        "breaker is not seen to fail, a declared check has no breaker, or a construction has "
        "no example dataset or no declared checks.",
        epilog=EPILOG,
    )
    st.add_argument("names", nargs="*", metavar="NAME", help="only these constructions")
    st.add_argument("--json", action="store_true", help="JSON on stdout")
    st.add_argument("--quiet", action="store_true", help="no progress on stderr")
    st.set_defaults(func=_command("selftest"))


def _add_convert(sub) -> None:
    """``convert``: JSON ⇄ the binary container (exactmem.files.container)."""
    cv = sub.add_parser(
        "convert",
        help="a dataset or model file from JSON to the binary container (.exm) or back",
        description="Read a dataset or model file (checked as every command checks its inputs) "
        "and write the same content in the form OUT's name asks for: .exm is the binary "
        "container, .json or .json.gz JSON. The canonical SHA-256 is the same in both "
        "(docs/files.md).",
        epilog=EPILOG,
    )
    cv.add_argument("input", metavar="IN", help="dataset or model file (.json, .json.gz, .exm)")
    cv.add_argument(
        "output",
        metavar="OUT",
        help="file to write (.exm, .json or .json.gz; above 10⁵ rows use .exm: half the size, "
        "faster to write and read)",
    )
    cv.add_argument(
        "--allow-floats",
        action="store_true",
        help="accept JSON floats in a dataset, converted exactly (dyadic)",
    )
    cv.add_argument("--json", action="store_true", help="JSON on stdout: the path and sha256")
    cv.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _add_limits(cv)
    cv.set_defaults(func=_command("convert"))


def _add_warmup(sub) -> None:
    w = sub.add_parser(
        "warmup",
        help="compile every numba kernel now (once per machine; later runs load them)",
        description="Compile every kernel of the fast evaluator and of the constructions, in "
        "every form a run may need, into the per-user cache (NUMBA_CACHE_DIR when set), so that "
        "no later run compiles, whatever its size. Kernels already cached are only loaded.",
        epilog=EPILOG,
    )
    w.add_argument(
        "--json", action="store_true", help="JSON on stdout: the cache folder and what compiled"
    )
    w.add_argument("--quiet", action="store_true", help="no progress on stderr")
    w.set_defaults(func=_command("warmup"))


def _add_schema(sub) -> None:
    s = sub.add_parser(
        "schema",
        help="print a JSON schema of exactmem's files, or the example dataset",
        description="Print one of the files the documentation cites, as shipped inside the "
        "package: the JSON schemas of dataset, model and certificate files, and the example "
        "dataset. Without NAME, list them.",
        epilog=EPILOG,
    )
    s.add_argument("name", nargs="?", metavar="NAME", help="what to print (omit to list)")
    s.add_argument(
        "--json", action="store_true", help="the list as JSON (a schema is JSON already)"
    )
    s.set_defaults(func=_command("schema"))
