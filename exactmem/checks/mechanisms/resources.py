"""The declared resource bounds as checks with breakers: every checklist that declares a bound
(:attr:`exactmem.checks.checklist.Checklist.bounds`) emits ``NAME.bounds.<metric>``, and the
breakers
here are seen to make it fail — a model grown past the bound while computing the same outputs
(dead hidden units for the width, an identity sub-layer for the depth, a dead unit with one
heavy weight for the bits)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import sympy

from exactmem.checks.checklist import Breaker, CheckSpec
from exactmem.core.model import MLP, Affine, Transformer, resources
from exactmem.datasets.dataset import Dataset, radius_and_separation

__all__ = [
    "bound_specs",
    "dataset_figures",
    "deepened",
    "heavier",
    "past",
    "stream_width",
    "widened",
]


def stream_width(model: Transformer) -> int:
    """The width of the residual stream after the last sub-layer (before any E_out)."""
    width = model.embed.out_dim if model.embed else model.input_dim
    for s in model.sublayers:
        if isinstance(s, MLP):
            width = s.out_dim
    return width


def _growth(model: Transformer, dataset: Dataset) -> int:
    """More units than any declared width formula of the built-ins allows on ``dataset``
    (they are at most linear in nN, d and C)."""
    n = len(dataset.sequences[0]) if dataset.task != "points" else 1
    return 4 * (stream_width(model) + n * dataset.size + dataset.dim + dataset.num_classes) + 16


def _identity_mlp(width: int, hidden: int, weight: int = 1) -> MLP:
    """A residual MLP adding 0 to the stream: ``hidden`` units reading lane 0 with ``weight``,
    read by no output (two affine layers deep, ``hidden`` wide)."""
    first = Affine(width, tuple(((0, weight),) for _ in range(hidden)), (0,) * hidden)
    second = Affine(hidden, tuple(() for _ in range(width)), (0,) * width)
    return MLP((first, second), residual=True, label="breaker")


def widened(model: Transformer, dataset: Dataset) -> Transformer:
    """The model with dead hidden units: appended to the first hidden layer of its first MLP
    of two or more layers (read by no unit of the next layer), else in a residual MLP adding 0
    appended after the last sub-layer. The outputs do not change; the width grows past every
    declared width bound linear in nN, d and C."""
    return _widen(model, _growth(model, dataset))


def _widen(model: Transformer, extra: int, weight: int = 1) -> Transformer:
    """``model`` with ``extra`` dead hidden units (see :func:`widened`), each reading lane 0
    with ``weight``."""
    subs = list(model.sublayers)
    for i, s in enumerate(subs):
        if isinstance(s, MLP) and len(s.layers) >= 2:
            first, second = s.layers[0], s.layers[1]
            row = ((0, first.denominator * weight),)
            first = replace(
                first,
                rows=first.rows + tuple(row for _ in range(extra)),
                bias=first.bias + (0,) * extra,
                names=first.names + tuple(f"dead[{k}]" for k in range(extra))
                if first.names
                else (),
            )
            second = replace(second, in_dim=second.in_dim + extra)
            subs[i] = replace(s, layers=(first, second, *s.layers[2:]))
            return replace(model, sublayers=tuple(subs))
    subs.append(_identity_mlp(stream_width(model), extra, weight))
    return replace(model, sublayers=tuple(subs))


def heavier(model: Transformer, dataset: Dataset) -> Transformer:
    """The model with one dead hidden unit (:func:`widened`) whose weight is 2^4096: the outputs
    do not change; the largest parameter has 4098 bits, past every constant bits bound."""
    return _heavy(model, 4096)


def _heavy(model: Transformer, bits: int) -> Transformer:
    """``model`` with one dead unit reading lane 0 with weight 2^bits (bits + 2 bits: the
    integer's bitlen and the sign, core/exact.parameter_bits)."""
    return _widen(model, 1, 1 << bits)


def deepened(model: Transformer, dataset: Dataset) -> Transformer:
    """The model with residual MLPs adding 0 appended after its last sub-layer: the outputs do
    not change; the depth grows by 2 per MLP, past every constant depth bound and past
    ``depth`` + 64."""
    return _deepen(model, 40)


def _deepen(model: Transformer, count: int) -> Transformer:
    """``model`` with ``count`` residual MLPs adding 0 appended (see :func:`deepened`)."""
    mlp = _identity_mlp(stream_width(model), 1)
    return replace(model, sublayers=(*model.sublayers, *([mlp] * count)))


def dataset_figures(dataset: Dataset) -> dict[str, sympy.Expr]:
    """The dataset's figures (N, d, C, r, δ, and n, ω for sequences) as the core measures them
    (exactmem.checks.bound_checks.figure_names: r and δ over the distinct points or tokens), for a
    breaker to aim past a bound."""
    if dataset.task == "points":
        vectors, names = list(dict.fromkeys(map(tuple, dataset.points))), {}
    else:
        vectors = list(dict.fromkeys(map(tuple, dataset.vocab)))
        names = {"n": sympy.Integer(len(dataset.sequences[0]))}
        names["omega"] = sympy.Integer(len(dataset.vocab))
    r2, delta2 = radius_and_separation(vectors)
    names |= {
        "N": sympy.Integer(dataset.size),
        "d": sympy.Integer(dataset.dim),
        "C": sympy.Integer(dataset.num_classes),
        "r": sympy.sqrt(sympy.Rational(str(r2))),
        "delta": sympy.Integer(1) if delta2 is None else sympy.sqrt(sympy.Rational(str(delta2))),
    }
    return names


def past(
    metric: str,
    formula: str,
    options: Mapping[str, object] | None = None,
    defines: Mapping[str, Any] | None = None,
    known: Iterable[str] = (),
) -> Callable[[Transformer, Dataset], Transformer]:
    """A breaker that adds dead hidden units (:func:`widened`; identity sub-layers for the
    depth) until the model's ``metric`` exceeds ``formula`` on the dataset, at the build
    ``options`` the breaker's honest model is built with (``known``: the construction's
    declared options; ``defines``: its bound defines): a bound of any size, quadratic ones
    included, is shown to fail on a model computing the same outputs."""

    def grow(model: Transformer, dataset: Dataset) -> Transformer:
        from exactmem.checks.bound_checks import bound_names, with_lcd
        from exactmem.core.bounds import evaluate_ball, parse_formula

        texts = [formula, *(defines or {}).values()]
        figures = with_lcd(dataset_figures(dataset), dataset, texts)
        names, _ = bound_names(figures, options or {}, known, defines or {}, "breaker")
        ball = evaluate_ball(parse_formula(formula, names, f"breaker.{metric}"), 128)
        # one above the ball's upper end (exact: the midpoint of a radius-0 ball): past the bound
        limit = int(ball.upper().mid().floor().unique_fmpz()) + 1 if ball is not None else 0
        if metric == "max_bits":  # one weight 2^limit has limit + 2 bits
            return _heavy(model, max(limit, 0))
        extra = _growth(model, dataset)
        while True:  # at least one more unit of the metric per dead unit or layer: ends
            broken = _deepen(model, extra) if metric == "depth" else _widen(model, extra)
            if getattr(resources(broken), metric) > limit:
                return broken
            extra *= 2

    what = {"depth": "identity sub-layers", "max_bits": "a dead unit's weight"}.get(
        metric, "dead hidden units"
    )
    grow.__doc__ = f"{what} until the {metric} exceeds {formula}"
    return grow


BREAKERS: dict[str, tuple[str, Callable[[Transformer, Dataset], Transformer]]] = {
    "width": ("dead units widen", widened),
    "depth": ("identity sub-layers deepen", deepened),
    "dense_parameters": ("dead units widen", widened),
    "nonzero_parameters": ("dead units widen", widened),
    "max_bits": ("a dead unit's weight outgrows", heavier),
}


def bound_specs(
    name: str,
    paper: str,
    bounds: Mapping[str, str],
    source: str,
    *,
    options: Mapping[str, object] | None = None,
    defines: Mapping[str, Any] | None = None,
    known: Iterable[str] = (),
) -> tuple[CheckSpec, ...]:
    """One :class:`CheckSpec` per declared bound of construction ``name``, with a breaker where
    one is known (width, depth, parameters, bits). ``source`` says where the bound comes from (the
    claim file and section); ``options``, ``defines`` and ``known`` (the declared options)
    evaluate a bound that names build options, for its breaker (at the example's options)."""
    specs = []
    for metric, formula in bounds.items():
        breakers: tuple[Breaker, ...] = ()
        if metric in BREAKERS:
            what, fn = BREAKERS[metric]
            if fn in (widened, heavier) or defines or options:  # aimed past it, whatever its size
                fn = past(metric, formula, options, defines, tuple(known))
                what = "identity sub-layers deepen" if metric == "depth" else what
            breakers = (
                Breaker(what, f"the {metric} bound {formula}", f"{name}.bounds.{metric}", fn),
            )
        sign = "≥" if metric == "margin" else "≤"
        specs.append(
            CheckSpec(
                f"{name}.bounds.{metric}",
                paper,
                source,
                f"the construction's {metric} {sign} {formula}",
                breakers,
            )
        )
    return tuple(specs)
