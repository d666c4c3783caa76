"""Strict JSON input: what every file the tool reads goes through.

Python's ``json`` module takes the last of repeated keys, accepts ``NaN`` and ``Infinity``,
parses integers of any length in quadratic time and recurses once per nesting level. Here a
repeated key is an error naming its JSON path, the constants are refused, integers are capped
at ``max_digits`` and nesting at ``max_depth`` (checked on the bytes before parsing), and the
file's size and gzip expansion are bounded (:mod:`exactmem.core.limits`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from exactmem.core import limits
from exactmem.core.errors import InputError
from exactmem.core.limits import json_depth, read_limited

__all__ = ["parse_json", "read_json_file"]


def read_json_file(path: str | Path, what: str) -> object:
    """Read a ``.json`` or ``.json.gz`` file within the limits of :mod:`exactmem.core.limits`;
    every failure is an :class:`InputError` naming the file."""
    path = Path(path)
    return parse_json(read_limited(path, what), f"{what} file {path}")


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _DuplicateKey
    return obj


class _Marked(dict):
    """An object of the second parse that had a duplicate key (the path is found after)."""

    duplicate: str = ""


def _marking_keys(pairs: list[tuple[str, object]]) -> dict:
    obj = _Marked(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        obj.duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
    return obj


def _duplicate_path(text: str) -> tuple[str, str]:
    """(JSON path of the first object with a repeated key, the key): a second parse that
    marks such objects, then a walk to find one."""
    try:  # numbers and constants are not needed to find the path: not converted
        top = json.loads(
            text,
            object_pairs_hook=_marking_keys,
            parse_int=len,
            parse_constant=len,
            parse_float=len,
        )
    except (ValueError, RecursionError):
        return "?", "?"
    stack: list[tuple[object, str]] = [(top, "")]
    while stack:
        obj, path = stack.pop()
        if isinstance(obj, dict):
            if isinstance(obj, _Marked) and obj.duplicate:
                return path or "the top-level object", obj.duplicate
            stack += [(v, f"{path}.{k}" if path else k) for k, v in reversed(obj.items())]
        elif isinstance(obj, list):
            stack += [(v, f"{path}[{i}]") for i, v in reversed(list(enumerate(obj)))]
    return "?", "?"  # pragma: no cover - the first parse found one


def _float(text: str) -> float:
    value = float(text)
    mantissa = text.lower().partition("e")[0]
    if value == 0 and mantissa.strip("-+0.") != "":
        raise InputError(
            f"JSON number {text[:40]} underflows to 0 as a float; write it as a string"
        )
    return value


def _no_constant(name: str) -> object:
    raise InputError(f"JSON constant {name} is not a finite number (JSON has no NaN or infinity)")


def parse_json(raw: bytes | bytearray, where: str) -> object:
    """Strict JSON: UTF-8, no repeated keys, no NaN or infinities, nesting within
    ``max_depth``, integers within ``max_digits`` (Python parses decimal digits in quadratic
    time). Errors name ``where`` and the position or JSON path."""
    lim = limits.current()
    deep = json_depth(raw, lim.max_depth)
    if deep is not None:
        raise InputError(
            f"{where}: JSON nested deeper than {lim.max_depth} levels (at byte {deep}; --max-depth)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    cap = lim.max_digits
    hooks: dict = {
        "object_pairs_hook": _unique_keys,
        "parse_constant": _no_constant,
        "parse_float": _float,
    }
    if cap < 640:  # below what the interpreter's own limit may be set to

        def parse_int(digits: str) -> int:
            if len(digits.lstrip("-")) > cap:
                raise ValueError("Exceeds the limit")
            return int(digits)

        hooks["parse_int"] = parse_int
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(max(cap, 640))
    try:
        return json.loads(text, **hooks)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except _DuplicateKey:
        path, key = _duplicate_path(text)
        raise InputError(f"{where}: {path}: key {key!r} appears twice") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply for the parser (--max-depth)") from None
    except ValueError as exc:
        if "Exceeds the limit" not in str(exc):
            raise
        long = re.search(f"[0-9]{{{cap + 1}}}", text)
        at = long.start() if long else 0
        line = text.count("\n", 0, at) + 1
        raise InputError(
            f"{where}: an integer with more than {cap} digits (line {line}, column "
            f"{at - text.rfind(chr(10), 0, at)}; --max-digits)"
        ) from None
    finally:
        sys.set_int_max_str_digits(old)
