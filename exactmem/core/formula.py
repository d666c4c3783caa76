"""The grammar of bound formulas: claim text parsed as data into SymPy expressions.

A claim file writes a bound such as ``3*K*Max(ceiling(log(R, 2)), 1) + 2``. That text is
untrusted, so it is never handed to Python (``eval``) nor to SymPy's string parser, which
evaluates Python. A tokenizer and a recursive-descent parser accept exactly this grammar::

    formula := sum
    sum     := product (("+" | "-" | "−") product)*
    product := unary (("*" | "×" | "/" | "÷") unary)*
    unary   := ("-" | "−") unary | power
    power   := atom (("**" | "^") unary)?            # right-associative: 2**3**2 = 2**9
    atom    := NUMBER | NAME | FUNCTION "(" sum ("," sum)* ")" | "(" sum ")"

NUMBER is an ASCII decimal integer or decimal fraction (``12``, ``2.5``, read exactly); NAME is
a variable or define given by the caller, or the constant ``pi`` or ``E``; FUNCTION is one of
``sqrt``, ``log`` (``log(x)`` natural, ``log(x, b)`` base b), ``ceiling``, ``floor``, ``Max``,
``Min``. Every node is built with SymPy's own constructors, so a formula parses to exactly the
expression SymPy's parser would give (a ``ceiling`` or ``floor`` that Arb balls decide is built
as that integer directly: the one SymPy would find, without its slower evaluation).

Every variable of a claim is a number when its formulas are parsed, so every sub-formula has a
value. Before SymPy builds a node, the node's value is bounded by an Arb ball at low precision;
a node whose magnitude exceeds 2^MAX_BITS (or is nonzero below 2^-MAX_BITS), whose exponent
exceeds MAX_EXPONENT, whose exact rational has more than MAX_BITS bits, whose tree has more
than MAX_NODES nodes, or that is not a finite real number is refused. So ``10**10**10`` is
refused before anything is computed, and no later evaluation meets a number too large to
compute with. :func:`check_formula` reads a formula before the values are known (a claim file
being loaded): syntax, names, and every sub-formula of numbers alone.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import sympy
from flint import arb, ctx, fmpq

from exactmem.core.errors import InputError

__all__ = [
    "CONSTANTS",
    "FUNCTIONS",
    "MAX_ARGUMENTS",
    "MAX_BITS",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_EXPONENT",
    "MAX_LENGTH",
    "MAX_NODES",
    "RESERVED",
    "Undecided",
    "ball_of",
    "check_formula",
    "parse_formula",
]

MAX_LENGTH = 1000  # characters of one formula
MAX_DIGITS = 100  # digits of one number
MAX_DEPTH = 32  # nesting of parentheses, calls, unary minus and powers
MAX_ARGUMENTS = 16  # arguments of Max and Min
MAX_EXPONENT = 1024  # |exponent| of a power
MAX_BITS = 2048  # |value| of a sub-formula below 2^MAX_BITS; numerators and denominators too
MAX_NODES = 64  # nodes of a sub-formula's expression tree, defines expanded
GUARD_PRECISION = 128  # bits of the balls that bound a node before it is built

CONSTANTS: dict[str, sympy.Expr] = {"pi": sympy.pi, "E": sympy.E}
FUNCTIONS: dict[str, tuple[int, int]] = {  # name → (least, most) arguments
    "sqrt": (1, 1),
    "log": (1, 2),
    "ceiling": (1, 1),
    "floor": (1, 1),
    "Max": (1, MAX_ARGUMENTS),
    "Min": (1, MAX_ARGUMENTS),
}
RESERVED = frozenset(CONSTANTS) | frozenset(FUNCTIONS)

_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+)
      | (?P<number>[0-9][0-9A-Za-z_.]*)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>\*\*|[-+*/^(),−×÷])""",
    re.VERBOSE | re.ASCII,
)
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
_CANONICAL = {"−": "-", "×": "*", "÷": "/", "^": "**"}
_LIMIT = arb(2) ** MAX_BITS
_TINY = arb(2) ** -MAX_BITS


class Undecided(Exception):
    """A floor or ceiling whose argument's ball contains an integer boundary."""


@dataclass(frozen=True)
class _Token:
    kind: str  # "number" | "name" | "op" | "end"
    text: str
    start: int  # offsets in the formula text
    end: int

    @property
    def column(self) -> int:  # 1-based, for messages
        return self.start + 1


@dataclass(frozen=True)
class _Node:
    expr: sympy.Expr | None  # None: the value is not known yet (check_formula)
    ball: arb | None  # the value, at GUARD_PRECISION
    size: int  # nodes of the expression tree


def _log_ball(x: arb, base: arb | None = None) -> arb:
    return x.log() if base is None else x.log() / base.log()


