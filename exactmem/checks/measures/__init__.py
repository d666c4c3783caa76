"""What each paper's checklist measures on a model, from the trusted evaluators' values: one module
per paper (kim23, ks24, ks25, madden24)."""
