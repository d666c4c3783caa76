"""The evaluators (trusted): the exact reference evaluator (the ground truth), the fast exact
evaluator (the same values with less work, tested against the reference), Arb balls for softmax,
GELU and layer norm, and a float64 evaluator whose values are labelled as float and decide
nothing. Imports only :mod:`exactmem.core`, :mod:`exactmem.runtime` and
:mod:`exactmem.datasets`."""
