"""The compiled kernels, each family imported when first needed (numba takes ~0.5 s to import,
and a kernel is compiled — or loaded from the on-disk cache — on its first call), and
:func:`warm`, which calls every kernel once."""

from __future__ import annotations

from types import ModuleType

__all__ = ["fold_kernel", "layer_kernel", "limb_kernel", "row_kernel", "run_kernel", "step_kernel"]
__all__ += ["warm"]


def row_kernel() -> ModuleType:
    """Row units, read-outs, refinement (:mod:`exactmem.evaluate.fast.row_kernel`)."""
    from exactmem.evaluate.fast import row_kernel

    return row_kernel


def limb_kernel() -> ModuleType:
    """Limb arithmetic (:mod:`exactmem.evaluate.fast.limb_kernel`)."""
    from exactmem.evaluate.fast import limb_kernel

    return limb_kernel


def layer_kernel() -> ModuleType:
    """One layer's shared units (:mod:`exactmem.evaluate.fast.layer_kernel`)."""
    from exactmem.evaluate.fast import layer_kernel

    return layer_kernel


def run_kernel() -> ModuleType:
    """Runs of class-shared layers (:mod:`exactmem.evaluate.fast.run_kernel`)."""
    from exactmem.evaluate.fast import run_kernel

    return run_kernel


def step_kernel() -> ModuleType:
    """Runs of step layers in key order (:mod:`exactmem.evaluate.fast.step_kernel`)."""
    from exactmem.evaluate.fast import step_kernel

    return step_kernel


def fold_kernel() -> ModuleType:
    """The verifier's step and match folds (:mod:`exactmem.evaluate.fast.fold_kernel`)."""
    from exactmem.evaluate.fast import fold_kernel

    return fold_kernel


def warm() -> None:
    """Call every kernel once on tiny inputs: loads them from numba's on-disk cache, or compiles
    and caches them on a machine that has none (the first-run cost, see docs/fast.md)."""
    for family in (fold_kernel, row_kernel, limb_kernel, layer_kernel, run_kernel, step_kernel):
        family().warm()
