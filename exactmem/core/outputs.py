"""Output files: checked before any work, written atomically.

A verification may run for minutes; an output path that cannot be written must fail at once
(exit 2), not after the work, and a failed or interrupted write must leave the previous file
as it was. :func:`check_output` tests a path up front (its folder exists and is writable, it is
not a folder, not a read-only file, not one of the command's inputs); :func:`write_atomic`
writes a temporary file in the same folder, flushes and fsyncs it, and renames it over the
target, removing the temporary file on any failure, ``KeyboardInterrupt`` and termination
included.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from exactmem.core.errors import InputError

__all__ = [
    "JSON_ROWS_NOTE",
    "OutputError",
    "abandon_partial",
    "check_output",
    "kept",
    "new_ledger",
    "note_json_at_scale",
    "write_atomic",
]

TEMP_SUFFIX = ".exactmem-tmp"


# Above this many rows (points or sequences) JSON costs more than it is worth: the binary
# container (.exm, docs/files.md) is half the size, needs less memory and writes and reads faster
# (measured in the README's "Which file format": at N = 10⁶ generate 2.4x, build 1.8x less CPU).
JSON_ROWS_NOTE = 10**5


def note_json_at_scale(rows: int, files: dict[str, str | os.PathLike]) -> None:
    """Say on stderr, once, which of ``files`` (option -> path: the command's inputs and outputs)
    are JSON when a dataset has more than :data:`JSON_ROWS_NOTE` rows, and how to convert them."""
    import sys

    if rows <= JSON_ROWS_NOTE:
        return
    json_files = {
        option: str(path)
        for option, path in files.items()
        if path is not None and not str(path).endswith(".exm")
    }
    if not json_files:
        return
    named = ", ".join(f"{option} {path}" for option, path in json_files.items())
    first = next(iter(json_files.values()))
    stem = first.removesuffix(".gz").removesuffix(".json")
    print(
        f"note: {rows} rows in JSON ({named}): above 10⁵ rows use the binary .exm container, "
        f"half the size and faster to write and read (`exactmem convert {first} {stem}.exm`; "
        "README: Which file format)",
        file=sys.stderr,
    )


class OutputError(InputError):
    """An output path that cannot be written (exit 2, like every bad argument)."""


class _Ledger:
    """The output files of the running command, for the one line an interruption prints (what
    was kept) and for the temporary files it removes before the process exits at once."""

    def __init__(self) -> None:
        self.shown: dict[str, str] = {}  # target → the path as given, in the order first seen
        self.existed: dict[str, bool] = {}  # target → a file was there when first seen
        self.done: set[str] = set()  # targets renamed into place by this command
        self.writing: dict[str, str] = {}  # temporary file → its target, while it exists

    def plan(self, target: Path, shown: str) -> str:
        key = str(target)
        if key not in self.shown:
            self.shown[key] = shown
            self.existed[key] = target.exists()
        return key


_ledger = _Ledger()


def new_ledger() -> None:
    """Forget the outputs of earlier commands (the command line calls it as a command starts)."""
    global _ledger
    _ledger = _Ledger()


def abandon_partial() -> None:
    """Remove the temporary files being written now (an interruption, before the process exits
    without unwinding): no partial file is left, and no target was touched by them."""
    for temp in list(_ledger.writing):
        try:
            os.unlink(temp)
        except OSError:
            pass
        _ledger.writing.pop(temp, None)


def kept() -> str:
    """One line on the command's output files: which are complete, which untouched."""
    said = []
    # a temporary file gone while still listed was renamed into place just before the signal
    done = _ledger.done | {k for t, k in _ledger.writing.items() if not os.path.exists(t)}
    for key, shown in _ledger.shown.items():
        if key in done:
            said.append(f"{shown} written in full")
        elif _ledger.existed[key]:
            said.append(f"{shown} untouched (the previous file kept)")
        else:
            said.append(f"{shown} not written")
    if not said:
        return "no output file was begun"
    return "; ".join(said) + "; no partial file left"


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EFBIG:
        return "file too large for the file-size limit (EFBIG)"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device (ENOSPC)"
    return exc.strerror or str(exc)


def _target(path: str | os.PathLike, option: str) -> Path:
    text = os.fspath(path)
    if not text:
        raise OutputError(f"{option}: empty path")
    if text.endswith(("/", os.sep)):
        raise OutputError(f"{option} {text}: names a folder, expected a file path")
    # write through a symbolic link to the file it names (os.replace would swap the link)
    return Path(os.path.realpath(text))


def check_output(
    path: str | os.PathLike, option: str, inputs: Iterable[str | os.PathLike] = ()
) -> Path:
    """Refuse an output path that cannot be written, before any work is done.

    ``option`` names the flag in messages (``--out``, ``--certificate``); ``inputs`` are the
    command's input files, which the output must not replace. Returns the resolved target."""
    shown = os.fspath(path)
    try:
        target = _target(path, option)
        _ledger.plan(target, shown)
        return _checked(target, shown, option, inputs)
    except OSError as exc:  # a folder on the way that cannot be searched, a link loop
        raise OutputError(f"{option} {shown}: cannot be examined ({_reason(exc)})") from None


def _checked(target: Path, shown: str, option: str, inputs: Iterable) -> Path:
    folder = target.parent
    if target.is_dir():
        raise OutputError(f"{option} {shown}: is a folder, expected a file path")
    if not folder.exists():
        raise OutputError(f"{option} {shown}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputError(f"{option} {shown}: {folder} is not a folder")
    if target.exists():
        for given in inputs:
            try:
                same = os.path.samefile(target, given)
            except OSError:
                same = False
            if same:
                raise OutputError(
                    f"{option} {shown}: is the input file {os.fspath(given)}; writing it would "
                    "replace the input"
                )
        if not target.is_file():
            raise OutputError(f"{option} {shown}: exists and is not a regular file")
        if not os.access(target, os.W_OK):
            raise OutputError(f"{option} {shown}: the existing file is not writable")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {shown}: the folder {folder} is not writable")
    # os.access trusts permission bits (always true for root); a real file proves it
    try:
        fd, probe = tempfile.mkstemp(prefix=_prefix(target), suffix=TEMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise OutputError(
            f"{option} {shown}: cannot create a file in {folder} ({_reason(exc)})"
        ) from None
    _ledger.writing[probe] = str(target)
    try:
        os.close(fd)
    finally:
        os.unlink(probe)
        _ledger.writing.pop(probe, None)
    return target


def _prefix(target: Path) -> str:
    # a temporary name must fit where the target's name fits (255 bytes on most systems)
    return f".{target.name[:64]}."


def _mode_for(target: Path) -> int:
    """The permission bits of the file being replaced, else the umask's default for new files."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomic(
    path: str | os.PathLike,
    data: bytes | Iterable[bytes | memoryview],
    option: str = "output file",
) -> None:
    """Write ``data`` (bytes, or pieces of bytes written one after another) to ``path`` so that
    the file is either the old one or the whole new one.

    Temporary file in the same folder (so the rename cannot cross file systems), write, flush,
    fsync, ``os.replace``, then fsync of the folder. An ``OSError`` (full disk, file-size limit)
    becomes an :class:`OutputError` naming the path; on any failure or interruption the
    temporary file is removed and the old file is untouched."""
    target = _target(path, option)
    # only the outputs a command checked up front (its own) are reported; files written on the
    # way (a model handed to worker processes) are not, but are abandoned all the same
    key = str(target)
    try:
        fd, temp = tempfile.mkstemp(prefix=_prefix(target), suffix=TEMP_SUFFIX, dir=target.parent)
    except OSError as exc:
        raise OutputError(
            f"{option} {os.fspath(path)}: cannot create a file in {target.parent} ({_reason(exc)})"
        ) from None
    _ledger.writing[temp] = key
    try:
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), _mode_for(target))
                for piece in (data,) if isinstance(data, bytes | bytearray) else data:
                    handle.write(piece)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, target)
            _ledger.done.add(key)
            del _ledger.writing[temp]
        except OSError as exc:
            raise OutputError(
                f"{option} {os.fspath(path)}: cannot write ({_reason(exc)}); "
                "the previous file, if any, is unchanged"
            ) from None
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        _ledger.writing.pop(temp, None)
        raise
    _sync_folder(target.parent)


def _sync_folder(folder: Path) -> None:
    """Make the rename durable; some file systems refuse to open or fsync a folder."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
