"""Lowering rules: binary elementwise ops with broadcasting, comparisons, logical ops, where."""

from __future__ import annotations
