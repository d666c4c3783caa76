"""Dataset files: JSON (gzip-compressed when the name ends in ``.gz``) and the binary container
(``.exm``), loaded and validated as :func:`~exactmem.datasets.dataset.parse_dataset` does."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exactmem.core.errors import InputError
from exactmem.core.json_input import read_json_file
from exactmem.datasets.dataset import Dataset, dataset_to_json, parse_dataset
from exactmem.runtime.gcpause import paused_gc


def _write_json(obj: object, path: Path, progress: Callable[..., Any] | None = None) -> None:
    text = json.dumps(obj, separators=(",", ":"))
    data = text.encode()
    if path.name.endswith(".gz"):
        # level 6 (zlib's default): level 9 took 21 s of a 31 s `generate` at N = 10⁶ for a
        # file a few per cent smaller; mtime 0 keeps the bytes reproducible
        data = _gzip(data, progress, f"compressing {path.name}")
    from exactmem.core.outputs import write_atomic

    write_atomic(path, data)


def load_dataset(path: str | Path, *, allow_floats: bool = False) -> Dataset:
    """Load and validate a dataset file (``.json``, ``.json.gz``, or the binary container
    ``.exm`` of :mod:`exactmem.files.container`)."""
    with paused_gc():  # parsing makes a tuple per sequence and point, none in a cycle
        return _load_dataset(path, allow_floats)


def _load_dataset(path: str | Path, allow_floats: bool) -> Dataset:
    if str(path).endswith(".exm"):
        from exactmem.files.container import read_dataset

        return read_dataset(path)
    try:
        obj = read_json_file(path, "dataset")
    except InputError as exc:
        if "not valid JSON" in str(exc) and _looks_like_text(path):
            raise InputError(
                f"{exc}; it looks like plain text, not a dataset: make one of it first with "
                f"exactmem generate text --file {path} --window W --out data.json "
                "(docs/own-text.md)"
            ) from None
        raise
    source = f"dataset file {path}"
    try:
        return parse_dataset(obj, allow_floats=allow_floats, source=source)
    except InputError as exc:
        if str(exc).startswith(source):
            raise
        raise InputError(f"{source}: {exc}") from None


def _looks_like_text(path: str | Path) -> bool:
    """Whether a file that is not valid JSON starts like prose: UTF-8 text whose first
    character that is not white space opens no JSON value (``generate text`` reads such files)."""
    if str(path).endswith(".gz"):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")
    return bool(text) and b"\0" not in head and text[0] not in '{["'


GZIP_BLOCK = 1 << 22


def _gzip(data: bytes, progress: Callable[..., Any] | None, phase: str) -> bytes:
    """``gzip.compress(data, 6, mtime=0)``, the same bytes, fed to zlib a block at a time so
    that ``progress`` hears how far it is."""
    from exactmem.runtime.progress import counter

    if progress is None:
        return gzip.compress(data, compresslevel=6, mtime=0)
    told = counter(progress, phase, -(-len(data) // GZIP_BLOCK))  # in blocks of 4 MiB
    deflate = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip header, mtime 0
    parts = []
    for k, start in enumerate(range(0, len(data), GZIP_BLOCK)):
        parts.append(deflate.compress(data[start : start + GZIP_BLOCK]))
        told(k + 1)
    parts.append(deflate.flush())
    return b"".join(parts)


def save_dataset(
    ds: Dataset, path: str | Path, *, progress: Callable[..., Any] | None = None
) -> None:
    """Write ``ds`` as a dataset file (gzip-compressed if the name ends in ``.gz``, the binary
    container of :mod:`exactmem.files.container` if it ends in ``.exm``); ``progress`` hears how far
    the compression is."""
    if str(path).endswith(".exm"):
        from exactmem.files.container import write_dataset

        return write_dataset(ds, path)
    _write_json(dataset_to_json(ds), Path(path), progress)
