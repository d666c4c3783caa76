"""From (model, dataset) to a :class:`~exactmem.checks.certificate.Certificate`.

This is the trusted path: evaluate exactly, then judge every promise from the evaluated values.
Nothing the construction said is consulted; the dataset supplies the expected labels.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from gmpy2 import mpq

from exactmem.checks.certificate import (
    MAX_EXAMPLES,
    Certificate,
    Check,
    activation_summary,
    library_versions,
    outputs_verdict,
    step_folds,
)
from exactmem.checks.checklist import (
    Checklist,
    Construction,
    Evidence,
    guarded,
    undecided_if_inconclusive,
)
from exactmem.checks.lower_bounds import lower_bound_checks
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.exact import format_rational
from exactmem.core.exact_arrays import exact, int_array, ratio_equal
from exactmem.core.model import (
    MLP,
    Attention,
    PositionalEncoding,
    Transformer,
    has_gelu,
    resources,
)
from exactmem.datasets.dataset import (
    Dataset,
    _geometry,
    dataset_hash,
    point_conflicts,
)
from exactmem.datasets.sequences import check_consistency, token_geometry, view, with_positions
from exactmem.evaluate.reference import run as reference_run
from exactmem.files.model_json import model_hash
from exactmem.runtime.progress import tell

__all__ = [
    "Criteria",
    "certificate_json",
    "certify",
    "checklist_of",
    "hardmax_limit",
    "library_versions",
    "output_width",
    "point_conflicts",
]


def __getattr__(name: str):
    """``CONSTRUCTIONS`` and ``CHECKLISTS`` of earlier releases, now read off the registry
    (:mod:`exactmem.checks.registry`): the installed constructions' names, and their checklists'
    summaries."""
    if name == "CONSTRUCTIONS":
        from exactmem.checks import registry

        return registry.names()
    if name == "CHECKLISTS":
        from exactmem.checks import registry

        return {
            c.name: c.checklist.summary
            for c in registry.constructions().values()
            if c.checklist is not None
        }
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def checklist_of(construction: str | Checklist | Construction | None) -> Checklist | None:
    """The checklist a caller demands: a registered construction's by name
    (:mod:`exactmem.checks.registry`), a :class:`~exactmem.checks.checklist.Construction`'s, or a
    :class:`~exactmem.checks.checklist.Checklist` given directly; None for none."""
    if construction is None:
        return None
    if isinstance(construction, Checklist):
        return construction
    if isinstance(construction, Construction):
        found = construction.checklist
        name = construction.name
    elif isinstance(construction, str):
        from exactmem.checks import registry

        try:
            found = registry.get(construction).checklist
        except KeyError as exc:
            raise InputError(f"--construction {exc.args[0]}") from None
        name = construction
    else:
        raise InputError(
            f"construction must be a name, a Construction or a Checklist, got "
            f"{type(construction).__name__}"
        )
    if found is None or found.run is None:
        raise InputError(f"--construction {name!r} registers no checklist to demand")
    return found


@dataclass(frozen=True)
class Criteria:
    """What the user asked the verdict to mean: printed in every certificate.

    ``construction``: whose full checklist is demanded (None: the construction-independent
    checks only), a registered construction's name — or give the ``checklist`` itself.
    ``tolerance``: how far a regression output may be from its label (None: exactly).
    ``bounds``: the user's own resource bounds (claim-file formulas by metric). ``options``:
    the build options the user states the model was built with (``verify --set``), checked
    against the construction's declared options and parsed as ``build --set`` parses them;
    the declared bounds that name them are judged with these values. Nothing here is read from
    the model file."""

    construction: str | None = None
    tolerance: mpq | None = None
    max_precision: int | None = None  # Arb bits before a softmax label is inconclusive
    checklist: Checklist | None = None
    bounds: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.checklist is None and self.construction is not None:
            object.__setattr__(self, "checklist", checklist_of(self.construction))
        if self.checklist is not None and self.construction is None:
            object.__setattr__(self, "construction", self.checklist.name)
        if self.tolerance is not None and mpq(self.tolerance) < 0:
            raise InputError(f"--tolerance {self.tolerance}: must be ≥ 0")
        mp = self.max_precision
        if mp is not None and (isinstance(mp, bool) or not isinstance(mp, int) or mp < 64):
            raise InputError(f"--max-precision {mp!r}: must be an integer ≥ 64 (bits)")
        if not isinstance(self.bounds, Mapping):
            raise InputError("bounds: expected a mapping of metric to formula")
        from exactmem.checks.checklist import BOUND_METRICS

        for metric, text in self.bounds.items():
            if metric not in BOUND_METRICS:
                raise InputError(
                    f"bounds: unknown metric {metric!r}; known: {', '.join(BOUND_METRICS)}"
                )
            if not isinstance(text, str):
                raise InputError(f"bounds.{metric}: expected a formula string")
        object.__setattr__(self, "options", _user_options(self.construction, self.options))


def _user_options(construction: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked against ``construction``'s declared ``--set`` options and parsed by
    the same parsers (:func:`exactmem.plugins.options.parse_options`): a value given as text is
    parsed, any other (an int, a bool) as its text — one form whatever the caller."""
    if not isinstance(options, Mapping):
        raise InputError("options: expected a mapping of option to value")
    if not options:
        return {}
    if construction is None:
        raise InputError("--set: build options are criteria of a construction; give --construction")
    from exactmem.plugins.options import parse_options

    items = []
    for key, value in options.items():
        if not isinstance(key, str):
            raise InputError(f"options: expected option names, got {type(key).__name__}")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str | int) or type(value).__name__ == "mpq":
            text = str(value)
        else:
            raise InputError(f"--set {key}: expected a number, a word or true/false")
        items.append(f"{key}={text}")
    return parse_options(construction, items)


