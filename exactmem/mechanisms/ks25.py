"""The mechanisms the Kajitsuka & Sato 2025 checklists (ks25-next-token, ks25-seq2seq,
ks25-token-ids, ks25-deep-sets, ks25-bit-budget) test, each check with its breakers."""

from __future__ import annotations

from collections.abc import Callable

from exactmem.checklist import CheckSpec
from exactmem.data import Dataset

CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "ks25-next-token": (),
    "ks25-seq2seq": (),
    "ks25-token-ids": (),
    "ks25-deep-sets": (),
    "ks25-bit-budget": (),
}

# the small seeded dataset selftest builds the honest model on, per construction
EXAMPLES: dict[str, Callable[[], Dataset]] = {}
