"""The public API: build a construction's model, run it exactly, load and save it.

Everything here is also reachable from the package itself (``exactmem.build``,
``exactmem.run``, …); :func:`exactmem.certify` is the trusted core's
:func:`exactmem.checks.certify.certify`, re-exported unchanged.

The constructions are untrusted plugins (see the trust-boundary page): :func:`build` runs one
and returns what it built, and nothing it says about itself is believed. Only
:func:`exactmem.checks.certify.certify` decides a verdict, from the exact evaluation of the weights,
the dataset's labels and the criteria its caller gives.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gmpy2 import mpq

from exactmem.core.errors import InputError
from exactmem.core.exact import parse_rational
from exactmem.core.model import Transformer
from exactmem.datasets.dataset import Dataset
from exactmem.datasets.sequences import with_positions

if TYPE_CHECKING:
    from exactmem.evaluate.records import Trace

__all__ = ["Output", "build", "import_model", "load_model", "run", "save_model"]

Output = tuple[mpq, ...]
"""The output vector at one position: one exact rational per output of the model."""


def _constructions() -> dict[str, str]:
    """Name → what it builds: every registered construction (:mod:`exactmem.checks.registry`)."""
    from exactmem.checks import registry

    return {name: c.summary for name, c in registry.constructions().items()}


# --------------------------------------------------------------------------- build


def _option_text(key: str, value: object) -> str:
    """A Python option value as the text ``build --set KEY=VALUE`` takes, so that both are
    parsed and bounded by the same code."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, numbers.Rational):
        p, q = int(value.numerator), int(value.denominator)
        return str(p) if q == 1 else f"{p}/{q}"
    if isinstance(value, Sequence):  # a direction: a rational per coordinate
        return ",".join(_option_text(key, v) for v in value)
    raise InputError(
        f"option {key}={value!r:.60}: expected an int, a bool, a string or an exact rational "
        f"(Fraction), got {type(value).__name__}"
    )


