"""Lowering rules: sampling (in progress)."""
