"""The running process (trusted): progress on stderr, the garbage collector and freed memory,
kernel threads and numba's compile cache. Imports only :mod:`exactmem.core`."""
