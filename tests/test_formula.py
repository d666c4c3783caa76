"""The formula grammar: claim text is parsed as data, to the expressions SymPy gave before,
within limits on numbers, exponents, nesting and size."""

import io
import tokenize
import tomllib
from pathlib import Path

import pytest
import sympy

import exactmem
from exactmem.claims.proofs import shipped_proofs_dir
from exactmem.core.bounds import decide_le, evaluate_ball
from exactmem.core.errors import InputError
from exactmem.core.formula import (
    MAX_BITS,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_EXPONENT,
    MAX_LENGTH,
    MAX_NODES,
    check_formula,
    parse_formula,
)

PACKAGE = Path(exactmem.__file__).resolve().parent

# the figures of a few datasets, as _bound_checks gives them (r and δ exact square roots)
OPTION_NAMES = {  # claim options as formula names (Dana's H, d_h and model width d)
    "option_heads": sympy.Integer(20),
    "option_head_dim": sympy.Integer(10),
    "option_d": sympy.Integer(10),
    "option_width": sympy.Integer(12),  # Madden et al.'s FNN width m
}
NAME_SETS = [
    {
        "N": sympy.Integer(300),
        "n": sympy.Integer(6),
        "d": sympy.Integer(3),
        "C": sympy.Integer(5),
        "r": sympy.sqrt(sympy.Rational(7, 3)),
        "delta": sympy.sqrt(sympy.Rational(1, 1000)),
        "omega": sympy.Integer(40),
        "B": sympy.Integer(4),
        **OPTION_NAMES,
    },
    {
        "N": sympy.Integer(10000),
        "n": sympy.Integer(16),
        "d": sympy.Integer(8),
        "C": sympy.Integer(10),
        "r": sympy.sqrt(sympy.Integer(3000000)),
        "delta": sympy.Integer(1),
        "omega": sympy.Integer(500),
        "B": sympy.Integer(64),
        **OPTION_NAMES,
    },
    {
        "N": sympy.Integer(1),
        "n": sympy.Integer(1),
        "d": sympy.Integer(1),
        "C": sympy.Integer(1),
        "r": sympy.Rational(1, 2),
        "delta": sympy.sqrt(sympy.Rational(2, 9)),
        "omega": sympy.Integer(1),
        "B": sympy.Integer(1),
        **OPTION_NAMES,
    },
]
OLD_NAMESPACE = {
    "sqrt": sympy.sqrt,
    "log": sympy.log,
    "ceiling": sympy.ceiling,
    "floor": sympy.floor,
    "Max": sympy.Max,
    "Min": sympy.Min,
    "pi": sympy.pi,
    "E": sympy.E,
}


def shipped_formulas():
    for path in sorted(shipped_proofs_dir().glob("*.toml")):
        obj = tomllib.loads(path.read_text())
        pairs = [*obj.get("define", {}).items(), *obj.get("bounds", {}).items()]
        if pairs:
            yield pytest.param(pairs, id=path.stem)


@pytest.mark.parametrize("pairs", list(shipped_formulas()))
@pytest.mark.parametrize("names", range(len(NAME_SETS)))
def test_shipped_formulas_parse_to_what_sympy_gave(pairs, names):
    """The grammar gives the very expressions SymPy's parser gave on the shipped (trusted)
    claim text; sympify runs here, in the test, on those strings only."""
    ours, old = dict(NAME_SETS[names]), dict(NAME_SETS[names])
    for key, text in pairs:
        try:
            expected = sympy.sympify(text, locals={**OLD_NAMESPACE, **old}, rational=True)
        except ZeroDivisionError:
            continue
        mine = parse_formula(text, ours, key)
        assert mine == expected, (key, text)
        ours[key], old[key] = mine, expected


@pytest.mark.parametrize(
    "text, value",
    [
        ("1 + 2*3", 7),
        ("2**3**2", 512),  # right-associative
        ("2^3^2", 512),
        ("-2**2", -4),  # the power binds tighter than unary minus
        ("2**-1", sympy.Rational(1, 2)),
        ("--3", 3),
        ("7 − 2 × 3 ÷ 4", sympy.Rational(11, 2)),
        ("1.25*4", 5),
        ("0.1 + 0.2", sympy.Rational(3, 10)),  # decimals are exact
        ("10/4", sympy.Rational(5, 2)),
        ("log(8, 2)", 3),
        ("log(E)", 1),
        ("ceiling(7/2) + floor(7/2)", 7),
        ("Max(1, 5, 3) - Min(4, 2)", 3),
        ("sqrt(16)", 4),
        ("N*d + C", 23),
        ("\t( N )\n", 4),
    ],
)
def test_grammar(text, value):
    names = {"N": sympy.Integer(4), "d": sympy.Integer(5), "C": sympy.Integer(3)}
    assert parse_formula(text, names, "f") == value


def test_constants_and_irrationals_stay_exact():
    assert parse_formula("pi*E", {}, "f") == sympy.pi * sympy.E
    assert parse_formula("sqrt(2)*10**12", {}, "f") == sympy.sqrt(2) * 10**12


PAYLOAD = "sqrt.__globals__['__builtins__']['__import__']('os').system('touch pwned') + 100"


