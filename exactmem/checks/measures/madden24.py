"""The checklist of Madden, Fox & Thrampoulidis 2024 (``verify --construction madden24``),
judged on Arb enclosures of the model as built (GELU and softmax are transcendental).

The model must be the one-layer decoder: token ids → embedding (+ positional tables) → one
causal softmax attention head → a plain GELU FNN of two layers whose last layer outputs the C
logits. On the n distinct contexts of the dataset:

* ``madden24.injectivity``: the attention's last-position outputs W_O·W_V·Σ_j a_j X_j, on the
  lanes the FNN reads, are pairwise distinct — certified by separating the balls coordinate by
  coordinate, so every pair lies at L∞ distance ≥ the reported gap, which exceeds the enclosure
  width. The head's contribution, not the stream after our residual sub-layer: the paper's
  decoder has no residual connection (its h(x) is the attention's output), and a head with
  W_O = 0 leaves h(x) = e(x_S) + p_S, a unigram model that separates contexts with distinct
  last tokens without any attention (review r1, F4);
* ``madden24.feature_rank``: Φ = GELU(W₁h + b₁) (n × m), restricted to the features the
  output layer reads (the columns of W₂ not the same for every logit), has full row rank n, or
  [Φ, 1] has (the output bias column): a non-zero n × n determinant on balls. With m < n − 1
  the rank is at most m + 1 < n and the check fails: softmax is invariant under a per-context
  shift, so n contexts need m + 1 ≥ n (the lower bound's width, reconstructed). A feature W₂
  does not read (or adds to every logit alike: a shift) carries nothing, so it adds no rank
  (issue 26);
* ``madden24.targets`` (datasets with ``targets``): |softmax(logits_i)_c − π_ic| ≤ the user's
  ``--tolerance`` for every context and class;
* ``madden24.dimension_count`` (datasets with ``targets`` only): the upper bound, a property
  of any next-token model: a C¹ map from k parameters to the n(ω − 1) free logits has an image
  of dimension ≤ k, so k < n(ω − 1) dense parameters cannot reach generic targets (ω = C).
  Labels alone are an open set of logits: there the count says nothing and is not run.

The argmax labels are the core's ``labels`` check (Arb, rising precision).
"""

from __future__ import annotations

from dataclasses import replace

from flint import arb, arb_mat, ctx
from gmpy2 import mpq

from exactmem.checks.certificate import Check, ChecklistStructureError, undecided_check
from exactmem.checks.mixtures import gelu_features_model
from exactmem.core.balls import ball_bounds, softmax_balls, to_ball
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.exact import format_rational
from exactmem.core.model import MLP, Affine, Attention, PositionalEncoding, Transformer, resources
from exactmem.evaluate.reference import run as reference_run
from exactmem.evaluate.softmax import decide, run_balls

__all__ = [
    "decoder_parts",
    "dimension_count_check",
    "dimension_count_checks",
    "distinct_contexts",
    "feature_rank_check",
    "injectivity_check",
    "madden_checks",
    "read_features",
    "require_tolerance",
    "targets_check",
]

START, LIMIT = 128, 1 << 12


def decoder_parts(model: Transformer) -> tuple[Transformer, MLP]:
    """(the model up to its attention, the FNN), or ChecklistStructureError."""
    subs = model.sublayers
    if not model.token_inputs or model.unembed is not None or len(subs) < 2:
        raise ChecklistStructureError("not token ids → attention → FNN without an unembedding")
    *front, att, fnn = subs
    if not all(isinstance(s, PositionalEncoding) for s in front):
        raise ChecklistStructureError("only positional tables may precede the attention")
    if not isinstance(att, Attention) or len(att.heads) != 1:
        raise ChecklistStructureError("the second-last sub-layer is not one attention head")
    if att.score != "softmax" or att.mask != "causal":
        raise ChecklistStructureError(f"attention is {att.score}/{att.mask}, not softmax/causal")
    if not isinstance(fnn, MLP) or fnn.residual or len(fnn.layers) != 2:
        raise ChecklistStructureError("the last sub-layer is not a plain two-layer FNN")
    if fnn.activation != "gelu":
        raise ChecklistStructureError(f"the FNN's activation is {fnn.activation}, not gelu")
    front_model = Transformer(model.input_dim, (*front, att), model.embed, None, token_inputs=True)
    return front_model, fnn


