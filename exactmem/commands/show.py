"""``exactmem show CERT``: read a certificate file back — its format, its SHA-256 and the
fields of the ``exactmem.certificate/2`` schema (docs/examples/certificate.schema.json) checked —
and print its verdict table, as ``verify`` printed it.

``show`` re-judges nothing: it says what the file records, and that the file is intact. To judge
a model again, run ``verify`` on the model and the dataset."""

from __future__ import annotations

import argparse
import re
from typing import cast

from exactmem.errors import InputError

CERTIFICATE_BYTES = 64 * 2**20  # with per-layer statistics a certificate is a few hundred kB
SHA256 = re.compile(r"[0-9a-f]{64}")
RATIONAL = re.compile(r"-?(?:\d+|0x[0-9a-f]+)(?:/(?:\d+|0x[0-9a-f]+))?")
RESOURCES = (
    "width",
    "depth",
    "relu_layers",
    "dense_parameters",
    "nonzero_parameters",
    "max_bits",
    "total_bits",
)


def _field(obj: dict, key: str, kind: type | tuple, where: str):
    if key not in obj:
        raise InputError(f"{where}.{key}: missing")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InputError(f"{where}.{key}: wrong type {type(value).__name__}")
    return value


def _count(obj: dict, key: str, where: str, least: int = 0) -> int:
    value = _field(obj, key, int, where)
    if value < least:
        raise InputError(f"{where}.{key}: {value}, expected an integer ≥ {least}")
    return value


def _one_of(obj: dict, key: str, allowed: tuple, where: str) -> None:
    if obj.get(key, object()) not in allowed:
        raise InputError(f"{where}.{key}: {str(obj.get(key))[:40]!r}, expected one of {allowed}")


def _rational_or_null(obj: dict, key: str, where: str) -> None:
    value = obj.get(key, "missing")
    if value is not None and not (isinstance(value, str) and RATIONAL.fullmatch(value)):
        raise InputError(f"{where}.{key}: expected null or an exact rational such as '1/2'")


def validate(cert: dict, where: str) -> dict:
    """The content of a certificate file (its envelope checked by
    :func:`exactmem.io.read_certificate_file`) against the schema's required fields and types;
    an :class:`InputError` names the first field that fails."""
    here = f"{where}.certificate"
    extra = set(cert) - {"verdict", "subject", "data", "resources", "checks", "activation"}
    if extra:
        raise InputError(f"{here}: unexpected field {sorted(extra)[0][:40]!r}")
    _field(cert, "verdict", str, here)
    _one_of(cert, "verdict", ("verified", "refuted", "inconclusive"), here)
    subject = _field(cert, "subject", dict, here)
    _one_of(subject, "task", ("points", "next-token", "seq2seq"), f"{here}.subject")
    for key in ("dataset_sha256", "model_sha256"):
        if not SHA256.fullmatch(_field(subject, key, str, f"{here}.subject")):
            raise InputError(f"{here}.subject.{key}: expected 64 lowercase hex digits")
    _field(subject, "construction", (str, type(None)), f"{here}.subject")
    _field(subject, "model_says", dict, f"{here}.subject")
    crit = _field(subject, "criteria", dict, f"{here}.subject")
    at = f"{here}.subject.criteria"
    _field(crit, "construction", (str, type(None)), at)
    _field(crit, "checklist", str, at)
    _rational_or_null(crit, "tolerance", at)
    _one_of(crit, "readout", ("label", "argmax"), at)
    _one_of(crit, "inputs", ("vectors", "vectors with positions", "token ids"), at)
    runs = _field(crit, "checks_run", list, at)
    if not all(isinstance(name, str) for name in runs):
        raise InputError(f"{at}.checks_run: expected a list of check names")
    data = _field(cert, "data", dict, here)
    for key in ("N", "d", "C"):
        _count(data, key, f"{here}.data", least=1)
    res = _field(cert, "resources", dict, here)
    extra = set(res) - set(RESOURCES)
    if extra:
        raise InputError(f"{here}.resources: unexpected field {sorted(extra)[0][:40]!r}")
    for key in RESOURCES:
        _count(res, key, f"{here}.resources")
    checks = _field(cert, "checks", list, here)
    if not checks:
        raise InputError(f"{here}.checks: empty (a verdict rests on at least one check)")
    for i, check in enumerate(checks):
        if not isinstance(check, dict):
            raise InputError(f"{here}.checks[{i}]: expected an object")
        _field(check, "name", str, f"{here}.checks[{i}]")
        _field(check, "passed", bool, f"{here}.checks[{i}]")
        _field(check, "detail", str, f"{here}.checks[{i}]")
        if "undecided" in check:
            _field(check, "undecided", bool, f"{here}.checks[{i}]")
            if check["undecided"] and check["passed"]:
                raise InputError(f"{here}.checks[{i}]: passed and undecided at once")
    act = _field(cert, "activation", dict, here)
    for key in ("relu_layers", "zero_preactivations", "preactivations"):
        _count(act, key, f"{here}.activation")
    _rational_or_null(act, "min_nonzero_preactivation", f"{here}.activation")
    # the verdict is what the checks say: a file whose verdict contradicts them is not one
    # the verifier wrote
    from exactmem.verify import Check, verdict_of

    verdict = verdict_of(
        Check(c["name"], c["passed"], c["detail"], undecided=c.get("undecided") is True)
        for c in checks
    )
    if cert["verdict"] != verdict:
        said = {
            "verified": "every check passed",
            "refuted": "a check failed",
            "inconclusive": "no check failed and one is undecided",
        }
        raise InputError(f"{here}.verdict: {cert['verdict']!r}, but {said[verdict]}")
    return cert


def _printable(value: object) -> object:
    """``value`` with every string that holds control characters escaped, so that a file's text
    never drives the terminal."""
    import json

    if isinstance(value, str):
        return value if value.isprintable() else json.dumps(value)
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def read(path: str) -> dict:
    """Read and validate a certificate file (``.json`` or ``.json.gz``)."""
    from exactmem.io import read_certificate_file

    return validate(read_certificate_file(path, CERTIFICATE_BYTES), f"certificate file {path}")


def run(args: argparse.Namespace) -> int:
    cert = read(args.certificate)
    if args.json:
        from exactmem.commands import emit_json

        emit_json(cert)
    else:
        from exactmem.commands.verify import print_certificate

        print(f"certificate {args.certificate}: format and sha256 checked")
        print_certificate(cast(dict, _printable(cert)))
    from exactmem.commands.verify import EXIT_CODES

    return EXIT_CODES[cert["verdict"]]
