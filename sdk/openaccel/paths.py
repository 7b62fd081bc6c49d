"""Where openaccel finds its own files (runtime sources, toolchains) and keeps its cache."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ToolchainError


def project_root() -> Path:
    """The checkout holding runtime_c/ and toolchains/ (OPENACCEL_HOME overrides)."""
    env = os.environ.get("OPENACCEL_HOME")
    root = Path(env) if env else Path(__file__).resolve().parents[2]
    if not (root / "runtime_c" / "CMakeLists.txt").exists():
        raise ToolchainError(
            f"cannot find the openaccel runtime sources under {root} (runtime_c/CMakeLists.txt); "
            "install openaccel from a checkout (pip install -e .) or set OPENACCEL_HOME")
    return root


def runtime_dir() -> Path:
    return project_root() / "runtime_c"


def toolchains_dir() -> Path:
    return project_root() / "toolchains"


def cache_dir() -> Path:
    """Build cache: $OPENACCEL_CACHE, else ~/.cache/openaccel."""
    env = os.environ.get("OPENACCEL_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "openaccel"
    base.mkdir(parents=True, exist_ok=True)
    return base
