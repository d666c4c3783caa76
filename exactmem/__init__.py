"""exactmem: build the networks of Transformer memorization theorems, run them exactly, and
certify what the theorems promise.

The public API, in the order of a session (each name is documented where it is defined):

* datasets: :class:`Dataset` (with :meth:`Dataset.from_tokens`, :meth:`Dataset.from_text`
  and :meth:`Dataset.from_points`), :func:`load_dataset`, :func:`save_dataset`;
* models: :func:`build` (runs an untrusted construction), :func:`run` (exact outputs),
  :func:`load_model`, :func:`save_model`, :class:`Transformer`;
* a look inside: :func:`trace` (every stream, probe, attention score and pattern, exact);
* verdicts: :func:`certify` (the trusted core: ``exactmem.certify(model, dataset,
  construction=NAME, tolerance=Q)``), which returns a :class:`Certificate`: the verdict and
  the :class:`Check` results it rests on; :func:`recheck` re-derives a certificate file from
  the model and dataset files it names and lists every difference (a :class:`Recheck`);
* errors: :class:`InputError` (bad input, exit code 2), :class:`InconclusiveError` (exact
  arithmetic cannot decide, exit code 4), both :class:`ExactmemError`.

``import exactmem`` loads none of them: each is imported on first use (PEP 562), so the
command line's ``--help`` and the import itself stay fast.
"""

import importlib
import sys
import types

from exactmem import _moved
from exactmem.core.version import __version__

_moved.install()  # the old module paths of the release before, each with a DeprecationWarning

# name → module that defines it; resolved on first access by __getattr__
_LAZY = {
    "Dataset": "exactmem.datasets.dataset",
    "load_dataset": "exactmem.files.dataset_files",
    "save_dataset": "exactmem.files.dataset_files",
    "Transformer": "exactmem.core.model",
    "Certificate": "exactmem.checks.certificate",
    "Check": "exactmem.checks.certificate",
    "build": "exactmem.api",
    "run": "exactmem.api",
    "load_model": "exactmem.api",
    "import_model": "exactmem.api",
    "recheck": "exactmem.checks.recheck",
    "Recheck": "exactmem.checks.recheck",
    "save_model": "exactmem.api",
    "trace": "exactmem.reports.tracing",
    "ExactmemError": "exactmem.core.errors",
    "InputError": "exactmem.core.errors",
    "InconclusiveError": "exactmem.core.errors",
}

__all__ = [
    "Certificate",
    "Check",
    "Dataset",
    "ExactmemError",
    "InconclusiveError",
    "InputError",
    "Transformer",
    "__version__",
    "build",
    "certify",
    "import_model",
    "load_dataset",
    "load_model",
    "recheck",
    "Recheck",
    "run",
    "save_dataset",
    "save_model",
    "trace",
]

TYPE_CHECKING = False  # mypy reads this name as typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from exactmem.api import build, import_model, load_model, run, save_model
    from exactmem.checks.certificate import Certificate, Check
    from exactmem.checks.certify import certify
    from exactmem.checks.recheck import Recheck, recheck
    from exactmem.core.errors import ExactmemError, InconclusiveError, InputError
    from exactmem.core.model import Transformer
    from exactmem.datasets.dataset import Dataset
    from exactmem.files.dataset_files import load_dataset, save_dataset
    from exactmem.reports.tracing import trace


def __getattr__(name: str) -> object:
    if name == "certify":
        # the trusted module itself, made callable (_CallableCertify): ``exactmem.certify(...)``
        # and ``exactmem.certify.Criteria`` both read as they always did
        trusted = importlib.import_module("exactmem.checks.certify")
        trusted.__class__ = _CallableCertify
        globals()["certify"] = trusted
        return trusted
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'exactmem' has no attribute {name!r}")
    # importlib, not an import statement: the trusted core imports this package (for
    # __version__), and must not appear to import the constructions through it
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _CallableCertify(types.ModuleType):
    """``exactmem.certify`` is both the trusted module and, called, its ``certify`` function:
    ``exactmem.certify(model, dataset, construction=NAME)`` is
    ``exactmem.checks.certify.certify(model, dataset, construction=NAME)``."""

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.certify(*args, **kwargs)


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        # The import system binds a loaded submodule on its package by setattr; a function
        # named like the module would be overwritten by it, so the module is made callable.
        if name == "certify" and isinstance(value, types.ModuleType):
            # the old path's forwarding module is not bound over the callable trusted module
            if isinstance(value, _moved._Forward):
                return
            value.__class__ = _CallableCertify
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
