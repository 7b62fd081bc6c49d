"""The runtime build cache survives what happens to it between checkouts and interrupted builds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from openaccel.paths import project_root
from openaccel.runtime.build import build_runtime

LIB_ONLY = ("-DOA_BUILD_TOOLS=OFF", "-DOA_BUILD_TESTS=OFF")


def test_interrupted_build_from_another_checkout_is_redone(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Same sources in a second checkout share cache keys with this one (CI clones anew each run).
    here, other = project_root(), tmp_path / "other"
    for part in ("runtime_c", "toolchains"):
        shutil.copytree(here / part, other / part)
    monkeypatch.setenv("OPENACCEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENACCEL_HOME", str(other))
    first = build_runtime("host", shared=False, extra_cmake=LIB_ONLY, log=lambda _m: None)
    (first.directory / ".done").unlink()  # as if the first build was killed before it finished

    monkeypatch.setenv("OPENACCEL_HOME", str(here))
    shutil.rmtree(other)
    again = build_runtime("host", shared=False, extra_cmake=LIB_ONLY, log=lambda _m: None)
    assert again.directory == first.directory
    assert again.static_lib.exists()
    assert "runtime_c" in (again.directory / "CMakeCache.txt").read_text()
    assert str(other) not in (again.directory / "CMakeCache.txt").read_text()


def test_finished_build_from_a_deleted_checkout_is_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached build made in a checkout that was deleted since has usable binaries, but `cmake
    --install` reads the headers from that checkout: it is configured again from this one."""
    here, other = project_root(), tmp_path / "other"
    for part in ("runtime_c", "toolchains"):
        shutil.copytree(here / part, other / part)
    monkeypatch.setenv("OPENACCEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENACCEL_HOME", str(other))
    first = build_runtime("host", shared=False, extra_cmake=LIB_ONLY, log=lambda _m: None)
    assert (first.directory / ".done").exists()

    monkeypatch.setenv("OPENACCEL_HOME", str(here))
    shutil.rmtree(other)
    again = build_runtime("host", shared=False, extra_cmake=LIB_ONLY, log=lambda _m: None)
    assert again.directory == first.directory
    assert str(other) not in (again.directory / "CMakeCache.txt").read_text()
    done = subprocess.run(["cmake", "--install", str(again.directory), "--prefix", str(tmp_path / "install")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