def distinct_contexts(dataset) -> list[int]:
    """First occurrences of the distinct sequences."""
    first: dict = {}
    return [i for i, s in enumerate(dataset.sequences) if first.setdefault(tuple(s), i) == i]


def _hidden(front: Transformer, dataset, rows: list[int], precision: int) -> list[list[arb]]:
    seqs = [dataset.sequences[i] for i in rows]
    trace = run_balls(front, dataset.vocab, seqs, precision=precision, positions="last")
    return [out[-1] for out in trace.outputs]


def _separate(balls: list[list[arb]]) -> tuple[bool | None, mpq | None, mpq]:
    """Whether the vectors of balls are pairwise distinct: split them into groups of
    overlapping intervals on coordinate 0, each group again on coordinate 1, …; distinct once
    every group is a singleton (True), equal if two are exact and equal (False), else
    undecided (None). Returns the least gap between separated groups (every pair lies at L∞
    distance ≥ it) and the largest radius."""
    bounds = [[ball_bounds(x) for x in v] for v in balls]
    radius = max((hi - lo) / 2 for v in bounds for lo, hi in v) if bounds else mpq(0)
    gap: mpq | None = None
    stack = [(list(range(len(balls))), 0)]
    while stack:
        group, c = stack.pop()
        if len(group) < 2:
            continue
        if c == len(bounds[0]):
            exact = [i for i in group if all(lo == hi for lo, hi in bounds[i])]
            if len({tuple(bounds[i]) for i in exact}) < len(exact):
                return False, gap, radius
            return None, gap, radius
        order = sorted(group, key=lambda i: bounds[i][c][0])
        part, top = [order[0]], bounds[order[0]][c][1]
        for i in order[1:]:
            lo, hi = bounds[i][c]
            if lo > top:
                gap = lo - top if gap is None else min(gap, lo - top)
                stack.append((part, c + 1))
                part = []
            part.append(i)
            top = max(top, hi)
        stack.append((part, c + 1))
    return True, gap, radius


def _exact_outputs(front: Transformer, dataset, rows: list[int]) -> list[tuple] | None:
    """h(x) of the contexts exactly, when the exact evaluator runs the attention (softmax with
    every score of a column equal: weights exactly 1/n); None when it cannot."""
    try:
        trace = reference_run(
            front, dataset.vocab, [dataset.sequences[i] for i in rows], positions="last"
        )
    except InconclusiveError:
        return None
    return [tuple(out[-1]) for out in trace.outputs]


def _read_lanes(front: Transformer, fnn: MLP | None) -> list[int]:
    """The stream lanes the FNN's first layer reads (every lane without an FNN)."""
    width = front.embed.out_dim if front.embed is not None else front.input_dim
    if fnn is None:
        return list(range(width))
    return sorted({c for row in fnn.layers[0].rows for c, _ in row})


def _head_lanes(front: Transformer, read: list[int]) -> list[int]:
    """The lanes of ``read`` where W_O·W_V ≠ 0 (exactly): where the head adds anything."""
    from exactmem.checks.attention import head_map

    M = head_map(front.sublayers[-1].heads[0])
    return [i for i in read if any(x != 0 for x in M[i])]


