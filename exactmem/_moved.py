"""The module paths of the release before the package was re-housed, kept for one release.

Each old path (``exactmem.model``, ``exactmem.certify``, …) still imports, as a module that
forwards every attribute to the module's new home and warns (:class:`DeprecationWarning`) once,
naming the new path. The table below is the whole list; the old paths go in the next release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

REMOVED_IN = "0.3"

# old path (under exactmem.) → new path(s) (under exactmem.; a module split in two names both)
MOVED = {
    "model": "core.model",
    "exact": "core.exact",
    "exact_arrays": "core.exact_arrays",
    "weight_rows": "core.weight_rows",
    "balls": "core.balls",
    "errors": "core.errors",
    "limits": "core.limits",
    "wording": "core.wording",
    "formula": "core.formula",
    "bounds": "core.bounds",
    "json_input": "core.json_input",
    "outputs": "core.outputs",
    "progress": "runtime.progress",
    "gcpause": "runtime.gcpause",
    "memory": "runtime.memory",
    "parallel": "runtime.parallel",
    "jit": "runtime.jit",
    "data": "datasets.dataset files.dataset_files",
    "dataset_arrays": "datasets.vocab_arrays",
    "token_rows": "datasets.token_rows",
    "sequences": "datasets.sequences",
    "targets": "datasets.targets",
    "text": "datasets.text",
    "canonical": "datasets.canonical",
    "mt_draws": "datasets.mt_draws",
    "attention_data": "datasets.attention_data",
    "separation": "datasets.separation",
    "assumptions": "datasets.assumptions",
    "io": "files.model_files files.model_json",
    "container": "files.container",
    "schemas": "files.schemas",
    "safetensors_io": "checkpoints.safetensors_io",
    "architectures": "checkpoints.architectures checkpoints.tensors",
    "checkpoint_files": "checkpoints.checkpoint_files",
    "gpt_import": "checkpoints.gpt_import",
    "mha_import": "checkpoints.mha_import",
    "certify": "checks.certify",
    "verify": "checks.certificate checks.memorizer",
    "verify_attention": "checks.attention",
    "verify_margins": "checks.margins",
    "verify_kim23": "checks.measures.kim23",
    "verify_ks24": "checks.measures.ks24 checks.seq2seq_balls",
    "verify_ks25": "checks.measures.ks25",
    "verify_madden24": "checks.measures.madden24",
    "folds": "checks.folds",
    "mixtures": "checks.mixtures",
    "dataflow": "checks.dataflow",
    "rank_one": "checks.rank_one",
    "lower_bounds": "checks.lower_bounds",
    "bound_checks": "checks.bound_checks",
    "reference_logits": "checks.reference_logits",
    "certificates": "checks.recheck",
    "checklist": "checks.checklist",
    "registry": "checks.registry",
    "distributed": "checks.distributed",
    "mechanisms": "checks.mechanisms",
    "circuit": "constructions.circuit",
    "gadgets": "constructions.gadgets",
    "options": "plugins.options checks.build_options",
    "proofs": "claims.proofs",
    "generators": "claims.generators",
    "testing": "claims.testing",
    "pytest_plugin": "claims.pytest_plugin",
    "selftest": "claims.selftest",
    "tracing": "reports.tracing",
    "explain": "reports.explain",
    "plot": "reports.plot",
    "plot_trace": "reports.plot_trace",
    "recite": "reports.recite",
    "field": "reports.field",
    "cli": "commands.main commands.parser",
    "suggest": "commands.suggest",
    "mechanisms.dana25": "checks.mechanisms.dana25",
    "mechanisms.kim23": "checks.mechanisms.kim23",
    "mechanisms.ks24": "checks.mechanisms.ks24",
    "mechanisms.ks25": "checks.mechanisms.ks25",
    "mechanisms.lower_bounds": "checks.mechanisms.lower_bounds",
    "mechanisms.madden24": "checks.mechanisms.madden24",
    "mechanisms.mahdavi24": "checks.mechanisms.mahdavi24",
    "mechanisms.resources": "checks.mechanisms.resources",
    "mechanisms.vys": "checks.mechanisms.vys",
}


def _outside_importlib() -> int:
    """The stacklevel of the first frame that is neither importlib's nor this module's: the
    warning is reported where the user's code imports the old path (Python only shows a
    DeprecationWarning attributed to the user's own code)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib")
        or frame.f_code.co_filename == __file__
    ):
        frame = frame.f_back
        level += 1
    return level


class _Forward(types.ModuleType):
    """An old path: every attribute is read from the modules it was split into, in order."""

    __targets__: tuple[str, ...]

    def __getattr__(self, name: str) -> object:
        for target in self.__targets__:
            module = importlib.import_module(target)
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted({n for t in self.__targets__ for n in dir(importlib.import_module(t))})


class _Loader(importlib.abc.Loader):
    def __init__(self, targets: tuple[str, ...]) -> None:
        self.targets = targets

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Forward(spec.name)
        module.__targets__ = self.targets
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        if hasattr(importlib.import_module(self.targets[0]), "__path__"):
            module.__path__ = []  # a package: its old submodule paths are found by the finder
        warnings.warn(
            f"{module.__name__} has moved to {' and '.join(self.targets)}; the old path is "
            f"removed in exactmem {REMOVED_IN}",
            DeprecationWarning,
            stacklevel=_outside_importlib(),
        )


class OldPaths(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED` (and nothing else)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, rest = fullname.partition(".")
        new = MOVED.get(rest) if prefix == "exactmem" else None
        if new is None:
            return None
        targets = tuple("exactmem." + t for t in new.split())
        return importlib.machinery.ModuleSpec(fullname, _Loader(targets))


def install() -> None:
    """Put the finder first on :data:`sys.meta_path`, once."""
    if not any(isinstance(f, OldPaths) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPaths())
