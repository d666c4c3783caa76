"""The canonical JSON text of a dataset, hashed as a stream.

A dataset's SHA-256 is the hash of ``json.dumps(obj, sort_keys=True, separators=(",", ":"))``
of its canonical object (:func:`exactmem.datasets.dataset.dataset_to_json`, without ``meta``). Its
bulk is
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

__all__ = ["canonical_sha256", "int_rows_json", "int_strings_json"]

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


def canonical_sha256(
    obj: dict, *, tokens: np.ndarray | None = None, texts: dict[str, bytes] | None = None
) -> str:
    """SHA-256 of ``obj``'s canonical JSON (sorted keys, no whitespace), ``obj["sequences"]``
    written from ``tokens`` (the same indices as an (N, n) array) or from the rows it holds;
    ``texts``: fields given as their canonical JSON already (:func:`int_strings_json`).

    The token rows of a dataset are vocabulary indices, validated as ints when the dataset was
    made; a row of another shape or type (a bool, a list) goes through ``json.dumps``."""
    texts = texts or {}
    digest = hashlib.sha256()
    digest.update(b"{")
    for i, key in enumerate(sorted(set(obj) | set(texts))):
        digest.update((b"," if i else b"") + _dumps(key) + b":")
        if key in texts:
            digest.update(texts[key])
            continue
        rows = None
        if key == "sequences":
            rows = _token_rows(obj[key] if tokens is None else tokens)
        if rows is None:  # (``tokens`` stands for the rows whatever ``obj`` holds there)
            whole = obj[key] if key != "sequences" or tokens is None else tokens.tolist()
            digest.update(_dumps(whole))
            continue
        for chunk in int_rows_json(rows):
            digest.update(chunk)
    digest.update(b"}")
    return digest.hexdigest()


def int_strings_json(values: np.ndarray) -> bytes | None:
    """The compact JSON of a non-empty 2-D int64 array as lists of decimal strings
    (``[["3","-12"],["0","7"]]``, how a dataset file writes integer coordinates), or None when
    its range is too wide for a table of texts (wider than 2¹⁶ and than four per value)."""
    rows, d = values.shape
    low, high = int(values.min()), int(values.max())
    # the table has a text per value of the range: bounded by the values' count too, or two
    # coordinates far apart would build one of millions (−2⁶³: no int64 magnitude)
    span = min(TABLE_LIMIT, max(4 * values.size, 1 << 16))
    if rows == 0 or d == 0 or high - low >= span or low == -(2**63):
        return None
    v = np.arange(low, high + 1, dtype=np.int64)
    digits = len(str(max(abs(low), abs(high))))
    magnitude = np.abs(v)
    length = np.ones(len(v), np.int64)
    for p in range(1, digits):
        length += magnitude >= 10**p
    sign = (v < 0).astype(np.int64)
    # byte j of a text: '"', then '-' if negative, the digits, '"'
    width = digits + 3
    text = np.zeros((len(v), width), np.uint8)
    text[:, 0] = ord('"')
    text[sign == 1, 1] = ord("-")
    place = (length + sign)[:, None] - np.arange(width)[None, :]  # power of ten at byte j
    at_digit = (np.arange(width)[None, :] >= 1 + sign[:, None]) & (place >= 0)
    digit = (magnitude[:, None] // 10 ** np.maximum(place, 0)) % 10 + ord("0")
    text[at_digit] = digit[at_digit]
    text[np.arange(len(v)), 1 + sign + length] = ord('"')
    first = np.zeros((len(v), width + 1), np.uint8)
    first[:, 0] = ord("[")
    first[:, 1:] = text
    after = np.zeros((len(v), width + 1), np.uint8)
    after[:, 0] = ord(",")
    after[:, 1:] = text
    at = values - low
    out = np.empty((rows, d * (width + 1) + 2), np.uint8)
    out[:, : width + 1] = first[at[:, 0]]
    out[:, width + 1 : -2] = after[at[:, 1:]].reshape(rows, -1)
    out[:, -2] = ord("]")
    out[:, -1] = ord(",")
    flat = out.reshape(-1)
    flat = flat[flat != 0]
    return b"[" + flat[:-1].tobytes() + b"]"