def certify(
    model: Transformer,
    dataset: Dataset,
    *,
    construction: str | Checklist | Construction | None = None,
    tolerance: mpq | str | None = None,
    progress: Callable[[str], None] | None = None,
    per_layer: bool = True,
    jobs: int = 1,
    evaluator: str = "fast",
    max_precision: int | None = None,
    cluster=None,
    bounds: Mapping[str, str] | None = None,
    reference=None,
    reference_tolerance: mpq | None = None,
    options: Mapping[str, Any] | None = None,
) -> Certificate:
    """Evaluate ``model`` on ``dataset`` exactly and judge it.

    The verdict's criteria come from the caller, never from ``model.meta``: ``construction``
    (a registered construction's name, :mod:`exactmem.checks.registry`, or a
    :class:`~exactmem.checks.checklist.Checklist` given directly) demands that construction's full
    checklist (a model lacking a stage it needs is refuted) and the resource bounds it declares;
    ``tolerance`` (an exact rational) loosens regression labels from exact equality to
    |output − label| ≤ tolerance; ``bounds`` (metric → formula in N, n, d, C, r, delta, omega,
    as a claim file's ``[bounds]``) are the caller's own bounds on the resources, judged as
    ``bound.<metric>`` checks; ``options`` (as ``build --set`` takes them, e.g.
    ``{"bit_budget": 4}``) are the build options the caller states the model was built with —
    criteria, recorded in the certificate, never read from the model file — with which the
    construction's declared bounds that name them are judged (one needing an option not given
    is undecided). How inputs are fed (token vectors, vectors with their position
    appended, token ids) and how outputs are read (one value: a label; C values: logits, argmax
    with a positive margin) are recomputed from the weights and printed in the certificate.

    Every check runs and is ok, FAIL or undecided: the verdict is ``refuted`` if any check
    failed, else ``inconclusive`` if any is undecided, else ``verified``.

    ``evaluator`` is ``fast`` (:mod:`exactmem.evaluate.fast`: int64 rows and class-shared
    multi-limb lanes, falling back to the reference wherever it cannot prove int64 safety) or
    ``reference`` (plain Python integers, in ``jobs`` processes for the token-wise sub-layers).
    Both compute the same values, lanes and statistics.

    ``max_precision`` caps the Arb precision (bits) of softmax models, judged on balls: an
    example still undecided there makes the answer inconclusive (default 2^12 for
    regression labels, 2^14 per argmax example).

    ``cluster`` (an :class:`exactmem.checks.distributed.Cluster`) runs the fast evaluator's MLP
    sub-layers sharded on Dask workers; the certificate is the same.

    ``reference`` (:class:`exactmem.checks.reference_logits.Reference`: the framework's own logits
    of
    this dataset) adds the check ``reference_logits``: every one within float32 rounding
    (τ·(1 + |x|), τ printed; ``reference_tolerance`` replaces it) of its certified enclosure."""
    criteria = Criteria(
        construction if isinstance(construction, str) else None,
        None if tolerance is None else mpq(tolerance),
        max_precision,
        checklist=checklist_of(construction),
        bounds=dict(bounds or {}),
        options=dict(options or {}),
    )
    checklist = criteria.checklist
    if checklist is not None and checklist.require is not None:
        checklist.require(dataset, criteria.tolerance)
    evaluator = _evaluator_for(evaluator, model)  # the certificate names the one that ran
    run = _evaluator(evaluator)
    if cluster is not None and evaluator == "fast":
        run = cluster.run
    readout = _readout(model, dataset)
    res = resources(model)  # one pass over every weight, for the certificate and the bounds
    feed = "vectors"
    tokens = None  # the dataset's token rows as an array, if the checks made one
    _require_task(criteria, dataset)
    if dataset.task == "points" and _unevaluable(criteria, model):
        checks, stats, data = _unevaluable_points(model, dataset, criteria, res)
    elif dataset.task == "points":
        checks, trace, data = _points(
            model, dataset, progress, jobs, run, criteria, readout, res=res
        )
        stats = trace.stats
    elif dataset.task in ("next-token", "seq2seq"):
        feed = _feed(model, dataset)
        if feed == "vectors with positions":
            dataset = with_positions(dataset)
        checks, stats, data, tokens = _sequences(
            model, dataset, progress, jobs, run, criteria, readout, feed, res=res
        )
    else:
        raise InputError(f"task {dataset.task!r} is not supported by this version's verifier")
    if reference is not None:
        from exactmem.checks.reference_logits import reference_check

        checks += undecided_if_inconclusive(
            "reference_logits",
            lambda: [
                reference_check(
                    model,
                    dataset,
                    reference,
                    tolerance=reference_tolerance,
                    limit=max_precision or 1 << 14,
                )
            ],
        )
    activation = activation_summary(stats, per_layer=per_layer)
    checks += _declared_bounds(criteria, data, dataset, res, activation)
    if checklist is not None:  # every check the checklist declares carries its paper and result
        checks = [_declared(checklist, c) for c in checks]
    subject = {
        "task": dataset.task,
        "dataset_sha256": dataset_hash(dataset, tokens=tokens),
        "model_sha256": model_hash(model),
        "construction": criteria.construction,
        "criteria": {
            "construction": criteria.construction,
            "checklist": checklist.summary
            if checklist is not None
            else "construction-independent checks only (no --construction given)",
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
            **({"bounds": dict(criteria.bounds)} if criteria.bounds else {}),
            **({"options": _json_options(criteria.options)} if criteria.options else {}),
            **(
                {"declared_bounds": dict(checklist.bounds)}
                if checklist is not None and checklist.bounds
                else {}
            ),
            "checks_run": [c.name for c in checks],
            "checklist_provider": _provider(construction),
        },
        "model_says": _untrusted_labels(model),
        "evaluator": evaluator,
        "versions": library_versions(),
        "argv": sys.argv[1:],
    }
    return Certificate(
        checks=checks,
        resources=res,
        activation=activation,
        subject=subject,
        data=data,
    )


