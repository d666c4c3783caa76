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


class Terminated(BaseException):
    """SIGTERM, raised by the CLI's handler so that ``finally`` blocks (temporary files) run.

    A ``BaseException`` like ``KeyboardInterrupt``: no ``except Exception`` may swallow it."""

    exit_code = EXIT_TERMINATED
