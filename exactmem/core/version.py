"""The package's version, in one place below every layer (the package root re-exports it)."""

__version__ = "0.1.0"