def _provider(construction: str | Checklist | Construction | None) -> str | None:
    """Which package (and version) provided the checklist the verdict ran: a built-in's is
    exactmem's own code, a plugin's is as trustworthy as that plugin (docs/trust.md)."""
    if construction is None:
        return None
    if isinstance(construction, str):
        from exactmem.checks import registry

        construction = registry.get(construction)
    if isinstance(construction, Construction):
        return f"{construction.package or '?'} {construction.version}".rstrip()
    return "a checklist given directly by the caller"


def _declared_bounds(
    criteria: Criteria, data: dict, dataset: Dataset, res, activation: dict
) -> list[Check]:
    """The demanded checklist's declared bounds (``NAME.bounds.<metric>``) and the caller's own
    (``bound.<metric>``), judged on the resources counted from the weights and on the smallest
    non-zero |pre-activation|."""
    checklist = criteria.checklist
    declared = dict(checklist.bounds) if checklist is not None else {}
    if not declared and not criteria.bounds:
        return []
    from exactmem.checks.bound_checks import bound_checks, figure_names, with_lcd

    defines = dict(checklist.bound_defines) if checklist is not None else {}
    texts = [*declared.values(), *defines.values(), *criteria.bounds.values()]
    names = with_lcd(figure_names(data, dataset), dataset, texts)
    checks: list[Check] = []
    if declared:
        assert checklist is not None
        judged = bound_checks(
            declared,
            names,
            res,
            activation,
            prefix=f"{checklist.name}.bounds",
            where=f"construction {checklist.name!r}: bounds",
            options=criteria.options,
            declared_options=_declared_options(criteria.construction),
            defines=defines,
        )
        checks += [_declared(checklist, c) for c in judged]
    if criteria.bounds:
        checks += bound_checks(
            criteria.bounds, names, res, activation, prefix="bound", where="bounds"
        )
    return checks


