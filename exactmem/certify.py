"""From (model, dataset) to a :class:`~exactmem.verify.Certificate`.

This is the trusted path: evaluate exactly, then judge every promise from the evaluated values.
Nothing the construction said is consulted; the dataset supplies the expected labels.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from gmpy2 import mpq

from exactmem import __version__
from exactmem.data import (
    SEPARATION_LIMIT,
    Dataset,
    dataset_hash,
    radius_and_separation,
    squared_radius,
)
from exactmem.dataflow import memorizer_dataflow
from exactmem.errors import InconclusiveError, InputError
from exactmem.evaluate.reference import run as reference_run
from exactmem.exact import format_rational
from exactmem.exact_arrays import exact, int_array, ratio_equal
from exactmem.io import model_hash
from exactmem.lower_bounds import lower_bound_checks
from exactmem.model import MLP, PositionalEncoding, Transformer, has_gelu, resources
from exactmem.progress import tell
from exactmem.sequences import check_consistency, token_geometry, view, with_positions
from exactmem.verify import (
    MAX_EXAMPLES,
    Certificate,
    Check,
    ChecklistStructureError,
    activation_summary,
    check_memorizer,
    outputs_verdict,
    step_folds,
)
from exactmem.verify_ks25 import check_ks25

__all__ = [
    "CHECKLISTS",
    "CONSTRUCTIONS",
    "Criteria",
    "certificate_json",
    "certify",
    "library_versions",
    "output_width",
    "point_conflicts",
]


def library_versions() -> dict:
    import gmpy2
    import numpy

    return {
        "exactmem": __version__,
        "python": platform.python_version(),
        "gmpy2": gmpy2.version(),
        "numpy": numpy.__version__,
        "mpmath": _version("mpmath", "mpmath"),
        "python-flint": _version("flint", "python-flint"),
    }


def _version(module: str, distribution: str) -> str | None:
    """A library's version without importing it for that (mpmath and flint cost a tenth of a
    second, and a verification may need neither): the loaded module's, else the installed
    distribution's."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return loaded.__version__
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:  # pragma: no cover - a declared dependency
        return None


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


def _geometry(vectors, what: str, geometry=None) -> dict:
    """The count, r² and δ² of ``vectors``; ``geometry()`` gives (r², δ²) if the caller has
    them (measured once)."""
    if len(vectors) > SEPARATION_LIMIT:
        r2, delta2 = squared_radius(vectors), None
    else:
        r2, delta2 = geometry() if geometry else radius_and_separation(vectors)
    figures = {what: len(vectors), "r2": format_rational(r2)}
    if len(vectors) <= SEPARATION_LIMIT:
        figures["delta2"] = None if delta2 is None else format_rational(delta2)
    else:
        figures["delta2"] = f"not measured (more than {SEPARATION_LIMIT} vectors)"
    return figures


CONSTRUCTIONS = (
    "vys",
    "ks25-next-token",
    "ks25-seq2seq",
    "ks25-token-ids",
    "ks25-deep-sets",
    "ks25-bit-budget",
    "mahdavi24",
    "dana25",
    "kim23",
    "ks24",
    "madden24",
)
"""The constructions whose checklists the verifier knows (``verify --construction NAME``)."""

CHECKLISTS = {
    "vys": "Lemma C.1 stages I–III of the memorizer (points)",
    "ks25-next-token": "Theorem 4.1 items 3–9, both memorizers' Lemma C.1 stages, Theorem 4.2",
    "ks25-seq2seq": "Corollary 4.1: Theorem 4.1's checklist at every position",
    "ks25-token-ids": "Theorem E.1: Theorem 4.1's checklist with token ids ≥ 1 apart",
    "ks25-deep-sets": "Theorem D.1: Theorem 4.1's checklist on multisets (set ids)",
    "ks25-bit-budget": "Theorem F.1: Theorem 4.1's checklist, memorizers checked per sub-network",
    "mahdavi24": "Mahdavi et al. 2024: n < d, A1, A2, the rank of the model's own attention "
    "features (exact, or certified on balls), capacity H(min(n, d_h) − 1) + 1, Proposition 2's "
    "ceiling",
    "dana25": "Dana et al. 2025: Lemma 2's feature rank (Arb), capacity H·d_h + d",
    "kim23": "Kim et al. 2023: 2n attention layers of head size 1, context values equal on "
    "equivalent sequences, (context, token) ids distinct where labels differ, attention "
    "ties and margins, the memorizer's Lemma C.1 stages",
    "ks24": "Kajitsuka & Sato 2024: tokenwise separatedness, the contextual-mapping gap of the "
    "rank-one softmax head (Arb), the FFN's exact re-quantization, labels exact",
    "madden24": "Madden et al. 2024: injective last-position outputs, full row rank of the GELU "
    "features (m ≥ n − 1), targets within --tolerance, the dimension count k ≥ n(ω − 1) (Arb)",
}


