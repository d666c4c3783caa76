"""The numba kernels' cache folder, the compile notice and ``exactmem warmup``
(exactmem.runtime.jit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exactmem.runtime import jit

ROOT = Path(__file__).resolve().parent.parent


def _env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True
    )


def test_numba_cache_dir_is_honoured(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "given"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jit.cache_dir() == tmp_path / "given"


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the XDG layout")
def test_per_user_cache_folder(monkeypatch, tmp_path):
    """Unset (or empty) NUMBA_CACHE_DIR: exactmem/numba in the user's cache folder, which is
    $XDG_CACHE_HOME when that is an absolute path and ~/.cache otherwise (a relative one is
    ignored, as the XDG specification says)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jit.cache_dir() == tmp_path / "xdg" / "exactmem" / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")
    assert jit.cache_dir() == tmp_path / "xdg" / "exactmem" / "numba"
    for bad in ("relative/cache", ""):
        monkeypatch.setenv("XDG_CACHE_HOME", bad)
        assert jit.cache_dir() == tmp_path / "home" / ".cache" / "exactmem" / "numba"


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the XDG layout")
@pytest.mark.parametrize("numba_first", [False, True])
def test_numba_reads_the_folder_from_any_directory(tmp_path, numba_first):
    """A kernel module run from an unrelated directory: numba's cache setting is the per-user
    folder — also when numba was imported before exactmem — and no compiled file lands next to
    the sources."""
    first = "import numba; " if numba_first else ""
    code = (
        f"{first}from exactmem.evaluate.fast import fold_kernel; import numba; "
        "print(numba.config.CACHE_DIR)"
    )
    env = _env(NUMBA_CACHE_DIR=None, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    got = _python(code, env, tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == str(tmp_path / "xdg" / "exactmem" / "numba")


KERNEL = """
from exactmem.runtime.jit import njit

@njit
def twice(x):
    return 2 * x
"""


def test_notice_when_compiling_only(tmp_path):
    """A kernel compiled into an empty cache is announced on stderr (what, how long); the same
    kernel loaded from the cache by the next process is not; quiet() silences the notice."""
    (tmp_path / "tiny.py").write_text(KERNEL)
    env = _env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    run = "import tiny; assert tiny.twice(3) == 6"
    first = _python(run, env, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "exactmem: compiling the numba kernels of exactmem" in first.stderr
    assert "exactmem: compiled tiny.twice in " in first.stderr
    assert any((tmp_path / "cache").rglob("*.nbi"))  # the cache is the folder given
    again = _python(run, env, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "compil" not in again.stderr
    assert not (tmp_path / "__pycache__").exists() or not any(
        (tmp_path / "__pycache__").glob("*.nbi")
    )
    (tmp_path / "tiny.py").write_text(KERNEL.replace("2 * x", "3 * x"))  # source changed
    quiet = _python(
        "from exactmem import jit; jit.quiet(); import tiny; assert tiny.twice(3) == 9; "
        "print(len(jit.compiled))",
        env,
        tmp_path,
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout.strip() == "1"  # compiled all the same, silently


def _two_installs(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    """The same sources at two paths, as two virtual environments or a reinstall hold them."""
    installs = tmp_path / "site-a", tmp_path / "elsewhere" / "site-b"
    for folder in installs:
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
    return installs


def test_a_second_install_of_the_same_code_compiles_nothing(tmp_path):
    """The cache is keyed by the kernels' content, not their path: the same module imported
    from a second folder with the same cache loads what the first compiled; an edited copy
    compiles, and the first is still served beside it (two versions side by side)."""
    first, second = _two_installs(tmp_path, {"tiny.py": KERNEL})
    cache = str(tmp_path / "cache")
    run = (
        "import tiny; from exactmem import jit; assert tiny.twice(3) == 6; print(len(jit.compiled))"
    )

    def compiled(folder: Path, code: str = run) -> str:
        env = _env(NUMBA_CACHE_DIR=cache)
        env["PYTHONPATH"] += os.pathsep + str(folder)
        got = _python(code, env, tmp_path)
        assert got.returncode == 0, got.stderr
        return got.stdout.strip()

    assert compiled(first) == "1"
    assert compiled(second) == "0"
    (second / "tiny.py").write_text(KERNEL.replace("2 * x", "3 * x"))
    assert compiled(second, run.replace("== 6", "== 9")) == "1"  # new code: compiled
    assert compiled(first) == "0"  # the first version's entry was not overwritten


def test_first_notice_estimates_from_what_this_machine_measured(tmp_path, monkeypatch):
    """Before a machine has compiled anything the notice gives the reference machine's time;
    afterwards the sum of the times measured here (kept beside the kernels)."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert f"≈ {jit.REFERENCE_SECONDS:.0f} s for all of them on a 2-core machine" in (
        jit.first_notice()
    )
    jit._record_time("a.kernel", 2.5)
    jit._record_time("b.kernel", 10.0)
    jit._record_time("a.kernel", 3.0)  # measured again: replaced
    assert "≈ 13 s for all 2 kernels, as measured here" in jit.first_notice()
    (tmp_path / jit.TIMES_FILE).write_text("not json")
    assert "2-core machine" in jit.first_notice()  # a damaged record is ignored


@pytest.mark.slow
def test_a_second_install_of_the_package_compiles_nothing(tmp_path):
    """The whole package copied to two folders (two virtual environments): ``warmup`` in the
    first compiles every kernel into an empty cache, in the second none."""
    import shutil

    installs = tmp_path / "a", tmp_path / "b"
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in installs:
        shutil.copytree(ROOT / "exactmem", folder / "exactmem", ignore=ignore)
    cache = str(tmp_path / "cache")
    counts = []
    for folder in installs:
        env = dict(_env(NUMBA_CACHE_DIR=cache), PYTHONPATH=str(folder))
        got = subprocess.run(
            [sys.executable, "-m", "exactmem", "warmup", "--json", "--quiet"],
            env=env,
            cwd=folder,
            capture_output=True,
            text=True,
        )
        assert got.returncode == 0, got.stderr
        counts.append(len(json.loads(got.stdout)["compiled"]))
    assert counts[0] > 0 and counts[1] == 0, counts


def test_warmup_compiles_every_kernel_then_nothing(tmp_path):
    """``exactmem warmup`` loads or compiles every kernel into the cache folder; a second run
    (as any later run of any size) compiles nothing. Uses the shared per-user cache, so only
    a machine's first test run pays for the compilation."""
    cmd = [sys.executable, "-m", "exactmem", "warmup", "--json", "--quiet"]
    env = _env()
    first = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["cache_dir"] == str(jit.cache_dir())
    assert first.stderr == ""  # --quiet: no progress, no compile notice
    second = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["compiled"] == []


def test_warmup_refuses_arguments(capsys):
    from exactmem.commands.main import main

    with pytest.raises(SystemExit) as stop:
        main(["warmup", "--jobs", "2"])
    assert stop.value.code == 2
    assert "unrecognized option --jobs" in capsys.readouterr().err


KERNELS = """
import numpy as np
from exactmem.runtime.jit import njit, prange

@njit
def inner(x):
    return x * x + 1

@njit
def squares(n):  # allocates: needs numba's runtime (NRT), which the light load initialises
    out = np.empty(n, np.int64)
    for i in range(n):
        out[i] = inner(i)
    return out

@njit(parallel=True)
def total(a):  # a parallel kernel: its thread pool starts when it is loaded
    s = 0
    for i in prange(len(a)):
        s += a[i]
    return s
"""


def test_kernels_loaded_from_the_cache_without_numba_registries(tmp_path):
    """Kernels loaded from the cache (allocating, parallel, calling another kernel) give the
    values they gave when compiled, and loading them skips numba's typing and lowering
    registries (the context's refresh) — a signature not yet cached still compiles after."""
    (tmp_path / "kern.py").write_text(KERNELS)
    env = _env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    run = (
        "import numpy as np, kern\n"
        "from numba.core.registry import cpu_target\n"
        "from exactmem import jit\n"
        "a = kern.squares(1000)\n"
        "assert a.tolist() == [i * i + 1 for i in range(1000)]\n"
        "assert kern.total(a) == sum(i * i + 1 for i in range(1000))\n"
        "print(len(jit.compiled), len(cpu_target.target_context._registries))\n"
        "assert kern.total(a.astype(np.int32)) == kern.total(a)  # a new signature compiles\n"
        "assert kern.squares(np.int32(7)).tolist() == a[:7].tolist()  # (calling a kernel)\n"
    )
    first = _python(run, env, tmp_path)
    assert first.returncode == 0, first.stderr
    compiled, _ = first.stdout.split()
    assert int(compiled) == 2  # squares (inner inside it) and total
    again = _python(run, env, tmp_path)
    assert again.returncode == 0, again.stderr
    compiled, registries = again.stdout.split()
    assert int(compiled) == 0  # both loaded from the cache
    assert int(registries) == 0  # no registry installed to load them


@pytest.mark.parametrize("freeze", [False, True])
def test_freeze_after_import(tmp_path, freeze):
    """With freeze_after_import on (the command line), importing numba moves every live object
    to the collector's permanent generation; off (the API's default), nothing is frozen."""
    code = (
        "import gc; from exactmem import jit\n"
        f"jit.freeze_after_import({freeze})\n"
        "jit._load(); print(gc.get_freeze_count(), gc.isenabled())"
    )
    got = _python(code, _env(), tmp_path)
    assert got.returncode == 0, got.stderr
    count, enabled = got.stdout.split()
    assert (int(count) > 10_000) == freeze
    assert enabled == "True"  # the collector paused for the import only


def test_only_the_command_line_process_freezes(monkeypatch):
    """``exactmem …`` (main() reading sys.argv) turns the freeze on while its command runs;
    main([...]) called in-process leaves it off; both restore the setting before."""
    import exactmem.commands.verify as verify_command
    from exactmem.commands.main import main

    seen = []
    monkeypatch.setattr(verify_command, "run", lambda args: seen.append(jit._freeze) or 0)
    args = ["verify", "m.json", "--data", "d.json", "--quiet"]
    assert main(args) == 0
    monkeypatch.setattr(sys, "argv", ["exactmem", *args])
    assert main() == 0
    assert seen == [False, True]
    assert jit._freeze is False  # restored
