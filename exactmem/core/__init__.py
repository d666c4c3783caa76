"""The foundation every layer stands on (trusted): the exact Transformer IR and its resource
count (:mod:`~exactmem.core.model`), exact scalars and integer arrays, Arb balls, bound formulas,
size limits, strict JSON input, atomic output files, errors and the words of messages. Imports
nothing else of exactmem."""