@dataclass(frozen=True)
class Criteria:
    """What the user asked the verdict to mean: printed in every certificate.

    ``construction``: whose full checklist is demanded (None: the construction-independent
    checks only). ``tolerance``: how far a regression output may be from its label (None:
    exactly). Nothing here is read from the model file."""

    construction: str | None = None
    tolerance: mpq | None = None
    max_precision: int | None = None  # Arb bits before a softmax label is inconclusive

    def __post_init__(self) -> None:
        if self.construction is not None and self.construction not in CONSTRUCTIONS:
            raise InputError(
                f"--construction {self.construction!r} is unknown; available: "
                f"{', '.join(CONSTRUCTIONS)}"
            )
        if self.tolerance is not None and mpq(self.tolerance) < 0:
            raise InputError(f"--tolerance {self.tolerance}: must be ≥ 0")
        mp = self.max_precision
        if mp is not None and (isinstance(mp, bool) or not isinstance(mp, int) or mp < 64):
            raise InputError(f"--max-precision {mp!r}: must be an integer ≥ 64 (bits)")


def certify(
    model: Transformer,
    dataset: Dataset,
    *,
    construction: str | None = None,
    tolerance: mpq | str | None = None,
    progress: Callable[[str], None] | None = None,
    per_layer: bool = True,
    jobs: int = 1,
    evaluator: str = "fast",
    max_precision: int | None = None,
    cluster=None,
    reference=None,
    reference_tolerance: mpq | None = None,
) -> Certificate:
    """Evaluate ``model`` on ``dataset`` exactly and judge it.

    The verdict's criteria come from the caller, never from ``model.meta``: ``construction``
    demands that construction's full checklist (a model lacking a stage it needs is refuted);
    ``tolerance`` (an exact rational) loosens regression labels from exact equality to
    |output − label| ≤ tolerance. How inputs are fed (token vectors, vectors with their position
    appended, token ids) and how outputs are read (one value: a label; C values: logits, argmax
    with a positive margin) are recomputed from the weights and printed in the certificate.

    ``evaluator`` is ``fast`` (:mod:`exactmem.evaluate.fast`: int64 rows and class-shared
    multi-limb lanes, falling back to the reference wherever it cannot prove int64 safety) or
    ``reference`` (plain Python integers, in ``jobs`` processes for the token-wise sub-layers).
    Both compute the same values, lanes and statistics.

    ``max_precision`` caps the Arb precision (bits) of softmax models, judged on balls: an
    example still undecided there makes the answer inconclusive (default 2^12 for
    regression labels, 2^14 per argmax example).

    ``cluster`` (an :class:`exactmem.distributed.Cluster`) runs the fast evaluator's MLP
    sub-layers sharded on Dask workers; the certificate is the same.

    ``reference`` (:class:`exactmem.reference_logits.Reference`: the framework's own logits of
    this dataset) adds the check ``reference_logits``: every one within float32 rounding
    (τ·(1 + |x|), τ printed; ``reference_tolerance`` replaces it) of its certified enclosure."""
    criteria = Criteria(construction, None if tolerance is None else mpq(tolerance), max_precision)
    if criteria.construction == "madden24":
        from exactmem.verify_madden24 import require_tolerance

        require_tolerance(dataset, criteria.tolerance)
    evaluator = _evaluator_for(evaluator, model)  # the certificate names the one that ran
    run = _evaluator(evaluator)
    if cluster is not None and evaluator == "fast":
        run = cluster.run
    readout = _readout(model, dataset)
    res = resources(model)  # one pass over every weight, for the certificate and the bounds
    feed = "vectors"
    tokens = None  # the dataset's token rows as an array, if the checks made one
    if dataset.task == "points":
        _require_task(criteria, dataset)
        checks, trace, data = _points(
            model, dataset, progress, jobs, run, criteria, readout, res=res
        )
        stats = trace.stats
    elif dataset.task in ("next-token", "seq2seq"):
        _require_task(criteria, dataset)
        feed = _feed(model, dataset)
        if feed == "vectors with positions":
            dataset = with_positions(dataset)
        checks, stats, data, tokens = _sequences(
            model, dataset, progress, jobs, run, criteria, readout, feed, res=res
        )
    else:
        raise InputError(f"task {dataset.task!r} is not supported by this version's verifier")
    if reference is not None:
        from exactmem.reference_logits import reference_check

        checks.append(
            reference_check(
                model,
                dataset,
                reference,
                tolerance=reference_tolerance,
                limit=max_precision or 1 << 14,
            )
        )
    subject = {
        "task": dataset.task,
        "dataset_sha256": dataset_hash(dataset, tokens=tokens),
        "model_sha256": model_hash(model),
        "construction": criteria.construction,
        "criteria": {
            "construction": criteria.construction,
            "checklist": CHECKLISTS.get(
                criteria.construction or "",
                "construction-independent checks only (no --construction given)",
            ),
            "tolerance": None
            if criteria.tolerance is None
            else format_rational(criteria.tolerance),
            "readout": readout,
            **({"max_precision": max_precision} if max_precision is not None else {}),
            **(
                {
                    "reference_logits": {
                        "sha256": reference.sha256,
                        "tolerance": None
                        if reference_tolerance is None
                        else format_rational(mpq(reference_tolerance)),
                    }
                }
                if reference is not None
                else {}
            ),
            "inputs": "token ids" if model.token_inputs else feed,
            "checks_run": [c.name for c in checks],
        },
        "model_says": _untrusted_labels(model),
        "evaluator": evaluator,
        "versions": library_versions(),
        "argv": sys.argv[1:],
    }
    return Certificate(
        checks=checks,
        resources=res,
        activation=activation_summary(stats, per_layer=per_layer),
        subject=subject,
        data=data,
    )


