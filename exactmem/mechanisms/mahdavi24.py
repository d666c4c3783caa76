"""The mechanisms the mahdavi24 checklist test, each check with its breakers."""

from __future__ import annotations

from collections.abc import Callable

from exactmem.checklist import CheckSpec
from exactmem.data import Dataset

CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "mahdavi24": (),
}

# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {}
