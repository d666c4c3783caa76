"""The framework's own logits against the certified enclosures.

A checkpoint read with a wrong layout or activation still imports when the shapes allow it — a
transposed square matrix, erf GELU for the tanh one — and is then certified as *another*
function. No file-local check can see that; the logits the framework itself computed can.
``verify --reference-logits FILE`` reads them and the check ``reference_logits`` compares every
one with the Arb enclosure of the same logit of the model as exactmem reads it.

**The file.** A ``.npy`` (NumPy's format, version 1–3: magic, a header that is a Python
literal dict ``{'descr', 'fortran_order', 'shape'}`` — parsed as data by
:func:`ast.literal_eval`, never unpickled — then the raw values) or a ``.safetensors`` holding
one tensor (any name) or one named ``logits``. dtype float32 or float64 (``<f4``/``<f8``,
``F32``/``F64``), finite. Shape ``[N, n, C]`` (every position of the N sequences of n tokens)
or ``[N, C]`` (the judged position: the last one; next-token datasets only), N and n the
dataset's, C the model's outputs per position. Each value is read exactly (a float is a
dyadic rational).

**The rule.** A framework computing in float32 rounds; its logit x differs from the exact value
by an amount no a-priori bound pins down without the network's conditioning. The tolerance is
therefore explicit, printed, and replaceable (``--reference-tolerance Q``):

    dist(x, enclosure) ≤ τ·(1 + |x|),   τ = k·2⁻²⁴ (float32's unit roundoff),

where k counts the sequential roundings of one logit the usual probabilistic way — a sum of m
rounded terms contributes ⌈√m⌉ (random rounding errors add in quadrature), every other
elementwise step 1 — summed along the network (:func:`rounding_steps`): per layer norm ⌈√w⌉+2,
per attention the largest over its heads of the query, key, value and output maps' fan-ins,
⌈√d_h⌉ for the score, ⌈√n⌉ for the mixing, +3 (softmax, scale, residual); per MLP its maps'
fan-ins plus 1 per activation and 1 for the residual; the embedding and unembedding maps'
fan-ins. This is not a proof that a difference within it *is* rounding; it is a scale beyond
which rounding is an implausible explanation, while a misread layout or activation moves
logits by 10⁻³ or more (tests/test_reference_logits.py). dist is exact: the distance from the
framework's value to the enclosure [lo, hi] (0 inside). The enclosures are computed at rising
precision until every radius is at most a sixteenth of its logit's tolerance, so a wide ball
never hides a difference; a radius still wider at ``--max-precision`` is inconclusive.
"""

from __future__ import annotations

import ast
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gmpy2 import mpq

from exactmem.checks.certificate import Check
from exactmem.core import limits
from exactmem.core.errors import InconclusiveError, InputError
from exactmem.core.exact import format_rational
from exactmem.core.model import MLP, Affine, Attention, LayerNorm, PositionalEncoding, Transformer

__all__ = ["Reference", "read_reference_logits", "reference_check", "rounding_steps"]

ROUNDOFF = mpq(1, 1 << 24)  # float32's unit roundoff 2⁻²⁴
NPY_MAGIC = b"\x93NUMPY"
NPY_HEADER_BYTES = 1 << 16
NPY_DTYPES: dict[str, np.dtype] = {"<f4": np.dtype("<f4"), "<f8": np.dtype("<f8")}
SAFETENSORS_DTYPES = {"F32": "float32", "F64": "float64"}


@dataclass(frozen=True)
class Reference:
    """The framework's logits: ``values`` float64 ``[N, n, C]`` or ``[N, C]`` (exact: read from
    float32 or float64), the file's ``sha256``, ``path`` and ``dtype``."""

    values: np.ndarray
    sha256: str
    path: str
    dtype: str

    @property
    def every_position(self) -> bool:
        return self.values.ndim == 3