def _untrusted_labels(model: Transformer) -> dict:
    """What the model file says about itself — printed as a label, never read by a check."""
    meta = model.meta if isinstance(model.meta, dict) else {}
    said = {k: meta[k] for k in ("construction", "theorem", "options") if k in meta}
    said["layout"] = [
        {"label": s.label, **s.meta}
        for s in model.sublayers
        if isinstance(s, MLP) and isinstance(s.meta, dict) and s.meta
    ]
    return said


TASKS = {
    "vys": ("points",),
    "ks25-seq2seq": ("seq2seq",),
    "mahdavi24": ("next-token",),
    "dana25": ("next-token",),
    "kim23": ("seq2seq", "next-token"),
    "ks24": ("seq2seq",),
    "madden24": ("next-token",),
}


def _require_task(criteria: Criteria, dataset: Dataset) -> None:
    name = criteria.construction
    if name is None:
        return
    tasks = TASKS.get(name, ("next-token",))
    if dataset.task not in tasks:
        raise InputError(
            f"--construction {name} certifies task {' or '.join(tasks)}; the dataset has task "
            f"{dataset.task!r}"
        )


def output_width(model: Transformer) -> int:
    """How many values the model outputs per position, from its weights."""
    if model.unembed is not None:
        return model.unembed.out_dim
    width = model.embed.out_dim if model.embed else model.input_dim
    for s in model.sublayers:
        if isinstance(s, MLP):
            width = s.out_dim
    return width


def _readout(model: Transformer, dataset: Dataset) -> str:
    """``label`` (one output: the label itself) or ``argmax`` (C outputs: logits), from the
    model's output width; anything else cannot be judged."""
    width = output_width(model)
    if width == 1:
        return "label"
    if width == dataset.num_classes:
        return "argmax"
    raise InputError(
        f"the model outputs {width} values per position; expected 1 (the label) or "
        f"C = {dataset.num_classes} (logits)"
    )


