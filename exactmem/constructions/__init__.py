"""One module per paper; constructions are pure functions returning (model, witness)."""
