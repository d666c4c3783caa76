"""How the fast evaluator's kernel threads wait, chosen once before numba is imported.

numba's OpenMP layer (GNU libgomp) lets idle threads spin for a while before they sleep: on a
machine whose cores are busy with other work the spinning threads take the cores the working
ones need, and the default ``--jobs`` (all cores) ran 2–3× slower than one job. Threads that
sleep while they wait (``OMP_WAIT_POLICY=passive``) cost nothing when idle. Both settings are
read once, when numba loads its threading layer, so they are set just before numba is
imported (:mod:`exactmem.runtime.jit`), and only where the user has not set them: the user's
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
    at least one. Other work is the processes runnable right now besides this one (Linux's
    ``/proc/loadavg``, the median of three looks 5 ms apart). Not the load average: it lags a
    minute behind, so a ``verify`` started right after the user's own ``build`` would see
    that finished process as a busy core.

    A parallel kernel waits for its slowest thread: a thread sharing its core with another
    busy process makes every kernel wait for it, so on a loaded machine one job is the
    faster choice, and on an idle one all cores are."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, cores - round(_busy())))


def _busy() -> float:
    """Processes runnable now besides this one (the one-minute load average where the
    instantaneous count is not available)."""
    import time

    try:
        looks = []
        for k in range(3):
            if k:
                time.sleep(0.005)
            looks.append(int(_loadavg().split()[3].split("/")[0]) - 1)
        return float(sorted(looks)[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this system
        return 0.0


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return f.read()