@pytest.mark.parametrize(
    "text, message",
    [
        (PAYLOAD, "unexpected character '.'"),
        ("__import__(os)", "unknown names __import__, os"),
        ("N + q", "unknown names q"),
        ("N +* 2", "expected a number, name or '('"),
        ("(N", "expected ')'"),
        ("N)", "unexpected ')'"),
        ("2 N", "unexpected 'N'"),
        ("", "expected a formula string"),
        ("   ", "expected a formula string"),
        ("1e5", "malformed number '1e5'"),
        ("1_000", "malformed number '1_000'"),
        ("0x1f", "malformed number '0x1f'"),
        ("1.", "malformed number '1.'"),
        (".5", "unexpected character '.'"),
        ("١٢", "unexpected character"),
        ("１/２", "unexpected character"),
        ("N; N", "unexpected character ';'"),
        ("lambda", "unknown names lambda"),
        ("sqrt", "is a function"),
        ("sqrt(1, 2)", "takes 1 arguments, got 2"),
        ("log(1, 2, 3)", "takes 1 to 2 arguments"),
        ("Max()", "expected a number, name or '('"),
        ("1/0", "division by zero"),
        ("1/(N - N)", "division by zero"),
        ("log(0)", "not a finite real number"),
        ("sqrt(-1)", "not a finite real number"),
        ("(-8)**(1/3)", "not a finite real number"),
        ("0**-1", "not a finite real number"),
        ("log(2, 1)", "not a finite real number"),
        ("10**10**10", f"exceeds {MAX_EXPONENT}"),
        ("N**N**N", "exponent"),
        (f"2**{MAX_EXPONENT + 1}", f"exceeds {MAX_EXPONENT}"),
        ("(1 + 1/10**30)**1000", f"more than {MAX_BITS} bits"),
        ("(2**1000)**3", f"more than {MAX_BITS} bits"),
        ("(2**1000*pi)**3", f"exceeds 2^{MAX_BITS}"),
        ("(pi/2**1000)**3", f"below 2^-{MAX_BITS}"),
        ("1" * (MAX_DIGITS + 1), f"more than {MAX_DIGITS} digits"),
        ("(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH}"),
        ("-" * (MAX_DEPTH + 1) + "1", f"deeper than {MAX_DEPTH}"),
        ("+".join(["N"] * (MAX_LENGTH // 2 + 1)), f"longer than {MAX_LENGTH}"),
    ],
)
def test_refused_with_the_place_named(text, message):
    names = {"N": sympy.Integer(7)}
    with pytest.raises(InputError, match="claim file x.toml: bounds.depth") as info:
        parse_formula(text, names, "claim file x.toml: bounds.depth")
    assert message in str(info.value)


def test_not_a_string():
    for value in (3, None, ["N"], {"a": 1}):
        with pytest.raises(InputError, match="bounds.width: expected a formula string"):
            parse_formula(value, {}, "bounds.width")


def test_limits_are_edges_not_guesses():
    """Just inside every limit parses."""
    assert parse_formula(f"2**{MAX_EXPONENT}", {}, "f") == 2**MAX_EXPONENT
    assert parse_formula("9" * MAX_DIGITS, {}, "f") == int("9" * MAX_DIGITS)
    deep = "(" * (MAX_DEPTH - 1) + "1" + ")" * (MAX_DEPTH - 1)
    assert parse_formula(deep, {}, "f") == 1
    assert parse_formula("(2**1000)**2", {}, "f") == 2**2000


def test_exponential_expansion_of_defines_is_refused():
    """Each define doubles the expression tree; the size limit stops the chain before
    evaluation (which would revisit shared sub-trees) gets costly."""
    names = {"x0": parse_formula("pi + E", {}, "x0")}
    with pytest.raises(InputError, match=f"more than {MAX_NODES} nodes"):
        for k in range(1, 40):
            names[f"x{k}"] = parse_formula(f"x{k - 1}*pi + x{k - 1}*E", names, f"x{k}")


def test_check_formula_before_values_are_known():
    check_formula("Max(N, K) + 1", ["N", "K"], "bounds.depth")
    with pytest.raises(InputError, match="bounds.depth: unknown names q"):
        check_formula("N + q", ["N"], "bounds.depth")
    with pytest.raises(InputError, match="exceeds"):
        check_formula("N + 10**10**10", ["N"], "bounds.depth")
    with pytest.raises(InputError, match="unexpected character"):
        check_formula(PAYLOAD, ["N"], "bounds.width")


def test_evaluation_is_rigorous_and_bounded():
    names = {"N": sympy.Integer(2) ** 40}
    expr = parse_formula("ceiling(log(N, 2)) * (2**1024) + sqrt(2)", names, "f")
    ball = evaluate_ball(expr, 2048)
    assert ball is not None and ball > 40 * 2**1024 + 1 and ball < 40 * 2**1024 + 2
    assert decide_le(40 * 2**1024 + 1, expr).holds is True
    assert decide_le(40 * 2**1024 + 2, expr).holds is False


FORBIDDEN = {"eval", "exec", "sympify", "parse_expr", "pickle", "__import__", "lambdify"}


def forbidden_uses(source: str) -> list[str]:
    """Names that run text as code (or unpickle), in code only: comments and strings are
    tokens of their own. ``compile`` is forbidden as the builtin (``re.compile`` is fine)."""
    found = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.NAME:
            continue
        previous = tokens[i - 1].string if i else ""
        if tok.string in FORBIDDEN or (tok.string == "compile" and previous != "."):
            found.append(f"line {tok.start[0]}: {tok.string}")
    return found


def test_no_code_runs_from_text_anywhere_in_the_package():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = forbidden_uses(path.read_text())
        if found:
            offenders[str(path.relative_to(PACKAGE))] = found
    assert offenders == {}


def test_the_scan_finds_what_it_looks_for():
    assert forbidden_uses("x = eval(text)\n") == ["line 1: eval"]
    assert forbidden_uses("import sympy\ny = sympy.sympify(t)\n") == ["line 2: sympify"]
    assert forbidden_uses("import pickle\n") == ["line 1: pickle"]
    assert forbidden_uses("c = compile(s, 'f', 'exec')\n") == ["line 1: compile"]
    assert forbidden_uses("import re\nr = re.compile('a')\n# eval(x)\ns = 'exec('\n") == []