def _contribution_model(front: Transformer, read: list[int]) -> Transformer:
    """The model whose output at the last position is the head's contribution
    W_O·W_V·Σ_j a_j X_j on lanes ``read`` — Madden et al.'s attention output, without the skip
    connection our attention sub-layer adds (:func:`~exactmem.checks.mixtures.mixture_model`)."""
    from exactmem.checks.mixtures import mixture_model

    att = front.sublayers[-1]
    derived = mixture_model(front, att, values=True, keep_stream=False, outputs=True)
    width = derived.unembed.in_dim
    at = width - att.heads[0].output.out_dim
    pick = Affine(width, tuple(((at + i, 1),) for i in read), (0,) * len(read))
    return replace(derived, unembed=pick)


def _same_input(front: Transformer, dataset, i: int, j: int) -> bool:
    """Whether contexts i and j end in the same token at the same position: their skip terms
    e(x_S) + p_S are equal, so equal contributions mean equal h(x) and equal rows of Φ."""
    a, b = dataset.sequences[i], dataset.sequences[j]
    return len(a) == len(b) and a[-1] == b[-1]


def injectivity_check(
    front: Transformer, dataset, rows: list[int], fnn: MLP | None = None
) -> Check:
    """The attention's output pairwise distinct on the distinct contexts, on the lanes the FNN
    reads. Madden et al.'s decoder has no residual connection: its h(x) *is* the attention's
    output, so we judge the head's contribution W_O·W_V·Σ_j a_j X_j, not the stream
    e(x_S) + p_S + contribution our residual sub-layer hands the FNN — a head with W_O = 0 (the
    skip term alone separating contexts with distinct last tokens) is dead attention, not the
    paper's injectivity (review r1, F4). Decided exactly where the exact evaluator runs the
    attention (every score of a column equal, e.g. a zero query: token averaging), else by
    separating Arb balls at rising precision. The figure ``collision`` (two contexts with
    exactly equal rows of Φ) is set when the contributions are exactly equal and the contexts
    end in the same token at the same position."""
    read = _read_lanes(front, fnn)
    if len(rows) >= 2 and not _head_lanes(front, read):
        i, j = rows[0], rows[1]
        figures: dict = {"contexts": len(rows), "head_lanes_read": 0}
        ends: dict = {}
        for r in rows:  # two contexts ending alike: h(x) and the rows of Φ exactly equal
            seq = dataset.sequences[r]
            k = ends.setdefault((len(seq), seq[-1]), r)
            if k != r:
                i, j = k, r
                figures["collision"] = [i, j]
                break
        return Check(
            "madden24.injectivity",
            False,
            "the head adds nothing the FNN reads (W_O·W_V is 0 on its lanes): every context has "
            f"exactly the same attention output, sequences[{i}] and sequences[{j}] included — "
            "h(x) is the skip term e(x_S) + p_S, not the attention",
            figures,
        )
    part = _contribution_model(front, read)
    exact = _exact_outputs(part, dataset, rows)
    if exact is not None:
        seen: dict = {}
        for r, h in zip(rows, exact, strict=True):
            j = seen.setdefault(h, r)
            if j != r:
                figures = {"contexts": len(rows), "attention_collision": [j, r]}
                if _same_input(front, dataset, j, r):
                    figures["collision"] = [j, r]
                return Check(
                    "madden24.injectivity",
                    False,
                    f"sequences[{j}] and sequences[{r}] are distinct contexts with exactly the "
                    "same attention output (exact: every attention score of a column is equal)",
                    figures,
                )
        return Check(
            "madden24.injectivity",
            True,
            f"the {len(rows)} distinct contexts have pairwise distinct attention outputs "
            "(exact: every attention score of a column is equal)",
            {"contexts": len(rows), "exact": True},
        )
    state: dict = {}

    def judge(H):
        verdict, gap, radius = _separate(H)
        state.update(gap=gap, radius=radius)
        return verdict

    verdict, precision = decide(
        lambda p: _hidden(part, dataset, rows, p), judge, start=START, limit=LIMIT
    )
    if verdict is None:
        raise InconclusiveError(
            f"madden24.injectivity: the enclosures of the attention outputs still overlap at "
            f"{precision} bits"
        )
    gap = state["gap"]
    figures = {
        "contexts": len(rows),
        "least_distance_lower_bound": None if gap is None else format_rational(gap),
        "enclosure_radius": format_rational(state["radius"]),
        "precision": precision,
    }
    if not verdict:
        return Check(
            "madden24.injectivity",
            False,
            "two distinct contexts have exactly the same attention output",
            figures,
        )
    if gap is None:
        return Check("madden24.injectivity", True, "one context: nothing to separate", figures)
    return Check(
        "madden24.injectivity",
        True,
        f"the {len(rows)} distinct contexts have pairwise distinct attention outputs (on the "
        f"{len(read)} lanes the FNN reads): L∞ distance ≥ {float(gap):.3g} > enclosure radius "
        f"{float(state['radius']):.3g} (Arb, {precision} bits)",
        figures,
    )


