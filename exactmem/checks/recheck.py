"""Re-derive a certificate from the files it names: ``exactmem recheck`` and
:func:`exactmem.recheck`.

A certificate file is a record. Its SHA-256 (:mod:`exactmem.files.model_files`) is a checksum of
its own
content with no key: anyone can change a field and hash the file again, so an intact hash
proves that the file was not damaged since it was written, not who wrote it nor that its
verdict is true (docs/trust.md, "What a certificate proves"). :func:`recheck` makes the record
evidence again: it checks that the model and the dataset are the ones the certificate names
(their hashes), runs :func:`exactmem.certify` on them under the criteria the certificate
records (``subject.criteria``: construction, tolerance, max_precision, the user's bounds), and
compares what it re-derives with what the file says — verdict, every check (name, passed,
detail, figures), resources, data, activation totals, hashes and criteria. Any difference is
reported; none means the record is what the trusted core says of these files today.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactmem.core.errors import InputError

if TYPE_CHECKING:
    from exactmem.checks.certificate import Certificate
    from exactmem.core.model import Transformer
    from exactmem.datasets.dataset import Dataset

__all__ = ["Recheck", "compare", "printable", "read", "recheck", "validate"]

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
    if value is not None and not _is_rational(value):
        raise InputError(f"{where}.{key}: expected null or an exact rational such as '1/2'")


def _is_rational(value: object) -> bool:
    """An exact rational as certificates write it, with a non-zero denominator ("1/0" is
    none: it would be a division by zero wherever it is read)."""
    if not (isinstance(value, str) and RATIONAL.fullmatch(value)):
        return False
    if "/" not in value:
        return True
    return int(value.split("/")[1], 0) != 0


def validate(cert: dict, where: str) -> dict:
    """The content of a certificate file (its envelope checked by
    :func:`exactmem.files.model_files.read_certificate_file`) against the schema's required fields
    and types;
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
    from exactmem.checks.certificate import Check, verdict_of

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


def printable(value: object) -> object:
    """``value`` with every string that holds control characters escaped, so that a file's text
    never drives the terminal."""
    import json

    if isinstance(value, str):
        return value if value.isprintable() else json.dumps(value)
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable(v) for v in value]
    return value


def read(path: str) -> dict:
    """Read and validate a certificate file (``.json`` or ``.json.gz``)."""
    from exactmem.files.model_files import read_certificate_file

    return validate(read_certificate_file(path, CERTIFICATE_BYTES), f"certificate file {path}")


# activation totals compared; the per-layer table depends on how the certificate was written
# (``check`` writes none), the totals do not
ACTIVATION_TOTALS = (
    "relu_layers",
    "min_nonzero_preactivation",
    "zero_preactivations",
    "preactivations",
)
# the criteria ``certify`` records; ``checklist`` is its text for the construction
CRITERIA = (
    "construction",
    "checklist",
    "tolerance",
    "readout",
    "inputs",
    "max_precision",
    "bounds",
    "options",
    "options_not_judged",
    "declared_bounds",
    "checklist_provider",
)
# the largest max_precision a certificate may ask recheck for without --max-precision: the
# verify command's own default cap (a larger one can make recheck run for hours)
PRECISION_CAP = 1 << 14


@dataclass
class Recheck:
    """What :func:`recheck` found: ``differences`` (one line each, empty when the record is
    re-derived exactly), the ``recorded`` certificate content and the ``rederived`` one
    (:meth:`exactmem.checks.certificate.Certificate.to_json`)."""

    recorded: dict
    rederived: dict
    differences: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """True when every compared field of the record was re-derived unchanged."""
        return not self.differences

    def __repr__(self) -> str:
        if self.same:
            return (
                f"<Recheck SAME: {self.rederived['verdict']} and its "
                f"{len(self.rederived['checks'])} checks re-derived>"
            )
        return (
            f"<Recheck DIFFERS in {len(self.differences)} places:\n "
            + "\n ".join(self.differences)
            + ">"
        )


def _rational(text: object, where: str):
    """A recorded exact rational (``format_rational``'s text: decimal, or hex parts)."""
    from gmpy2 import mpq

    from exactmem.core.exact import from_hex

    if not isinstance(text, str):
        raise InputError(f"{where}: expected an exact rational such as '1/2'")
    parts = text.split("/")
    try:
        values = [from_hex(p, where) if "0x" in p else int(p) for p in parts]
    except ValueError:
        raise InputError(f"{where}: {text[:40]!r} is not an exact rational") from None
    if len(values) > 2 or (len(values) == 2 and values[1] < 1):
        raise InputError(f"{where}: {text[:40]!r} is not an exact rational")
    return mpq(*values)


