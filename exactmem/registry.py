"""The installed constructions: every :class:`~exactmem.checklist.Construction` registered in
the ``exactmem.constructions`` entry-point group, the built-in ones included.

A package registers one in its ``pyproject.toml``::

    [project.entry-points."exactmem.constructions"]
    mine = "my_package.plugin:construction"

where ``construction`` is a :class:`~exactmem.checklist.Construction` (or a function of no
arguments returning one). A plugin that fails to import or to register is named in a warning
and skipped; it never breaks the others or the built-ins. Names are unique: a plugin that
claims a name already registered (a built-in's above all) is refused with a warning, so a
plugin can never replace — and so loosen — another's checklist.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from functools import cache
from importlib.metadata import EntryPoint, entry_points

from exactmem.checklist import Construction

__all__ = ["GROUP", "PluginWarning", "constructions", "get", "names"]

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


def _builtin_entry_points() -> list[EntryPoint]:
    """The built-ins as entry points of their own, for a checkout that is not installed (no
    distribution metadata): the same objects the installed metadata names."""
    return [EntryPoint(name, _builtin_value(name), GROUP) for name in BUILTIN]


def _load(ep: EntryPoint) -> Construction:
    obj = ep.load()
    if callable(obj) and not isinstance(obj, Construction):
        obj = obj()
    if not isinstance(obj, Construction):
        raise TypeError(f"{ep.value} is a {type(obj).__name__}, not an exactmem Construction")
    if obj.name != ep.name:
        raise ValueError(f"entry point {ep.name!r} registers a construction named {obj.name!r}")
    return obj


@cache
def constructions() -> dict[str, Construction]:
    """Every installed construction by name: the built-ins first, then the plugins in the
    order of their names."""
    found = list(entry_points(group=GROUP))
    ours = [ep for ep in found if ep.dist is not None and ep.dist.name == DISTRIBUTION]
    if not ours:  # a checkout run without installing: the same built-ins, found directly
        found = _builtin_entry_points() + found
    order = {name: i for i, name in enumerate(BUILTIN)}

    def rank(ep: EntryPoint) -> tuple:
        # a built-in is our own module under its own name, whoever declares it: a plugin can
        # never take a built-in's place by sorting before it
        builtin = ep.name in order and ep.value == _builtin_value(ep.name)
        return (0, order[ep.name], "") if builtin else (1, 0, ep.name)

    registry: dict[str, Construction] = {}
    seen: set[tuple[str, str]] = set()
    for ep in sorted(found, key=rank):
        if (ep.name, ep.value) in seen:  # one distribution found twice on sys.path
            continue
        seen.add((ep.name, ep.value))
        package = ep.dist.name if ep.dist is not None else DISTRIBUTION
        version = ep.dist.version if ep.dist is not None else ""
        if ep.name in registry:
            warnings.warn(
                f"plugin construction {ep.name!r} from package {package!r} refused: the name is "
                f"already registered by {registry[ep.name].package!r}",
                PluginWarning,
                stacklevel=2,
            )
            continue
        try:
            construction = _load(ep)
        except Exception as exc:  # a broken plugin never breaks the others
            warnings.warn(
                f"plugin construction {ep.name!r} from package {package!r} ({ep.value}) could "
                f"not be registered: {type(exc).__name__}: {exc}",
                PluginWarning,
                stacklevel=2,
            )
            continue
        registry[ep.name] = replace(construction, package=package, version=version)
    return registry


def names() -> tuple[str, ...]:
    return tuple(constructions())


def get(name: str) -> Construction:
    """The construction registered as ``name`` (KeyError naming the known ones)."""
    registry = constructions()
    try:
        return registry[name]
    except KeyError:
        raise KeyError(f"unknown construction {name!r}; known: {', '.join(registry)}") from None
