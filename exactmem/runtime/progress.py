"""Progress on stderr: a bar with percentage and ETA for each phase that reports how far it is
(the items a generator draws, through :func:`counter`; the steps of a construction's build,
through :class:`Steps`; the blocks of a file's compression, the layers of an evaluation, the
checks, the instances of ``check``), an elapsed-time line for a phase that cannot (reading or
writing a file in one call), and milestone lines.

The bars are tqdm's. tqdm is a small, dependency-free, maintained library that draws
percentage, rate and ETA itself and imports in a few tens of milliseconds; rich draws the same
bars but brings a whole console renderer (and its markdown and syntax-highlighting dependencies)
for one line of stderr. tqdm is imported only when a bar is first drawn, so ``--help`` and
``--quiet`` runs never load it.

Bars are drawn only when stderr is a terminal: piped or redirected, stderr gets the milestone
lines alone (the phase that starts, the file written), and ``--quiet`` silences both. Nothing
here writes to stdout, so ``--json`` output is the same with or without progress.

A progress reporter is any callable taking a message, as the evaluators and
:func:`exactmem.checks.certify.certify` have always accepted. :func:`tell` reports a fraction done
to a
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
    outer: bool = False,
) -> None:
    """Report ``message`` to ``progress``; with ``done`` of ``total`` steps of ``phase``, to a
    reporter that takes fractions as that fraction (its bar's percentage and ETA). An empty
    message reaches only a reporter that takes fractions."""
    if progress is None:
        return
    fraction = getattr(progress, "fraction", None)
    if fraction is not None and total and done is not None:
        if outer:  # the keyword only where it is used: other reporters need not take it
            fraction(phase or message, done, total, message, outer=True)
        else:
            fraction(phase or message, done, total, message)
    elif message:
        progress(message)


RARE = 100  # a phase of at most this many steps draws every step (a construction's build)


def _columns() -> int:
    """The terminal's width, or 80 where it reports none (a pseudo-terminal of width 0, where
    tqdm would draw nothing)."""
    import shutil

    return shutil.get_terminal_size((80, 24)).columns or 80


def _rows() -> int:
    """The terminal's height, or 24 where it reports none: tqdm takes a height of 0 rows (a
    pseudo-terminal whose size was never set) as −1 and then hides every bar."""
    import shutil

    return shutil.get_terminal_size((80, 24)).lines or 24


def ignore(done: int) -> None:
    """The counter of a phase nobody hears."""


def counter(
    progress: Callable[..., Any] | None, phase: str, total: int, *, reports: int = 200
) -> Callable[[int], None]:
    """A function of ``done`` that tells ``progress`` the fraction ``done / total`` of
    ``phase`` at most about ``reports`` times and always at ``done = total`` (which closes the
    bar): cheap enough to call at every step of a generator's loop. A reporter that takes no
    fractions hears nothing (a line per item would drown the milestones)."""
    if progress is None or getattr(progress, "fraction", None) is None or total < 1:
        return ignore
    stride = max(1, total // reports)
    due = [0]

    def step(done: int) -> None:
        if done >= due[0] or done >= total:
            due[0] = done + stride
            tell(progress, "", phase=phase, done=done, total=total)

    return step


class Steps:
    """The named steps of a phase that can count them (a construction's build): ``step(name)``
    says that the steps before it are done and that ``name`` starts, ``add(k)`` counts steps
    found on the way (another attempt, the parts of a split), ``done()`` ends the phase. A
    reporter that takes fractions draws a bar of the steps with the current one as its note;
    any other reporter hears the step names (``progress=print`` lists them)."""

    def __init__(self, progress: Callable[..., Any] | None, phase: str, total: int):
        self.progress = progress
        self.phase = phase
        self.total = max(1, total)
        self.count = 0  # steps started so far

    def step(self, name: str) -> None:
        if self.count >= self.total:
            self.total = self.count + 1  # a step more than planned: the bar grows
        tell(self.progress, name, phase=self.phase, done=self.count, total=self.total)
        self.count += 1

    def add(self, k: int) -> None:
        self.total += max(0, k)

    def done(self) -> None:
        tell(self.progress, "", phase=self.phase, done=self.total, total=self.total)


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
        self._bar: Any = None  # the current phase's bar
        self._outer: Any = None  # an outer phase's bar, above it
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self._later: str | None = None  # a milestone held until the work reports (later())

    # ------------------------------------------------------------------ lines

    def later(self, message: str) -> None:
        """A milestone line ("verifying on N inputs") held until the work it announces first
        reports (a message or a step) or :meth:`flush` is called; an error raised before that
        (the input checks that open the work) ends the command with no progress line before
        its message."""
        self._later = message

    def flush(self) -> None:
        """Print the milestone :meth:`later` holds, if any."""
        held, self._later = self._later, None
        if held is not None:
            self(held, force=True)

    def __call__(self, message: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        if self._later is not None:
            self.flush()
        now = time.perf_counter()
        with self._lock:
            if force:
                self._line(f"[{now - self.start:7.1f}s] {message}")
            elif self._bar is not None and self._bar.total:
                self._bar.set_postfix_str(message[:80], refresh=False)
            elif self._bar is not None or self._outer is not None:
                pass  # a bar shows that work goes on
            elif self.bars and now - self.last >= 1.0:
                self.last = now
                self._line(f"[{now - self.start:7.1f}s] {message}")

    def _line(self, text: str) -> None:
        if self._bar is not None or self._outer is not None:
            from tqdm import tqdm

            tqdm.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    # ------------------------------------------------------------------ bars

    def fraction(
        self, phase: str, done: int, total: int, message: str = "", *, outer: bool = False
    ) -> None:
        """``done`` of ``total`` steps of ``phase``: its bar (a new one when the phase
        changes), closed when the phase is complete. An ``outer`` phase (the instances of
        ``check``) keeps its bar on the first line while the inner phases come and go below."""
        if self._later is not None and self.enabled:
            self.flush()
        if not self.bars:
            return
        with self._lock:
            bar = self._outer if outer else self._bar
            if bar is not None and bar.desc == phase[:40] and bar.total != total and bar.total:
                bar.total = total  # steps found on the way (Steps.add): the same bar, longer
            if bar is None or bar.desc != phase[:40] or bar.total != total:
                self._close(outer)
                bar = self._new(total, phase[:40], outer)
                if outer:
                    self._outer = bar
                else:
                    self._bar = bar
            if message:
                bar.set_postfix_str(message[:80], refresh=False)
            bar.update(max(0, min(done, total) - bar.n))
            if outer or total <= RARE:  # rare steps (instances, a build's): each shown at once
                bar.refresh()
            if done >= total:
                self._close(outer)

    def _new(self, total: int | None, desc: str, outer: bool) -> Any:
        from tqdm import tqdm

        counted = "{percentage:3.0f}%|{bar}| {n}/{total} [{elapsed}<{remaining}]{postfix}"
        bar = tqdm(
            total=total,
            desc=desc,
            file=self.stream,
            leave=False,
            ncols=_columns(),
            nrows=_rows(),
            mininterval=0.25,
            position=0 if outer else int(self._outer is not None),
            bar_format="{desc}: " + (counted if total else "{elapsed} elapsed"),
        )
        self._start_ticker()
        return bar

    def _start_ticker(self) -> None:
        """Redraw the bars twice a second, so that elapsed time and ETA move while a step
        takes long (a construction's build, the checks after an evaluation)."""
        if self._ticker is not None:
            return
        stop = self._stop = threading.Event()

        def tick() -> None:
            while not stop.wait(0.5):
                with self._lock:
                    for bar in (self._outer, self._bar):
                        if bar is not None:
                            bar.refresh()

        self._ticker = threading.Thread(target=tick, daemon=True)
        self._ticker.start()

    def _close(self, outer: bool = False) -> None:
        bar = self._outer if outer else self._bar
        if bar is not None:
            bar.close()
        if outer:
            self._outer = None
        else:
            self._bar = None
        if self._bar is None and self._outer is None and self._ticker is not None:
            self._stop.set()  # no bar left to redraw; the ticker ends at its next wake-up
            self._ticker = None

    def close(self) -> None:
        """Clear every bar still drawn (a phase that stopped early) and stop redrawing."""
        with self._lock:
            self._close()
            self._close(outer=True)

    @contextmanager
    def phase(self, name: str, *, outer: bool = False) -> Iterator[None]:
        """A phase that cannot say how far it is: on a terminal, its name and the time elapsed,
        redrawn twice a second until the phase ends. An ``outer`` one (a whole verification)
        stays on the first line while the phases inside it draw their bars below."""
        if not self.bars:
            yield
            return
        with self._lock:
            self._close(outer)
            bar = self._new(None, name[:60], outer=outer)
            if outer:
                self._outer = bar
            else:
                self._bar = bar
        try:
            yield
        finally:
            with self._lock:
                self._close(outer)