def _feed(model: Transformer, dataset: Dataset) -> str:
    """How the dataset's tokens enter the model, from its input width: the token vectors, or
    the vectors with their position k + 1 appended (position-aware models)."""
    if model.token_inputs:
        return "token ids"
    if model.input_dim == dataset.dim:
        return "vectors"
    if model.input_dim == dataset.dim + 1:
        return "vectors with positions"
    raise InputError(
        f"the model takes inputs of dimension {model.input_dim}, the dataset's tokens have "
        f"{dataset.dim} (or {dataset.dim + 1} with their position appended)"
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


def _evaluator_for(name: str, model: Transformer) -> str:
    """The fast evaluator knows neither GELU nor causal masks: such models go to the reference
    evaluator (which refuses GELU as transcendental: the checks then run on Arb balls)."""
    causal = any(getattr(s, "mask", "") == "causal" for s in model.sublayers)
    return "reference" if name == "fast" and (has_gelu(model) or causal) else name


def _checklist(name: str, run_checks: Callable[[], list[Check]]) -> list[Check]:
    """Run a construction's checklist; a model without the parts it reads is refuted by a
    failed ``NAME.structure`` check, never judged on fewer checks."""
    try:
        return run_checks()
    except ChecklistStructureError as exc:
        why = str(exc)
    except (KeyError, ValueError, IndexError, StopIteration) as exc:  # a lane or stage missing
        why = f"{type(exc).__name__}: {exc}"
    return [
        Check(
            f"{name}.structure",
            False,
            f"the model does not have the structure the {name} checklist reads ({why})",
        )
    ]


def _not_exactly_uniform() -> list[Check]:
    raise ChecklistStructureError("its attention is not exactly uniform on this dataset")


def _points(model, dataset, progress, jobs, run, criteria: Criteria, readout: str, res=None):
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
    if readout == "argmax":
        from exactmem.verify_attention import exact_classification_check  # imports flint

        checks = [exact_classification_check(trace.outputs, dataset.labels, "points")]
    else:
        got, den = trace.outputs.first_lane()
        checks = [_label_check(got, den, dataset.labels, criteria.tolerance, "points")]
    checks += lower_bound_checks(model, dataset, res=res)
    if criteria.construction == "vys":
        expected = {i: y for i, y in enumerate(dataset.labels)}

        def memorizer() -> list[Check]:
            # Theorem 3.1's network is one MLP: a layer beside it would escape the checklist
            first = model.sublayers[0] if len(model.sublayers) == 1 else None
            if not isinstance(first, MLP) or model.embed or model.unembed:
                raise ChecklistStructureError("the model is not one MLP")
            checks = check_memorizer(trace, first, expected, lambda r: f"points[{r}]")
            # the checked read-out must be what produces the output (issue 26, file C)
            return [*checks, memorizer_dataflow("vys.dataflow", model, 0)]

        checks += _checklist("vys", memorizer)
    data = {**_geometry(dataset.points, "N"), "C": dataset.num_classes, "d": dataset.dim}
    return checks, trace, data


def _consistency_mode(model, dataset, criteria: Criteria, feed: str) -> str:
    if criteria.construction == "ks25-deep-sets":
        return "multiset"
    if feed == "vectors with positions" or any(
        isinstance(s, PositionalEncoding) for s in model.sublayers
    ):
        return "sequence"  # positions break permutation equivariance: only equal sequences
    return dataset.task


def _ball_labels(model, dataset, readout: str, criteria: Criteria):
    """Labels of a softmax model on balls: argmax per example with margins and the float
    evaluation beside (:mod:`exactmem.verify_margins`), else within the tolerance."""
    from exactmem.evaluate.softmax import MAX_PRECISION
    from exactmem.verify_attention import ball_label_check
    from exactmem.verify_margins import margin_check

    if readout == "argmax":
        limit = criteria.max_precision or MAX_PRECISION
        return margin_check(model, dataset, limit=limit)
    limit = criteria.max_precision or (1 << 12)
    return ball_label_check(
        model, dataset, readout=readout, tolerance=criteria.tolerance, limit=limit
    )


def _sequences(
    model, dataset, progress, jobs, run, criteria: Criteria, readout: str, feed: str, res=None
):
    """Next-token (judged at the last position) and seq-to-seq (every position)."""
    construction = criteria.construction or ""
    if model.token_inputs:
        if len(dataset.vocab) > model.input_dim:
            raise InputError(
                f"the model's embedding table has {model.input_dim} tokens, the "
                f"dataset's vocabulary {len(dataset.vocab)}"
            )
    else:
        _require_dim(model, dataset.dim, "tokens")
    sv = check_consistency(
        dataset,
        _consistency_mode(model, dataset, criteria, feed),
        view(dataset, by_index=model.token_inputs),
        position_advice=not model.token_inputs and feed != "vectors with positions",
    )
    seq2seq = dataset.task == "seq2seq"
    # the construction checklists read Arb balls (flint): imported only when they run
    if construction == "kim23":
        from exactmem.verify_kim23 import check_kim23, hardmax_limit, has_softmax
    limit_trace = None  # kim23 with unequal softmax scores: its checklist reads the limit
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
        trace = None  # unequal softmax scores: certify on Arb enclosures instead
        if construction == "kim23" and has_softmax(model):
            # the exact hardmax limit; kim23.softmax certifies the model equal to it after
            # every re-quantizing FFN — only then are the limit's labels the model's
            limit_trace = run(
                hardmax_limit(model),
                dataset.vocab,
                dataset.sequences,
                positions="all" if seq2seq else "last",
                progress=progress,
                jobs=jobs,
                folds=step_folds(model),
            )
    phases = 2 + bool(construction)
    tell(progress, "checks: the labels", phase="checks", done=0, total=phases)
    if trace is None or readout == "argmax" or construction in ("mahdavi24", "dana25"):
        # the checks of softmax and attention features import flint: only when they run
        from exactmem.verify_attention import (
            dana_checks,
            exact_classification_check,
            mahdavi_checks,
        )
    kim23_checks = None
    if limit_trace is not None:
        kim23_checks = _checklist(
            construction, lambda: check_kim23(limit_trace, model, dataset, sv)
        )
        checks = _kim23_softmax_labels(
            model, dataset, limit_trace, kim23_checks, readout, criteria, seq2seq
        )
    elif trace is None and seq2seq and readout != "argmax":  # argmax: per-example margins
        from exactmem.verify_ks24 import ball_seq2seq_label_check

        checks = [
            ball_seq2seq_label_check(model, dataset, readout=readout, tolerance=criteria.tolerance)
        ]
    elif trace is None:
        checks = [_ball_labels(model, dataset, readout, criteria)]
    elif readout == "argmax":
        checks = [exact_classification_check(trace.outputs, dataset.labels)]
    else:
        got, den = trace.outputs.first_lane()
        if not seq2seq:
            got = got[:, -1:]
        where = "seq2seq" if seq2seq else "sequences"
        checks = [_label_check(got, den, dataset.labels, criteria.tolerance, where)]
    if construction:
        step = f"checks: the {construction} checklist"
        tell(progress, step, phase="checks", done=1, total=phases)
    if construction.startswith("ks25-"):
        if trace is None:
            checks += _checklist(construction, _not_exactly_uniform)
        else:
            checks += _checklist(
                construction, lambda: check_ks25(trace, model, dataset, sv, construction)
            )
    if construction == "mahdavi24":
        checks += _checklist(construction, lambda: mahdavi_checks(model, dataset))
    if construction == "dana25":
        checks += _checklist(construction, lambda: dana_checks(model, dataset))
    if construction == "kim23":
        if kim23_checks is not None:
            checks += kim23_checks
        elif trace is None:
            checks += _checklist(construction, _not_exactly_uniform)
        else:
            checks += _checklist(construction, lambda: check_kim23(trace, model, dataset, sv))
    if construction == "ks24":
        from exactmem.verify_ks24 import check_ks24

        checks += _checklist(construction, lambda: check_ks24(model, dataset))
    if construction == "madden24":
        from exactmem.verify_madden24 import dimension_count_checks, madden_checks

        checks += _checklist(
            construction, lambda: madden_checks(model, dataset, criteria.tolerance)
        )
        # the upper bound reads only k, n and ω: it judges any model, decoder or not (on
        # target distributions only: labels alone are an open set of logits)
        checks += dimension_count_checks(model, dataset)
    tell(progress, "checks: the lower bounds", phase="checks", done=phases - 1, total=phases)
    checks += lower_bound_checks(
        model,
        dataset,
        sv,
        run,
        theorem_4_2=construction.startswith("ks25-"),
        res=res,
        trace=trace,
    )
    tell(progress, "", phase="checks", done=phases, total=phases)
    tokens = [dataset.vocab[t] for t in sv.tokens]
    data = {
        "N": dataset.size,
        "n": len(dataset.sequences[0]),
        "d": dataset.dim,
        "C": dataset.num_classes,
        **_geometry(tokens, "tokens", lambda: token_geometry(dataset, sv)),
        "distinct_multisets": len(sv.first_of_multiset),
        "position_aware": feed == "vectors with positions",
        "vocabulary": len(dataset.vocab),
    }
    stats = trace.stats if trace is not None else []
    # the canonical tokens are the vocabulary indices themselves when no two tokens are equal
    identity = sv.canonical == tuple(range(len(dataset.vocab)))
    return checks, stats, data, sv.canonical_sequences if identity else None


def _kim23_softmax_labels(model, dataset, limit_trace, kim23_checks, readout, criteria, seq2seq):
    """The labels of a kim23 softmax model, judged on the model: read on its exact hardmax limit
    where ``kim23.softmax`` certified the model equal to it after every re-quantizing FFN (and
    its structure held), else on Arb balls of the model itself; when those stay undecided no
    labels line is printed (the failed checklist refutes)."""
    from exactmem.verify_attention import exact_classification_check

    certified = any(c.name == "kim23.softmax" and c.passed for c in kim23_checks) and all(
        c.passed for c in kim23_checks if c.name.endswith(".structure")
    )
    if certified:
        if readout == "argmax":
            check = exact_classification_check(limit_trace.outputs, dataset.labels)
        else:
            got, den = limit_trace.outputs.first_lane()
            if not seq2seq:
                got = got[:, -1:]
            where = "seq2seq" if seq2seq else "sequences"
            check = _label_check(got, den, dataset.labels, criteria.tolerance, where)
        return [
            replace(
                check,
                detail=check.detail + " (the model equals its hardmax limit after every "
                "re-quantizing FFN: kim23.softmax)",
            )
        ]
    try:
        if seq2seq:
            from exactmem.verify_ks24 import ball_seq2seq_label_check

            return [
                ball_seq2seq_label_check(
                    model,
                    dataset,
                    readout=readout,
                    tolerance=criteria.tolerance,
                    limit=criteria.max_precision or 1024,  # a failed checklist refutes anyway
                )
            ]
        return [_ball_labels(model, dataset, readout, criteria)]
    except InconclusiveError:
        return []


def _label_check(got: np.ndarray, den: int, labels, tolerance: mpq | None, where: str) -> Check:
    """Every judged output equals its label exactly — or, with a user's ``tolerance``, lies
    within it — compared on the numerator arrays (|p/den − y| ≤ a/b ⇔ b·|p − y·den| ≤ a·den);
    rationals are built only for the outputs reported wrong. Labels are exact integers of any
    size."""
    want = int_array(labels).reshape(len(labels), -1)
    got = got.reshape(want.shape)
    if tolerance is None or tolerance == 0:
        wrong = np.argwhere(~ratio_equal(exact(got), den, want, 1))
    else:
        tol = mpq(tolerance)
        a, b = int(tol.numerator), int(tol.denominator)
        diff = np.abs(np.asarray(got, dtype=object) - np.asarray(want, dtype=object) * den)
        wrong = np.argwhere(diff * b > a * den)

    def name(i: int, k: int) -> str:
        if where == "seq2seq":
            return f"sequences[{i}][{k}]"
        return f"{where}[{i}]"

    bad = [
        f"{name(i, k)}: output {format_rational(mpq(int(got[i, k]), den))}, "
        f"expected {int(want[i, k])}"
        for i, k in wrong[: MAX_EXAMPLES + 1].tolist()
    ]
    check = outputs_verdict("labels", bad, len(wrong), want.size)
    if tolerance is not None and check.passed:
        return Check(
            "labels",
            True,
            f"all {want.size} outputs within {format_rational(mpq(tolerance))} of their labels "
            "(--tolerance)",
            {"count": want.size, "tolerance": format_rational(mpq(tolerance))},
        )
    return check


def certificate_json(cert: Certificate) -> dict:
    """The certificate's JSON object (:meth:`Certificate.to_json`)."""
    return cert.to_json()