def build(
    dataset: Dataset,
    construction: str,
    *,
    seed: int = 0,
    progress: Callable[..., None] | None = None,
    **options: object,
) -> Transformer:
    """Build the model that ``construction`` promises for ``dataset``.

    ``construction`` is a registered construction (``exactmem constructions`` lists them,
    plugins included): the built-ins are ``vys`` (Vardi, Yehudai & Shamir 2022,
    Theorem 3.1, as Kajitsuka & Sato 2025 use it in Lemma C.1; task ``points``),
    ``ks25-next-token`` (Kajitsuka & Sato 2025, Theorem 4.1) and its variants
    ``ks25-seq2seq`` (Corollary 4.1), ``ks25-token-ids`` (Theorem E.1), ``ks25-deep-sets``
    (Theorem D.1), ``ks25-bit-budget`` (Theorem F.1), ``mahdavi24`` (Mahdavi, Liao &
    Thrampoulidis 2024), ``dana25`` (Dana, Pydi & Chevaleyre 2025), ``kim23`` (Kim, Kim &
    Mozafari 2023), ``ks24`` (Kajitsuka & Sato 2024; task ``seq2seq``) and ``madden24``
    (Madden, Fox & Thrampoulidis 2024).

    ``options`` are the construction's options, exactly those of ``build --set KEY=VALUE``
    (``python -m exactmem build --help`` lists them), given as Python values:
    ``gadget="peel"``, ``group_size=3``, ``position_aware=True``, ``temperature=Fraction(1,
    8)``. They are checked and bounded as on the command line. ``seed`` fixes the random
    choices: the same seed builds the same model. ``progress``, a callable taking a message
    (``print``, or the command line's :class:`exactmem.runtime.progress.Progress`), hears the steps
    of
    the construction.

    The construction is untrusted: the model is what it built, not evidence that it works.
    Judge it with :func:`exactmem.checks.certify.certify`.

    Raises:
        InputError: an unknown construction or option, an option out of range, or a dataset
            the construction cannot take (the message names what is wrong).
    """
    from exactmem.checks.build_options import check_option_limits, parse_options

    known = _constructions()
    if isinstance(construction, Dataset):  # (its repr would fill the message: kilobytes)
        raise InputError(
            f"build(dataset, construction): got {type(dataset).__name__} and Dataset "
            "(the arguments swapped?)"
        )
    if not isinstance(construction, str):
        raise InputError(f"construction must be a name, got {type(construction).__name__}")
    if construction not in known:
        raise InputError(f"construction {construction!r} is unknown; available: {', '.join(known)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"seed must be an integer, got {seed!r:.40}")
    if not isinstance(dataset, Dataset):
        raise InputError(f"dataset must be an exactmem.Dataset, got {type(dataset).__name__}")
    try:
        parsed = parse_options(
            construction, [f"{key}={_option_text(key, value)}" for key, value in options.items()]
        )
        parsed["seed"] = seed
        check_option_limits(parsed, dataset)
        return _construct(dataset, construction, parsed, progress)
    except InputError as exc:  # the command line's messages, in the API's words
        raise InputError(str(exc).replace("--set ", "option ")) from None


def _construct(
    dataset: Dataset,
    construction: str,
    options: dict,
    progress: Callable[..., None] | None = None,
) -> Transformer:
    """Run the construction's own code (as ``build --construction NAME`` does): the builder
    its registration names (:attr:`exactmem.checks.checklist.Construction.builder`); ``progress``
    hears its steps."""
    from exactmem.checks import registry

    try:
        found = registry.get(construction)
    except KeyError as exc:
        raise InputError(f"construction {exc.args[0]}") from None
    try:
        builder = found.builder_function()
    except LookupError as exc:
        raise InputError(str(exc)) from None
    model = builder(dataset, options, progress)
    if not isinstance(model, Transformer):
        raise InputError(
            f"the builder of construction {construction!r} ({found.builder}) returned a "
            f"{type(model).__name__}, not an exactmem Transformer"
        )
    return model


# --------------------------------------------------------------------------- run


def _vector(raw: object, where: str, dim: int) -> tuple[mpq, ...]:
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
        raise InputError(f"{where}: expected a token vector (a list of {dim} numbers)")
    if len(raw) != dim:
        raise InputError(f"{where}: has {len(raw)} coordinates, the model reads {dim}")
    return tuple(parse_rational(_entry(x), f"{where}[{j}]") for j, x in enumerate(raw))


def _entry(x: object) -> object:
    """A coordinate as a dataset file holds it: ``Fraction``, ``mpq`` and NumPy integers as
    exact text; ints, strings and (refused) floats as they are."""
    if isinstance(x, numbers.Rational) and not isinstance(x, int):
        return f"{x.numerator}/{x.denominator}"
    return x


def _inputs(
    model: Transformer, inputs: Dataset | Sequence[Sequence[object]]
) -> tuple[Sequence[Sequence[mpq]], Sequence[Sequence[int]]]:
    """(vocabulary, sequences of indices into it) as the evaluators take them.

    Tokens get their position k + 1 appended when the model reads one more coordinate than
    they have (position-aware models, as :func:`exactmem.checks.certify.certify` feeds them)."""
    if isinstance(inputs, Dataset):
        if model.token_inputs:
            if inputs.task == "points" or len(inputs.vocab) > model.input_dim:
                what = "points" if inputs.task == "points" else f"{len(inputs.vocab)} tokens"
                raise InputError(
                    f"the model's embedding table has {model.input_dim} tokens, the dataset "
                    f"has {what}"
                )
            return inputs.vocab, inputs.sequences
        if inputs.task == "points":
            if inputs.dim != model.input_dim:
                raise InputError(
                    f"the model reads inputs of dimension {model.input_dim}, the dataset's "
                    f"points have {inputs.dim}"
                )
            return inputs.points, [[i] for i in range(inputs.size)]
        if model.input_dim == inputs.dim + 1:
            aware = with_positions(inputs)
            return aware.vocab, aware.sequences
        if inputs.dim != model.input_dim:
            raise InputError(
                f"the model reads inputs of dimension {model.input_dim}, the dataset's tokens "
                f"have {inputs.dim} (or {inputs.dim + 1} with their position appended)"
            )
        return inputs.vocab, inputs.sequences
    if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence) or not inputs:
        raise InputError("inputs: expected a Dataset or a non-empty list of sequences")
    seqs: list[Sequence[object]] = []
    for i, seq in enumerate(inputs):
        if isinstance(seq, str | bytes) or not isinstance(seq, Sequence) or not seq:
            raise InputError(f"inputs[{i}]: expected a non-empty list of tokens")
        if len(seq) != len(inputs[0]):
            raise InputError(f"inputs[{i}]: length {len(seq)}, expected {len(inputs[0])}")
        seqs.append(seq)
    if model.token_inputs:  # token ids; the one-hot rows of the table are the evaluator's
        ids: list[list[int]] = []
        for i, seq in enumerate(seqs):
            ids.append([])
            for k, t in enumerate(seq):
                if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < model.input_dim:
                    raise InputError(
                        f"inputs[{i}][{k}]: {t!r:.40} is not a token id of the model's "
                        f"embedding table (0..{model.input_dim - 1})"
                    )
                ids[-1].append(t)
        return [(mpq(0),)] * model.input_dim, ids
    first = seqs[0][0]
    dim = len(first) if isinstance(first, Sequence) and not isinstance(first, str) else 0
    if dim not in (model.input_dim, model.input_dim - 1):
        raise InputError(
            f"inputs[0][0]: a token of dimension {dim}; the model reads {model.input_dim} "
            f"(or {model.input_dim - 1} with the position appended)"
        )
    positions = dim == model.input_dim - 1
    index: dict[tuple[mpq, ...], int] = {}  # equal tokens are evaluated once
    rows = []
    for i, seq in enumerate(seqs):
        row = []
        for k, token in enumerate(seq):
            vec = _vector(token, f"inputs[{i}][{k}]", dim)
            row.append(index.setdefault((*vec, mpq(k + 1)) if positions else vec, len(index)))
        rows.append(row)
    return list(index), rows


