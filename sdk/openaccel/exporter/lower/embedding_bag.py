"""Lowering rules: embedding_bag (in progress)."""
