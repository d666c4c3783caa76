"""The JSON schemas of exactmem's files and the example dataset, shipped inside the package so
that an installed copy carries what its documentation cites (``exactmem schema NAME`` prints
one). docs/examples holds the same files for the documentation site; a test keeps the two
identical."""

from __future__ import annotations

from importlib import resources

__all__ = ["FILES", "names", "text"]

# name → (file, what it describes); the order `exactmem schema` lists them in
FILES: dict[str, tuple[str, str]] = {
    "dataset": ("dataset.schema.json", "a dataset file (exactmem.dataset/1)"),
    "model": ("model.schema.json", "a model file (exactmem.model/1)"),
    "certificate": ("certificate.schema.json", "a certificate (exactmem.certificate/2)"),
    "dataset-example": ("dataset.json", "a complete small dataset (five sequences)"),
}


def names() -> list[str]:
    """The names ``exactmem schema`` accepts."""
    return list(FILES)


def text(name: str) -> str:
    """The file ``name`` as shipped (UTF-8 text); ``KeyError`` for an unknown name."""
    file, _ = FILES[name]
    return resources.files(__name__).joinpath(file).read_text(encoding="utf-8")
