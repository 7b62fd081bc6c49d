"""Targets: one TOML file per target under toolchains/targets/ (triple, flags, CMake toolchain
file, emulator and its -cpu). Adding a board or target is adding a file, not code."""

from __future__ import annotations

import platform
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ToolchainError
from .paths import toolchains_dir


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    arch: str
    triple: str
    cmake_toolchain: str
    c_flags: str
    emulator: str
    emulator_args: tuple[str, ...]
    static: bool
    packages: tuple[str, ...]
    runs_natively_on: str = ""
    path: Path = field(default=Path(), compare=False)

    @property
    def compiler(self) -> str:
        return f"{self.triple}-gcc" if self.triple and self.cmake_toolchain else "cc"

    @property
    def toolchain_file(self) -> Path | None:
        return toolchains_dir() / self.cmake_toolchain if self.cmake_toolchain else None

    def missing(self) -> list[str]:
        """Programs this target needs that are not on PATH."""
        need = ["cmake", self.compiler]
        if self.emulator and not self.runs_here_natively:
            need.append(self.emulator)
        return [p for p in need if shutil.which(p) is None]

    @property
    def runs_here_natively(self) -> bool:
        if self.name == "host":
            return True
        return bool(self.runs_natively_on) and platform.machine() == self.runs_natively_on

    @property
    def ready(self) -> bool:
        return not self.missing()

    def install_hint(self) -> str:
        return "apt-get install -y " + " ".join(self.packages)

    def run_prefix(self) -> list[str]:
        """Command prefix that runs one of this target's binaries on this machine."""
        if self.runs_here_natively or not self.emulator:
            if not self.runs_here_natively:
                raise ToolchainError(f"target {self.name} has no emulator and cannot run on this "
                                     f"{platform.machine()} machine; use --board to run it on hardware")
            return []
        return [self.emulator, *self.emulator_args]


def _load(path: Path) -> Target:
    with path.open("rb") as f:
        d = tomllib.load(f)
    try:
        return Target(name=d["name"], description=d.get("description", ""), arch=d.get("arch", ""),
                      triple=d.get("triple", ""), cmake_toolchain=d.get("cmake_toolchain", ""),
                      c_flags=d.get("c_flags", "-O2"), emulator=d.get("emulator", ""),
                      emulator_args=tuple(d.get("emulator_args", [])), static=bool(d.get("static", False)),
                      packages=tuple(d.get("packages", [])),
                      runs_natively_on=d.get("runs_natively_on", ""), path=path)
    except KeyError as e:
        raise ToolchainError(f"{path}: missing key {e}") from None


def all_targets() -> dict[str, Target]:
    out: dict[str, Target] = {}
    for p in sorted((toolchains_dir() / "targets").glob("*.toml")):
        t = _load(p)
        out[t.name] = t
    return out


def get_target(name: str) -> Target:
    targets = all_targets()
    if name not in targets:
        raise ToolchainError(f"unknown target '{name}'; known targets: {', '.join(targets)} (one file "
                             f"each in {toolchains_dir() / 'targets'}; `openaccel targets` shows them)")
    return targets[name]


def list_targets() -> list[Target]:
    return list(all_targets().values())
