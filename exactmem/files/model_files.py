"""Model and certificate files (the file formats of docs/concepts.md).

JSON with a schema version, every integer weight in hex, and the SHA-256 of the canonical
content (sorted keys, no whitespace). Loading never uses pickle; it rejects unknown versions,
unknown fields, malformed numbers, shapes that do not fit and hash mismatches with a message
naming the JSON path, within the limits of :mod:`exactmem.core.limits`.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

from exactmem.core.errors import InputError
from exactmem.core.json_input import read_json_file
from exactmem.core.model import (
    Transformer,
)
from exactmem.files.model_json import (
    MODEL_FILE_FIELDS,
    MODEL_FORMAT,
    _only,
    canonical_hash,
    model_from_json,
    model_hash,
    model_to_json,
)
from exactmem.runtime.gcpause import paused_gc

__all__ = [
    "read_certificate_file",
    "CERTIFICATE_FORMAT",
    "MODEL_FORMAT",
    "canonical_hash",
    "load_model",
    "model_from_json",
    "model_hash",
    "model_to_json",
    "save_certificate",
    "save_model",
]

CERTIFICATE_FORMAT = "exactmem.certificate/2"


# --------------------------------------------------------------------------- encode


def _write(obj: dict, path: Path) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    from exactmem.core.outputs import write_atomic

    write_atomic(path, data)


def save_model(model: Transformer, path: str | Path) -> str:
    """Write the model file; returns its SHA-256."""
    if os.fspath(path).endswith(".exm"):  # the binary container (exactmem.files.container)
        from exactmem.files.container import write_model_of

        digest = model_hash(model)  # its text is gone before the arrays are laid out
        write_model_of(model, digest, path)
        return digest
    content = model_to_json(model)
    digest = canonical_hash(content)
    _write({"format": MODEL_FORMAT, "sha256": digest, "model": content}, Path(path))
    return digest


def save_certificate(content: dict, path: str | Path) -> str:
    digest = canonical_hash(content)
    _write({"format": CERTIFICATE_FORMAT, "sha256": digest, "certificate": content}, Path(path))
    return digest


# --------------------------------------------------------------------------- decode
#
# Strict: every object has exactly its fields (a misspelt or extra field is an error, never
# ignored), numbers are ASCII (exactmem.core.exact), shapes fit
# (exactmem.core.model.shape_problem), and
# the meta labels the certificate shows are typed. Every error names the JSON path.


def load_model(path: str | Path) -> tuple[Transformer, str]:
    """Load and check a model file (JSON, or the binary container if the name ends in
    ``.exm``); returns (model, sha256)."""
    with paused_gc():  # parsing makes a tuple per weight, none in a cycle
        return _load_model(path)


def _load_model(path: str | Path) -> tuple[Transformer, str]:
    if os.fspath(path).endswith(".exm"):
        from exactmem.files.container import read_model

        return read_model(path)
    obj = read_json_file(path, "model")
    where = f"model file {path}"
    if not isinstance(obj, dict):
        raise InputError(f"{where}: top level: expected an object")
    fmt = obj.get("format")
    if fmt != MODEL_FORMAT:
        raise InputError(f"{where}: format {fmt!r} is not supported (expected {MODEL_FORMAT!r})")
    content = obj.get("model")
    stated = obj.get("sha256")
    if not isinstance(content, dict) or not isinstance(stated, str):
        raise InputError(f"{where}: needs fields 'model' (object) and 'sha256' (string)")
    try:
        _only(obj, MODEL_FILE_FIELDS, "the top-level object")
        actual = canonical_hash(content)
        if actual != stated:
            raise InputError(
                f"SHA-256 mismatch — the content hashes to {actual[:16]}…, the file states "
                f"{stated[:16]}…; the file was modified or damaged"
            )
        return model_from_json(content, "model"), actual
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


CERTIFICATE_BYTES = 64 * 2**20  # with per-layer statistics a certificate is a few hundred kB
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def read_certificate_file(path: str | os.PathLike, max_bytes: int = CERTIFICATE_BYTES) -> dict:
    """The content of a certificate file (``.json`` or ``.json.gz``) after its envelope is
    checked: at most ``max_bytes``, a JSON object of exactly ``format`` (this version's),
    ``sha256`` (64 lowercase hex digits) and ``certificate`` (an object whose canonical hash
    that is). Each failure is an :class:`InputError` naming the file and the field; what the
    content holds is for the reader (``show`` checks the schema, ``plot`` what it draws)."""
    where = f"certificate file {os.fspath(path)}"
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise InputError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if size > max_bytes:
        raise InputError(f"{where}: {size} bytes, more than the {max_bytes} allowed")
    obj = read_json_file(Path(path), "certificate")
    if not isinstance(obj, dict):
        raise InputError(f"{where}: top level: expected an object")

    def field(key: str, kind: type):
        if key not in obj:
            raise InputError(f"{where}.{key}: missing")
        if not isinstance(obj[key], kind):
            raise InputError(f"{where}.{key}: wrong type {type(obj[key]).__name__}")
        return obj[key]

    fmt = field("format", str)
    if fmt != CERTIFICATE_FORMAT:
        raise InputError(f"{where}.format: {fmt[:60]!r}, expected {CERTIFICATE_FORMAT!r}")
    extra = set(obj) - {"format", "sha256", "certificate"}
    if extra:
        raise InputError(f"{where}: unexpected field {sorted(extra)[0][:40]!r}")
    stated = field("sha256", str)
    if not _SHA256_HEX.fullmatch(stated):
        raise InputError(f"{where}.sha256: expected 64 lowercase hex digits")
    cert = field("certificate", dict)
    if canonical_hash(cert) != stated:
        raise InputError(
            f"{where}.sha256: does not match the certificate's content (the file was changed "
            "after it was written)"
        )
    return cert
