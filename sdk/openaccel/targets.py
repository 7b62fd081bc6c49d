"""Targets: one TOML file per target under toolchains/targets/ (triple, flags, CMake toolchain
file, emulator and its -cpu). Adding a board or target is adding a file, not code."""

from __future__ import annotations

import os
import platform
import re
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ToolchainError
from .paths import toolchains_dir

# The CPU features a target may declare (`cpu_features`) and a file may require: the C runtime's
# names (runtime_c/src/cpu/required_features.c), which are also the CPU device's "cpu" query keys.
KNOWN_CPU_FEATURES: tuple[str, ...] = (
    "neon", "fp16", "dotprod",
    "sse4_1", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni",
    "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
    "v",
    "i8mm",
)


@dataclass(frozen=True)
class EmulatorOption:
    """A `{name}` placeholder in a target's emulator_args, filled from an environment variable
    (e.g. OA_RVV_VLEN for qemu-riscv64-v's vector length) or its default."""

    name: str
    env: str
    default: str
    values: tuple[str, ...] = ()

    def value(self, target: str) -> str:
        v = os.environ.get(self.env, "").strip() or self.default
        if self.values and v not in self.values:
            raise ToolchainError(f"{self.env}={v!r} is not a valid {self.name} for target {target}; "
                                 f"choose one of {', '.join(self.values)} (default {self.default})")
        return v


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
    # CPU features every file exported for this target requires (written to Program.required_features)
    cpu_features: tuple[str, ...] = ()
    c_compiler: str = ""        # the compiler the toolchain file uses, when it is not <triple>-gcc
    tools: tuple[str, ...] = ()  # other programs the build needs (e.g. a cross gcc for its sysroot)
    emulator_options: tuple[EmulatorOption, ...] = ()

    @property
    def compiler(self) -> str:
        if self.c_compiler:
            return self.c_compiler
        return f"{self.triple}-gcc" if self.triple and self.cmake_toolchain else "cc"

    def emulator_command_args(self) -> list[str]:
        """emulator_args with each `{option}` filled in (from its environment variable or default)."""
        values = {o.name: o.value(self.name) for o in self.emulator_options}
        return [re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), a) for a in self.emulator_args]

    @property
    def toolchain_file(self) -> Path | None:
        return toolchains_dir() / self.cmake_toolchain if self.cmake_toolchain else None

    def missing(self) -> list[str]:
        """Programs this target needs that are not on PATH."""
        need = ["cmake", self.compiler, *self.tools]
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
        return [self.emulator, *self.emulator_command_args()]


def _load(path: Path) -> Target:
    with path.open("rb") as f:
        d = tomllib.load(f)
    try:
        features = tuple(d.get("cpu_features", []))
        unknown = [x for x in features if x not in KNOWN_CPU_FEATURES]
        if unknown:
            raise ToolchainError(f"{path}: cpu_features {unknown} are not CPU features the runtime knows "
                                 f"(known: {', '.join(KNOWN_CPU_FEATURES)})")
        options = tuple(EmulatorOption(name=k, env=str(v["env"]), default=str(v["default"]),
                                       values=tuple(str(x) for x in v.get("values", [])))
                        for k, v in d.get("emulator_options", {}).items())
        return Target(name=d["name"], description=d.get("description", ""), arch=d.get("arch", ""),
                      triple=d.get("triple", ""), cmake_toolchain=d.get("cmake_toolchain", ""),
                      c_flags=d.get("c_flags", "-O2"), emulator=d.get("emulator", ""),
                      emulator_args=tuple(d.get("emulator_args", [])), static=bool(d.get("static", False)),
                      packages=tuple(d.get("packages", [])),
                      runs_natively_on=d.get("runs_natively_on", ""), path=path, cpu_features=features,
                      c_compiler=d.get("c_compiler", ""), tools=tuple(d.get("tools", [])),
                      emulator_options=options)
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
