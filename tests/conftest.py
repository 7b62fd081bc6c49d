"""Shared pytest set-up: make tests/ importable (helpers.py) and keep builds in one cache."""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

# Export is deterministic given the seed; keep torch from spawning threads that fight xdist workers.
os.environ.setdefault("OMP_NUM_THREADS", "1")
