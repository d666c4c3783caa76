"""Your own text as next-token sequences: every window of W units, labelled by the unit after it.

A text is cut into units — characters, or words and punctuation marks (:data:`WORD`) — and
each distinct unit (a *symbol*) gets an id 1..V in order of first appearance. Symbol ``i`` is
the token vector ``(i,)`` ∈ Q¹ (distinct integers: the tokens are 1 apart, the separation the
Kajitsuka–Sato constructions need), and the label of a window is the id of the unit that
follows it, so C = V and a label reads back as a symbol through ``meta["symbols"]``.

Two things can stand between a text and a memorizer (Kajitsuka & Sato 2025, eq. (5)):

* two *identical* windows followed by different units: no model memorizes both, so
  :func:`windows` refuses the text, naming both places and the smallest window that has no
  such pair (windows only get more distinct as they grow);
* two different windows with the same last unit and the same multiset of units, followed by
  different units: a Transformer without positional encoding cannot tell them apart. Then (with
  ``positions="auto"``) every token carries its position: token k of a window becomes
  ``(i, k)`` ∈ Q², k = 1..W, and ``meta["position_aware"]`` says so and why.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from exactmem.core.errors import InputError
from exactmem.core.exact_arrays import first_seen_ids
from exactmem.core.limits import open_regular
from exactmem.runtime.progress import Steps

if TYPE_CHECKING:
    from exactmem.datasets.dataset import Dataset

__all__ = [
    "MAX_BYTES",
    "MAX_TOKENS",
    "UNITS",
    "WORD",
    "Units",
    "read_text",
    "split",
    "symbol_id",
    "symbols_of",
    "unit_of",
    "window_text",
    "windows",
]

UNITS = ("char", "word")
WORD = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")
"""A word unit: a run of letters, digits and underscores, possibly joined by inner apostrophes or
hyphens (``don't``, ``well-known``); or one punctuation mark or other symbol that is neither a
word character nor white space. White space separates units and is not one."""

MAX_BYTES = 1 << 20
"""The largest text file read (1 MiB): a memorizer of a megabyte of text is already large."""

MAX_TOKENS = 10**7
"""The most tokens a dataset of windows may hold (N windows × W units)."""


@dataclass(frozen=True)
class Units:
    """The units of a text, each with the character span it came from."""

    text: str
    symbols: tuple[str, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def span(self, first: int, count: int) -> str:
        """The text of ``count`` units from unit ``first`` on, as it stands in the text."""
        return self.text[self.starts[first] : self.ends[first + count - 1]]

    def place(self, k: int) -> str:
        """Where unit ``k`` starts: ``line L, column C`` (1-based, columns count characters)."""
        breaks = [m.start() for m in re.finditer("\n", self.text[: self.starts[k]])]
        line = len(breaks) + 1
        column = self.starts[k] - (breaks[-1] + 1 if breaks else 0) + 1
        return f"line {line}, column {column}"


def split(text: str, unit: str = "char") -> Units:
    """Cut ``text`` into units: every character (``char``: spaces and line breaks included,
    nothing normalised), or words and punctuation marks (``word``, see :data:`WORD`)."""
    if unit == "char":
        spans = [(k, k + 1) for k in range(len(text))]
    elif unit == "word":
        spans = [m.span() for m in WORD.finditer(text)]
    else:
        raise InputError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    return Units(
        text,
        tuple(text[a:b] for a, b in spans),
        tuple(a for a, _ in spans),
        tuple(b for _, b in spans),
    )


def read_text(path: str | Path) -> str:
    """The UTF-8 text of a file; a missing, empty, binary, non-UTF-8 or too large file is an
    :class:`InputError` naming it. A leading byte-order mark is not part of the text."""
    path = Path(path)
    with open_regular(path, f"text file {path}") as f:  # not /dev/zero, not a FIFO
        try:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_BYTES:
                raise InputError(
                    f"text file {path}: {size} bytes, at most {MAX_BYTES} (1 MiB); cut the text"
                )
            raw = f.read(MAX_BYTES + 1)
        except OSError as exc:
            raise InputError(f"text file {path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:  # grew since stat
        raise InputError(f"text file {path}: more than {MAX_BYTES} bytes (1 MiB); cut the text")
    if b"\0" in raw:
        raise InputError(
            f"text file {path}: binary data (a NUL byte at offset {raw.index(0)}), not text"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"text file {path}: not UTF-8 text (byte {exc.start})") from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputError(f"text file {path}: empty" + (" (white space only)" if text else ""))
    return text


@dataclass(frozen=True)
class Windows:
    """The windows of a text as plain values, before they are a dataset
    (:meth:`exactmem.datasets.dataset.Dataset.from_text` makes them one): token rows of symbol
    ids from 0, their labels (ids from 1), the symbols and, when tokens must carry their
    positions, why (else None)."""

    rows: np.ndarray
    labels: np.ndarray
    symbols: list[str]
    meta: dict
    positions_because: str | None


def windows(
    text: str,
    window: int,
    unit: str = "char",
    *,
    positions: str = "auto",
    source: str = "text",
    progress: Callable[..., Any] | None = None,
) -> Windows:
    """Next-token windows of ``text``: sequence ``j`` is the window of ``window`` units from
    unit ``j`` on, its label the id of unit ``j + window``; N = (number of units) − window.

    ``positions``: ``auto`` appends each token's position only when two windows need it (see the
    module docstring), ``always`` always, ``never`` refuses such a text instead. ``source``
    names the text in messages. Identical windows followed by different units are refused
    (exit 2) naming both places. ``meta`` records the symbols (label ``i`` is
    ``symbols[i - 1]``), the window, the unit and whether and why tokens carry positions.
    ``progress`` hears its steps."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise InputError(f"window must be an integer ≥ 1, got {window!r}")
    if positions not in ("auto", "always", "never"):
        raise InputError(f"positions must be auto, always or never, got {positions!r}")
    steps = Steps(progress, "generating text windows", 4)
    steps.step(f"{unit}s of {len(text)} characters")
    units = split(text, unit)
    count = len(units.symbols)
    if window >= count:
        raise InputError(
            f"{source}: {count} {unit}s, so a window of {window} leaves no {unit} to predict "
            f"(the window must be at most {count - 1})"
            if count
            else f"{source}: no {unit}s"
        )
    N = count - window
    if N * window > MAX_TOKENS:
        raise InputError(
            f"{source}: {N} windows of {window} {unit}s hold {N * window} tokens, at most "
            f"{MAX_TOKENS}; use a shorter text or window"
        )
    steps.step(f"{N} windows")
    ids: dict[str, int] = {}
    for sym in units.symbols:
        ids.setdefault(sym, len(ids) + 1)
    stream = np.fromiter((ids[s] for s in units.symbols), np.int64, count)
    rows = np.lib.stride_tricks.sliding_window_view(stream, window)[:N]
    labels = stream[window:]

    clash = _first_clash(rows, labels)
    if clash is not None:
        a, b = clash
        steps.step("the smallest window without a clash")
        shortest = _smallest_window(stream)
        raise InputError(
            f"{source}: the windows at {units.place(a)} and {units.place(b)} are both "
            f"{_quote(units.span(a, window))} but are followed by "
            f"{_quote(units.symbols[a + window])} and {_quote(units.symbols[b + window])}: "
            "identical windows with different next units cannot be memorized by any model; "
            f"the smallest window without such a pair is {shortest} (--window {shortest})"
        )
    meta = {
        "generator": "text",
        "source": source,
        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "unit": unit,
        "window": window,
        "symbols": list(ids),
        "position_aware": False,
    }
    steps.step("windows that need positions")
    need = _first_clash(_multiset_keys(rows), labels)
    why: str | None = None
    if need is None and positions == "always":
        why = "asked for (positions='always')"
    elif need is not None:
        a, b = need
        why = (
            f"the windows at {units.place(a)} ({_quote(units.span(a, window))}) and at "
            f"{units.place(b)} ({_quote(units.span(b, window))}) have the same last {unit} and "
            f"the same {unit}s in another order, but are followed by "
            f"{_quote(units.symbols[a + window])} and {_quote(units.symbols[b + window])}"
        )
        if positions == "never":
            raise InputError(
                f"{source}: {why}: a Transformer without positional encoding cannot tell them "
                "apart; let the tokens carry their positions (positions='auto')"
            )
    steps.done()
    return Windows(rows - 1, labels, list(ids), meta, why)


