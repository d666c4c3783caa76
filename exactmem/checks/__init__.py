"""The verifier (trusted): :func:`~exactmem.checks.certify.certify` takes a model and a
dataset to a certificate, from the trusted evaluators' values and the user's criteria only. Here
are the checklist interface and registry, the checks every construction shares (labels, margins,
dataflow, lower bounds, declared bounds), each paper's measurements
(:mod:`exactmem.checks.measures`) and mechanisms with their breakers
(:mod:`exactmem.checks.mechanisms`). Never imports a construction."""
