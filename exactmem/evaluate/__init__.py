"""Evaluators: the reference (ground truth) and, later, faster exact ones."""