# --------------------------------------------------------------------------- reading back


def symbols_of(dataset: Dataset) -> list[str] | None:
    """The text vocabulary of a dataset written by :func:`windows` (``generate text``): its
    ``meta["symbols"]`` when that is a list of C strings (label ``i`` is ``symbols[i - 1]``),
    else None. A file's meta is its own word: it names labels for reading, it decides nothing."""
    found = dataset.meta.get("symbols") if isinstance(dataset.meta, dict) else None
    if (
        not isinstance(found, list)
        or len(found) != dataset.num_classes
        or not all(isinstance(s, str) for s in found)
    ):
        return None
    return found


def unit_of(dataset: Dataset) -> str:
    """``word`` for a dataset of word windows, else ``char`` (how units join into text)."""
    return "word" if dataset.meta.get("unit") == "word" else "char"


def symbol_id(vector: Any, count: int) -> int | None:
    """The symbol id a token of a text dataset carries in its first coordinate (position-aware
    tokens carry their position second), or None when it carries none."""
    if not vector or vector[0] != int(vector[0]) or not 1 <= int(vector[0]) <= count:
        return None
    return int(vector[0])


def window_text(dataset: Dataset, index: int) -> str | None:
    """Sequence ``index`` of a text dataset as text (units joined by nothing, or by spaces for
    words), or None when the dataset has no text vocabulary."""
    symbols = symbols_of(dataset)
    if symbols is None or dataset.sequences is None:
        return None
    ids = [symbol_id(dataset.vocab[t], len(symbols)) for t in dataset.sequences[index]]
    if any(i is None for i in ids):
        return None
    return (" " if unit_of(dataset) == "word" else "").join(symbols[i - 1] for i in ids if i)


