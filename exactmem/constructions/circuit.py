"""A builder for deep ReLU networks with named units.

Constructions describe each hidden layer as named units ``σ(Σ coeff·previous_unit + bias)``
and get an exact :class:`~exactmem.core.model.MLP` back. Names make the compiled network readable
(``stage3.k4.match``) and let the verifier find the quantities a proof talks about.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gmpy2 import mpq

from exactmem.core.model import MLP, Affine, Probe

__all__ = ["Circuit", "Lin", "const", "var"]


@dataclass(frozen=True)
class Lin:
    """An affine expression ``Σ coeff·name + constant`` over the units of one layer."""

    terms: Mapping[str, mpq] = field(default_factory=dict)
    constant: mpq = mpq(0)

    def __add__(self, other: Lin | int) -> Lin:
        if not isinstance(other, Lin):
            return Lin(self.terms, self.constant + other)
        terms = dict(self.terms)
        for k, v in other.terms.items():
            s = terms.get(k, 0) + v
            if s:
                terms[k] = s
            else:
                terms.pop(k, None)
        return Lin(terms, self.constant + other.constant)

    __radd__ = __add__

    def __neg__(self) -> Lin:
        return Lin({k: -v for k, v in self.terms.items()}, -self.constant)

    def __sub__(self, other: Lin | int) -> Lin:
        return self + (-other)

    def __rsub__(self, other: Lin | int) -> Lin:
        return (-self) + other

    def __mul__(self, scalar: int | mpq) -> Lin:
        if scalar == 0:
            return Lin()
        return Lin({k: v * scalar for k, v in self.terms.items()}, self.constant * scalar)

    __rmul__ = __mul__


def var(name: str) -> Lin:
    return Lin({name: mpq(1)})


def const(value: int | mpq) -> Lin:
    return Lin({}, mpq(value))


class Circuit:
    """Accumulates hidden layers of named ReLU units, then compiles them into an :class:`MLP`.

    ``inputs`` names the coordinates of the MLP's input. Each call to :meth:`layer` appends one
    hidden layer whose expressions refer to the names of the layer before.
    """

    def __init__(self, inputs: Sequence[str]):
        self._prev: tuple[str, ...] = tuple(inputs)
        self._layers: list[Affine] = []
        self._probes: list[Probe] = []
        # lanes carried through every new layer (σ(v) = v needs v ≥ 0); the expression of a
        # kept lane may be reassigned between layers, e.g. to add a sub-network's output
        self.keep: dict[str, Lin] = {}
        self.probe_prefix = ""

    @property
    def depth(self) -> int:
        return len(self._layers)

    @property
    def current(self) -> tuple[str, ...]:
        return self._prev

    def _compile(self, exprs: Mapping[str, Lin]) -> Affine:
        index = {name: i for i, name in enumerate(self._prev)}
        dens = [v.denominator for e in exprs.values() for v in e.terms.values()]
        dens += [e.constant.denominator for e in exprs.values()]
        den = math.lcm(*[int(d) for d in dens]) if dens else 1
        rows, bias = [], []
        for name, expr in exprs.items():
            row = []
            for unit, coeff in expr.terms.items():
                if unit not in index:
                    raise KeyError(f"unit {name!r} refers to {unit!r}, not in the previous layer")
                row.append((index[unit], int(coeff * den)))
            rows.append(tuple(sorted(row)))
            bias.append(int(expr.constant * den))
        return Affine(len(self._prev), tuple(rows), tuple(bias), den, tuple(exprs))

    def layer(self, units: Mapping[str, Lin]) -> None:
        """Append a hidden layer: unit ``name`` computes ``σ(units[name])``."""
        if not units:
            raise ValueError("a hidden layer needs at least one unit")
        units = {**units, **{k: v for k, v in self.keep.items() if k not in units}}
        self._layers.append(self._compile(units))
        self._prev = tuple(units)
        for name in self.keep:
            self.keep[name] = var(name)

    def probe(self, name: str, expr: Lin) -> None:
        """Name a linear read-out of the most recent hidden layer for the verifier."""
        index = {unit: i for i, unit in enumerate(self._prev)}
        if expr.constant:
            raise ValueError("probes are linear (no constant)")
        terms = tuple(sorted((index[u], int(c)) for u, c in expr.terms.items()))
        self._probes.append(Probe(self.probe_prefix + name, len(self._layers) - 1, terms))

    def finish(
        self,
        outputs: Mapping[str, Lin],
        *,
        residual: bool = False,
        label: str = "",
        meta: dict | None = None,
    ) -> MLP:
        """Append the final affine layer (no ReLU) and return the compiled :class:`MLP`."""
        final = self._compile(outputs)
        layers = tuple(self._layers) + (final,)
        return MLP(layers, residual, tuple(self._probes), label, dict(meta or {}))
