"""Datasets (trusted): the dataset type and its validation, token sequences, target
distributions, your own text, the seeded random data of the papers and exact measurements of data
(separation, linear independence). Imports only :mod:`exactmem.core` and :mod:`exactmem.runtime`."""
