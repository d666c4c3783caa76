"""File formats (trusted): model and certificate files, the binary container (``.exm``) and
the JSON schemas that document them. Every file is parsed as data, within the limits of
:mod:`exactmem.core.limits`."""