def _npy(raw: bytes, where: str) -> tuple[np.ndarray, str]:
    if raw[:6] != NPY_MAGIC or len(raw) < 10:
        raise InputError(f"{where}: not a .npy file (no \\x93NUMPY magic)")
    major = raw[6]
    if major == 1:
        length, start = int.from_bytes(raw[8:10], "little"), 10
    elif major in (2, 3):
        length, start = int.from_bytes(raw[8:12], "little"), 12
    else:
        raise InputError(f"{where}: .npy format version {major} is unknown (1, 2 or 3)")
    if length > NPY_HEADER_BYTES or start + length > len(raw):
        raise InputError(f"{where}: the .npy header length {length} is beyond the file")
    try:
        text = raw[start : start + length].decode("latin1" if major < 3 else "utf8")
        header = ast.literal_eval(text)  # a literal: data, never code
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        raise InputError(f"{where}: the .npy header is not a Python literal dict") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise InputError(f"{where}: the .npy header must hold descr, fortran_order and shape")
    descr, order, shape = header["descr"], header["fortran_order"], header["shape"]
    if not isinstance(descr, str) or descr not in ("<f4", "<f8"):
        raise InputError(
            f"{where}: dtype {descr!r}; reference logits are float32 or float64 ('<f4', '<f8')"
        )
    if not isinstance(order, bool):
        raise InputError(f"{where}: fortran_order must be True or False")
    if not isinstance(shape, tuple) or not all(
        isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 1 << 40 for s in shape
    ):
        raise InputError(f"{where}: shape {shape!r} is not a tuple of sizes")
    dtype = NPY_DTYPES[descr]
    data = memoryview(raw)[start + length :]
    need = math.prod(shape) * dtype.itemsize
    if need != len(data):
        raise InputError(
            f"{where}: shape {list(shape)} of {descr} needs {need} bytes of data, the file has "
            f"{len(data)}"
        )
    values = np.frombuffer(data, dtype=dtype)
    values = values.reshape(shape, order="F" if order else "C")
    return values.astype(np.float64), "float32" if descr == "<f4" else "float64"


def _safetensors(path: Path, where: str) -> tuple[np.ndarray, str]:
    from exactmem.checkpoints.safetensors_io import read_safetensors

    tensors, _ = read_safetensors(path)  # strict: offsets, sizes, NaN/inf refused by name
    if "logits" in tensors:
        tensor = tensors["logits"]
    elif len(tensors) == 1:
        tensor = next(iter(tensors.values()))
    else:
        raise InputError(
            f"{where}: {len(tensors)} tensors and none named 'logits': save the logits alone"
        )
    if tensor.dtype not in ("F32", "F64"):
        raise InputError(
            f"{where}: tensor {tensor.name!r} is {tensor.dtype}; reference logits are F32 or F64"
        )
    return tensor.as_float64(), SAFETENSORS_DTYPES[tensor.dtype]


def read_reference_logits(path: str | Path, dataset, outputs: int) -> Reference:
    """The framework's logits of ``dataset`` from ``path`` (module docstring), checked against
    the dataset (N sequences of n tokens) and the model's ``outputs`` per position. Every
    failure is an :class:`InputError` naming the file."""
    path = Path(path)
    where = f"reference logits {path}"
    if path.suffix == ".safetensors":
        values, dtype = _safetensors(path, where)
        raw = limits.read_limited(path, "reference logits")
    elif path.suffix == ".npy":
        raw = limits.read_limited(path, "reference logits")
        values, dtype = _npy(bytes(raw), where)
    else:
        raise InputError(f"{where}: expected a .npy or .safetensors file")
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values.ravel()))[0])
        raise InputError(f"{where}: entry {bad} (flat index) is not finite")
    N = dataset.size
    n = len(dataset.sequences[0]) if N else 0
    seq2seq = dataset.task == "seq2seq"
    wanted = [[N, n, outputs]] if seq2seq else [[N, n, outputs], [N, outputs]]
    if list(values.shape) not in wanted:
        said = " or ".join(str(w) for w in wanted)
        raise InputError(
            f"{where}: shape {list(values.shape)}, expected {said} (N sequences, n positions, "
            "the model's outputs per position)"
        )
    return Reference(values, hashlib.sha256(raw).hexdigest(), str(path), dtype)


def _fan_in(a: Affine) -> int:
    """⌈√m⌉ for the longest row (m non-zero terms)."""
    m = max((len(row) for row in a.rows), default=0) + any(a.bias)
    return max(1, math.isqrt(m - 1) + 1) if m else 1


def rounding_steps(model: Transformer, n: int) -> int:
    """k of the tolerance τ = k·2⁻²⁴ (module docstring) for sequences of ``n`` tokens."""
    k = 0
    if model.embed is not None:
        k += 1 if model.token_inputs else _fan_in(model.embed)
    for sub in model.sublayers:
        if isinstance(sub, LayerNorm):
            k += math.isqrt(max(sub.width - 1, 0)) + 1 + 2
        elif isinstance(sub, Attention):
            k += 3 + max(
                (
                    _fan_in(h.query)
                    + _fan_in(h.key)
                    + _fan_in(h.value)
                    + _fan_in(h.output)
                    + math.isqrt(max(h.query.out_dim - 1, 0))
                    + 1
                    + math.isqrt(max(n - 1, 0))
                    + 1
                    for h in sub.heads
                ),
                default=0,
            )
        elif isinstance(sub, MLP):
            k += sum(_fan_in(a) for a in sub.layers) + len(sub.layers) - 1 + 1
        elif isinstance(sub, PositionalEncoding):
            k += 1
    if model.unembed is not None:
        k += _fan_in(model.unembed)
    return max(k, 1)


