"""numba as exactmem uses it: one on-disk cache of compiled kernels per user, and a notice on
stderr while a kernel compiles.

Every module that compiles kernels imports ``njit`` and ``prange`` from here, never from numba
itself, so the cache folder is chosen before numba is first imported and reads its
configuration: ``NUMBA_CACHE_DIR`` when it is set, else the user's cache folder
(:func:`cache_dir`, ``~/.cache/exactmem/numba`` on Linux). Each kernel is filed there by
content — its module's name and its source file's hash, not the install location — so every
install of the same code shares one cache (a second virtual environment, a reinstall: nothing
compiles again), whatever the working directory, and a checkout never writes compiled code into
its own tree.

A kernel is compiled on its first call (or loaded from the cache, in milliseconds): a model
that never reaches a kernel does not compile it. While one compiles, a notice says
which, and how long it took, on stderr — never for a kernel loaded from the cache, and never
after :func:`quiet` (``--quiet``). ``exactmem warmup`` compiles them all up front.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = [
    "cache_dir",
    "freeze_after_import",
    "inner",
    "njit",
    "quiet",
    "set_threads",
    "user_cache_root",
]

ENV = "NUMBA_CACHE_DIR"


def user_cache_root() -> Path:
    """The per-user cache folder of this platform (what platformdirs' ``user_cache_dir``
    returns): ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux and other Unixes,
    ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows."""
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return Path(local) if local else Path.home() / "AppData" / "Local"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"


def cache_dir() -> Path:
    """Where compiled kernels are kept: ``NUMBA_CACHE_DIR`` when it is set (numba's own
    setting, honoured as numba does), else ``exactmem/numba`` in the user's cache folder."""
    given = os.environ.get(ENV, "")
    if given:
        return Path(given)
    return user_cache_root() / "exactmem" / "numba"


def _configure() -> None:
    """Point numba at :func:`cache_dir` — through the environment before numba is imported (it
    reads its configuration then, and worker processes inherit it), and through its config
    object when something imported numba first."""
    os.environ[ENV] = str(cache_dir())
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.config.CACHE_DIR = os.environ[ENV]


_quiet = False
_numba: Any = None
compiled: list[tuple[str, float]] = []  # (kernel, seconds) compiled in this process, in order


def quiet(on: bool = True) -> bool:
    """No compile notices from now on (``--quiet``); ``quiet(False)`` brings them back.
    Returns the setting before."""
    global _quiet
    before, _quiet = _quiet, on
    return before


_freeze = False


def freeze_after_import(on: bool = True) -> bool:
    """Once numba is imported, move every object then alive to the garbage collector's
    permanent generation (:func:`gc.freeze`); returns the setting before.

    The command line turns this on (``exactmem …``, ``python -m exactmem …``; not ``main([…])``
    called in-process): its process ends with its command, and what exists when
    the kernels are first needed (the modules, numba's ~10⁵ objects, the model and the
    dataset just read) lives until then. Later collections no longer walk all of it again —
    at N = 10⁴ a warm ``verify`` spent ≈ 0.05 s of its 0.7 s in such passes. Off for the
    API: a frozen object is never collected as part of a reference cycle, which a long
    session may need."""
    global _freeze
    before, _freeze = _freeze, on
    return before


def _load() -> Any:
    """numba, imported on first need (it takes ~0.1–0.2 s, with the cyclic collector paused:
    nothing it makes is garbage yet): after the cache folder is chosen, with the compile
    notice listening."""
    global _numba
    if _numba is None:
        _configure()
        from exactmem.runtime.gcpause import paused_gc
        from exactmem.runtime.parallel import configure as threads_wait_passively

        # before numba loads its threading layer (exactmem.runtime.parallel)
        threads_wait_passively()
        with paused_gc():
            import numba
            from numba.core import event

        event.register("numba:compile", _notice(event.Listener)())
        _numba = numba
        if _freeze:
            gc.freeze()
    return _numba


def _notice(listener: type) -> type:
    """The compile notice, a numba event listener: on stderr, which kernel compiles and how
    long it took; the kernels a kernel calls compile inside it and count as part of it."""

    class Notice(listener):  # type: ignore[misc, valid-type]
        depth = 0
        started = 0.0
        told = False

        def on_start(self, ev: Any) -> None:
            self.depth += 1
            if self.depth > 1:
                return
            self.started = time.perf_counter()
            if not self.told and not _quiet:
                self.told = True
                print(first_notice(), file=sys.stderr, flush=True)

        def on_end(self, ev: Any) -> None:
            self.depth -= 1
            if self.depth > 0:
                return
            func = ev.data["dispatcher"].py_func
            what = f"{func.__module__.rsplit('.', 1)[-1]}.{func.__qualname__}"
            seconds = time.perf_counter() - self.started
            compiled.append((what, seconds))
            if func.__module__.startswith("exactmem."):  # (not a user's or a test's kernel)
                _record_time(what, seconds)
            if not _quiet:
                print(f"exactmem: compiled {what} in {seconds:.1f} s", file=sys.stderr, flush=True)

    return Notice