def run(
    model: Transformer,
    inputs: Dataset | Sequence[Sequence[object]],
    *,
    positions: Literal["all", "last"] = "all",
    evaluator: Literal["fast", "reference"] = "fast",
    progress: Callable[[str], None] | None = None,
) -> list[list[Output]]:
    """Evaluate ``model`` exactly: ``run(model, inputs)[i][k]`` is the output vector at
    position k of sequence i, one exact rational (``gmpy2.mpq``) per output.

    ``inputs`` is a :class:`~exactmem.datasets.dataset.Dataset` (a ``points`` dataset is run as
    sequences of length one) or a list of equal-length sequences of tokens: token vectors
    (lists of ints, exact strings or ``Fraction``) or, for a model with an embedding table
    (Kajitsuka & Sato 2025, Theorem E.1), token ids. Tokens get their position k + 1 appended
    when the model reads one coordinate more than they have, as certification feeds them.

    ``positions="last"`` computes only the last position after the last attention layer (what
    next-token prediction reads): each sequence then has one output. ``evaluator`` is
    ``fast`` (numba kernels, compiled on first use and cached; the reference wherever int64
    safety is not proved) or ``reference`` (plain Python integers): both compute the same
    values.

    Raises:
        InputError: inputs that do not fit the model (the message names the index).
        InconclusiveError: a softmax attention whose scores are not all equal: its weights are
            not rational, so no exact output exists (certification then uses Arb balls).
    """
    if positions not in ("all", "last"):
        raise InputError(f"positions must be 'all' or 'last', got {positions!r}")
    evaluate: Callable[..., Trace]
    if evaluator == "fast":
        from exactmem.evaluate import fast

        evaluate = fast.run
    elif evaluator == "reference":
        from exactmem.evaluate import reference

        evaluate = reference.run
    else:
        raise InputError(f"evaluator must be 'fast' or 'reference', got {evaluator!r}")
    vocab, sequences = _inputs(model, inputs)
    trace = evaluate(model, vocab, sequences, positions=positions, progress=progress)
    return [list(trace.outputs[i]) for i in range(len(sequences))]


# --------------------------------------------------------------------------- files


def load_model(path: str | Path) -> Transformer:
    """Load a model file (``.json`` or ``.json.gz``), checking its format and SHA-256.

    A model file is data: it is parsed within limits, never executed, and what its ``meta``
    says is never a criterion of a verdict. :func:`exactmem.files.model_files.load_model` also
    returns the
    hash.

    Raises:
        InputError: an unreadable, malformed or modified file (the message names the field).
    """
    from exactmem.files.model_files import load_model as load

    model, _ = load(path)
    return model


def save_model(model: Transformer, path: str | Path) -> str:
    """Write ``model`` to ``path`` atomically (gzip-compressed if it ends in ``.gz``);
    returns the SHA-256 of its canonical content, as stored in the file."""
    from exactmem.files.model_files import save_model as save

    return save(model, path)


def import_model(path: str | Path, arch: str | None, *, heads: int | None = None) -> Transformer:
    """The exact model of a trained safetensors checkpoint of architecture ``arch``
    (``mahdavi24``, ``dana25``, ``ks25``, ``madden24``, ``gpt`` or ``gpt2``; tensor names in
    docs/trained.md): a file, or a Hugging Face ``save_pretrained`` folder (``arch`` None: the
    ``model_type`` of its ``config.json``). ``heads``: the number of heads of a ``gpt`` or
    ``nn.MultiheadAttention`` checkpoint (default: its ``__metadata__`` entry ``n_head``).

    float32, float16, bfloat16 and float64 weights are read as the exact dyadic rationals their
    bits encode; no pickle and no PyTorch are involved. What the model does is for
    :func:`exactmem.certify` to judge.

    Raises:
        InputError: a malformed checkpoint (header, offsets, dtypes), a NaN or infinite weight,
            a missing, extra or misshapen tensor (the message names the tensor).
    """
    from exactmem.checkpoints.architectures import import_checkpoint

    return import_checkpoint(path, arch, heads=heads)