def _feature_matrix(front, fnn, dataset, rows, precision) -> list[list[arb]]:
    """Φ = σ(W₁h + b₁) per context: the ball evaluator on the model up to the FNN's first
    layer and its activation (:func:`~exactmem.checks.mixtures.gelu_features_model`), the
    activation the file gives."""
    derived = gelu_features_model(front, fnn.layers[0], fnn.activation)
    seqs = [dataset.sequences[i] for i in rows]
    trace = run_balls(derived, dataset.vocab, seqs, precision=precision, positions="last")
    return [list(out[-1]) for out in trace.outputs]


def _dead_columns(Phi: list[list[arb]]) -> set[int]:
    """Features that are exactly 0 on every context (σ(0) = 0 exactly: a unit whose weights
    and bias are zero, or that every context drives to an exact 0) — they add no rank."""
    if not Phi:
        return set()
    return {j for j in range(len(Phi[0])) if all(row[j].is_exact() and row[j] == 0 for row in Phi)}


def read_features(fnn: MLP) -> list[int]:
    """The features the output layer reads: the columns j of W₂ (exact) that are not constant
    over the C logits. A column proportional to the all-ones vector, the zero column included,
    adds the same value Φ_j·w to every logit of a context — a per-context shift, which softmax
    and argmax ignore — so that feature reaches no output (issue 26: the checked features must
    be the ones the output reads). The bias column of [Φ, 1] is not a feature: it is the
    per-class offset b₂, always available to the solve. Twin units (one row of W₁ and one bias)
    are one feature, read through the sum of their columns."""
    last = fnn.layers[-1]
    columns: dict[int, list[int]] = {}
    for c, row in enumerate(last.rows):
        for j, v in row:
            columns.setdefault(j, [0] * len(last.rows))[c] = v
    # twin units (the same row of W₁ and bias) compute one feature: W₂ reads their sum, so
    # columns +c and −c on twins read nothing (review 5); one representative per read feature
    first = fnn.layers[0]
    twins: dict[tuple, list[int]] = {}
    for j, (row, bias) in enumerate(zip(first.rows, first.bias, strict=True)):
        twins.setdefault((tuple(row), bias), []).append(j)
    read = []
    zero = [0] * len(last.rows)
    for units in twins.values():
        total = [sum(col) for col in zip(*(columns.get(j, zero) for j in units), strict=True)]
        if len(set(total)) > 1:
            read.append(units[0])
    return sorted(read)