def _criteria(recorded: dict, where: str, max_precision: int | None = None) -> dict:
    """The keyword arguments of ``certify`` that the certificate's criteria name;
    ``max_precision``: the caller's cap on the recorded max_precision (default
    :data:`PRECISION_CAP`)."""
    from exactmem.checks import registry

    crit = recorded["subject"]["criteria"]
    at = f"{where}.subject.criteria"
    construction = crit.get("construction")
    if construction is not None and construction not in registry.names():
        raise InputError(
            f"{at}.construction: {str(construction)[:60]!r} is not an installed construction "
            f"(installed: {', '.join(registry.names())}); install the package that provides it "
            "to re-derive this certificate"
        )
    tolerance = crit.get("tolerance")
    mp = crit.get("max_precision")
    if mp is not None and (isinstance(mp, bool) or not isinstance(mp, int) or mp < 64):
        raise InputError(f"{at}.max_precision: expected an integer ≥ 64")
    cap = PRECISION_CAP if max_precision is None else max_precision
    if mp is not None and mp > cap:
        raise InputError(
            f"{at}.max_precision: {mp} bits is above the cap of {cap} bits (the verifier's "
            "default; a larger precision can take hours); pass --max-precision BITS (≥ "
            f"{mp}) to recheck to allow it"
        )
    bounds = crit.get("bounds", {})
    if not isinstance(bounds, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in bounds.items()
    ):
        raise InputError(f"{at}.bounds: expected an object of metric to formula")
    options = crit.get("options", {})
    if not isinstance(options, dict):
        raise InputError(f"{at}.options: expected an object of option to value")
    return {
        "construction": construction,
        "tolerance": None if tolerance is None else _rational(tolerance, f"{at}.tolerance"),
        "max_precision": mp,
        "bounds": bounds or None,
        "options": options or None,
    }


def _load_record(cert: str | Path | dict) -> tuple[dict, str]:
    """(content, where) of a certificate given as a path, a file's whole object
    (``format``/``sha256``/``certificate``) or its content; validated as ``show`` does."""
    if isinstance(cert, str | Path):
        return read(str(cert)), f"certificate file {cert}"
    if not isinstance(cert, dict):
        raise InputError(f"certificate: expected a path or a dict, got {type(cert).__name__}")
    if set(cert) == {"format", "sha256", "certificate"}:
        from exactmem.files.model_files import CERTIFICATE_FORMAT
        from exactmem.files.model_json import canonical_hash

        if cert["format"] != CERTIFICATE_FORMAT:
            raise InputError(f"certificate.format: expected {CERTIFICATE_FORMAT!r}")
        if not isinstance(cert["certificate"], dict):
            raise InputError("certificate.certificate: expected an object")
        if canonical_hash(cert["certificate"]) != cert["sha256"]:
            raise InputError("certificate.sha256: does not match the certificate's content")
        cert = cert["certificate"]
    return validate(cert, "certificate"), "certificate"


def _text(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)[:200]


def _compare_checks(old: list[dict], new: list[dict]) -> list[str]:
    out = []
    recorded = {c["name"]: c for c in old}
    derived = {c["name"]: c for c in new}
    for c in new:
        if c["name"] not in recorded:
            mark = "ok" if c["passed"] else "FAIL"
            out.append(
                f"check {c['name']}: missing from the record (re-derived: {mark}, {c['detail']})"
            )
    for c in old:
        if c["name"] not in derived:
            out.append(f"check {c['name']}: in the record but not re-derived")
    for c in new:
        was = recorded.get(c["name"])
        if was is None:
            continue
        if was["passed"] != c["passed"]:
            out.append(
                f"check {c['name']}: recorded {'passed' if was['passed'] else 'failed'}, "
                f"re-derived {'passed' if c['passed'] else 'FAILED'} ({c['detail']})"
            )
        for key in sorted(set(was) | set(c)):
            if key in ("name", "passed") or was.get(key) == c.get(key):
                continue
            out.append(
                f"check {c['name']}.{key}: recorded {_text(was.get(key))}, re-derived "
                f"{_text(c.get(key))}"
            )
    if not out and [c["name"] for c in old] != [c["name"] for c in new]:
        out.append("checks: the same checks, in another order than certify writes them")
    return out


