"""Lowering rules: distance (in progress)."""
