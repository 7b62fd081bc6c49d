"""Lowering rules: index ops (see opset.py for the openaccel side)."""

from __future__ import annotations
