"""Errors that map to the exit codes of the CLI contract (docs/quickstart.md lists them)."""

from __future__ import annotations

EXIT_VERIFIED = 0
EXIT_REFUTED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INCONCLUSIVE = 4
EXIT_NOTHING_SELECTED = 5
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM


class ExactmemError(Exception):
    """Base class; ``exit_code`` is what the CLI returns."""

    exit_code = EXIT_INTERNAL


class InputError(ExactmemError, ValueError):
    """Bad input (dataset, model file, option): the message names the offending field or index."""

    exit_code = EXIT_USAGE


class InconclusiveError(ExactmemError):
    """Exact arithmetic cannot decide (for example softmax with unequal scores)."""

    exit_code = EXIT_INCONCLUSIVE


class MissingPartError(KeyError, ValueError):
    """A trace has no lane or probe of the name a checklist reads: the model lacks a part the
    checklist needs (a structure failure, never an internal error). A KeyError and a ValueError,
    as the lookups it replaces raised (review r1, M2: the checklist runner catches only this and
    the structure errors checklists raise on purpose)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Terminated(BaseException):
    """SIGTERM, raised by the CLI's handler so that ``finally`` blocks (temporary files) run.

    A ``BaseException`` like ``KeyboardInterrupt``: no ``except Exception`` may swallow it."""

    exit_code = EXIT_TERMINATED
