"""``exactmem <command>`` (also ``python -m exactmem``): ``main``, which parses the command line
(:mod:`exactmem.commands.parser`), runs the command (each in its own module of
:mod:`exactmem.commands`) and turns errors, signals and closed pipes into the exit codes.

Results go to stdout (JSON with ``--json``), progress and logs to stderr. Exit codes:
0 verified, 1 refuted, 2 usage or invalid input, 3 internal error, 4 inconclusive,
5 nothing selected. Heavy modules are imported inside the commands so ``--help`` is fast.
Shell completion (``pip install 'exactmem[completion]'``) uses argcomplete when it is installed;
without it the parser works unchanged.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from exactmem.commands.parser import _limits, parser
from exactmem.core.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    ExactmemError,
    Terminated,
)
from exactmem.runtime.parallel import default_jobs
from exactmem.runtime.progress import Progress  # noqa: F401

# --------------------------------------------------------------------------- parser


def _stop_workers() -> None:
    """Kill this process's worker processes (the reference evaluator's pool): its shutdown
    would otherwise wait for every queued chunk, and the workers write nothing to disk."""
    import multiprocessing

    for child in multiprocessing.active_children():
        child.kill()


def _terminate(signum, frame) -> None:
    _stop_workers()
    raise Terminated


def _interrupt(signum, frame) -> None:
    _stop_workers()
    raise KeyboardInterrupt


def _exit_now(signum, frame) -> None:
    """SIGINT or SIGTERM in a process that ends with its command: stop the workers, remove the
    temporary file being written, say in one line what was kept, and exit with 130 or 143 at
    once, whatever runs — numba compiling, a kernel's Python callback, a write.

    Raising instead (as for ``main([...])`` called in-process) lets the exception surface inside
    numba's dispatcher ("SystemError: … returned a result with an exception set", exit 3) or
    its compiler (a traceback, then "no compiled object yet"). Every output is written to a
    temporary file renamed over the target (exactmem.core.outputs), so exiting without unwinding
    leaves each target complete or as it was."""
    from exactmem.core import outputs

    word, code = (
        ("interrupted", EXIT_INTERRUPTED)
        if signum == signal.SIGINT
        else ("terminated", EXIT_TERMINATED)
    )
    try:
        _stop_workers()
    except Exception:  # noqa: BLE001 - exiting regardless
        pass
    line = f"{word}: {outputs.kept()}"
    outputs.abandon_partial()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a stream in use by the interrupted code, or closed
            pass
    start = "\n" if sys.stderr.isatty() else ""  # past a progress bar's line
    try:
        os.write(2, f"{start}{line}\n".encode())
    finally:
        os._exit(code)


def _complete(p: argparse.ArgumentParser) -> None:
    """Shell completion through argcomplete when it is installed (the ``completion`` extra)
    and the shell asked for it; otherwise nothing happens."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(p)


def main(argv: Sequence[str] | None = None) -> int:
    from exactmem.core import outputs

    outputs.new_ledger()
    # the console script and `python -m exactmem` (no argv given): a process that ends with its
    # command exits at once on SIGINT or SIGTERM, saying what was kept (_exit_now), from the
    # first moment; an ignored SIGINT (a shell's background job) stays ignored
    previous = keyboard = None
    if argv is None:
        _install(signal.SIGTERM, _exit_now)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            _install(signal.SIGINT, _exit_now)
    p = parser()
    _complete(p)
    args = p.parse_args(argv)
    if "jobs" in vars(args) and args.jobs is None:
        args.jobs = default_jobs()  # the cores idle now, as the command starts
    sys.set_int_max_str_digits(0)
    from exactmem.runtime import jit  # (numba is not imported here)

    was_quiet = jit.quiet(False)
    jit.quiet(was_quiet or getattr(args, "quiet", False))  # --quiet: no compile notices either
    # the console script and `python -m exactmem` (no argv given): a process that ends with its
    # command; main([...]) called in a longer-lived process (tests, scripts) does not freeze
    was_freezing = jit.freeze_after_import(argv is None)
    if argv is not None:
        # main([...]) in a longer-lived process: SIGTERM raises as Ctrl-C does, so the atomic
        # writer removes its temporary file and the caller goes on; restored afterwards
        previous = _install(signal.SIGTERM, _terminate)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            keyboard = _install(signal.SIGINT, _interrupt)
    guards = _ClosedPipeGuard.install()
    try:
        with _limits(args):
            code = args.func(args)
        _ClosedPipeGuard.flush_all()  # here, not at exit: a late EPIPE keeps the code
        return code
    except ExactmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"interrupted: {outputs.kept()}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"terminated: {outputs.kept()}", file=sys.stderr)
        return EXIT_TERMINATED
    except MemoryError:
        # a file that asks for more memory than the machine has is bad input (exit 2), named
        # with the limits that bound it — never an internal error
        print(
            "error: out of memory: the input needs more memory than is available; lower "
            "--max-value-bits (the largest number an evaluation may produce) or the other "
            "input limits (exactmem --help lists them), or give the process more memory",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except BrokenPipeError:  # a write that bypassed the guards (a stream's raw buffer)
        _ClosedPipeGuard.silence(sys.stdout)
        return getattr(args, "pending_exit", EXIT_INTERNAL)
    except Exception as exc:  # noqa: BLE001 - the contract: internal errors exit 3
        if os.environ.get("EXACTMEM_DEBUG"):
            raise
        print(
            f"internal error: {type(exc).__name__}: {exc} (set EXACTMEM_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        _ClosedPipeGuard.remove(guards)
        jit.quiet(was_quiet)
        jit.freeze_after_import(was_freezing)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if keyboard is not None:
            signal.signal(signal.SIGINT, keyboard)


class _ClosedPipeGuard:
    """``sys.stdout`` or ``sys.stderr`` whose reader may leave early (``exactmem show CERT |
    head -1``): the write or flush that meets the closed pipe points the descriptor at
    /dev/null and the command goes on, so it ends with its own exit code — the verdict's —
    whichever write met the pipe, even the flush at the end (``show | head -1`` once exited 3
    when the exception escaped before ``show`` chose its code)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self.silence(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self.silence(self._stream)
        except ValueError:  # closed by the command itself
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    @staticmethod
    def silence(stream) -> None:
        """Point ``stream``'s descriptor at /dev/null: what it still buffers, and every later
        write, goes nowhere (the reader has gone)."""
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)

    @classmethod
    def install(cls) -> tuple:
        """Guard stdout and stderr; returns what :meth:`remove` puts back."""
        saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = cls(sys.stdout), cls(sys.stderr)
        return saved

    @staticmethod
    def flush_all() -> None:
        """Flush both guarded streams (a closed pipe met here is silenced like any other)."""
        for guarded in (sys.stdout, sys.stderr):
            if isinstance(guarded, _ClosedPipeGuard):
                guarded.flush()

    @classmethod
    def remove(cls, saved: tuple) -> None:
        cls.flush_all()
        if isinstance(sys.stdout, cls):
            sys.stdout = saved[0]
        if isinstance(sys.stderr, cls):
            sys.stderr = saved[1]


def _install(signum: int, handler):
    """Install ``handler``; returns the handler to restore, or None off the main thread (where
    ``signal.signal`` is not allowed: the default stays)."""
    previous = signal.getsignal(signum)
    try:
        signal.signal(signum, handler)
    except ValueError:
        return None
    # None: a handler not installed from Python; the default is the closest restorable one
    return signal.SIG_DFL if previous is None else previous