def feature_rank_check(
    front: Transformer, fnn: MLP, dataset, rows: list[int], collision=None
) -> Check:
    """[Φ_R, 1] has full row rank n, with Φ_R the features the output layer reads
    (:func:`read_features`; features exactly 0 on every context dropped too): a non-zero
    n × n determinant on balls over the first n of them (the bias column when fewer). A
    feature W₂ does not read carries nothing to the logits, so a model whose W₂ reads fewer
    than n − 1 features is refuted however many units it computes (issue 26).
    ``collision``: two contexts whose h(x) the injectivity check found exactly equal — their
    rows of Φ are then equal and the rank is < n (balls could only leave it undecided)."""
    n, m = len(rows), fnn.layers[0].out_dim
    figures: dict = {"n": n, "width": m}
    if collision:
        i, j = collision
        return Check(
            "madden24.feature_rank",
            False,
            f"sequences[{i}] and sequences[{j}] have exactly the same h(x), so equal rows of "
            f"[Φ, 1]: rank < n = {n}",
            figures,
        )
    if m + 1 < n:
        return Check(
            "madden24.feature_rank",
            False,
            f"[Φ, 1] has m + 1 = {m + 1} columns for n = {n} contexts: rank < n, so generic "
            f"targets cannot all be fitted (width m = {m} < n − 1 = {n - 1})",
            figures,
        )
    read = read_features(fnn)
    dead = _dead_columns(_feature_matrix(front, fnn, dataset, rows, START))
    live = [j for j in read if j not in dead]
    figures.update(read_features=len(read), dead_features=len(dead))
    if len(live) + 1 < n:
        unread = m - len(read)
        why = []
        if unread:
            why.append(f"the output layer reads {len(read)} of the m = {m} features")
        if len(live) < len(read):
            why.append(f"{len(read) - len(live)} read features are exactly 0 on every context")
        return Check(
            "madden24.feature_rank",
            False,
            f"{'; '.join(why)}: [Φ, 1] restricted to what the output reads has "
            f"{len(live) + 1} columns for n = {n} contexts, rank < n (a column of W₂ that is "
            "zero or the same for every logit carries nothing through softmax)",
            figures,
        )
    cols = live[:n]
    which = "Φ" if len(cols) == n else "[Φ, 1]"

    def evaluate(precision):
        Phi = _feature_matrix(front, fnn, dataset, rows, precision)
        old = ctx.prec
        ctx.prec = precision
        try:
            A = arb_mat([[row[j] for j in cols] + [arb(1)] * (n - len(cols)) for row in Phi])
            return A.det()
        finally:
            ctx.prec = old

    def judge(det):
        lo, hi = ball_bounds(det)
        if lo > 0 or hi < 0:
            return True
        return False if lo == hi == 0 else None

    verdict, precision = decide(evaluate, judge, start=START, limit=LIMIT)
    figures["precision"] = precision
    if verdict is None:
        raise InconclusiveError(
            f"madden24.feature_rank: the determinant's enclosure still contains 0 at "
            f"{precision} bits"
        )
    if not verdict:
        return Check("madden24.feature_rank", False, f"{which} is exactly singular", figures)
    some = f"the first {n} of " if len(cols) < len(live) else ""
    if len(live) == m:
        of = f"its m = {m} features (all read by the output layer)"
    else:
        of = f"the {len(live)} of its m = {m} features the output layer reads"
    return Check(
        "madden24.feature_rank",
        True,
        f"{which} ({n} × {n}) on {some}{of} has full row rank {n}: its determinant excludes 0 "
        f"(Arb, {precision} bits)",
        figures,
    )


