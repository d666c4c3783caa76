"""How the fast evaluator's kernel threads wait, chosen once before numba is imported.

numba's OpenMP layer (GNU libgomp) lets idle threads spin for a while before they sleep: on a
machine whose cores are busy with other work the spinning threads take the cores the working
ones need, and the default ``--jobs`` (all cores) ran 2–3× slower than one job. Threads that
sleep while they wait (``OMP_WAIT_POLICY=passive``) cost nothing when idle. Both settings are
read once, when numba loads its threading layer, so they are set here, on import of the
package, and only where the user has not set them: the user's environment wins.
"""

from __future__ import annotations

import os

__all__ = ["THREADING", "configure"]

THREADING = {
    "OMP_WAIT_POLICY": "passive",
}
"""The environment the kernels run under unless the user's own environment says otherwise."""


def configure() -> None:
    """Set :data:`THREADING` in the environment where it is unset (idempotent; effective only
    before numba's threading layer is loaded, which the package does lazily)."""
    for name, value in THREADING.items():
        os.environ.setdefault(name, value)