def _extremum(pick: str) -> Callable[..., arb]:
    def ball(*xs: arb) -> arb:
        total = xs[0]
        for x in xs[1:]:
            total = total.max(x) if pick == "max" else total.min(x)
        return total

    return ball


_CALLS: dict[str, Callable] = {
    "sqrt": sympy.sqrt,
    "log": sympy.log,
    "ceiling": sympy.ceiling,
    "floor": sympy.floor,
    "Max": sympy.Max,
    "Min": sympy.Min,
}
_CALL_BALLS: dict[str, Callable[..., arb]] = {
    "sqrt": arb.sqrt,
    "log": _log_ball,
    "ceiling": arb.ceil,
    "floor": arb.floor,
    "Max": _extremum("max"),
    "Min": _extremum("min"),
}


# --------------------------------------------------------------------------- balls


def ball_of(expr: sympy.Expr, *, strict: bool = True, memo: dict | None = None) -> arb:
    """``expr`` as an Arb ball at the current precision of ``flint.ctx``.

    ``strict`` raises :class:`Undecided` for a floor or ceiling whose argument's ball does not
    determine the integer; otherwise that node is the ball of every candidate. Shared
    sub-expressions are evaluated once (``memo``), so a chain of defines costs its size.
    """
    memo = {} if memo is None else memo
    found = memo.get(expr)
    if found is not None:
        return found
    value = _ball_node(expr, strict, memo)
    memo[expr] = value
    return value


def _ball_node(expr: sympy.Expr, strict: bool, memo: dict) -> arb:
    if expr.is_Integer:
        return arb(int(expr))
    if expr.is_Rational:
        return arb(fmpq(int(expr.p), int(expr.q)))
    if expr is sympy.pi:
        return arb.pi()
    if expr is sympy.E:
        return arb.const_e()
    args = [ball_of(a, strict=strict, memo=memo) for a in expr.args]
    if expr.is_Add:
        total = args[0]
        for a in args[1:]:
            total = total + a
        return total
    if expr.is_Mul:
        total = args[0]
        for a in args[1:]:
            total = total * a
        return total
    if expr.is_Pow:
        exponent = expr.args[1]
        if exponent.is_Integer:
            return args[0] ** int(exponent)
        if exponent == sympy.Rational(1, 2):
            return args[0].sqrt()
        if exponent == sympy.Rational(-1, 2):
            return args[0].rsqrt()
        return (args[1] * args[0].log()).exp()
    if isinstance(expr, sympy.log):
        return args[0].log()
    if isinstance(expr, sympy.exp):
        return args[0].exp()
    if isinstance(expr, sympy.ceiling | sympy.floor):
        rounded = args[0].ceil() if isinstance(expr, sympy.ceiling) else args[0].floor()
        value = rounded.unique_fmpz()
        if value is not None:
            return arb(value)
        if strict:
            raise Undecided
        return rounded
    if isinstance(expr, sympy.Max | sympy.Min):
        total = args[0]
        for a in args[1:]:
            total = total.max(a) if isinstance(expr, sympy.Max) else total.min(a)
        return total
    raise InputError(f"bound formulas cannot use {type(expr).__name__} ({expr})")


def _tree_size(expr: sympy.Expr, cap: int) -> int:
    """Nodes of ``expr`` as a tree (shared sub-trees counted each time), stopping past ``cap``."""
    count, stack = 0, [expr]
    while stack and count <= cap:
        node = stack.pop()
        count += 1
        stack.extend(node.args)
    return count


# --------------------------------------------------------------------------- tokens


def _tokens(text: str, fail: Callable[[str], InputError]) -> list[_Token]:
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise fail(f"unexpected character {text[pos]!r} at column {pos + 1}")
        kind = match.lastgroup
        if kind != "space":
            word = match.group()
            if kind == "number" and not _NUMBER.fullmatch(word):
                raise fail(f"malformed number {word!r} at column {pos + 1}")
            if kind == "number" and len(word.replace(".", "")) > MAX_DIGITS:
                raise fail(f"number at column {pos + 1} has more than {MAX_DIGITS} digits")
            out.append(_Token(kind, _CANONICAL.get(word, word), pos, match.end()))
        pos = match.end()
    out.append(_Token("end", "", len(text), len(text)))
    return out


