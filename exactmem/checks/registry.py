"""The installed constructions: the built-in ones (always :mod:`exactmem.plugins`, imported
directly, whatever any distribution's metadata says) and every third-party
:class:`~exactmem.checks.checklist.Construction` registered in the ``exactmem.constructions``
entry-point group.

A package registers one in its ``pyproject.toml``::

    [project.entry-points."exactmem.constructions"]
    mine = "my_package.plugin:construction"

where ``construction`` is a :class:`~exactmem.checks.checklist.Construction` (or a function of no
arguments returning one). A plugin runs with the verifier's full authority once imported, so a
plugin's module is imported only when its own name is demanded (:func:`get`, :func:`find`) or
when a command lists every construction (:func:`constructions`); a built-in name never imports
third-party code. A plugin that fails to import or to register is named in a warning and
skipped. An entry point claiming a built-in's name is refused with a warning, so a plugin can
never replace — and so loosen — a built-in checklist.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import replace
from functools import cache
from importlib.metadata import EntryPoint, entry_points

from exactmem.checks.checklist import Construction

__all__ = [
    "GROUP",
    "PluginWarning",
    "constructions",
    "find",
    "get",
    "loaded",
    "names",
]

GROUP = "exactmem.constructions"
DISTRIBUTION = "exactmem"

BUILTIN = (
    "vys",
    "ks25-next-token",
    "ks25-seq2seq",
    "ks25-token-ids",
    "ks25-deep-sets",
    "ks25-bit-budget",
    "mahdavi24",
    "dana25",
    "kim23",
    "ks24",
    "madden24",
)
"""The built-in constructions, in the order they are listed (registered as entry points of the
``exactmem`` distribution, like any plugin's)."""


class PluginWarning(UserWarning):
    """A plugin construction could not be registered (named in the message)."""


def _builtin_value(name: str) -> str:
    return f"exactmem.plugins.{name.replace('-', '_')}:construction"


def _check(obj: object, name: str, value: str) -> Construction:
    if callable(obj) and not isinstance(obj, Construction):
        obj = obj()
    if not isinstance(obj, Construction):
        raise TypeError(f"{value} is a {type(obj).__name__}, not an exactmem Construction")
    if obj.name != name:
        raise ValueError(f"entry point {name!r} registers a construction named {obj.name!r}")
    return obj


@cache
def _builtin(name: str) -> Construction:
    """A built-in construction, from its own module in this package (never from metadata)."""
    from exactmem.core.version import __version__

    module = importlib.import_module(f"exactmem.plugins.{name.replace('-', '_')}")
    obj = _check(module.construction, name, _builtin_value(name))
    return replace(obj, package=DISTRIBUTION, version=__version__)


def _package(ep: EntryPoint) -> tuple[str, str]:
    if ep.dist is None:
        return "?", ""
    return ep.dist.name, ep.dist.version


@cache
def _plugin_entry_points() -> dict[str, tuple[EntryPoint, ...]]:
    """The third-party entry points by name, none loaded. One claiming a built-in's name is
    refused with a warning (our own declaration of a built-in, pointing at our module, is
    skipped silently: the built-ins are registered directly)."""
    found: dict[str, list[EntryPoint]] = {}
    seen: set[tuple[str, str]] = set()
    for ep in entry_points(group=GROUP):
        if (ep.name, ep.value) in seen:  # one distribution found twice on sys.path
            continue
        seen.add((ep.name, ep.value))
        if ep.name in BUILTIN:
            if ep.value != _builtin_value(ep.name):
                package, _ = _package(ep)
                warnings.warn(
                    f"plugin construction {ep.name!r} from package {package!r} ({ep.value}) "
                    f"refused: {ep.name!r} is a built-in construction of exactmem",
                    PluginWarning,
                    stacklevel=3,
                )
            continue
        found.setdefault(ep.name, []).append(ep)
    return {name: tuple(eps) for name, eps in sorted(found.items())}


_PLUGINS: dict[str, Construction | None] = {}


def _plugin(name: str) -> Construction | None:
    """The third-party construction ``name``: its entry point alone is imported (None when no
    entry point has the name, or it failed — named in a warning)."""
    if name in _PLUGINS:
        return _PLUGINS[name]
    eps = _plugin_entry_points().get(name, ())
    result = None
    for i, ep in enumerate(eps):
        package, version = _package(ep)
        if i > 0:
            warnings.warn(
                f"plugin construction {name!r} from package {package!r} refused: the name is "
                f"already registered by {_package(eps[0])[0]!r}",
                PluginWarning,
                stacklevel=3,
            )
            continue
        try:
            result = replace(_check(ep.load(), name, ep.value), package=package, version=version)
        except Exception as exc:  # a broken plugin never breaks the others
            warnings.warn(
                f"plugin construction {name!r} from package {package!r} ({ep.value}) could "
                f"not be registered: {type(exc).__name__}: {exc}",
                PluginWarning,
                stacklevel=3,
            )
    _PLUGINS[name] = result
    return result


_KNOWN: dict[str, Construction] = {}
"""The constructions loaded so far (the dict :func:`constructions` returns: a test may register
one in it, as ``monkeypatch.setitem(registry.constructions(), name, c)``)."""


def names() -> tuple[str, ...]:
    """Every construction's name — the built-ins first, then the plugins' in order — without
    importing any plugin (a plugin that fails to load is named here, refused by :func:`get`)."""
    listed = BUILTIN + tuple(_plugin_entry_points())
    return listed + tuple(n for n in _KNOWN if n not in listed)


def find(name: str) -> Construction | None:
    """The construction ``name``, None when none is registered; a built-in never imports
    third-party code, a plugin's name imports that plugin alone."""
    if name in _KNOWN:
        return _KNOWN[name]
    found = _builtin(name) if name in BUILTIN else _plugin(name)
    if found is not None:
        _KNOWN[name] = found
    return found


def loaded() -> dict[str, Construction]:
    """The built-ins, in their order, then the plugins imported so far (no plugin is
    imported)."""
    for name in BUILTIN:
        find(name)
    ordered = [n for n in BUILTIN if n in _KNOWN] + [n for n in _KNOWN if n not in BUILTIN]
    return {n: _KNOWN[n] for n in ordered}


def constructions() -> dict[str, Construction]:
    """Every installed construction by name, for the commands that list them all: imports
    every plugin. The built-ins first, then the plugins in the order of their names."""
    for name in (*BUILTIN, *_plugin_entry_points()):
        find(name)
    listed = [n for n in (*BUILTIN, *_plugin_entry_points()) if n in _KNOWN]
    ordered = {n: _KNOWN[n] for n in (*listed, *(n for n in _KNOWN if n not in listed))}
    _KNOWN.clear()
    _KNOWN.update(ordered)
    return _KNOWN


def get(name: str) -> Construction:
    """The construction registered as ``name`` (KeyError naming the known ones); see
    :func:`find`."""
    found = find(name)
    if found is None:
        raise KeyError(f"unknown construction {name!r}; known: {', '.join(names())}")
    return found


def cache_clear() -> None:
    """Forget the entry points seen and the plugins loaded (tests that install one)."""
    _plugin_entry_points.cache_clear()
    _PLUGINS.clear()
    _KNOWN.clear()


constructions.cache_clear = cache_clear  # type: ignore[attr-defined]  # the earlier API