def _first_clash(keys: np.ndarray, labels: np.ndarray) -> tuple[int, int] | None:
    """The first window whose key was seen before with another label: (earlier, later)."""
    ids, firsts = first_seen_ids(np.ascontiguousarray(keys))
    owner = firsts[ids]
    clash = np.nonzero(labels != labels[owner])[0]
    if not len(clash):
        return None
    later = int(clash[0])
    return int(owner[later]), later


def _multiset_keys(rows: np.ndarray) -> np.ndarray:
    """(last unit, the window's units sorted): what a model without positions sees of it."""
    return np.concatenate([rows[:, -1:], np.sort(rows, axis=1)], axis=1)


def _smallest_window(stream: np.ndarray) -> int:
    """The smallest W whose identical windows are always followed by the same unit. If W has
    none, neither has W + 1 (equal longer windows end in equal shorter ones), so bisect; W =
    len − 1 has one window and always qualifies. Windows are compared by two polynomial hashes
    (mod 2⁶⁴ and mod 2³¹ − 1) in O(len) memory: equal windows always hash equal, so a W found
    free of clashes is free of them; a hash collision could only make the W named larger."""
    lo, hi = 1, len(stream) - 1
    hashes = _PrefixHashes(stream)
    while lo < hi:
        mid = (lo + hi) // 2
        keys = hashes.windows(mid)
        labels = stream[mid:]
        order = np.lexsort((labels, *keys))
        same = np.ones(len(order) - 1, bool)
        for k in keys:
            same &= k[order[1:]] == k[order[:-1]]
        if (same & (labels[order[1:]] != labels[order[:-1]])).any():
            lo = mid + 1
        else:
            hi = mid
    return lo


class _PrefixHashes:
    """Prefix sums of s[t]·B^t (mod 2⁶⁴ and mod P): the hash of a window is the difference of
    two of them scaled by B^(−start), so every window length costs O(len)."""

    P = 2**31 - 1
    B64 = np.uint64(0x9E3779B97F4A7C15)  # odd, so invertible mod 2⁶⁴
    BP = 48271  # a primitive root mod 2³¹ − 1

    def __init__(self, stream: np.ndarray):
        n = len(stream) + 1
        s = stream.astype(np.uint64)
        with np.errstate(over="ignore"):
            # products wrap mod 2⁶⁴, which is the arithmetic wanted
            pow64 = np.concatenate([[np.uint64(1)], np.cumprod(np.full(n - 1, self.B64))])
            inv = np.uint64(pow(int(self.B64), -1, 2**64))
            self.inv64 = np.concatenate([[np.uint64(1)], np.cumprod(np.full(n - 1, inv))])
            self.h64 = np.concatenate([[np.uint64(0)], np.cumsum(s * pow64[:-1])])
        powp = self._powers(self.BP, n)
        self.invp = self._powers(pow(self.BP, -1, self.P), n)
        terms = (stream.astype(np.int64) % self.P) * powp[:-1] % self.P
        self.hp = np.concatenate([[0], np.cumsum(terms) % self.P])

    def _powers(self, base: int, n: int) -> np.ndarray:
        out = np.ones(n, np.int64)
        k, step = 1, base
        while k < n:  # out[k:2k] = out[:k]·base^k, all below P² < 2⁶³
            out[k : 2 * k] = out[: min(k, n - k)] * step % self.P
            k, step = 2 * k, step * step % self.P
        return out

    def windows(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """Per window of length w (starts 0..len − w − 1): its two hashes."""
        N = len(self.h64) - 1 - w
        with np.errstate(over="ignore"):
            h64 = (self.h64[w : w + N] - self.h64[:N]) * self.inv64[:N]
        hp = (self.hp[w : w + N] - self.hp[:N]) % self.P * self.invp[:N] % self.P
        return h64, hp


def _quote(s: str, limit: int = 60) -> str:
    """A span of text as a JSON string (line breaks visible), cut to ``limit`` characters."""
    return json.dumps(s if len(s) <= limit else s[: limit - 1] + "…", ensure_ascii=False)
