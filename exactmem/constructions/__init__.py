"""The constructions of the papers (untrusted): one module per paper, pure functions from a dataset
and options to ``(model, witness)``. Nothing here decides a verdict: the trusted core
(:mod:`exactmem.checks`) never imports this package, and a construction never evaluates."""
