import sympy

from exactmem.core.bounds import decide_le, parse_formula
from exactmem.core.errors import InputError


def test_decides_rigorously_near_the_edge():
    e = parse_formula("sqrt(2)*10**12", {}, "b")
    assert decide_le(1414213562373, e).holds is True
    assert decide_le(1414213562374, e).holds is False


def test_exact_equality_is_decided_by_simplification():
    assert (
        decide_le(40, parse_formula("ceiling(log(R, 2))", {"R": sympy.Integer(2) ** 40}, "b")).holds
        is True
    )


def test_unknown_names_and_garbage_are_input_errors():
    import pytest

    with pytest.raises(InputError, match="unknown names"):
        parse_formula("N + q", {"N": sympy.Integer(3)}, "bounds.depth")
    with pytest.raises(InputError, match="bounds.depth"):
        parse_formula("N +* 2", {"N": sympy.Integer(3)}, "bounds.depth")
