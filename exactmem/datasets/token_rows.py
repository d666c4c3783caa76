"""A dataset's sequences as one (N, n) integer array that reads as a tuple of tuples.

Ten million sequences of 16 tokens as Python tuples take 1.8 GB (a tuple of 16 pointers is 184
bytes) and their conversion to arrays, which every check and the evaluator make, a gigabyte or
two more; as an array of 2-byte token ids they take 320 MB. :class:`TokenRows` keeps the array
and gives the tuples one at a time, so code that reads ``dataset.sequences[i]`` or iterates over
them is unchanged, and code that wants the array takes :attr:`TokenRows.array` (or
:func:`token_matrix`, for either form).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["TokenRows", "token_matrix"]

CHUNK = 1 << 16  # rows converted to tuples at a time while iterating


class TokenRows(Sequence):
    """Read-only sequences of token ids: ``rows[i]`` is a tuple of Python ints, equality and
    hashing are those of the tuple of tuples it stands for."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        array = np.asarray(array)
        if array.ndim != 2 or array.dtype.kind not in "iu":
            raise ValueError("TokenRows takes a 2-D integer array")
        array.setflags(write=False)  # shared by every reader: nobody may change a token
        self.array = array

    def __len__(self) -> int:
        return self.array.shape[0]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return TokenRows(self.array[i])
        return tuple(self.array[i].tolist())

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        for start in range(0, len(self), CHUNK):
            yield from map(tuple, self.array[start : start + CHUNK].tolist())

    def __eq__(self, other) -> bool:
        if isinstance(other, TokenRows):
            return self.array.shape == other.array.shape and bool((self.array == other.array).all())
        if isinstance(other, tuple):  # the tuple of tuples it stands for
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"TokenRows({self.array.shape[0]} × {self.array.shape[1]})"


def token_matrix(sequences: Sequence[Sequence[int]], dtype=np.int64) -> np.ndarray:
    """Equal-length ``sequences`` as an (N, n) array of ``dtype``: a :class:`TokenRows`' own
    array (no copy when it has that type already), else read from the tuples."""
    if isinstance(sequences, TokenRows):
        return sequences.array.astype(dtype, copy=False)
    from itertools import chain

    N = len(sequences)
    n = len(sequences[0]) if N else 0
    return np.fromiter(chain.from_iterable(sequences), dtype, N * n).reshape(N, n)