# --------------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, text: str, names: Mapping[str, sympy.Expr], where: str):
        self.text = text
        self.where = where
        self.names = names
        self.tokens = _tokens(text, self.error)
        self.pos = 0
        self.depth = 0
        self.memo: dict = {}

    def error(self, message: str) -> InputError:
        return InputError(f"{self.where}: {message} in {self.text!r}")

    # token helpers

    @property
    def token(self) -> _Token:
        return self.tokens[self.pos]

    def take(self, text: str) -> bool:
        if self.token.kind == "op" and self.token.text == text:
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.take(text):
            raise self.error(f"expected {text!r} at column {self.token.column}{self.found()}")

    def found(self) -> str:
        return ", found the end" if self.token.kind == "end" else f", found {self.token.text!r}"

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nesting deeper than {MAX_DEPTH}")

    # grammar

    def formula(self) -> _Node:
        node = self.sum()
        if self.token.kind != "end":
            raise self.error(f"unexpected {self.token.text!r} at column {self.token.column}")
        return node

    def sum(self) -> _Node:
        start = self.token.start
        node = self.product()
        while True:
            if self.take("+"):
                node = self.build(operator.add, start, node, self.product())
            elif self.take("-"):
                node = self.build(operator.sub, start, node, self.product())
            else:
                return node

    def product(self) -> _Node:
        start = self.token.start
        node = self.unary()
        while True:
            if self.take("*"):
                node = self.build(operator.mul, start, node, self.unary())
            elif self.take("/"):
                right = self.unary()
                if right.expr is not None and right.expr.is_zero:
                    raise self.error(f"division by zero in {self.source(start)}")
                node = self.build(operator.truediv, start, node, right)
            else:
                return node

    def unary(self) -> _Node:
        start = self.token.start
        if self.take("-"):
            self.enter()
            operand = self.unary()
            self.depth -= 1
            return self.build(operator.neg, start, operand)
        return self.power()

    def power(self) -> _Node:
        start = self.token.start
        base = self.atom()
        if not self.take("**"):
            return base
        self.enter()
        exponent = self.unary()
        self.depth -= 1
        self.check_power(base, exponent, start)

        def ball(b: arb, e: arb) -> arb:
            if exponent.expr.is_Integer:
                return b ** int(exponent.expr)
            return (e * b.log()).exp()

        return self.build(operator.pow, start, base, exponent, ball=ball)

    def atom(self) -> _Node:
        token = self.token
        if token.kind == "number":
            self.pos += 1
            whole, _, fraction = token.text.partition(".")
            value = sympy.Rational(int(whole + fraction), 10 ** len(fraction))
            return self.leaf(value)
        if token.kind == "name":
            self.pos += 1
            if token.text in FUNCTIONS:
                return self.call(token)
            if token.text in self.names:
                return self.variable(token.text)
            if token.text in CONSTANTS:
                return self.leaf(CONSTANTS[token.text])
            raise self.error(f"unknown name {token.text!r} at column {token.column}")
        if self.take("("):
            self.enter()
            node = self.sum()
            self.expect(")")
            self.depth -= 1
            return node
        what = "the end" if token.kind == "end" else repr(token.text)
        raise self.error(f"expected a number, name or '(' at column {token.column}, found {what}")

    def call(self, name: _Token) -> _Node:
        least, most = FUNCTIONS[name.text]
        if not self.take("("):
            raise self.error(f"{name.text} at column {name.column} is a function: {name.text}(…)")
        self.enter()
        args = [self.sum()]
        while self.take(","):
            args.append(self.sum())
        self.expect(")")
        self.depth -= 1
        if not least <= len(args) <= most:
            count = f"{least}" if least == most else f"{least} to {most}"
            raise self.error(
                f"{name.text} at column {name.column} takes {count} arguments, got {len(args)}"
            )
        if name.text in ("ceiling", "floor") and args[0].expr is not None:
            value = self.integer_part(name.text, args[0].expr)
            if value is not None:
                ball = arb(int(value))
                return self.build(lambda _: value, name.start, args[0], ball=lambda _: ball)
        return self.build(_CALLS[name.text], name.start, *args, ball=_CALL_BALLS[name.text])

    @staticmethod
    def integer_part(function: str, expr: sympy.Expr) -> sympy.Integer | None:
        """``ceiling`` or ``floor`` of ``expr`` when Arb balls decide it (SymPy would evaluate
        the tree with mpmath again at every precision it tries, much slower); None leaves the
        node to SymPy. The integer is the one SymPy finds: both are correct."""
        old = ctx.prec
        try:
            for precision in (GUARD_PRECISION, 512, MAX_BITS + 64):
                ctx.prec = precision
                try:
                    ball = ball_of(expr)
                except Undecided:
                    return None
                rounded = ball.ceil() if function == "ceiling" else ball.floor()
                value = rounded.unique_fmpz()
                if value is not None:
                    return sympy.Integer(int(value))
            return None
        finally:
            ctx.prec = old

    # nodes

    def leaf(self, expr: sympy.Expr) -> _Node:
        return _Node(expr, self.ball(expr), 1)

    def variable(self, name: str) -> _Node:
        expr = self.names[name]
        if expr is None:  # a name whose value comes later (check_formula)
            return _Node(None, None, 1)
        if not isinstance(expr, sympy.Expr):
            raise self.error(f"{name!r} has no value")
        size = _tree_size(expr, MAX_NODES)
        if size > MAX_NODES:
            raise self.error(f"{name!r} expands to more than {MAX_NODES} nodes")
        return _Node(expr, self.ball(expr), size)

    def ball(self, expr: sympy.Expr) -> arb:
        old = ctx.prec
        ctx.prec = GUARD_PRECISION
        try:
            return ball_of(expr, strict=False, memo=self.memo)
        finally:
            ctx.prec = old

    def source(self, start: int) -> str:
        """The formula text from offset ``start`` to the last token read, quoted (or "the
        formula" when that is all of it: the message quotes the formula anyway)."""
        text = self.text[start : self.tokens[self.pos - 1].end].strip()
        return "the formula" if text == self.text.strip() else repr(text)

    def check_power(self, base: _Node, exponent: _Node, start: int) -> None:
        if base.expr is None or exponent.expr is None:
            return
        e = exponent.ball
        if not (e.is_finite() and e.abs_upper() <= MAX_EXPONENT):
            raise self.error(
                f"the exponent of {self.source(start)} exceeds {MAX_EXPONENT} in absolute value"
            )
        b, x = base.expr, exponent.expr
        if b.is_Rational and x.is_Rational:
            bits = max(int(b.p).bit_length(), int(b.q).bit_length())
            if bits * abs(int(x.p)) > MAX_BITS * int(x.q):
                raise self.error(f"{self.source(start)} has more than {MAX_BITS} bits")

    def build(
        self, make: Callable, start: int, *children: _Node, ball: Callable | None = None
    ) -> _Node:
        """The node ``make(*children)`` for the text from ``start``, refused before it is
        built when its value (``ball`` of the children's balls, else ``make`` of them) is out
        of bounds, so SymPy never computes with a number too large. A node with a child of
        unknown value (:func:`check_formula`) is unknown too."""
        text = self.source(start)
        if any(c.expr is None for c in children):
            return _Node(None, None, 1)
        if 1 + sum(c.size for c in children) > MAX_NODES:
            raise self.error(f"{text} has more than {MAX_NODES} nodes")
        ball = (ball or make)(*(c.ball for c in children))
        if not ball.is_finite():
            raise self.error(f"{text} is not a finite real number")
        if ball.abs_upper() > _LIMIT:  # the whole ball: a wide one is refused, not guessed
            raise self.error(f"{text} exceeds 2^{MAX_BITS} in absolute value")
        if ball.abs_upper() < _TINY and not ball.is_zero():
            raise self.error(f"{text} is nonzero below 2^-{MAX_BITS} in absolute value")
        try:
            expr = make(*(c.expr for c in children))
        except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
            raise self.error(f"cannot evaluate {text} ({type(exc).__name__})") from None
        if expr.is_Rational:
            if max(int(expr.p).bit_length(), int(expr.q).bit_length()) > MAX_BITS:
                raise self.error(f"{text} has more than {MAX_BITS} bits")
            return _Node(expr, self.ball(expr), 1)
        size = _tree_size(expr, MAX_NODES)
        if size > MAX_NODES:
            raise self.error(f"{text} has more than {MAX_NODES} nodes")
        # the ball is real and finite, so is the node; this only catches a disagreement (and
        # asks SymPy no assumption: that would evaluate the tree numerically, again and again)
        if expr.has(sympy.I, sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            raise self.error(f"{text} is not a finite real number")
        return _Node(expr, ball, size)


def parse_formula(
    text: str, names: Mapping[str, sympy.Expr | None], where: str
) -> sympy.Expr | None:
    """Parse ``text`` by the grammar above, with ``names`` (values of variables and defines),
    ``pi``, ``E`` and :data:`FUNCTIONS`; ``where`` (file and key) starts every message.

    Raises :class:`InputError` for text outside the grammar, an unknown name, or a value or
    size beyond the limits of this module.
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}: expected a formula string")
    if len(text) > MAX_LENGTH:
        raise InputError(f"{where}: formula longer than {MAX_LENGTH} characters")
    parser = _Parser(text, names, where)
    unknown = sorted(
        {
            t.text
            for t in parser.tokens
            if t.kind == "name" and t.text not in names and t.text not in RESERVED
        }
    )
    if unknown:
        raise InputError(f"{where}: unknown names {', '.join(unknown)} in {text!r}")
    return parser.formula().expr


def check_formula(text: str, names: Iterable[str], where: str) -> None:
    """Check ``text`` against the grammar and the limits before the values of ``names`` are
    known: unknown names, syntax, and every sub-formula of numbers alone (``10**10**10``)
    are refused now, the rest when the values come (:func:`parse_formula`)."""
    parse_formula(text, dict.fromkeys(names), where)
