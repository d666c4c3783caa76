"""The exact Transformer IR and its resource count.

A model is ``E_out ∘ S_L ∘ … ∘ S_1 ∘ E_in`` acting on a sequence of tokens (columns), as in
Kajitsuka & Sato 2025, eq. (4). Each sub-layer ``S`` is token-wise (:class:`MLP`, in residual
form ``H + W2·σ(W1·H + b1) + b2`` or plain) or mixes tokens (:class:`Attention`, score mode
``uniform`` | ``hardmax`` | ``softmax``). Every weight is exact: a layer is a sparse integer
matrix and integer bias over one positive integer denominator.

Coordinates carry names (*lanes*), like the basis directions of tracr: the verifier reads
margins at named lanes of the evaluated network.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import chain
from operator import itemgetter

from gmpy2 import mpq

from exactmem.core.exact import bitlen, parameter_bits
from exactmem.core.weight_rows import BlockRows, block_bits

__all__ = [
    "MLP",
    "Problem",
    "ACTIVATIONS",
    "MAX_SCALE",
    "TRANSCENDENTAL",
    "Affine",
    "Attention",
    "AttentionHead",
    "LayerNorm",
    "PositionalEncoding",
    "Probe",
    "Resources",
    "Transformer",
    "has_gelu",
    "mlp_problem",
    "model_meta_problem",
    "resources",
    "shape_problem",
    "validate",
]

Row = tuple[tuple[int, int], ...]  # ((column, integer coefficient), ...), non-zero, sorted

SCORE_MODES = ("uniform", "hardmax", "softmax")
MAX_SCALE = 999_999  # an attention's score divisor √scale: scale of 1 to 6 digits
MASKS = ("none", "context", "causal")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")
TRANSCENDENTAL = ("gelu", "gelu_tanh")  # only the ball evaluator runs them


@dataclass(frozen=True)
class Affine:
    """``y = (W·x + b) / denominator`` with W sparse over the integers.

    ``rows[i]`` lists the non-zero ``(column, coefficient)`` pairs of row i; ``names`` names the
    outputs (lanes or hidden units). An imported checkpoint's ``rows`` is a
    :class:`~exactmem.core.weight_rows.BlockRows`: one array that reads as these tuples.
    """

    in_dim: int
    rows: tuple[Row, ...]
    bias: tuple[int, ...]
    denominator: int = 1
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.denominator < 1:
            raise ValueError("denominator must be a positive integer")
        if len(self.bias) != len(self.rows):
            raise ValueError("bias and rows differ in length")
        if self.names and len(self.names) != len(self.rows):
            raise ValueError("names and rows differ in length")
        if isinstance(self.rows, BlockRows):  # non-zero integers by construction, in order
            if self.rows.max_column() >= self.in_dim:
                raise ValueError(f"column {self.rows.max_column()} for in_dim {self.in_dim}")
            return
        for row in self.rows:
            for col, coeff in row:
                if not 0 <= col < self.in_dim or coeff == 0:
                    raise ValueError(f"bad entry ({col}, {coeff}) for in_dim {self.in_dim}")

    @property
    def out_dim(self) -> int:
        return len(self.rows)

    @classmethod
    def from_dense(
        cls,
        matrix: Sequence[Sequence[int]],
        bias: Sequence[int] | None = None,
        denominator: int = 1,
        names: Sequence[str] = (),
        in_dim: int | None = None,
    ) -> Affine:
        rows = tuple(tuple((j, int(v)) for j, v in enumerate(r) if v) for r in matrix)
        width = in_dim if in_dim is not None else (len(matrix[0]) if matrix else 0)
        b = tuple(int(x) for x in bias) if bias is not None else (0,) * len(rows)
        return cls(width, rows, b, denominator, tuple(names))

    @classmethod
    def from_rationals(
        cls, matrix: Sequence[Sequence[mpq]], in_dim: int, names: Sequence[str] = ()
    ) -> Affine:
        """A bias-free map from a matrix of exact rationals (common denominator = their lcm)."""
        den = math.lcm(*[int(mpq(x).denominator) for r in matrix for x in r]) if matrix else 1
        dense = [[int(mpq(x) * den) for x in r] for r in matrix]
        return cls.from_dense(dense, None, den, names, in_dim=in_dim)

    def parameters(self, *, with_bias: bool = True) -> Iterator[mpq]:
        """The non-zero parameters as exact rationals (weights, then biases)."""
        for row in self.rows:
            for _, coeff in row:
                yield mpq(coeff, self.denominator)
        if with_bias:
            for b in self.bias:
                if b:
                    yield mpq(b, self.denominator)

    def dense_count(self, *, with_bias: bool = True) -> int:
        return self.in_dim * self.out_dim + (self.out_dim if with_bias else 0)


@dataclass(frozen=True)
class Probe:
    """A named linear read-out ``Σ coeff·unit`` of hidden layer ``layer`` of an MLP.

    Probes are how a construction names the quantities its proof talks about (a step indicator,
    a matched slot) so the verifier can read them from the evaluated network.
    """

    name: str
    layer: int
    terms: Row


@dataclass(frozen=True)
class MLP:
    """Token-wise network ``L_k ∘ σ ∘ … ∘ σ ∘ L_1`` (σ after every layer but the last).

    ``activation``: σ is ``relu`` (default; exact), ``gelu`` (x·Φ(x), Φ the standard normal
    distribution function — Madden, Fox & Thrampoulidis 2024 use it; PyTorch's
    ``nn.GELU()``, nanoGPT's MLP) or ``gelu_tanh``, the tanh approximation
    ½x(1 + tanh(√(2/π)(x + 0.044715x³))) (Hugging Face GPT-2's ``gelu_new``, PyTorch's
    ``gelu(approximate="tanh")``): a different function, never read for the other. Both GELUs
    are transcendental, so only the ball evaluator runs them. With ``residual=True`` the
    sub-layer returns ``H + MLP(H)`` (Kajitsuka & Sato 2025, eq. (3)); a standard FFN is the
    two-layer case. With ``residual=False`` it is a plain MLP and may change the width of the
    stream (arbitrary-depth F^(FF), eq. (43)).
    """

    layers: tuple[Affine, ...]
    residual: bool = True
    probes: tuple[Probe, ...] = ()
    label: str = ""
    meta: dict = field(default_factory=dict, compare=False)
    activation: str = "relu"

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r} not in {ACTIVATIONS}")
        if not self.layers:
            raise ValueError("an MLP needs at least one layer")
        for a, b in zip(self.layers, self.layers[1:], strict=False):
            if a.out_dim != b.in_dim:
                raise ValueError(f"layer widths do not chain: {a.out_dim} → {b.in_dim}")
        if self.residual and self.layers[0].in_dim != self.layers[-1].out_dim:
            raise ValueError("a residual MLP must map the stream width to itself")

    @property
    def in_dim(self) -> int:
        return self.layers[0].in_dim

    @property
    def out_dim(self) -> int:
        return self.layers[-1].out_dim


@dataclass(frozen=True)
class AttentionHead:
    """One head: ``W_O W_V Z σ[(W_K Z)ᵀ (W_Q Z) / √scale]`` (eq. (2)); the maps are bias-free
    (``scale`` is the sub-layer's, :class:`Attention`)."""

    query: Affine
    key: Affine
    value: Affine
    output: Affine


@dataclass(frozen=True)
class Attention:
    """Self-attention sub-layer ``Z + Σ_h head_h(Z)`` with a column-wise score normalisation.

    ``uniform``: weights exactly 1/n whatever the scores (eq. (39)); ``hardmax``: weight 1/|I|
    on the maximisers I of each column, ties averaged (eq. (1)); ``softmax``: exp-normalised.

    ``mask``: ``none`` (every position is a key), ``context`` (every position but the last is
    a key: a query token placed last attends to its context only, the model of Mahdavi et al.
    2024) or ``causal`` (position k attends to positions 0..k: a decoder, Madden et al. 2024).

    ``scale``: the scores are divided by √scale (a positive integer; 1, the default, leaves
    them as they are). It carries an irrational score scale such as 1/√d_h of a head size d_h
    that is not a square, which no exact weight can hold. Dividing every score by the same
    positive number changes neither ties nor maximisers, so uniform and hardmax weights and
    softmax weights of a column of equal scores (exactly 1/n) do not depend on it; only softmax
    of unequal scores does, which is transcendental anyway: the ball evaluator encloses
    1/√scale, the exact evaluators stop there as they do without it.
    """

    heads: tuple[AttentionHead, ...]
    score: str = "hardmax"
    label: str = ""
    mask: str = "none"
    scale: int = 1

    def __post_init__(self) -> None:
        if self.score not in SCORE_MODES:
            raise ValueError(f"score mode {self.score!r} not in {SCORE_MODES}")
        if self.mask not in MASKS:
            raise ValueError(f"mask {self.mask!r} not in {MASKS}")
        if type(self.scale) is not int or not 1 <= self.scale <= MAX_SCALE:
            raise ValueError(f"scale {self.scale!r} is not an integer in 1 … {MAX_SCALE}")
        for h in self.heads:
            for m in (h.query, h.key, h.value, h.output):
                if any(m.bias):
                    raise ValueError("attention maps are linear: biases must be zero")


@dataclass(frozen=True)
class PositionalEncoding:
    """Adds a fixed exact vector to the column at each position: Z[:, k] += table[k].

    A standard component that breaks permutation equivariance; the Kajitsuka–Sato constructions
    use none, and the Theorem 4.2 check must notice one."""

    table: tuple[tuple[mpq, ...], ...]
    label: str = ""

    @property
    def width(self) -> int:
        return len(self.table[0]) if self.table else 0


@dataclass(frozen=True)
class LayerNorm:
    """Token-wise layer normalisation (Ba, Kiros & Hinton 2016), applied to the stream:
    ``y = gain ⊙ (x − μ) / √(σ² + eps) + bias`` with μ and σ² the mean and the (biased)
    variance of the column's ``width`` entries, as ``torch.nn.LayerNorm``.

    The square root is irrational unless σ² + eps is the square of a rational: the exact
    evaluator computes it only then, and the Arb evaluator encloses it otherwise.

    With ``source`` and ``target`` set (a *branch* layer norm, for pre-norm blocks) it reads
    the ``width`` lanes from ``source`` on, writes their normalisation into the ``width`` lanes
    from ``target`` on (replacing what they held) and leaves every other lane as it was: the
    residual stream stays un-normalised and the next sub-layer reads the normalised copy, as
    in x + Attn(LN(x)). Without them it normalises the whole stream."""

    gain: tuple[mpq, ...]
    bias: tuple[mpq, ...]
    eps: mpq
    label: str = ""
    source: int | None = None
    target: int | None = None

    def __post_init__(self) -> None:
        if len(self.gain) != len(self.bias) or not self.gain:
            raise ValueError("a layer norm needs gain and bias of the same positive width")
        if not mpq(self.eps) > 0:
            raise ValueError("a layer norm's eps must be positive")
        if problem := branch_problem(self.source, self.target, len(self.gain), None):
            raise ValueError(f"layer norm {self.label!r}: {problem}")

    @property
    def is_branch(self) -> bool:
        return self.target is not None

    @property
    def width(self) -> int:
        return len(self.gain)

    in_dim = out_dim = width


Sublayer = MLP | Attention | PositionalEncoding | LayerNorm


def branch_problem(source: int | None, target: int | None, width: int, stream: int | None):
    """What is wrong with a branch layer norm's lanes (None when nothing): both or neither of
    ``source`` and ``target``, non-negative, disjoint, inside a stream of ``stream`` lanes."""
    if (source is None) != (target is None):
        return "source and target go together (a branch layer norm needs both)"
    if source is None or target is None:
        if stream is None or width == stream:
            return None
        return f"{width} entries, the stream has {stream}"
    if source < 0 or target < 0:
        return "source and target must be non-negative lanes"
    if source < target + width and target < source + width:
        return f"source lanes {source}.. and target lanes {target}.. overlap (width {width})"
    top = max(source, target) + width
    if stream is not None and top > stream:
        return f"lanes up to {top - 1} do not fit the stream's {stream}"
    return None


@dataclass(frozen=True)
class Transformer:
    """``E_out ∘ S_L ∘ … ∘ S_1 ∘ E_in`` on sequences of tokens in Q^d.

    ``embed`` / ``unembed`` are token-wise affine maps; ``None`` means the identity (a plain
    MLP on points is a Transformer on sequences of length one with no attention). With
    ``token_inputs`` the model reads vocabulary indices x ∈ {0..input_dim − 1} and ``embed`` is
    the embedding table: its column x (plus the bias) is the embedding, i.e. the linear map of
    the one-hot vector e_x (Kajitsuka & Sato 2025, Theorem E.1).
    """

    input_dim: int
    sublayers: tuple[Sublayer, ...]
    embed: Affine | None = None
    unembed: Affine | None = None
    meta: dict = field(default_factory=dict, compare=False)
    token_inputs: bool = False

    def __post_init__(self) -> None:
        if self.token_inputs and self.embed is None:
            raise ValueError("token inputs need an embedding table (E_in)")
        width = self.embed.out_dim if self.embed else self.input_dim
        if self.embed and self.embed.in_dim != self.input_dim:
            raise ValueError("embedding input width differs from input_dim")
        for s in self.sublayers:
            if isinstance(s, MLP):
                if s.in_dim != width:
                    raise ValueError(f"MLP {s.label!r} expects width {s.in_dim}, stream is {width}")
                width = s.out_dim
            elif isinstance(s, PositionalEncoding):
                if s.width != width:
                    raise ValueError(f"positional encoding {s.label!r} does not fit width {width}")
            elif isinstance(s, LayerNorm):
                if branch_problem(s.source, s.target, s.width, width):
                    raise ValueError(f"layer norm {s.label!r} does not fit width {width}")
            else:
                for h in s.heads:
                    if h.query.in_dim != width or h.output.out_dim != width:
                        raise ValueError(f"attention {s.label!r} does not fit stream width {width}")
        if self.unembed and self.unembed.in_dim != width:
            raise ValueError("unembedding input width differs from the stream width")

    def affines(self) -> Iterator[tuple[Affine, bool]]:
        """Every affine map with whether its bias counts as parameters."""
        for a, with_bias, _ in maps_with_paths(self):
            yield a, with_bias

    @property
    def has_attention(self) -> bool:
        return any(isinstance(s, Attention) for s in self.sublayers)


def has_gelu(model: Transformer) -> bool:
    """Whether an MLP of ``model`` uses a GELU, erf or tanh (transcendental: only the ball
    evaluator runs it)."""
    return any(isinstance(s, MLP) and s.activation in TRANSCENDENTAL for s in model.sublayers)


@dataclass(frozen=True)
class Resources:
    """What a theorem bounds. Conventions (docs/concepts.md):

    * width: the largest of the stream widths after E_in, the hidden widths, and s·H;
    * depth: affine layers of the MLP sub-layers plus attention sub-layers (E_in, E_out not
      counted); a plain MLP with one hidden layer has depth 2 (Kajitsuka–Sato erratum 16);
    * dense parameters: every entry of every matrix and bias, zeros included (attention maps
      have no biases); non-zero parameters: the non-zero ones;
    * bits of p/q: bitlen(|p|) + ⌈log₂ q⌉ + 1; total bits: the sum over non-zero parameters.
    """

    width: int
    depth: int
    relu_layers: int
    dense_parameters: int
    nonzero_parameters: int
    max_bits: int
    total_bits: int

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _widths(model: Transformer) -> Iterable[int]:
    yield model.embed.out_dim if model.embed else model.input_dim
    for s in model.sublayers:
        if isinstance(s, MLP):
            for layer in s.layers:
                yield layer.out_dim
        elif isinstance(s, Attention):
            yield sum(h.value.out_dim for h in s.heads)


def resources(model: Transformer) -> Resources:
    """Width, depth, parameter counts and bits of ``model`` (see :class:`Resources`)."""
    depth = relu = 0
    dense = nonzero = total_bits = 0
    max_bits = 0
    for s in model.sublayers:
        if isinstance(s, MLP):
            depth += len(s.layers)
            relu += len(s.layers) - 1 if s.activation == "relu" else 0
        elif isinstance(s, Attention):
            depth += 1
        else:  # a positional table or a layer norm: its entries are parameters, no depth
            entries = (
                [*s.gain, *s.bias]
                if isinstance(s, LayerNorm)
                else [v for row in s.table for v in row]
            )
            dense += len(entries)
            nonzero += sum(1 for v in entries if v)
            for v in entries:
                if v:
                    total_bits += parameter_bits(v)
                    max_bits = max(max_bits, parameter_bits(v))
    maps = list(model.affines())
    dense += sum(a.in_dim * len(a.rows) + (len(a.rows) if b else 0) for a, b in maps)
    # a map kept as one block (an imported checkpoint): its weights' bits counted in NumPy
    tuples = []
    for a, b in maps:
        counted = block_bits(a.rows, a.denominator) if isinstance(a.rows, BlockRows) else None
        if counted is None:
            tuples.append((a, b))
            continue
        nonzero += counted[0]
        total_bits += counted[1]
        max_bits = max(max_bits, counted[2])
        if b:
            biases = [mpq(v, a.denominator) for v in a.bias if v]
            nonzero += len(biases)
            total_bits += sum(map(parameter_bits, biases))
            max_bits = max([max_bits, *map(parameter_bits, biases)])
    maps = tuples
    # the maps over denominator 1 (all of a ks25 model): their weights counted in one pass
    whole = [(a, b) for a, b in maps if a.denominator == 1]
    integral = list(
        map(itemgetter(1), chain.from_iterable(chain.from_iterable(a.rows for a, _ in whole)))
    )
    integral += filter(None, chain.from_iterable(a.bias for a, b in whole if b))
    nonzero += len(integral)
    bit_cache: dict[tuple[int, int], int] = {}
    for affine, with_bias in maps:
        den = affine.denominator
        if den == 1:
            continue
        values = list(map(itemgetter(1), chain.from_iterable(affine.rows)))
        if with_bias:
            values += [b for b in affine.bias if b]
        nonzero += len(values)
        for v in values:
            key = (v, den)
            bits = bit_cache.get(key)
            if bits is None:
                bits = parameter_bits(mpq(v, den))
                if len(bit_cache) < 100_000:
                    bit_cache[key] = bits
            total_bits += bits
            max_bits = max(max_bits, bits)
    if integral:  # p/1 in lowest terms: bitlen(|p|) + 0 + 1 bits (parameter_bits)
        if set(map(type, integral)) <= {int}:
            lengths = list(map(int.bit_length, map(abs, integral)))
        else:  # integers of another type (numpy's, gmpy2's)
            lengths = [bitlen(v) for v in integral]
        total_bits += sum(lengths) + len(lengths)
        max_bits = max(max_bits, max(lengths) + 1)
    return Resources(
        width=max(_widths(model)),
        depth=depth,
        relu_layers=relu,
        dense_parameters=dense,
        nonzero_parameters=nonzero,
        max_bits=max(max_bits, 1),
        total_bits=total_bits,
    )


# --------------------------------------------------------------------------- validation
#
# What the evaluators take for granted about a model, checked once where a model enters from a
# file: every shape relation, so that the reference and fast evaluators never meet a model on
# which one would truncate (numpy broadcasting, a sum over the shorter of two lists) where the
# other fails. Problems are (path, message) with the path of the model file's JSON.

Problem = tuple[str, str]


def _affine_problem(a: Affine, path: str, *, in_dim: int | None, what: str) -> Problem | None:
    if in_dim is not None and a.in_dim != in_dim:
        return path, f"{a.in_dim} input columns, {what.format(in_dim)}"
    if a.out_dim < 1:
        return path, "no rows (an empty map)"
    if isinstance(a.rows, BlockRows):  # its columns are increasing by construction
        return None
    for i, row in enumerate(a.rows):
        cols = [c for c, _ in row]
        if any(b <= c for c, b in zip(cols, cols[1:], strict=False)):
            return f"{path}.rows[{i}]", f"columns {cols[:8]} are not strictly increasing"
    return None


def mlp_problem(
    layers: Sequence[Affine],
    residual: bool,
    probes: Sequence[Probe],
    path: str,
    width: int | None = None,
) -> Problem | None:
    """The first shape an MLP's parts break: layers chain (from the stream ``width`` when
    given), a residual MLP gives back its input width, probes read existing hidden units."""
    if not layers:
        return f"{path}.layers", "an MLP needs at least one layer"
    cols, what = width, "the stream width is {}"
    for j, layer in enumerate(layers):
        where = f"{path}.layers[{j}]"
        if problem := _affine_problem(layer, where, in_dim=cols, what=what):
            return problem
        cols, what = layer.out_dim, "the layer before outputs {}"
    start = layers[0].in_dim if width is None else width
    if residual and layers[-1].out_dim != start:
        return (
            f"{path}.layers[{len(layers) - 1}]",
            f"{layers[-1].out_dim} rows, a residual MLP must give back the stream width {start}",
        )
    for i, probe in enumerate(probes):
        where = f"{path}.probes[{i}]"
        if not 0 <= probe.layer < len(layers) - 1:
            return where, f"layer {probe.layer} is not a hidden layer of {len(layers)} layers"
        units = layers[probe.layer].out_dim
        terms = [c for c, _ in probe.terms]
        if any(not 0 <= c < units for c in terms):
            return where, f"unit {max(terms)} is outside hidden layer {probe.layer} of {units}"
        if any(b <= c for c, b in zip(terms, terms[1:], strict=False)):
            return where, f"units {terms[:8]} are not strictly increasing"
    return None


def _head_problem(h: AttentionHead, path: str, width: int) -> Problem | None:
    for name in ("query", "key", "value"):
        a = getattr(h, name)
        if problem := _affine_problem(
            a, f"{path}.{name}", in_dim=width, what="the stream width is {}"
        ):
            return problem
    if h.key.out_dim != h.query.out_dim:
        return f"{path}.key", f"{h.key.out_dim} rows, the query map has {h.query.out_dim}"
    value = "the value map outputs {}"
    if problem := _affine_problem(h.output, f"{path}.output", in_dim=h.value.out_dim, what=value):
        return problem
    if h.output.out_dim != width:
        return f"{path}.output", f"{h.output.out_dim} rows, the stream has width {width}"
    for name in ("query", "key", "value", "output"):
        if any(getattr(h, name).bias):
            return f"{path}.{name}.bias", "attention maps are linear: biases must be zero"
    return None


def _names(names: tuple[str, ...], width: int, path: str) -> Problem | None:
    if names and len(names) != width:
        return path, (
            f"the stream has {width} lanes but {len(names)} names (the reference evaluator names "
            "a stream by the last non-residual layer's names, else by the names before)"
        )
    return None


def shape_problem(
    input_dim: int,
    sublayers: Sequence[Sublayer],
    embed: Affine | None,
    unembed: Affine | None,
    token_inputs: bool,
) -> Problem | None:
    """The first shape relation a model breaks, as (JSON path, message), or None.

    Attention heads: query, key and value read the stream; query and key have the same
    number of rows; the output map reads the value map's rows and writes the stream width.
    MLP layers chain from the stream width (back to it when residual); probes read existing
    hidden units and have distinct names; positional tables have the stream width; embedding
    tables read ``input_dim`` columns; the unembedding reads the final stream. Rows list
    strictly increasing columns."""
    if type(input_dim) is not int or input_dim < 1:
        return "input_dim", f"{input_dim} is not a positive width"
    if token_inputs and embed is None:
        return "token_inputs", "token inputs need an embedding table 'embed'"
    names: tuple[str, ...] = ()
    probes: dict[str, str] = {}  # full probe name → where it is defined
    width = input_dim
    if embed is not None:
        if problem := _affine_problem(embed, "embed", in_dim=input_dim, what="input_dim is {}"):
            return problem
        width, names = embed.out_dim, embed.names
    for i, s in enumerate(sublayers):
        path = f"sublayers[{i}]"
        if isinstance(s, MLP):
            if s.activation not in ACTIVATIONS:
                return f"{path}.activation", (
                    f"{s.activation!r} is not one of {', '.join(ACTIVATIONS)}"
                )
            if problem := mlp_problem(s.layers, s.residual, s.probes, path, width):
                return problem
            for k, p in enumerate(s.probes):
                full = f"{s.label}.{p.name}" if s.label else p.name
                if full in probes:  # a trace keeps one lane per name: one would be lost
                    return (
                        f"{path}.probes[{k}]",
                        f"probe {full!r} is defined twice ({probes[full]})",
                    )
                probes[full] = f"{path}.probes[{k}]"
            last = s.layers[-1].names
            names = names or last if s.residual or not last else last
            width = s.out_dim
            if problem := _names(names, width, f"{path}.layers[{len(s.layers) - 1}].names"):
                return problem
        elif isinstance(s, PositionalEncoding):
            if not s.table:
                return f"{path}.table", "a positional table needs at least one position"
            for k, row in enumerate(s.table):
                if len(row) != width:
                    return f"{path}.table[{k}]", f"{len(row)} entries, the stream has {width}"
        elif isinstance(s, LayerNorm):
            if problem := branch_problem(s.source, s.target, s.width, width):
                return (f"{path}.gain" if s.source is None else f"{path}.target"), problem
            if len(s.bias) != s.width:
                return f"{path}.bias", f"{len(s.bias)} entries, the gain has {s.width}"
            if not s.eps > 0:
                return f"{path}.eps", "must be positive (it keeps √(σ² + eps) away from 0)"
        elif isinstance(s, Attention):
            if s.score not in SCORE_MODES:
                return f"{path}.score", f"{s.score!r} is not one of {', '.join(SCORE_MODES)}"
            if s.mask not in MASKS:
                return f"{path}.mask", f"{s.mask!r} is not one of {', '.join(MASKS)}"
            if type(s.scale) is not int or not 1 <= s.scale <= MAX_SCALE:
                return f"{path}.scale", f"{s.scale!r} is not an integer in 1 … {MAX_SCALE}"
            for j, h in enumerate(s.heads):
                if problem := _head_problem(h, f"{path}.heads[{j}]", width):
                    return problem
        else:
            return path, f"unknown sub-layer type {type(s).__name__}"
    if unembed is not None:
        return _affine_problem(
            unembed, "unembed", in_dim=width, what="the final stream width is {}"
        )
    return None


def validate(model: Transformer) -> Problem | None:
    """:func:`shape_problem`, then :func:`number_problem`, of a built model: what a model file's
    loader checks, for a model made in memory (a plugin's, a caller's)."""
    return shape_problem(
        model.input_dim, model.sublayers, model.embed, model.unembed, model.token_inputs
    ) or number_problem(model)


def _is_integer(v: object) -> bool:  # int and gmpy2's mpz: what the evaluators compute with
    return type(v) is int or type(v).__name__ == "mpz"


def _is_rational(v: object) -> bool:  # and mpq, Fraction; never a float, nor NumPy's numbers
    return _is_integer(v) or type(v).__name__ == "mpq" or type(v) is Fraction


def _map_number_problem(a: Affine, path: str) -> Problem | None:
    """What a map's file entry cannot say but a map made in memory (or changed after its checks,
    past a frozen dataclass) can: integers of the evaluators' kind (Python's or gmpy2's — not
    NumPy's, whose arithmetic wraps), a positive denominator, a bias per row, columns within
    the input and coefficients non-zero (the sparse rows list only those)."""
    if type(a.in_dim) is not int:
        return f"{path}.in_dim", f"{a.in_dim!r} is not an integer"
    if not _is_integer(a.denominator) or a.denominator < 1:
        return f"{path}.denominator", f"{a.denominator!r} is not a positive integer"
    if len(a.bias) != a.out_dim:
        return f"{path}.bias", f"{len(a.bias)} entries for {a.out_dim} rows"
    for i, b in enumerate(a.bias):
        if not _is_integer(b):
            return f"{path}.bias[{i}]", f"{b!r} is a {type(b).__name__}, not an integer"
    if isinstance(a.rows, BlockRows):  # integer arrays by construction
        return None
    for i, row in enumerate(a.rows):
        for c, v in row:
            if not (_is_integer(c) and _is_integer(v)):
                return f"{path}.rows[{i}]", f"entry ({c!r}, {v!r}) is not a pair of integers"
            if not 0 <= c < a.in_dim or v == 0:
                return f"{path}.rows[{i}]", (
                    f"entry ({c}, {v}): a column in 0 … {a.in_dim - 1} with a non-zero coefficient"
                )
    return None


def number_problem(model: Transformer) -> Problem | None:
    """The first number of ``model`` that is not what the evaluators compute with, or None:
    a map's coefficients, biases and denominator are integers, a positional table's and a layer
    norm's entries rationals — never a float (its arithmetic would decide the verdict) or a
    bool. A model file's loader gives nothing else; a model made in memory may."""
    for a, _, path in maps_with_paths(model):
        if problem := _map_number_problem(a, path):
            return problem
    for i, s in enumerate(model.sublayers):
        if isinstance(s, PositionalEncoding):
            entries = [(f"table[{k}]", v) for k, row in enumerate(s.table) for v in row]
        elif isinstance(s, LayerNorm):
            entries = [("gain", v) for v in s.gain] + [("bias", v) for v in s.bias]
            entries.append(("eps", s.eps))
        else:
            continue
        for where, v in entries:
            if not _is_rational(v):
                return f"sublayers[{i}].{where}", f"{v!r} is a {type(v).__name__}, not a rational"
    return None


def maps_with_paths(model: Transformer) -> Iterator[tuple[Affine, bool, str]]:
    """Every affine map, whether its bias counts as parameters (attention maps are bias-free),
    and its path in a model file."""
    if model.embed is not None:
        yield model.embed, True, "embed"
    for i, s in enumerate(model.sublayers):
        if isinstance(s, MLP):
            for j, layer in enumerate(s.layers):
                yield layer, True, f"sublayers[{i}].layers[{j}]"
        elif isinstance(s, Attention):
            for j, h in enumerate(s.heads):
                for part in ("query", "key", "value", "output"):
                    yield getattr(h, part), False, f"sublayers[{i}].heads[{j}].{part}"
    if model.unembed is not None:
        yield model.unembed, True, "unembed"


# What the core reads from a model's ``meta``: only labels it prints beside the verdict (the
# construction's name, theorem and options; memorizer layouts are checked where they are read
# and a bad one refutes). A label of the wrong type is a malformed file.


def model_meta_problem(meta: dict) -> Problem | None:
    """The labels of a model's meta that the certificate shows, typed (they decide nothing)."""
    for key, kind, what in (
        ("construction", str, "a string"),
        ("theorem", str, "a string"),
        ("options", dict, "an object"),
    ):
        if key in meta and not isinstance(meta[key], kind):
            return f"meta.{key}", f"expected {what}, got {type(meta[key]).__name__}"
    return None
