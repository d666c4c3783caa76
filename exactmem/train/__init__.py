"""Training small models of the papers' experiments with PyTorch (the optional ``[train]``
extra), then certifying each trained model exactly: :mod:`exactmem.train.nets` holds the
networks (each saved in the tensor layout of :mod:`exactmem.checkpoints.architectures`),
:mod:`exactmem.train.experiments` the datasets, grids and the results table.

PyTorch is imported only here, lazily: importing, certifying and every other command run
without it."""

from __future__ import annotations

from exactmem.core.errors import InputError

__all__ = ["require_torch"]

EXTRA = "pip install 'exactmem[train]'"


def require_torch():
    """The ``torch`` module, or an :class:`InputError` (exit 2) naming the ``[train]`` extra."""
    try:
        import torch
    except ImportError:
        raise InputError(
            f"training needs PyTorch, which is not installed: {EXTRA} "
            "(the optional [train] extra: torch on CPU and safetensors)"
        ) from None
    try:
        import safetensors.numpy  # noqa: F401
    except ImportError:
        raise InputError(
            f"training writes checkpoints with safetensors, which is not installed: {EXTRA}"
        ) from None
    return torch
