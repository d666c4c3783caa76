"""Looks inside a run and pictures of results (untrusted with respect to verdicts: they decide
nothing): traces, explanations of a verdict, plots, the table of the field and text recited by a
model."""
