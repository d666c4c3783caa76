"""A checkpoint's tensors as pieces of the exact IR, shared by every architecture's import: the
tensors taken by name with their shapes checked, float weights as dyadic rationals charged
against the output budget, and the affine maps, embeddings and positional tables made of them."""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpq

from exactmem.checkpoints.safetensors_io import DyadicTensor
from exactmem.core import limits
from exactmem.core.errors import InputError
from exactmem.core.model import (
    Affine,
    PositionalEncoding,
)
from exactmem.core.weight_rows import BlockRows, bit_length, read_only

_HEAD = re.compile(r"attn\.(0|[1-9][0-9]{0,5})\.(query|key|value|output)\.weight")


_ENTRY_TEXT = 8  # a weight's text beside its hex digits: [column, "0x…"],


@dataclass
class _Output:
    """The text the imported model's weights take, counted map by map as :func:`affine_of`
    makes them, against ``--max-bytes``: a map's weights share one power-of-two denominator,
    so a float64 map mixing subnormals (2^-1074) and huge values (2^1023) widens every weight
    to ~2100 bits — 525 hex digits for 8 bytes of checkpoint."""

    where: str
    source: int  # the checkpoint's bytes
    chars: int = 0

    def charge(self, chars: int) -> None:
        self.chars += chars
        cap = limits.current().max_bytes
        if self.chars > cap:
            raise InputError(
                f"{self.where}: the exact model's weights take at least {self.chars} bytes of "
                f"text, {self.chars / max(self.source, 1):.0f}× the checkpoint's {self.source} "
                f"bytes, more than the limit of {cap} (--max-bytes): the weights of each map "
                "share one power-of-two denominator, so tiny and huge values in one tensor "
                "widen all of them"
            )


_OUTPUT: ContextVar[_Output | None] = ContextVar("exactmem_import_output", default=None)


