"""Execute the Markdown docs: every ```python block runs, and its printed output is checked;
every ```console block runs its `$ ` lines in a shell, in the page's temporary folder, and its
output is checked the same way (`...` matches anything). A console block that cannot run there
(it needs the checkout, a virtual environment or many minutes) is preceded by
`<!-- skip: next -->`, which the page's reader does not see."""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from doctest import ELLIPSIS, NORMALIZE_WHITESPACE, OutputChecker
from pathlib import Path

from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ELLIPSIS | NORMALIZE_WHITESPACE


def _setup(namespace):
    # the console blocks' folder; a page's Python examples make their own (`tmp = ...`)
    namespace["tmp"] = namespace["console_tmp"] = Path(tempfile.mkdtemp(prefix="exactmem-docs-"))
    namespace["examples"] = Path(__file__).parent / "examples"
    # pages skip their training examples cleanly without PyTorch (the [train] extra)
    namespace["torch_available"] = importlib.util.find_spec("torch") is not None


def _teardown(namespace):
    shutil.rmtree(namespace["console_tmp"], ignore_errors=True)
    shutil.rmtree(namespace["tmp"], ignore_errors=True)


def console_commands(source: str) -> list[tuple[str, str]]:
    """The (command, expected output) pairs of a console block: a line starting with `$ ` is a
    command (a trailing backslash continues it on the next line), the lines up to the next
    command are what it prints."""
    pairs: list[tuple[str, list[str]]] = []
    continued = False
    for line in source.splitlines():
        if continued:
            command, out = pairs[-1]
            pairs[-1] = (command + "\n" + line, out)
            continued = line.endswith("\\")
        elif line.startswith("$ "):
            pairs.append((line[2:], []))
            continued = line.endswith("\\")
        elif pairs:
            pairs[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"a console block must start with a `$ ` line, not {line!r}")
    return [(command, "\n".join(out).strip() + "\n") for command, out in pairs]


def _console_env(namespace) -> dict[str, str]:
    """`exactmem` and `python` as a reader's shell has them, both running this checkout's
    exactmem with the interpreter that runs the tests (an `exactmem` script on PATH may belong to
    another install)."""
    if "console_env" not in namespace:
        bin_dir = namespace["console_tmp"] / ".bin"
        bin_dir.mkdir()
        shim = bin_dir / "exactmem"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m exactmem "$@"\n')
        shim.chmod(0o755)
        (bin_dir / "python").symlink_to(sys.executable)
        namespace["console_env"] = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",  # stdout and stderr interleaved as a terminal shows them
            "MPLBACKEND": "Agg",
            "COLUMNS": "100",
        }
    return namespace["console_env"]


def evaluate_console(example) -> str | None:
    """Run each command of the block with bash in the page's temporary folder (the same folder
    for every block of a page, so a page reads as one session); stdout and stderr together must
    match the block's text. A command must exit 0: a page that shows a failure says so in the
    shell (`...; echo "exit code $?"`)."""
    namespace = example.namespace
    env = _console_env(namespace)
    for command, expected in console_commands(example.parsed):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=namespace["console_tmp"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=900,
        )
        got = done.stdout.strip() + "\n"
        if done.returncode != 0:
            return f"$ {command}\nexited with {done.returncode}:\n{got}"
        if not OutputChecker().check_output(expected, got, FLAGS):
            return f"$ {command}\nexpected:\n{expected}got:\n{got}"
    return None


pytest_collect_file = Sybil(
    parsers=[
        PythonCodeBlockParser(doctest_optionflags=FLAGS),
        CodeBlockParser(language="console", evaluator=evaluate_console),
        SkipParser(),
    ],
    patterns=["*.md"],
    setup=_setup,
    teardown=_teardown,
).pytest()
