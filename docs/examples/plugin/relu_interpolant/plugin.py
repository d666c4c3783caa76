"""The registration: the object the entry point ``relu-interpolant`` names (pyproject.toml,
``[project.entry-points."exactmem.constructions"]``)."""

from __future__ import annotations

from exactmem.checks.checklist import Checklist, Construction
from exactmem.checks.mechanisms.resources import bound_specs

from . import checklist

NAME = "relu-interpolant"

# the resources the theorem promises: N neurons in one hidden layer (the stream is one wide
# before and after it), so width N, two affine maps, 3N + 1 dense parameters; each bound has a
# breaker in exactmem.checks.mechanisms.resources (dead units widen, identity sub-layers deepen)
BOUNDS = {
    "width": "N",
    "depth": "2",
    "dense_parameters": "3*N + 1",
}

construction = Construction(
    name=NAME,
    paper=checklist.PAPER,
    summary="one hidden layer of N ReLU units interpolating N points on the line (task points, "
    "d = 1): the piecewise-linear interpolant, knots at the points",
    checklist=Checklist(
        name=NAME,
        tasks=("points",),
        summary="Zhang et al. 2017, Theorem 1 on the line: a triangular activation pattern, "
        "linear pieces between the points",
        checks=(
            *checklist.CHECKS,
            *bound_specs(NAME, checklist.PAPER, BOUNDS, "Theorem 1: N neurons, one hidden layer"),
        ),
        run=checklist.run,
        evaluates="exact",
        bounds=BOUNDS,
    ),
    builder="relu_interpolant.builder:build",
    options={},
    example=checklist.example,
)
