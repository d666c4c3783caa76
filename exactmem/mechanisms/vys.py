"""The mechanisms the vys checklist test, each check with its breakers."""

from __future__ import annotations

from collections.abc import Callable

from exactmem.checklist import CheckSpec
from exactmem.data import Dataset

CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "vys": (),
}

# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {}
