"""The two ways through the verifier, points and sequences (trusted): the one evaluation by the
trusted evaluators, the labels check on its values (exact, or on Arb balls at rising precision),
and on the same values the demanded checklist and the lower bounds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from gmpy2 import mpq

from exactmem.checks.certificate import (
    MAX_EXAMPLES,
    Check,
    outputs_verdict,
    step_folds,
)
from exactmem.checks.checklist import (
    Evidence,
    undecided_if_inconclusive,
)
from exactmem.checks.criteria import (
    Criteria,
    hardmax_limit,
    is_lower_bound,
    limit_certified,
    require_dim,
    run_checklist,
    with_spec,
)
from exactmem.checks.lower_bounds import lower_bound_checks
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.exact import format_rational
from exactmem.core.exact_arrays import exact, int_array, ratio_equal
from exactmem.core.model import (
    PositionalEncoding,
    Transformer,
    resources,
)
from exactmem.datasets.dataset import (
    _geometry,
    point_conflicts,
)
from exactmem.datasets.sequences import check_consistency, token_geometry, view
from exactmem.runtime.progress import tell

__all__ = [
    "label_check",
    "points_checks",
    "sequence_checks",
    "unevaluable",
    "unevaluable_points_checks",
]


def unevaluable(criteria: Criteria, model) -> bool:
    """Whether the demanded checklist reads an exact evaluation the model has none of: a GELU
    (erf, tanh) MLP under a checklist that reads an exact (ReLU) evaluation — its structure
    check refutes it without evaluating."""
    from exactmem.core.model import has_gelu

    checklist = criteria.checklist
    return checklist is not None and checklist.evaluates == "exact" and has_gelu(model)


def unevaluable_points_checks(model, dataset, criteria: Criteria, res):
    """The checks of a points model the demanded checklist cannot read (:func:`unevaluable`):
    its structure check fails, naming the activation; the lower bounds still run."""
    from exactmem.core.model import TRANSCENDENTAL

    checklist = criteria.checklist
    assert checklist is not None
    acts = sorted(
        {s.activation for s in model.sublayers if getattr(s, "activation", None) in TRANSCENDENTAL}
    )
    checks = [
        with_spec(
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


def points_checks(model, dataset, progress, jobs, run, criteria: Criteria, readout: str, res=None):
    if model.token_inputs:  # its input_dim counts table rows: a point would be read as an index
        raise InputError(
            f"the model's embedding table has {model.input_dim} tokens (token-id inputs), the "
            "dataset has points"
        )
    require_dim(model, dataset.dim, "points")
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
        checks = [label_check(got, den, dataset.labels, criteria.tolerance, "points")]
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
        own = run_checklist(criteria, evidence)
        checks += lower + [c for c in own if not is_lower_bound(c)]
        checks += [c for c in own if is_lower_bound(c)]
    else:
        checks += lower
    data = {**_geometry(dataset.points, "N"), "C": dataset.num_classes, "d": dataset.dim}
    return checks, trace, data


def consistency_mode(model, dataset, criteria: Criteria, feed: str) -> str:
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


def ball_labels(model, dataset, readout: str, criteria: Criteria):
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


def labels_check(model, dataset, trace, readout: str, criteria: Criteria) -> Check:
    """The labels check: on the exact outputs when there are, else on Arb balls."""
    seq2seq = dataset.task == "seq2seq"
    if trace is None and seq2seq and readout != "argmax":  # argmax: per-example margins
        from exactmem.checks.seq2seq_balls import ball_seq2seq_label_check

        return ball_seq2seq_label_check(
            model, dataset, readout=readout, tolerance=criteria.tolerance
        )
    if trace is None:
        return ball_labels(model, dataset, readout, criteria)
    if readout == "argmax":
        from exactmem.checks.attention import exact_classification_check  # imports flint

        return exact_classification_check(trace.outputs, dataset.labels)
    got, den = trace.outputs.first_lane()
    if not seq2seq:
        got = got[:, -1:]
    where = "seq2seq" if seq2seq else "sequences"
    return label_check(got, den, dataset.labels, criteria.tolerance, where)


def sequence_checks(
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
        require_dim(model, dataset.dim, "tokens")
    sv = check_consistency(
        dataset,
        consistency_mode(model, dataset, criteria, feed),
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
        own = run_checklist(criteria, evidence)
    tell(progress, "checks: the labels", phase="checks", done=phases - 2, total=phases)
    if limit_trace is not None and limit_certified(criteria, own):
        checks = [
            replace(
                c,
                detail=f"{c.detail} (on the exact hardmax limit: the model equals it where its "
                f"labels are read, {criteria.checklist.limit_check if criteria.checklist else ''})",
            )
            for c in undecided_if_inconclusive(
                "labels", lambda: [labels_check(model, dataset, limit_trace, readout, criteria)]
            )
        ]
    else:
        checks = undecided_if_inconclusive(
            "labels", lambda: [labels_check(model, dataset, trace, readout, criteria)]
        )
    checks += [c for c in own if not is_lower_bound(c)]
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
    checks += [c for c in own if is_lower_bound(c)]  # listed with the other lower bounds
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


def label_check(got: np.ndarray, den: int, labels, tolerance: mpq | None, where: str) -> Check:
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
