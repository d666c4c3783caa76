"""Progress on stderr: a bar with percentage and ETA for each phase that reports how far it is
(the layers of an evaluation, the instances of ``check``), an elapsed-time line for a phase that
cannot (a construction's build, a generator), and milestone lines.

The bars are tqdm's. tqdm is a small, dependency-free, maintained library that draws
percentage, rate and ETA itself and imports in a few tens of milliseconds; rich draws the same
bars but brings a whole console renderer (and its markdown and syntax-highlighting dependencies)
for one line of stderr. tqdm is imported only when a bar is first drawn, so ``--help`` and
``--quiet`` runs never load it.

Bars are drawn only when stderr is a terminal: piped or redirected, stderr gets the milestone
lines alone (the phase that starts, the file written), and ``--quiet`` silences both. Nothing
here writes to stdout, so ``--json`` output is the same with or without progress.

A progress reporter is any callable taking a message, as the evaluators and
:func:`exactmem.certify.certify` have always accepted. :func:`tell` reports a fraction done to a
reporter that takes fractions (has a ``fraction`` method, as :class:`Progress` does) and the
plain message to any other, so ``progress=print`` keeps working.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO


def tell(
    progress: Callable[..., Any] | None,
    message: str,
    *,
    phase: str | None = None,
    done: int | None = None,
    total: int | None = None,
) -> None:
    """Report ``message`` to ``progress``; with ``done`` of ``total`` steps of ``phase``, to a
    reporter that takes fractions as that fraction (its bar's percentage and ETA). An empty
    message reaches only a reporter that takes fractions."""
    if progress is None:
        return
    fraction = getattr(progress, "fraction", None)
    if fraction is not None and total and done is not None:
        fraction(phase or message, done, total, message)
    elif message:
        progress(message)


def _columns() -> int:
    """The terminal's width, or 80 where it reports none (a pseudo-terminal of width 0, where
    tqdm would draw nothing)."""
    import shutil

    return shutil.get_terminal_size((80, 24)).columns or 80


class Progress:
    """The CLI's progress reporter: milestone lines (``force=True``) and, on a terminal, a
    tqdm bar per phase; other messages become the bar's note, or a line at most once a
    second when no bar is drawn."""

    def __init__(self, enabled: bool, *, stream: TextIO | None = None, bars: bool | None = None):
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        if bars is None:
            isatty = getattr(self.stream, "isatty", None)
            bars = bool(isatty and isatty())
        self.bars = enabled and bars
        self.start = time.perf_counter()
        self.last = 0.0
        self._bar: Any = None
        self._phase: str | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lines

    def __call__(self, message: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        with self._lock:
            if force:
                self._line(f"[{now - self.start:7.1f}s] {message}")
            elif self._bar is not None:
                self._bar.set_postfix_str(message[:80], refresh=False)
            elif self.bars and now - self.last >= 1.0:
                self.last = now
                self._line(f"[{now - self.start:7.1f}s] {message}")

    def _line(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    # ------------------------------------------------------------------ bars

    def fraction(self, phase: str, done: int, total: int, message: str = "") -> None:
        """``done`` of ``total`` steps of ``phase``: its bar (a new one when the phase
        changes), closed when the phase is complete."""
        if not self.bars:
            return
        with self._lock:
            if self._bar is None or self._phase != phase or self._bar.total != total:
                self._close()
                from tqdm import tqdm

                self._bar = tqdm(
                    total=total,
                    desc=phase[:40],
                    file=self.stream,
                    leave=False,
                    ncols=_columns(),
                    mininterval=0.25,
                    bar_format="{desc}: {percentage:3.0f}%|{bar}| {n}/{total} "
                    "[{elapsed}<{remaining}]{postfix}",
                )
                self._phase = phase
            self._bar.update(max(0, min(done, total) - self._bar.n))
            if done >= total:
                self._close()

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._bar, self._phase = None, None

    def close(self) -> None:
        """Clear any bar still drawn (a phase that stopped early)."""
        with self._lock:
            self._close()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """A phase that cannot say how far it is: on a terminal, its name and the time elapsed,
        redrawn twice a second until the phase ends."""
        if not self.bars:
            yield
            return
        from tqdm import tqdm

        with self._lock:
            self._close()
            bar = tqdm(
                total=None,
                desc=name[:60],
                file=self.stream,
                leave=False,
                ncols=_columns(),
                bar_format="{desc}: {elapsed} elapsed",
            )
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(0.5):
                with self._lock:
                    bar.refresh()

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
            with self._lock:
                bar.close()
