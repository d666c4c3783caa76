"""Execute the Markdown docs: every ```python block runs, and its printed output is checked."""

import importlib.util
import shutil
import tempfile
from doctest import ELLIPSIS, NORMALIZE_WHITESPACE
from pathlib import Path

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser


def _setup(namespace):
    namespace["tmp"] = Path(tempfile.mkdtemp(prefix="exactmem-docs-"))
    namespace["examples"] = Path(__file__).parent / "examples"
    # pages skip their training examples cleanly without PyTorch (the [train] extra)
    namespace["torch_available"] = importlib.util.find_spec("torch") is not None


def _teardown(namespace):
    shutil.rmtree(namespace["tmp"], ignore_errors=True)


pytest_collect_file = Sybil(
    parsers=[
        PythonCodeBlockParser(doctest_optionflags=ELLIPSIS | NORMALIZE_WHITESPACE),
        SkipParser(),
    ],
    patterns=["*.md"],
    setup=_setup,
    teardown=_teardown,
).pytest()