def compare(recorded: dict, rederived: dict, evaluator: bool = True) -> list[str]:
    """Every difference between a certificate's recorded content and the one re-derived from
    its files, one line each (empty: the same). Compared too: ``model_says`` (re-derived from
    the hashed model file) and, when ``evaluator``, the evaluator that ran. Not compared: the
    library versions, the command line (``argv``: it cannot be re-derived; ``show`` prints it
    as recorded) and the per-layer activation table (``check`` writes none); the activation
    totals are."""
    out = []
    if recorded["verdict"] != rederived["verdict"]:
        out.append(f"verdict: recorded {recorded['verdict']}, re-derived {rederived['verdict']}")
    old_s, new_s = recorded["subject"], rederived["subject"]
    for key, what in (
        ("model_sha256", "model"),
        ("dataset_sha256", "dataset"),
    ):
        if old_s[key] != new_s[key]:
            out.append(
                f"{what} sha256: the certificate names {old_s[key][:16]}…, the file given "
                f"hashes to {new_s[key][:16]}… (not the {what} the certificate is about)"
            )
    # model_says is re-derived from the hashed model file; evaluator from the run (compared
    # only when recheck ran the recorded one); argv cannot be re-derived (show says so)
    compared: tuple[str, ...] = ("task", "construction", "model_says")
    if evaluator:
        compared += ("evaluator",)
    for key in compared:
        if old_s.get(key) != new_s.get(key):
            out.append(
                f"subject.{key}: recorded {_text(old_s.get(key))}, re-derived "
                f"{_text(new_s.get(key))}"
            )
    old_c, new_c = old_s["criteria"], new_s["criteria"]
    for key in CRITERIA:
        if old_c.get(key) != new_c.get(key):
            out.append(
                f"criteria.{key}: recorded {_text(old_c.get(key))}, re-derived "
                f"{_text(new_c.get(key))}"
            )
    if old_c["checks_run"] != new_c["checks_run"]:
        missing = [n for n in new_c["checks_run"] if n not in old_c["checks_run"]]
        extra = [n for n in old_c["checks_run"] if n not in new_c["checks_run"]]
        parts = []
        if missing:
            parts.append(f"re-derived checks missing from the record: {', '.join(missing)}")
        if extra:
            parts.append(f"recorded checks not re-derived: {', '.join(extra)}")
        out.append("criteria.checks_run: " + ("; ".join(parts) or "the same in another order"))
    for key in sorted(set(recorded["resources"]) | set(rederived["resources"])):
        a, b = recorded["resources"].get(key), rederived["resources"].get(key)
        if a != b:
            out.append(f"resources.{key}: recorded {a}, re-derived {b}")
    for key in sorted(set(recorded["data"]) | set(rederived["data"])):
        a, b = recorded["data"].get(key), rederived["data"].get(key)
        if a != b:
            out.append(f"data.{key}: recorded {_text(a)}, re-derived {_text(b)}")
    out += _compare_checks(recorded["checks"], rederived["checks"])
    for key in ACTIVATION_TOTALS:
        a, b = recorded["activation"].get(key), rederived["activation"].get(key)
        if a != b:
            out.append(f"activation.{key}: recorded {_text(a)}, re-derived {_text(b)}")
    return out


def recheck(
    certificate: str | Path | dict,
    model: str | Path | Transformer,
    dataset: str | Path | Dataset,
    *,
    evaluator: str | None = None,
    jobs: int = 1,
    allow_floats: bool = False,
    progress: Callable[[str], None] | None = None,
    max_precision: int | None = None,
) -> Recheck:
    """Re-derive ``certificate`` (a certificate file's path, or its JSON object) from
    ``model`` and ``dataset`` (files or loaded objects) and compare.

    The model and the dataset must be the ones the certificate names (their SHA-256, computed from
    their content); the verdict is re-derived by :func:`exactmem.certify` under the certificate's
    own criteria (construction, tolerance, max_precision, bounds, options). The result lists every
    difference from the record (:attr:`Recheck.differences`; :attr:`Recheck.same` when there is
    none). ``evaluator``: None runs the one the certificate records (and compares it); ``fast`` or
    ``reference`` runs that one instead. ``max_precision`` raises the cap (:data:`PRECISION_CAP`) on
    the precision the certificate may ask for. The recorded ``argv`` is never compared: it cannot be
    re-derived.

    Raises:
        InputError: a certificate that is not one (format, hash, schema: the message names the
            field), a criterion that cannot be re-applied (a construction not installed), or
            a model or dataset file that does not load.
    """
    from exactmem.checks.certify import certificate_json, certify
    from exactmem.core.model import Transformer
    from exactmem.datasets.dataset import Dataset
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model

    recorded, where = _load_record(certificate)
    criteria = _criteria(recorded, where, max_precision)
    chosen = evaluator
    if chosen is None:
        chosen = recorded["subject"].get("evaluator", "fast")
        if chosen not in ("fast", "reference"):
            raise InputError(
                f"{where}.subject.evaluator: expected 'fast' or 'reference', got "
                f"{_text(chosen)[:60]}"
            )
    if not isinstance(model, Transformer):
        model, _ = load_model(model)
    if not isinstance(dataset, Dataset):
        dataset = load_dataset(dataset, allow_floats=allow_floats)
    cert: Certificate = certify(
        model, dataset, progress=progress, evaluator=chosen, jobs=jobs, **criteria
    )
    rederived = certificate_json(cert)
    # the caller chose the evaluator: running another one than recorded is not a difference
    return Recheck(recorded, rederived, compare(recorded, rederived, evaluator is None))


def recheck_json(result: Recheck) -> dict[str, Any]:
    """``recheck --json``: the differences, and both certificates' content."""
    return {
        "same": result.same,
        "differences": result.differences,
        "recorded": result.recorded,
        "rederived": result.rederived,
    }