def targets_check(model: Transformer, dataset, tolerance: mpq) -> Check:
    """softmax(logits) within ``tolerance`` of every target row, certified on balls."""
    state: dict = {}

    def evaluate(precision):
        trace = run_balls(
            model, dataset.vocab, dataset.sequences, precision=precision, positions="last"
        )
        old = ctx.prec
        ctx.prec = precision
        try:  # p − π at the working precision (a 53-bit subtraction would cap the figure)
            return [
                [
                    ball_bounds(ball - to_ball(target))
                    for ball, target in zip(softmax_balls(out[-1]), pi, strict=True)
                ]
                for out, pi in zip(trace.outputs, dataset.targets, strict=True)
            ]
        finally:
            ctx.prec = old

    def judge(errors):
        undecided, worst, bad = False, mpq(0), []
        for i, row in enumerate(errors):
            for c, (lo, hi) in enumerate(row):
                err = max(abs(lo), abs(hi))
                worst = max(worst, err)
                if lo > tolerance or hi < -tolerance:
                    bad.append(f"sequences[{i}] class {c + 1}: |p − π| > {float(tolerance):.3g}")
                elif err > tolerance:
                    undecided = True
        state.update(worst=worst, bad=bad)
        if bad:
            return False
        return None if undecided else True

    verdict, precision = decide(evaluate, judge, start=START, limit=LIMIT)
    figures = {
        "tolerance": format_rational(tolerance),
        "max_error_upper_bound": format_rational(state["worst"]),
        "precision": precision,
    }
    if verdict is None:
        raise InconclusiveError(
            f"madden24.targets: the enclosures stay wider than the tolerance at {precision} bits"
        )
    if not verdict:
        bad = state["bad"]
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        return Check("madden24.targets", False, "; ".join(bad[:3]) + more, figures)
    return Check(
        "madden24.targets",
        True,
        f"all {dataset.size} next-token distributions within {format_rational(tolerance)} "
        f"(worst ≤ {float(state['worst']):.3g}; Arb, {precision} bits)",
        figures,
    )


def dimension_count_checks(model: Transformer, dataset) -> list[Check]:
    """The dimension count where it applies: a dataset with target distributions. With labels
    only it does not apply — an argmax label is an open set of logits, reached by far fewer
    than n(ω − 1) parameters — so nothing is judged (no check)."""
    if not dataset.targets:
        return []
    return [dimension_count_check(model, dataset, len(distinct_contexts(dataset)))]


def dimension_count_check(model: Transformer, dataset, n: int) -> Check:
    """k < n(ω − 1) ⇒ generic targets are out of reach, for any model with k parameters.
    Applies to target distributions only (:func:`dimension_count_checks`)."""
    if not dataset.targets:
        raise ValueError("the dimension count applies to target distributions, not labels")
    k = resources(model).dense_parameters
    omega = dataset.num_classes
    need = n * (omega - 1)
    figures = {"parameters": k, "n_times_omega_minus_1": need}
    if k < need:
        return Check(
            "madden24.dimension_count",
            False,
            f"k = {k} parameters < n(ω − 1) = {need}: the model's logits on the {n} contexts "
            "form an image of dimension ≤ k in the n(ω − 1)-dimensional product of simplices, "
            "so generic targets are out of reach",
            figures,
        )
    return Check(
        "madden24.dimension_count",
        True,
        f"k = {k} parameters ≥ n(ω − 1) = {need}: the dimension count leaves generic targets "
        f"reachable ({k / need:.2f}× the count)",
        figures,
    )


def require_tolerance(dataset, tolerance: mpq | None) -> None:
    """Target distributions are judged within a tolerance the user gives (exit 2 without)."""
    if dataset.targets and tolerance is None:
        raise InputError(
            "the dataset has target distributions: pass --tolerance Q (softmax outputs are "
            "transcendental; they are certified within Q of the targets)"
        )


def madden_checks(model: Transformer, dataset, tolerance: mpq | None) -> list[Check]:
    """The decoder's stages of the madden24 checklist (see the module docstring); call
    :func:`require_tolerance` first. The dimension count reads any model:
    :func:`dimension_count_check`."""
    front, fnn = decoder_parts(model)
    rows = distinct_contexts(dataset)
    injective = injectivity_check(front, dataset, rows, fnn)
    collision = injective.figures.get("collision") if injective.figures else None
    checks = [injective]
    # an undecided stage leaves the others standing: a failed injectivity is not discarded
    # because the feature determinant's enclosure stays wide
    stages = [
        ("madden24.feature_rank", lambda: feature_rank_check(front, fnn, dataset, rows, collision))
    ]
    if dataset.targets:
        stages.append(("madden24.targets", lambda: targets_check(model, dataset, mpq(tolerance))))
    for name, stage in stages:
        try:
            checks.append(stage())
        except InconclusiveError as exc:
            checks.append(undecided_check(name, str(exc)))
    return checks
