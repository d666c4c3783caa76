"""The canonical JSON text of a dataset, hashed as a stream.

A dataset's SHA-256 is the hash of ``json.dumps(obj, sort_keys=True, separators=(",", ":"))``
of its canonical object (:func:`exactmem.data.dataset_to_json`, without ``meta``). Its bulk is
the token matrix, N rows of n vocabulary indices; here that part is written from an integer
array, a chunk of rows at a time, through a table of each index's decimal digits (one machine
word per index), and fed to the hash without building the text of the whole object. The bytes
hashed are the ones ``json.dumps`` writes (tests/test_hashes.py compares the two on every
task).
"""

from __future__ import annotations

import hashlib
import json
from itertools import chain

import numpy as np

__all__ = ["canonical_sha256", "int_rows_json"]

ROWS_PER_CHUNK = 1 << 15  # rows written at a time: a few MB of text in between
TABLE_LIMIT = 1 << 22  # largest index written through the digit table (above: json.dumps)


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _digit_words(size: int, lead: str) -> np.ndarray:
    """Entry ``v < size``: ``lead`` then the ASCII digits of v, padded with zero bytes to a
    word of 2, 4 or 8 bytes, as one unsigned integer (a row of text gathered a word per
    value)."""
    v = np.arange(size, dtype=np.int64)
    digits = len(str(size - 1))
    length = np.ones(size, np.int64)
    for p in range(1, digits):
        length += v >= 10**p
    place = length[:, None] - 1 - np.arange(digits)[None, :]  # power of ten of each digit
    text = (v[:, None] // 10 ** np.maximum(place, 0)) % 10 + ord("0")
    text[place < 0] = 0
    width = 1 << digits.bit_length()  # ≥ digits + 1
    words = np.zeros((size, width), np.uint8)
    words[:, 0] = ord(lead)
    words[:, 1 : 1 + digits] = text
    return words.view(WORDS[width]).reshape(-1)


def int_rows_json(rows: np.ndarray):
    """The compact JSON text of a non-empty 2-D array of non-negative integers below
    :data:`TABLE_LIMIT`, as a list of lists (``[[3,0,12],[7,7,1]]``), in chunks of bytes."""
    N, n = rows.shape
    size = int(rows.max()) + 1
    opening, after = _digit_words(size, "["), _digit_words(size, ",")
    closing = np.zeros(1, after.dtype)
    closing.view(np.uint8)[:2] = (ord("]"), ord(","))
    yield b"["
    for start in range(0, N, ROWS_PER_CHUNK):
        block = rows[start : start + ROWS_PER_CHUNK]
        text = np.empty((len(block), n + 1), after.dtype)
        text[:, 0] = opening[block[:, 0]]
        text[:, 1:n] = after[block[:, 1:]]
        text[:, n] = closing[0]
        flat = text.view(np.uint8).reshape(-1)
        flat = flat[flat != 0]  # the words' padding
        yield (flat[:-1] if start + len(block) == N else flat).tobytes()
    yield b"]"


def _token_rows(sequences) -> np.ndarray | None:
    """The sequences as an (N, n) int64 array, or None when they are not rows of plain
    non-negative ints below :data:`TABLE_LIMIT` (then ``json.dumps`` writes them)."""
    if isinstance(sequences, np.ndarray):
        rows = sequences
    else:
        if not sequences or type(sequences[0]) not in (tuple, list):
            return None
        n = len(sequences[0])
        if any(type(t) is not int for t in sequences[0]) or set(map(len, sequences)) != {n}:
            return None
        try:
            flat = np.fromiter(chain.from_iterable(sequences), np.int64, len(sequences) * n)
        except (TypeError, ValueError, OverflowError):
            return None
        rows = flat.reshape(len(sequences), n)
    if rows.ndim != 2 or rows.size == 0 or rows.dtype.kind not in "iu":
        return None
    if int(rows.min()) < 0 or int(rows.max()) >= TABLE_LIMIT:
        return None
    return rows


def canonical_sha256(obj: dict, *, tokens: np.ndarray | None = None) -> str:
    """SHA-256 of ``obj``'s canonical JSON (sorted keys, no whitespace), ``obj["sequences"]``
    written from ``tokens`` (the same indices as an (N, n) array) or from the rows it holds.

    The token rows of a dataset are vocabulary indices, validated as ints when the dataset was
    made; a row of another shape or type (a bool, a list) goes through ``json.dumps``."""
    digest = hashlib.sha256()
    digest.update(b"{")
    for i, key in enumerate(sorted(obj)):
        digest.update((b"," if i else b"") + _dumps(key) + b":")
        rows = None
        if key == "sequences":
            rows = _token_rows(obj[key] if tokens is None else tokens)
        if rows is None:
            digest.update(_dumps(obj[key]))
            continue
        for chunk in int_rows_json(rows):
            digest.update(chunk)
    digest.update(b"}")
    return digest.hexdigest()
