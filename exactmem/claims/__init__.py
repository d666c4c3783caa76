"""Claims about constructions, checked as a regression: claim files (``proofs/``) and the
``check`` command, the dataset generators their instances name, ``selftest`` (every check seen
to fail) and the helpers that run claim files as tests in your own repository."""