def _where(i: int, k: int | None, c: int) -> str:
    return f"sequences[{i}]" + (f"[{k}]" if k is not None else "") + f", logit {c + 1}"


def reference_check(
    model: Transformer,
    dataset,
    ref: Reference,
    *,
    tolerance: mpq | None = None,
    start: int = 64,
    limit: int = 1 << 14,
) -> Check:
    """The check ``reference_logits``: every framework logit x within τ·(1 + |x|) of its
    certified enclosure (module docstring); ``tolerance`` replaces τ. Figures: the largest
    distance (exact and short), where, τ and k, the largest |x − midpoint|, the precision."""
    from exactmem.evaluate.softmax import ball_bounds, run_balls  # flint: only when it runs

    n = len(dataset.sequences[0]) if dataset.size else 0
    k = rounding_steps(model, n)
    tau = mpq(tolerance) if tolerance is not None else k * ROUNDOFF
    rule = (
        f"τ = {format_rational(tau)} (--reference-tolerance)"
        if tolerance is not None
        else f"τ = k·2⁻²⁴ with k = {k}"
    )
    every = ref.every_position
    xs = [
        [[mpq(float(v)) for v in col] for col in (rows if every else [rows])] for rows in ref.values
    ]
    precision = min(start, limit)
    while True:
        trace = run_balls(
            model,
            dataset.vocab,
            dataset.sequences,
            precision=precision,
            positions="all" if every else "last",
        )
        worst = None  # (dist − allowed, where, dist, allowed) of the largest excess
        off_mid = mpq(0)
        ratio = 0.0  # the largest radius / (tolerance / 16): > 1 means too wide to judge
        for i, (out, want) in enumerate(zip(trace.outputs, xs, strict=True)):
            cols = out if every else out[-1:]
            for kk, (col, xcol) in enumerate(zip(cols, want, strict=True)):
                for c, (ball, x) in enumerate(zip(col, xcol, strict=True)):
                    allowed = tau * (1 + abs(x))
                    if not ball.is_finite():
                        ratio = math.inf
                        continue
                    lo, hi = ball_bounds(ball)
                    ratio = max(ratio, float((hi - lo) * 8 / allowed) if allowed else math.inf)
                    distance = max(lo - x, x - hi, mpq(0))
                    if worst is None or distance - allowed > worst[0]:
                        where = _where(i, kk if every else None, c)
                        worst = (distance - allowed, where, distance, allowed)
                    off_mid = max(off_mid, abs(x - (lo + hi) / 2))
        if ratio <= 1 or precision >= limit:
            break
        more = 16 if ratio == math.inf else max(16, math.ceil(math.log2(ratio)) + 8)
        precision = min(limit, precision + min(precision, -(-more // 16) * 16))
    if ratio > 1:
        raise InconclusiveError(
            f"reference logits: the enclosures stay wider than the tolerance at {precision} "
            "bits (raise --max-precision)"
        )
    from exactmem.checks.attention import brief

    excess, where, distance, allowed = worst or (mpq(-1), "no logit", mpq(0), tau)
    figures = {
        "file_sha256": ref.sha256,
        "dtype": ref.dtype,
        "positions": "every" if every else "last",
        "rule": "dist(x, enclosure) ≤ τ·(1 + |x|)",
        "tau": format_rational(tau),
        "k": k,
        "largest_distance": format_rational(distance),
        "largest_distance_brief": brief(distance),
        "at": where,
        "allowed_there": brief(allowed, up=False),
        "largest_off_midpoint": brief(off_mid),
        "precision": precision,
    }
    where_said = (
        f"every one inside its enclosure (largest |x − midpoint| {brief(off_mid)})"
        if distance == 0
        else f"largest distance {brief(distance)} at {where} (allowed there "
        f"{brief(allowed, up=False)})"
    )
    said = (
        f"{ref.values.size} framework logits ({ref.dtype}) against the enclosures (Arb, "
        f"{precision} bits): {where_said}; tolerance τ·(1 + |x|), {rule}"
    )
    if excess > 0:
        return Check(
            "reference_logits",
            False,
            said + " — more than float32 rounding explains: the model read is not the "
            "function the framework computed (layout, activation or scale?)",
            figures,
        )
    return Check("reference_logits", True, said, figures)
