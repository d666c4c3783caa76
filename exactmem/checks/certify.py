"""From (model, dataset) to a :class:`~exactmem.checks.certificate.Certificate`.

This is the trusted path: evaluate exactly, then judge every promise from the evaluated values.
Nothing the construction said is consulted; the dataset supplies the expected labels.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from gmpy2 import mpq

from exactmem.checks.build_options import check_option_limits
from exactmem.checks.certificate import (
    Certificate,
    Check,
    activation_summary,
    library_versions,
)
from exactmem.checks.checklist import (
    Checklist,
    Construction,
    define_texts,
    undecided_if_inconclusive,
)
from exactmem.checks.criteria import (
    Criteria,
    checklist_of,
    hardmax_limit,
    judged_options,
    stated,
    with_spec,
)
from exactmem.checks.labels import (
    points_checks,
    sequence_checks,
    unevaluable,
    unevaluable_points_checks,
)
from exactmem.core.errors import InputError
from exactmem.core.exact import format_rational
from exactmem.core.model import (
    MLP,
    Transformer,
    has_gelu,
    resources,
    validate,
)
from exactmem.datasets.dataset import (
    Dataset,
    dataset_hash,
    point_conflicts,
)
from exactmem.datasets.sequences import with_positions
from exactmem.evaluate.reference import run as reference_run
from exactmem.files.model_json import model_hash

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
    if (problem := validate(model)) is not None:  # a model made in memory: as a file's loader
        where, message = problem
        raise InputError(f"the model's {where}: {message}")
    criteria = Criteria(
        construction if isinstance(construction, str) else None,
        None if tolerance is None else mpq(tolerance),
        max_precision,
        checklist=checklist_of(construction),
        bounds=dict(bounds or {}),
        options=dict(options or {}),
    )
    if criteria.options:  # as `verify --set` and `build` bound them: no looser criteria here
        check_option_limits(stated(criteria.options), dataset)  # (a copy: not a check's reading)
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
    if dataset.task == "points" and unevaluable(criteria, model):
        checks, stats, data = unevaluable_points_checks(model, dataset, criteria, res)
    elif dataset.task == "points":
        checks, trace, data = points_checks(
            model, dataset, progress, jobs, run, criteria, readout, res=res
        )
        stats = trace.stats
    elif dataset.task in ("next-token", "seq2seq"):
        feed = _feed(model, dataset)
        if feed == "vectors with positions":
            dataset = with_positions(dataset)
        checks, stats, data, tokens = sequence_checks(
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
        checks = [with_spec(checklist, c) for c in checks]
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
            **({"options": _json_options(stated(criteria.options))} if criteria.options else {}),
            **(
                {"options_not_judged": unjudged}
                if (unjudged := _unjudged_options(criteria))
                else {}
            ),
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
            options=stated(criteria.options),  # (formulas name what they read: judged_options)
            declared_options=_declared_options(criteria.construction),
            defines=defines,
        )
        checks += [with_spec(checklist, c) for c in judged]
    if criteria.bounds:
        checks += bound_checks(
            criteria.bounds, names, res, activation, prefix="bound", where="bounds"
        )
    return checks


def _unjudged_options(criteria: Criteria) -> list[str]:
    """The stated options no check read and no declared bound or define names: recorded apart,
    so that the certificate lists among its criteria only what it was judged by."""
    checklist = criteria.checklist
    texts: list[str] = []
    if checklist is not None:
        texts += checklist.bounds.values()
        for define in checklist.bound_defines.values():
            texts += define_texts(define)
    judged = judged_options(criteria, texts)
    return [k for k in criteria.options if k not in judged]


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


def certificate_json(cert: Certificate) -> dict:
    """The certificate's JSON object (:meth:`Certificate.to_json`)."""
    return cert.to_json()
