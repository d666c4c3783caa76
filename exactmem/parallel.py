"""How the fast evaluator's kernel threads wait, chosen once before numba is imported.

numba's OpenMP layer (GNU libgomp) lets idle threads spin for a while before they sleep: on a
machine whose cores are busy with other work the spinning threads take the cores the working
ones need, and the default ``--jobs`` (all cores) ran 2–3× slower than one job. Threads that
sleep while they wait (``OMP_WAIT_POLICY=passive``) cost nothing when idle. Both settings are
read once, when numba loads its threading layer, so they are set just before numba is
imported (:mod:`exactmem.jit`), and only where the user has not set them: the user's
environment wins.
"""

from __future__ import annotations

import os

__all__ = ["THREADING", "configure", "default_jobs"]

THREADING = {
    "OMP_WAIT_POLICY": "passive",
}
"""The environment the kernels run under unless the user's own environment says otherwise."""


def configure() -> None:
    """Set :data:`THREADING` in the environment where it is unset (idempotent; effective only
    before numba's threading layer is loaded, which the package does lazily)."""
    for name, value in THREADING.items():
        os.environ.setdefault(name, value)


def default_jobs() -> int:
    """The default ``--jobs``: the cores this process may run on that other work leaves idle,
    at least one. Other work is the larger of the one-minute load average and the processes
    runnable right now besides this one (Linux's ``/proc/loadavg``; the average lags a
    minute behind a process that just started).

    A parallel kernel waits for its slowest thread: a thread sharing its core with another
    busy process makes every kernel wait for it, so on a loaded machine one job is the
    faster choice, and on an idle one all cores are."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, cores - round(_busy())))


def _busy() -> float:
    try:
        with open("/proc/loadavg") as f:
            fields = f.read().split()
        return max(float(fields[0]), int(fields[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this system
        return 0.0
