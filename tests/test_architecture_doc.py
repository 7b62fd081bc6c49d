"""docs/architecture.md names the rooms and the steps of adding an op, an ISA kernel and a pass by
their files: every repository path it writes in backquotes must exist, so the page cannot drift
from the tree unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
# backquoted words that look like repository paths (a known top-level folder, then more)
PATH = re.compile(r"`((?:sdk|runtime_c|tests|docs|examples|toolchains|benchmarks|scripts)/[^`\s<>|]+)`")


def _paths() -> list[str]:
    return sorted(set(PATH.findall(DOC.read_text())))


def test_the_page_names_files() -> None:
    paths = _paths()
    assert len(paths) >= 30, paths
    for room in ("runtime_c/src/program/", "runtime_c/src/method/", "runtime_c/src/cpu/kernels/",
                 "sdk/openaccel/exporter/pipeline.py", "runtime_c/src/cpu/kernels/kernels.def"):
        assert room in paths, f"docs/architecture.md no longer names {room}"


def test_every_named_path_exists() -> None:
    missing = [p for p in _paths() if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_how_to_sections_are_there() -> None:
    text = DOC.read_text()
    for heading in ("## How to add an op", "## How to add an optimized (ISA) kernel", "## How to add an exporter pass"):
        assert heading in text
