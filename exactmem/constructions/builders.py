"""The built-in constructions' builders as the registry calls them
(:attr:`exactmem.checks.checklist.Construction.builder`): ``function(dataset, options, progress)``
returning the model. Untrusted code, imported only by ``build`` and ``selftest``."""

from __future__ import annotations

from collections.abc import Callable

from exactmem.core.model import Transformer
from exactmem.datasets.dataset import Dataset

Progress = Callable[..., None] | None


def vys(dataset: Dataset, options: dict, progress: Progress = None) -> Transformer:
    """Vardi, Yehudai & Shamir 2022, Theorem 3.1 (:mod:`exactmem.constructions.vys`)."""
    from exactmem.constructions import vys as construction

    return construction.build(dataset, options, progress=progress)[0]


def _ks25(variant: str) -> Callable[[Dataset, dict, Progress], Transformer]:
    def build(dataset: Dataset, options: dict, progress: Progress = None) -> Transformer:
        from exactmem.constructions import ks25

        return ks25.build(dataset, options, variant, progress=progress)[0]

    build.__doc__ = f"Kajitsuka & Sato 2025, {variant} (:mod:`exactmem.constructions.ks25`)."
    return build


ks25_next_token = _ks25("ks25-next-token")
ks25_seq2seq = _ks25("ks25-seq2seq")
ks25_token_ids = _ks25("ks25-token-ids")
ks25_deep_sets = _ks25("ks25-deep-sets")
ks25_bit_budget = _ks25("ks25-bit-budget")


def mahdavi24(dataset: Dataset, options: dict, progress: Progress = None) -> Transformer:
    """Mahdavi, Liao & Thrampoulidis 2024 (:mod:`exactmem.constructions.mahdavi24`)."""
    from exactmem.constructions import mahdavi24 as construction

    return construction.build(dataset, options, progress=progress)[0]


def dana25(dataset: Dataset, options: dict, progress: Progress = None) -> Transformer:
    """Dana, Pydi & Chevaleyre 2025 (:mod:`exactmem.constructions.dana25`)."""
    from exactmem.constructions import dana25 as construction

    return construction.build(dataset, options, progress=progress)[0]


def kim23(dataset: Dataset, options: dict, progress: Progress = None) -> Transformer:
    """Kim, Kim & Mozafari 2023 (:mod:`exactmem.constructions.kim23`)."""
    from exactmem.constructions import kim23 as construction

    return construction.build(dataset, options, progress=progress)[0]


def ks24(dataset: Dataset, options: dict, progress: Progress = None) -> Transformer:
    """Kajitsuka & Sato 2024 (:mod:`exactmem.constructions.ks24`)."""
    from exactmem.constructions import ks24 as construction

    return construction.build(dataset, options, progress=progress)[0]


def madden24(dataset: Dataset, options: dict, progress: Progress = None) -> Transformer:
    """Madden, Fox & Thrampoulidis 2024 (:mod:`exactmem.constructions.madden24`)."""
    from exactmem.constructions import madden24 as construction

    return construction.build(dataset, options, progress=progress)[0]