def _charge_rationals(t: DyadicTensor) -> None:
    """Count the text of ``t``'s values written one by one as rationals (a positional table,
    a layer norm's gain and bias): numerator and denominator, each in hex."""
    if (output := _OUTPUT.get()) is not None:
        m, e = t.mantissa, t.exponent
        bits = bit_length(m.astype(np.float64)) + np.abs(e)  # |m| < 2^53: exact
        output.charge(int(((bits + 3) // 4).sum()) + 2 * _ENTRY_TEXT * t.size)


CHUNK = 1 << 20  # weights converted at a time: the temporaries stay small beside the block


def _stripped(m: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(non-zero mask, m, e) with the mantissas' trailing zero bits moved into the exponents,
    so that the least common denominator is the least power of two."""
    nz = m != 0
    low = np.where(nz, np.abs(m) & -np.abs(m), 1)
    tz = np.round(np.log2(low.astype(np.float64))).astype(np.int64)
    return nz, m >> tz, e + tz


def affine_of(t: DyadicTensor, names: tuple[str, ...] = ()) -> Affine:
    """The bias-free linear map of a ``[out, in]`` weight tensor, exactly: integer coefficients
    over the least common power-of-two denominator."""
    if len(t.shape) != 2:
        raise InputError(f"tensor {t.name!r}: shape {list(t.shape)}, expected [out, in]")
    rows_n, cols_n = t.shape
    m, e = t.mantissa, t.exponent
    least = None
    for lo in range(0, m.size, CHUNK):
        nz, _, es = _stripped(m[lo : lo + CHUNK], e[lo : lo + CHUNK])
        if nz.any():
            low = int(es[nz].min())
            least = low if least is None else min(least, low)
    k = max(0, -least) if least is not None else 0
    # each coefficient m·2^(e + k) as a float64, exact while it stays finite (|m| < 2^53: the
    # significand of a float of at most 64 bits): one block (exactmem.core.weight_rows)
    block = np.empty(m.size)
    output = _OUTPUT.get()
    for lo in range(0, m.size, CHUNK):
        nz, ms, es = _stripped(m[lo : lo + CHUNK], e[lo : lo + CHUNK])
        shift = es + k
        if output is not None:  # counted before the next chunk is made
            bits = bit_length(ms[nz].astype(np.float64)) + shift[nz]  # |m| < 2^53: exact
            output.charge(int(((bits + 3) // 4).sum()) + _ENTRY_TEXT * int(nz.sum()))
        with np.errstate(over="ignore"):  # (inf: not a double, the tuples below keep it)
            block[lo : lo + CHUNK] = np.ldexp(ms.astype(np.float64), shift)
    if np.isfinite(block).all():
        rows_at = np.arange(rows_n)
        table = BlockRows(
            read_only(block).reshape(rows_n, cols_n), rows_at, np.arange(cols_n), rows_n
        )
        return Affine(cols_n, table, (0,) * rows_n, 1 << k, names)
    del block
    nz, m, e = _stripped(m, e)
    shift = e + k
    rows = []
    for i in range(rows_n):
        lo = i * cols_n
        cols = np.flatnonzero(nz[lo : lo + cols_n])
        rows.append(tuple((int(j), int(m[lo + j]) << int(shift[lo + j])) for j in cols))
    return Affine(cols_n, tuple(rows), (0,) * rows_n, 1 << k, names)


def affine_biased(w: DyadicTensor, b: DyadicTensor, names: tuple[str, ...] = ()) -> Affine:
    """``x ↦ w x + b`` exactly, over one power-of-two denominator (``w`` ``[out, in]``, ``b``
    ``[out]``): the bias is read as one more column of the weight."""
    out, cols = w.shape
    joined = DyadicTensor(
        w.name,
        w.dtype,
        (out, cols + 1),
        np.concatenate([w.mantissa.reshape(out, cols), b.mantissa.reshape(out, 1)], 1).ravel(),
        np.concatenate([w.exponent.reshape(out, cols), b.exponent.reshape(out, 1)], 1).ravel(),
    )
    a = affine_of(joined)
    if isinstance(a.rows, BlockRows):  # the last column of the block is the bias
        block = a.rows.block
        table = BlockRows(block[:, :cols], a.rows.rows_at, np.arange(cols), out)
        return Affine(cols, table, tuple(map(int, block[:, cols].tolist())), a.denominator, names)
    rows = tuple(tuple(t for t in row if t[0] < cols) for row in a.rows)
    bias = tuple(dict(row).get(cols, 0) for row in a.rows)
    return Affine(cols, rows, bias, a.denominator, names)


class _Tensors:
    """The checkpoint's tensors, each taken at most once with its shape checked; the names
    never taken are reported at the end."""

    def __init__(self, tensors: dict[str, DyadicTensor], where: str):
        self.tensors, self.where, self.used = tensors, where, set()

    def take(self, name: str, shape: tuple[int | None, ...]) -> DyadicTensor:
        t = self.tensors.get(name)
        if t is None:
            raise InputError(f"{self.where}: tensor {name!r} is missing")
        if len(t.shape) != len(shape) or any(
            want is not None and got != want for got, want in zip(t.shape, shape, strict=True)
        ):
            want = "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"
            raise InputError(
                f"{self.where}: tensor {name!r}: shape {list(t.shape)}, expected {want}"
            )
        if 0 in t.shape:
            raise InputError(f"{self.where}: tensor {name!r} is empty (shape {list(t.shape)})")
        self.used.add(name)
        return t

    def peek(self, name: str, rank: int) -> tuple[int, ...]:
        """The shape of tensor ``name`` (of ``rank`` dimensions), to size the others by."""
        t = self.tensors.get(name)
        if t is None:
            raise InputError(f"{self.where}: tensor {name!r} is missing")
        if len(t.shape) != rank or 0 in t.shape:  # (the reader refuses empty tensors too)
            raise InputError(
                f"{self.where}: tensor {name!r}: shape {list(t.shape)}, expected {rank} "
                "non-zero dimensions"
            )
        return t.shape

    def heads(self) -> int:
        found: dict[int, set[str]] = {}
        for name in self.tensors:
            if match := _HEAD.fullmatch(name):
                found.setdefault(int(match[1]), set()).add(match[2])
        if not found:
            raise InputError(f"{self.where}: no attention tensors attn.{{h}}.query.weight")
        count = max(found) + 1
        for h in range(count):
            missing = {"query", "key", "value", "output"} - found.get(h, set())
            if missing:
                raise InputError(
                    f"{self.where}: tensor 'attn.{h}.{sorted(missing)[0]}.weight' is missing "
                    f"(heads are numbered 0 … {count - 1})"
                )
        return count

    def finish(self) -> None:
        extra = sorted(set(self.tensors) - self.used)
        if extra:
            raise InputError(
                f"{self.where}: tensor {extra[0]!r} is not part of this architecture "
                f"({len(extra)} unused)"
            )


def _widen(a: Affine, width: int, before: int = 0) -> Affine:
    """``a`` reading a stream of ``width`` columns (its own inputs first) and, with ``before``,
    writing below that many zero rows."""
    rows = ((),) * before + a.rows
    return Affine(width, rows, (0,) * len(rows), a.denominator)


def _transpose(a: Affine, names: tuple[str, ...]) -> Affine:
    if isinstance(a.rows, BlockRows):
        t = a.rows
        table = BlockRows(
            read_only(np.ascontiguousarray(t.block.T)), t.cols_at, t.rows_at, a.in_dim
        )
        return Affine(a.out_dim, table, (0,) * a.in_dim, a.denominator, names)
    cols: list[list[tuple[int, int]]] = [[] for _ in range(a.in_dim)]
    for i, row in enumerate(a.rows):
        for j, c in row:
            cols[j].append((i, c))
    return Affine(a.out_dim, tuple(tuple(c) for c in cols), (0,) * a.in_dim, a.denominator, names)


def _place(
    a: Affine,
    width: int,
    col: int = 0,
    row: int = 0,
    rows: int | None = None,
    one: int | None = None,
) -> Affine:
    """``a`` on a stream of ``width`` lanes: reading from lane ``col`` on, writing from lane
    ``row`` on, into ``rows`` output lanes in all (the others zero). With ``one``, the bias
    becomes the coefficient of lane ``one``, which holds the constant 1: attention maps are
    linear in the IR, so an affine query, key, value or output map reads its bias there."""
    total = a.out_dim + row if rows is None else rows
    if isinstance(a.rows, BlockRows) and (
        placed_block := _place_block(a, width, col, row, total, one)
    ):
        return placed_block
    placed: list = [()] * total
    bias = [0] * total
    for i, r in enumerate(a.rows):
        entries = tuple((j + col, c) for j, c in r)
        if one is not None:
            entries += ((one, a.bias[i]),) if a.bias[i] else ()
        else:
            bias[row + i] = a.bias[i]
        placed[row + i] = entries
    return Affine(width, tuple(placed), tuple(bias), a.denominator)


def _place_block(
    a: Affine, width: int, col: int, row: int, total: int, one: int | None
) -> Affine | None:
    """:func:`_place` of a block map, kept one block: None where the bias cannot join it as
    column ``one`` (a row outside the block has a bias, or ``one`` is not after its columns)."""
    t = a.rows
    bias = [0] * total
    cols_at, block = t.cols_at + col, t.block
    if one is None:
        for i, b in enumerate(a.bias):
            bias[row + i] = b
    elif any(a.bias):
        if t.rows_at.size != a.out_dim or (cols_at.size and one <= cols_at[-1]):
            return None
        try:
            column = np.array([float(b) for b in a.bias])
        except OverflowError:
            return None
        if any(int(x) != b for x, b in zip(column.tolist(), a.bias, strict=True)):
            return None  # a bias of more than 53 significant bits: the tuples keep it
        block = np.concatenate([block, column[:, None]], axis=1)
        cols_at = np.append(cols_at, one)
    return Affine(
        width,
        BlockRows(read_only(block), t.rows_at + row, cols_at, total),
        tuple(bias),
        a.denominator,
    )


def _carrying_one(v: Affine, one: int) -> Affine:
    """Value map ``v`` with one more output, the constant lane ``one`` itself (softmax weights
    sum to 1, so it stays exactly 1 after mixing: the output map reads its bias there)."""
    if isinstance(v.rows, BlockRows) and _exact_float(v.denominator):
        t = v.rows
        q = int(np.searchsorted(t.cols_at, one))
        block, cols_at = t.block, t.cols_at
        if q == cols_at.size or cols_at[q] != one:  # lane `one` joins the block's columns
            block = np.insert(block, q, 0.0, axis=1)
            cols_at = np.insert(cols_at, q, one)
        extra = np.zeros((1, cols_at.size))
        extra[0, q] = float(v.denominator)
        table = BlockRows(
            read_only(np.concatenate([block, extra])),
            np.append(t.rows_at, v.out_dim),
            cols_at,
            v.out_dim + 1,
        )
        return Affine(v.in_dim, table, (*v.bias, 0), v.denominator)
    return Affine(v.in_dim, (*v.rows, ((one, v.denominator),)), (*v.bias, 0), v.denominator)


def _exact_float(n: int) -> bool:
    try:
        return int(float(n)) == n
    except OverflowError:
        return False


def _embedding_with_one(emb: DyadicTensor, tokens: int, width: int) -> Affine:
    """The token table into the first lanes of a ``width``-lane stream whose last lane is the
    constant 1."""
    table = _place(_transpose(affine_of(emb), names=()), tokens, rows=width)
    bias = (*table.bias[:-1], table.denominator)
    return Affine(tokens, table.rows, bias, table.denominator)


def _positions(pos: DyadicTensor, d: int, width: int) -> PositionalEncoding:
    _charge_rationals(pos)
    return PositionalEncoding(
        tuple(
            tuple(pos.value(k * d + i) if i < d else mpq(0) for i in range(width))
            for k in range(pos.shape[0])
        ),
        "pos",
    )


def _rows(a: Affine, lo: int, hi: int, scale: int = 1) -> Affine:
    """Rows lo … hi − 1 of ``a``, divided by ``scale`` (exactly: a larger denominator)."""
    if isinstance(a.rows, BlockRows):
        t = a.rows
        p, q = np.searchsorted(t.rows_at, [lo, hi]).tolist()
        table = BlockRows(t.block[p:q], t.rows_at[p:q] - lo, t.cols_at, hi - lo)
        return Affine(a.in_dim, table, a.bias[lo:hi], a.denominator * scale)
    return Affine(a.in_dim, a.rows[lo:hi], a.bias[lo:hi], a.denominator * scale)


def _cols(a: Affine, lo: int, hi: int, with_bias: bool) -> Affine:
    """``a`` restricted to its input columns lo … hi − 1 (renumbered from 0), with or without
    its bias."""
    bias = a.bias if with_bias else (0,) * a.out_dim
    if isinstance(a.rows, BlockRows):
        t = a.rows
        p, q = np.searchsorted(t.cols_at, [lo, hi]).tolist()
        table = BlockRows(t.block[:, p:q], t.rows_at, t.cols_at[p:q] - lo, a.out_dim)
        return Affine(hi - lo, table, bias, a.denominator)
    rows = tuple(tuple((j - lo, c) for j, c in r if lo <= j < hi) for r in a.rows)
    bias = a.bias if with_bias else (0,) * a.out_dim
    return Affine(hi - lo, rows, bias, a.denominator)
