"""From (model, dataset) to a :class:`~exactmem.verify.Certificate`.

This is the trusted path: evaluate exactly, then judge every promise from the evaluated values.
Nothing the construction said is consulted; the dataset supplies the expected labels.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable

import numpy as np
from gmpy2 import mpq

from exactmem import __version__
from exactmem.data import (
    SEPARATION_LIMIT,
    Dataset,
    dataset_hash,
    squared_radius,
    squared_separation,
)
from exactmem.errors import InconclusiveError, InputError
from exactmem.evaluate.reference import Outputs
from exactmem.evaluate.reference import run as reference_run
from exactmem.exact import format_rational
from exactmem.exact_arrays import exact, ratio_equal
from exactmem.io import model_hash
from exactmem.lower_bounds import lower_bound_checks
from exactmem.model import MLP, PositionalEncoding, Transformer, resources
from exactmem.sequences import check_consistency, view, with_positions
from exactmem.verify import (
    MAX_EXAMPLES,
    Certificate,
    Check,
    activation_summary,
    check_memorizer,
    check_outputs,
    outputs_verdict,
    step_folds,
)
from exactmem.verify_attention import (
    ball_label_check,
    dana_checks,
    exact_classification_check,
    mahdavi_checks,
)
from exactmem.verify_ks25 import check_ks25

__all__ = ["certify", "library_versions", "point_conflicts"]


def library_versions() -> dict:
    import gmpy2
    import mpmath
    import numpy

    versions = {
        "exactmem": __version__,
        "python": platform.python_version(),
        "gmpy2": gmpy2.version(),
        "numpy": numpy.__version__,
        "mpmath": mpmath.__version__,
    }
    try:
        import flint

        versions["python-flint"] = flint.__version__
    except ImportError:  # pragma: no cover - a declared dependency
        versions["python-flint"] = None
    return versions


def point_conflicts(dataset: Dataset) -> None:
    """Equal points with different labels cannot be memorized: exit 2 naming both indices."""
    first: dict[tuple, int] = {}
    for i, p in enumerate(dataset.points):
        j = first.setdefault(tuple(p), i)
        if j != i and dataset.labels[j] != dataset.labels[i]:
            raise InputError(
                f"points[{j}] and points[{i}] are equal but labelled "
                f"{dataset.labels[j]} and {dataset.labels[i]}"
            )


def _geometry(vectors, what: str) -> dict:
    figures = {what: len(vectors), "r2": format_rational(squared_radius(vectors))}
    if len(vectors) <= SEPARATION_LIMIT:
        delta2 = squared_separation(vectors)
        figures["delta2"] = None if delta2 is None else format_rational(delta2)
    else:
        figures["delta2"] = f"not measured (more than {SEPARATION_LIMIT} vectors)"
    return figures


def certify(
    model: Transformer,
    dataset: Dataset,
    *,
    progress: Callable[[str], None] | None = None,
    per_layer: bool = True,
    jobs: int = 1,
    evaluator: str = "fast",
) -> Certificate:
    """Evaluate ``model`` on ``dataset`` exactly and judge it.

    ``evaluator`` is ``fast`` (:mod:`exactmem.evaluate.fast`: int64 rows and class-shared
    multi-limb lanes, falling back to the reference wherever it cannot prove int64 safety) or
    ``reference`` (plain Python integers, in ``jobs`` processes for the token-wise sub-layers).
    Both compute the same values, lanes and statistics."""
    run = _evaluator(evaluator)
    if dataset.task == "points":
        checks, trace, data = _points(model, dataset, progress, jobs, run)
        stats = trace.stats
    elif dataset.task in ("next-token", "seq2seq"):
        if model.meta.get("position_aware"):
            dataset = with_positions(dataset)
        checks, stats, data = _sequences(model, dataset, progress, jobs, run)
    else:
        raise InputError(f"task {dataset.task!r} is not supported by this version's verifier")
    subject = {
        "task": dataset.task,
        "dataset_sha256": dataset_hash(dataset),
        "model_sha256": model_hash(model),
        "construction": model.meta.get("construction"),
        "options": model.meta.get("options", {}),
        "layout": [
            {"label": s.label, **s.meta} for s in model.sublayers if isinstance(s, MLP) and s.meta
        ],
        "evaluator": evaluator,
        "versions": library_versions(),
        "argv": sys.argv[1:],
    }
    return Certificate(
        checks=checks,
        resources=resources(model),
        activation=activation_summary(stats, per_layer=per_layer),
        subject=subject,
        data=data,
    )


def _require_dim(model: Transformer, dim: int, what: str) -> None:
    if dim != model.input_dim:
        raise InputError(
            f"the model takes inputs of dimension {model.input_dim}, the dataset's {what} have "
            f"{dim}"
        )


EVALUATORS = ("fast", "reference")


def _evaluator(name: str) -> Callable:
    if name == "fast":
        from exactmem.evaluate.fast import run as fast_run

        return fast_run
    if name == "reference":
        return reference_run
    raise InputError(f"evaluator {name!r} is not one of {', '.join(EVALUATORS)}")


def _points(model, dataset, progress, jobs=1, run=None):
    _require_dim(model, dataset.dim, "points")
    point_conflicts(dataset)
    if model.has_attention:
        raise InputError("a points model must be token-wise (no attention sub-layers)")
    trace = run(
        model,
        dataset.points,
        [[i] for i in range(dataset.size)],
        progress=progress,
        jobs=jobs,
        folds=step_folds(model),
    )
    outs = []
    for i, (out, y) in enumerate(zip(trace.outputs, dataset.labels, strict=True)):
        if len(out[0]) != 1:
            raise InputError(f"the model outputs {len(out[0])} values per input, expected 1")
        outs.append((f"points[{i}]", out[0][0], y))
    checks = [check_outputs("labels", outs)]
    checks += lower_bound_checks(model, dataset)
    first = model.sublayers[0] if model.sublayers else None
    if isinstance(first, MLP) and "group_size" in first.meta:
        expected = {i: y for i, y in enumerate(dataset.labels)}
        checks += check_memorizer(trace, first, expected, lambda r: f"points[{r}]")
    data = {**_geometry(dataset.points, "N"), "C": dataset.num_classes, "d": dataset.dim}
    return checks, trace, data


def _consistency_mode(model, dataset) -> str:
    construction = model.meta.get("construction") or ""
    if construction == "ks25-deep-sets":
        return "multiset"
    if any(isinstance(s, PositionalEncoding) for s in model.sublayers):
        return "sequence"  # positions break permutation equivariance: only equal sequences
    return dataset.task


def _sequences(model, dataset, progress, jobs=1, run=None):
    """Next-token (judged at the last position) and seq-to-seq (every position)."""
    construction = model.meta.get("construction") or ""
    if model.token_inputs:
        if len(dataset.vocab) > model.input_dim:
            raise InputError(
                f"the model's embedding table has {model.input_dim} tokens, the "
                f"dataset's vocabulary {len(dataset.vocab)}"
            )
    else:
        _require_dim(model, dataset.dim, "tokens")
    sv = check_consistency(
        dataset, _consistency_mode(model, dataset), view(dataset, by_index=model.token_inputs)
    )
    seq2seq = dataset.task == "seq2seq"
    readout = model.meta.get("readout", "regression")
    try:
        trace = run(
            model,
            dataset.vocab,
            dataset.sequences,
            positions="all" if seq2seq else "last",
            progress=progress,
            jobs=jobs,
            folds=step_folds(model),
        )
    except InconclusiveError:
        if seq2seq:
            raise
        trace = None  # unequal softmax scores: certify on Arb enclosures instead
    if trace is None:
        checks = [ball_label_check(model, dataset)]
    elif readout == "classification":
        checks = [exact_classification_check(trace.outputs, dataset.labels)]
    else:
        checks = [_label_check(trace.outputs, dataset.labels, seq2seq)]
    if construction.startswith("ks25-"):
        checks += check_ks25(trace, model, dataset, sv)
    if construction == "mahdavi24":
        checks += mahdavi_checks(model, dataset)
    if construction == "dana25":
        checks += dana_checks(model, dataset)
    checks += lower_bound_checks(model, dataset, sv, run)
    tokens = [dataset.vocab[t] for t in sv.tokens]
    data = {
        "N": dataset.size,
        "n": len(dataset.sequences[0]),
        "d": dataset.dim,
        "C": dataset.num_classes,
        **_geometry(tokens, "tokens"),
        "distinct_multisets": len(sv.first_of_multiset),
        "position_aware": bool(model.meta.get("position_aware")),
        "vocabulary": len(dataset.vocab),
    }
    stats = trace.stats if trace is not None else []
    return checks, stats, data


def _label_check(outputs: Outputs, labels, seq2seq: bool) -> Check:
    """Every judged output equals its label exactly, compared on the numerator arrays;
    rationals are built only for the outputs reported wrong."""
    if len(outputs.columns) != 1:
        raise InputError(f"the model outputs {len(outputs.columns)} values per token, expected 1")
    got, den = outputs.first_lane()
    want = exact(np.array(labels, dtype=object)).reshape(len(labels), -1)
    if not seq2seq:
        got = got[:, -1:]
    wrong = np.argwhere(~ratio_equal(exact(got), den, want, 1))
    bad = [
        f"{f'sequences[{i}][{k}]' if seq2seq else f'sequences[{i}]'}: output "
        f"{format_rational(mpq(int(got[i, k]), den))}, expected {int(want[i, k])}"
        for i, k in wrong[: MAX_EXAMPLES + 1].tolist()
    ]
    return outputs_verdict("labels", bad, len(wrong), want.size)


def certificate_json(cert: Certificate) -> dict:
    return {
        "verdict": cert.verdict,
        "subject": cert.subject,
        "data": cert.data,
        "resources": cert.resources.as_dict(),
        "checks": [c.as_dict() for c in cert.checks],
        "activation": cert.activation,
    }
