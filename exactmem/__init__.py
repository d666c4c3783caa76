"""exactmem: build the networks of Transformer memorization theorems, run them exactly, and
certify what the theorems promise."""

__version__ = "0.1.0"