# What compiling every kernel took on the reference machine (2 cores, loaded, `exactmem warmup`
# into an empty cache: 16 kernels), told before a machine has measured its own.
REFERENCE_SECONDS = 55.0
TIMES_FILE = "compile-times.json"  # in cache_dir(): kernel → seconds, as last measured here


def _recorded_times() -> dict[str, float]:
    """The compile times measured on this machine (by any earlier version), kernel → seconds."""
    import json

    try:
        times = json.loads((cache_dir() / TIMES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(times, dict):
        return {}
    return {k: float(v) for k, v in times.items() if isinstance(v, int | float) and v >= 0}


def _record_time(kernel: str, seconds: float) -> None:
    """Add a measured compile time to the record (a temporary file renamed over the old one, so
    an interrupted write leaves the old record); a record that cannot be written is skipped."""
    import json

    times = _recorded_times()
    times[kernel] = round(seconds, 2)
    target = cache_dir() / TIMES_FILE
    temp = target.with_name(f".{TIMES_FILE}.{os.getpid()}.tmp")
    try:
        temp.write_text(json.dumps(times, indent=0, sort_keys=True))
        os.replace(temp, target)
    except OSError:
        try:
            temp.unlink()
        except OSError:
            pass


def first_notice() -> str:
    """The notice before the first kernel a process compiles — with the content-keyed cache,
    the first run of a new version (or of a kernel no run reached yet) on this machine: what
    happens, how long compiling all of them takes here (as last measured, else on the reference
    machine), where they are kept."""
    from exactmem.core.version import __version__

    times = _recorded_times()
    if times:
        total = f"≈ {sum(times.values()):.0f} s for all {len(times)} kernels, as measured here"
    else:
        total = f"≈ {REFERENCE_SECONDS:.0f} s for all of them on a 2-core machine"
    return (
        f"exactmem: compiling the numba kernels of exactmem {__version__} as they are first "
        f"needed — once per machine for this version, a few seconds each, {total}; a run "
        f"compiles only those it reaches. Kept in {cache_dir()} (`exactmem warmup` compiles all "
        "of them up front)"
    )


def njit(*args: Any, **kwargs: Any) -> Any:
    """numba's ``njit``, cached on disk (``cache=True`` unless given), with numpy's error model
    (``error_model="numpy"`` unless given): an integer division by zero gives 0 instead of
    raising, so no kernel carries a raise branch per division (a part of the first run's compile
    time, see docs/fast.md). No kernel divides by zero (its divisors are chunk counts ≥ 1, step
    weights w > 0 and the non-zero remainders of a gcd loop), so no value changes."""
    # numba gets cache=False and the kernel our own disk cache (:func:`_cached`): numba's would
    # first create a folder named after the install location
    cached = kwargs.pop("cache", True)
    kwargs.setdefault("error_model", "numpy")
    # no C entry point (only a kernel passed as a first-class function value would use it)
    kwargs.setdefault("no_cfunc_wrapper", True)
    made = _load().njit(*args, **kwargs)
    if hasattr(made, "py_func"):  # njit(func): the dispatcher; njit(**options): a decorator
        return _cached(made, cached)
    return lambda func: _cached(made(func), cached)


def _cached(dispatcher: Any, cached: bool) -> Any:
    """``dispatcher`` with exactmem's disk cache (:func:`_light_cache`) when ``cached``, else
    none (numba's NullCache, as numba set it)."""
    if cached:
        dispatcher._cache = _light_cache()(dispatcher.py_func)
    return dispatcher


def _content_folder(py_func: Any, stamp: bytes) -> str:
    """The cache folder of a kernel: its module's name and the SHA-256 of its source file,
    under numba's cache folder (:func:`cache_dir`).

    numba names the folder after the path of the source file's folder, so a second virtual
    environment, or a reinstall elsewhere, of the very same code compiled everything again
    (measured: ``exactmem warmup`` in a fresh venv, 16 kernels, 53 s). Named by content, every
    install of the same release shares the compiled kernels, and two releases side by side do
    not overwrite each other's."""
    folder = f"{py_func.__module__}-{stamp.hex()[:20]}"
    return os.path.join(_load().config.CACHE_DIR, folder)


_LightCache: Any = None


def _light_cache() -> type:
    """numba's on-disk function cache, but loading a kernel initialises only numba's runtime
    (NRT: the allocator a loaded kernel calls) where numba's own loader first refreshes the
    whole target context: it imports and installs every typing and lowering registry (string,
    list, set, random, linalg, datetime, …), 0.08–0.15 s of a 0.8 s `verify` at N = 10⁴,
    which only compiling reads. A kernel that must compile still gets them: numba's compiler
    refreshes the context itself before it types a function."""
    global _LightCache
    if _LightCache is None:
        from numba.core.caching import (
            CompileResultCacheImpl,
            FunctionCache,
            UserProvidedCacheLocator,
        )
        from numba.core.runtime import rtsys

        class ContentLocator(UserProvidedCacheLocator):
            """numba's locator for NUMBA_CACHE_DIR, with the folder named by content
            (:func:`_content_folder`) instead of by the source folder's path."""

            def __init__(self, py_func: Any, py_file: str) -> None:
                super().__init__(py_func, py_file)
                self._cache_path = _content_folder(py_func, self.get_source_stamp())

        class ContentImpl(CompileResultCacheImpl):
            _locator_classes = [ContentLocator, *CompileResultCacheImpl._locator_classes]

        class LightCache(FunctionCache):
            _impl_class = ContentImpl

            def load_overload(self, sig: Any, target_context: Any) -> Any:
                rtsys.initialize(target_context)
                with self._guard_against_spurious_io_errors():
                    return self._load_overload(sig, target_context)

            def _index_key(self, sig: Any, codegen: Any) -> Any:
                # numba keys a cache entry on the kernel's own bytecode and its file's hash
                # only, yet the entry holds the code of every kernel it calls: an edited
                # helper in another file would leave the old code running
                return (*super()._index_key(sig, codegen), callee_digest(self._py_func))

        _LightCache = LightCache
    return _LightCache


def callee_digest(py_func: Any) -> str:
    """SHA-256 of the code of every compiled kernel ``py_func`` calls, directly or not (names
    it reads from its module, attributes of a module it reads, its closure's cells): part of
    its cache key."""
    import hashlib
    import types

    digest = hashlib.sha256()
    seen: set[int] = set()
    todo = [py_func]
    while todo:
        func = todo.pop()
        code = func.__code__
        names = set(code.co_names)
        for const in code.co_consts:  # nested functions' names
            if isinstance(const, types.CodeType):
                names.update(const.co_names)
        found = []
        for cell in func.__closure__ or ():
            try:
                found.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        for name in sorted(names):
            value = func.__globals__.get(name)
            if isinstance(value, types.ModuleType):  # its namespace: no module __getattr__ runs
                found += [vars(value).get(attr) for attr in sorted(names)]
            else:
                found.append(value)
        for callee in found:
            target = getattr(callee, "py_func", None)
            if isinstance(target, types.FunctionType) and id(target) not in seen:
                seen.add(id(target))
                if target is not py_func:
                    digest.update(_code_text(target.__code__))
                todo.append(target)
    return digest.hexdigest()


def _code_text(code: Any) -> bytes:
    """A code object's instructions, names and constants as bytes, the same in every process
    (marshal's bytes depend on reference counts; a frozenset's order on the hash seed)."""
    import types

    def const(c: Any) -> bytes:
        if isinstance(c, types.CodeType):
            return b"<" + _code_text(c) + b">"
        if isinstance(c, tuple):
            return b"(" + b",".join(map(const, c)) + b")"
        if isinstance(c, frozenset):
            return b"{" + b",".join(sorted(map(const, c))) + b"}"
        return repr(c).encode()

    names = repr((code.co_names, code.co_varnames, code.co_freevars)).encode()
    return code.co_code + b"|" + names + b"|" + const(code.co_consts)


def inner(func: Any) -> Any:
    """:func:`njit` for a kernel only other kernels call: compiled into its callers, so it gets
    no Python or C entry point and no cache file of its own (a caller's cache entry holds its
    code). Those are about a fifth of the first run's compiling, and never used."""
    return njit(func, cache=False, no_cpython_wrapper=True)


def set_threads(jobs: int) -> None:
    """Run parallel kernels on ``jobs`` threads (at most numba's pool)."""
    numba = _load()
    numba.set_num_threads(max(1, min(jobs, numba.config.NUMBA_NUM_THREADS)))


def __getattr__(name: str) -> Any:
    if name == "prange":  # numba's, imported when a kernel module asks for it
        return _load().prange
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