def _declared_options(construction: str | None) -> tuple[str, ...]:
    """The ``--set`` options of a registered construction (none for a checklist given
    directly: its bounds cannot name options)."""
    if construction is None:
        return ()
    from exactmem.checks import registry

    try:
        return tuple(registry.get(construction).options)
    except KeyError:
        return ()


def _json_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The parsed options as the certificate records them: numbers and true/false as JSON,
    the rest as text."""
    return {
        k: v if isinstance(v, bool | int) and not isinstance(v, float) else str(v)
        for k, v in options.items()
    }


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


def _require_task(criteria: Criteria, dataset: Dataset) -> None:
    checklist = criteria.checklist
    if checklist is None:
        return
    if dataset.task not in checklist.tasks:
        raise InputError(
            f"--construction {checklist.name} certifies task {' or '.join(checklist.tasks)}; "
            f"the dataset has task {dataset.task!r}"
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


def hardmax_limit(model: Transformer) -> Transformer:
    """The model with every softmax attention read as hardmax (the λ → ∞ limit): exactly
    evaluable. A checklist that ``evaluates`` the ``hardmax-limit`` must itself certify that
    the softmax model's values equal the limit's; without that check the limit proves
    nothing."""
    subs = tuple(
        replace(s, score="hardmax") if isinstance(s, Attention) and s.score == "softmax" else s
        for s in model.sublayers
    )
    return replace(model, sublayers=subs)


def _checklist(criteria: Criteria, evidence: Evidence) -> list[Check]:
    """The demanded checklist's checks on the core's one evaluation, each carrying the paper,
    result and mechanism its :class:`~exactmem.checks.checklist.CheckSpec` declares."""
    checklist = criteria.checklist
    assert checklist is not None and checklist.run is not None
    run = checklist.run
    if evidence.trace is None and checklist.evaluates != "balls":
        what = "model" if checklist.evaluates == "exact" else "hardmax limit"
        checks = [
            Check(
                f"{checklist.name}.structure",
                False,
                f"the model does not have the structure the {checklist.name} checklist reads "
                f"(its {what} is not exactly evaluable on this dataset: unequal softmax "
                "scores, a GELU or a layer norm)",
            )
        ]
    else:
        checks = guarded(checklist.name, lambda: list(run(evidence)))
    return [_declared(checklist, c) for c in checks]


def _limit_certified(criteria: Criteria, checks: list[Check]) -> bool:
    """Whether the checklist certified the model equal to its hardmax limit: its
    ``limit_check`` passed and no structure check failed."""
    checklist = criteria.checklist
    if checklist is None or checklist.limit_check is None:
        return False
    return any(c.name == checklist.limit_check and c.passed for c in checks) and not any(
        c.name.endswith(".structure") and not c.passed for c in checks
    )


def _is_lower_bound(check: Check) -> bool:
    return check.name.startswith("lower_bound.")


def _declared(checklist: Checklist, check: Check) -> Check:
    spec = checklist.spec(check.name)
    if spec is None or check.paper is not None:
        return check
    return replace(check, paper=spec.paper, result=spec.result, mechanism=spec.mechanism)


def _unevaluable(criteria: Criteria, model) -> bool:
    """Whether the demanded checklist reads an exact evaluation the model has none of: a GELU
    (erf, tanh) MLP under a checklist that reads an exact (ReLU) evaluation — its structure
    check refutes it without evaluating."""
    from exactmem.core.model import has_gelu

    checklist = criteria.checklist
    return checklist is not None and checklist.evaluates == "exact" and has_gelu(model)


def _unevaluable_points(model, dataset, criteria: Criteria, res):
    """The checks of a points model the demanded checklist cannot read (:func:`_unevaluable`):
    its structure check fails, naming the activation; the lower bounds still run."""
    from exactmem.core.model import TRANSCENDENTAL

    checklist = criteria.checklist
    assert checklist is not None
    acts = sorted(
        {s.activation for s in model.sublayers if getattr(s, "activation", None) in TRANSCENDENTAL}
    )
    checks = [
        _declared(
            checklist,
            Check(
                f"{checklist.name}.structure",
                False,
                f"the {checklist.name} checklist reads a ReLU network evaluated exactly; the "
                f"model has a {', '.join(acts)} MLP",
            ),
        )
    ]
    checks += undecided_if_inconclusive(
        "lower_bound", lambda: lower_bound_checks(model, dataset, res=res)
    )
    data = {**_geometry(dataset.points, "N"), "C": dataset.num_classes, "d": dataset.dim}
    return checks, [], data


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
        from exactmem.checks.attention import exact_classification_check  # imports flint

        checks = [exact_classification_check(trace.outputs, dataset.labels, "points")]
    else:
        got, den = trace.outputs.first_lane()
        checks = [_label_check(got, den, dataset.labels, criteria.tolerance, "points")]
    lower = undecided_if_inconclusive(
        "lower_bound", lambda: lower_bound_checks(model, dataset, res=res)
    )
    if criteria.checklist is not None:
        evidence = Evidence(
            model=model,
            dataset=dataset,
            trace=trace,
            view=None,
            run=run,
            readout=readout,
            feed="vectors",
            resources=res if res is not None else resources(model),
            tolerance=criteria.tolerance,
            max_precision=criteria.max_precision,
            options=criteria.options,
        )
        own = _checklist(criteria, evidence)
        checks += lower + [c for c in own if not _is_lower_bound(c)]
        checks += [c for c in own if _is_lower_bound(c)]
    else:
        checks += lower
    data = {**_geometry(dataset.points, "N"), "C": dataset.num_classes, "d": dataset.dim}
    return checks, trace, data


def _consistency_mode(model, dataset, criteria: Criteria, feed: str) -> str:
    checklist = criteria.checklist
    if checklist is not None and checklist.consistency == "multiset":
        return "multiset"
    if (
        (checklist is not None and checklist.consistency == "sequence")
        or feed == "vectors with positions"
        or any(
            isinstance(s, PositionalEncoding) or getattr(s, "mask", "none") != "none"
            for s in model.sublayers
        )
    ):
        # positions, a causal mask (position k reads 0..k) or a context mask (the last token is
        # no key) break permutation equivariance: only equal sequences must agree
        return "sequence"
    return dataset.task


def _ball_labels(model, dataset, readout: str, criteria: Criteria):
    """Labels of a softmax model on balls: argmax per example with margins and the float
    evaluation beside (:mod:`exactmem.checks.margins`), else within the tolerance."""
    from exactmem.checks.attention import ball_label_check
    from exactmem.checks.margins import margin_check
    from exactmem.evaluate.softmax import MAX_PRECISION

    if readout == "argmax":
        limit = criteria.max_precision or MAX_PRECISION
        return margin_check(model, dataset, limit=limit)
    limit = criteria.max_precision or (1 << 12)
    return ball_label_check(
        model, dataset, readout=readout, tolerance=criteria.tolerance, limit=limit
    )


def _labels(model, dataset, trace, readout: str, criteria: Criteria) -> Check:
    """The labels check: on the exact outputs when there are, else on Arb balls."""
    seq2seq = dataset.task == "seq2seq"
    if trace is None and seq2seq and readout != "argmax":  # argmax: per-example margins
        from exactmem.checks.seq2seq_balls import ball_seq2seq_label_check

        return ball_seq2seq_label_check(
            model, dataset, readout=readout, tolerance=criteria.tolerance
        )
    if trace is None:
        return _ball_labels(model, dataset, readout, criteria)
    if readout == "argmax":
        from exactmem.checks.attention import exact_classification_check  # imports flint

        return exact_classification_check(trace.outputs, dataset.labels)
    got, den = trace.outputs.first_lane()
    if not seq2seq:
        got = got[:, -1:]
    where = "seq2seq" if seq2seq else "sequences"
    return _label_check(got, den, dataset.labels, criteria.tolerance, where)


def _sequences(
    model, dataset, progress, jobs, run, criteria: Criteria, readout: str, feed: str, res=None
):
    """Next-token (judged at the last position) and seq-to-seq (every position)."""
    checklist = criteria.checklist
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

    def evaluate(which: Transformer):
        return run(
            which,
            dataset.vocab,
            dataset.sequences,
            positions="all" if seq2seq else "last",
            progress=progress,
            jobs=jobs,
            folds=step_folds(model),
        )

    try:
        trace = evaluate(model)
    except InconclusiveError:
        trace = None  # unequal softmax scores: certify on Arb enclosures instead
    limit_trace = None
    if trace is None and checklist is not None and checklist.evaluates == "hardmax-limit":
        # the checklist reads the exact hardmax limit, and must itself certify the model equal
        # to it (its ``limit_check``); only then are the limit's labels the model's
        try:
            limit_trace = evaluate(hardmax_limit(model))
        except InconclusiveError:
            # the limit is not exactly evaluable (a GELU, a layer norm): the checklist's
            # structure check refutes below — a failed check wins over an undecided one
            limit_trace = None
    phases = 2 + (checklist is not None)
    own: list[Check] = []
    if checklist is not None:
        tell(
            progress,
            f"checks: the {checklist.name} checklist",
            phase="checks",
            done=0,
            total=phases,
        )
        evidence = Evidence(
            model=model,
            dataset=dataset,
            trace=trace if trace is not None else limit_trace,
            view=sv,
            run=run,
            readout=readout,
            feed=feed,
            resources=res if res is not None else resources(model),
            tolerance=criteria.tolerance,
            max_precision=criteria.max_precision,
            options=criteria.options,
        )
        own = _checklist(criteria, evidence)
    tell(progress, "checks: the labels", phase="checks", done=phases - 2, total=phases)
    if limit_trace is not None and _limit_certified(criteria, own):
        checks = [
            replace(
                c,
                detail=f"{c.detail} (on the exact hardmax limit: the model equals it where its "
                f"labels are read, {criteria.checklist.limit_check if criteria.checklist else ''})",
            )
            for c in undecided_if_inconclusive(
                "labels", lambda: [_labels(model, dataset, limit_trace, readout, criteria)]
            )
        ]
    else:
        checks = undecided_if_inconclusive(
            "labels", lambda: [_labels(model, dataset, trace, readout, criteria)]
        )
    checks += [c for c in own if not _is_lower_bound(c)]
    tell(progress, "checks: the lower bounds", phase="checks", done=phases - 1, total=phases)
    checks += undecided_if_inconclusive(
        "lower_bound",
        lambda: lower_bound_checks(
            model,
            dataset,
            sv,
            run,
            theorem_4_2=checklist is not None
            and "lower_bound.theorem_4_2" in checklist.lower_bounds,
            res=res,
            trace=trace,
        ),
    )
    checks += [c for c in own if _is_lower_bound(c)]  # listed with the other lower bounds
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
