"""The runtime build cache survives what happens to it between checkouts and interrupted builds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from openaccel.paths import project_root
from openaccel.runtime.build import RuntimeBuild, build_runtime

LIB_ONLY = ("-DOA_BUILD_TOOLS=OFF", "-DOA_BUILD_TESTS=OFF")
HERE = project_root()  # before a test points OPENACCEL_HOME elsewhere


def _build_in_another_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A library-only host build made in a copy of this checkout's sources (same sources share
    cache keys; CI clones anew each run): (the copy, the build directory)."""
    other = tmp_path / "other"
    for part in ("runtime_c", "toolchains"):
        shutil.copytree(HERE / part, other / part)
    monkeypatch.setenv("OPENACCEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENACCEL_HOME", str(other))
    first = build_runtime("host", shared=False, extra_cmake=LIB_ONLY, log=lambda _m: None)
    return other, first.directory


def _build_here_after_deleting(other: Path, monkeypatch: pytest.MonkeyPatch) -> RuntimeBuild:
    monkeypatch.setenv("OPENACCEL_HOME", str(HERE))
    shutil.rmtree(other)
    return build_runtime("host", shared=False, extra_cmake=LIB_ONLY, log=lambda _m: None)


def test_interrupted_build_from_another_checkout_is_redone(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    other, directory = _build_in_another_checkout(tmp_path, monkeypatch)
    (directory / ".done").unlink()  # as if the first build was killed before it finished
    again = _build_here_after_deleting(other, monkeypatch)
    assert again.directory == directory
    assert again.static_lib.exists()
    assert "runtime_c" in (again.directory / "CMakeCache.txt").read_text()
    assert str(other) not in (again.directory / "CMakeCache.txt").read_text()


def test_finished_build_from_a_deleted_checkout_is_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached build made in a checkout that was deleted since has usable binaries, but `cmake
    --install` reads the headers from that checkout: it is configured again from this one."""
    other, directory = _build_in_another_checkout(tmp_path, monkeypatch)
    assert (directory / ".done").exists()
    again = _build_here_after_deleting(other, monkeypatch)
    assert again.directory == directory
    assert str(other) not in (again.directory / "CMakeCache.txt").read_text()
    done = subprocess.run(["cmake", "--install", str(again.directory), "--prefix", str(tmp_path / "install")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
