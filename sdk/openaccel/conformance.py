"""The device conformance suite (runtime_c/tools/conformance/, the oa_conformance tool) from
Python: build the runtime for a target, optionally build the vendor device examples
(examples/vendor_device) into the cache, run `oa_conformance --json` natively or under QEMU, and
parse its rows.

    from openaccel.conformance import build_vendor_example, run_conformance
    report = run_conformance(build_vendor_example())    # the simulated accelerator
    print(report)                                        # table, then "N passed, N failed"
    run_conformance("skeleton")                          # the skeleton: every slot unsupported
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import RuntimeFailure, ToolchainError
from .paths import cache_dir, project_root, runtime_dir
from .runtime.build import build_runtime
from .targets import Target, get_target

Log = Callable[[str], None]

#: the name `openaccel conformance --device` accepts for the vendor device example
SIM_DEVICE = "sim"
#: the library the example builds
SIM_LIBRARY = "libopenaccel_vendor_sim.so"
#: the name for the skeleton device (every slot "unsupported"), built with the example
SKELETON_DEVICE = "skeleton"
SKELETON_LIBRARY = "libopenaccel_vendor_skeleton.so"
DEFAULT_TIMEOUT = 600.0


@dataclass(frozen=True)
class Check:
    """One row of the suite: a check (stable name) on one device."""

    device: int
    name: str
    result: str  # "PASS", "FAIL" or "SKIP"
    detail: str


@dataclass
class ConformanceReport:
    target: str
    emulated: bool
    devices: list[dict[str, Any]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    returncode: int = 0
    stderr: str = ""

    @property
    def passed(self) -> int:
        return sum(c.result == "PASS" for c in self.checks)

    @property
    def failed(self) -> int:
        return sum(c.result == "FAIL" for c in self.checks)

    @property
    def skipped(self) -> int:
        return sum(c.result == "SKIP" for c in self.checks)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.passed > 0

    def failures(self, device: int | None = None) -> list[str]:
        """Names of the failed checks (of one device, or of all)."""
        return [c.name for c in self.checks if c.result == "FAIL" and (device is None or c.device == device)]

    def result(self, name: str, device: int = 0) -> str:
        for c in self.checks:
            if c.name == name and c.device == device:
                return c.result
        raise KeyError(f"no check '{name}' on device {device}")

    def lines(self) -> list[str]:
        out: list[str] = []
        for d in self.devices:
            out.append(f"device {d['index']}: {d['name']} [{d['kind']}] by {d['vendor']} (seed {d['seed']})"
                       + (" (emulated)" if self.emulated else ""))
            out += [f"{c.name:<34} {c.result:<6} {c.detail}" for c in self.checks if c.device == d["index"]]
        out.append(f"{self.skipped} skipped")
        out.append(f"{self.passed} passed, {self.failed} failed")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _say(log: Log | None, msg: str) -> None:
    if log:
        log(msg)


def _example_dir() -> Path:
    d = project_root() / "examples" / "vendor_device"
    if not (d / "CMakeLists.txt").exists():
        raise ToolchainError(f"the vendor device example is missing: {d}/CMakeLists.txt (a source checkout has it)")
    return d


def _run_logged(cmd: list[str], cwd: Path, what: str, log_path: Path) -> None:
    with log_path.open("a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-25:]
        raise ToolchainError(f"{what} failed (exit {r.returncode}); last lines of {log_path}:\n" + "\n".join(tail))


def build_vendor_example(target: str | Target = "host", *, log: Log | None = None) -> Path:
    """Build examples/vendor_device (the simulated accelerator `vendor.sim`) with CMake into the
    cache, keyed by its sources, the runtime and the target; return the .so. The skeleton device
    (SKELETON_LIBRARY) and `run_model` (an application running .oab files on the CPU plus device
    libraries) are built next to it.
    Loading a device library needs a host build of oa_conformance (cross builds are static)."""
    t = target if isinstance(target, Target) else get_target(target)
    missing = [m for m in t.missing() if m != t.emulator]
    if missing:
        raise ToolchainError(f"target {t.name} needs {', '.join(missing)}, not found on PATH; "
                             f"install with: {t.install_hint()}")
    src = _example_dir()
    include = runtime_dir() / "include"
    runtime = build_runtime(t, log=log)  # its directory name carries the runtime's source hash
    h = hashlib.sha256("\n".join([t.name, t.c_flags, t.cmake_toolchain, str(runtime.static_lib)]).encode())
    for p in sorted([*src.iterdir(), *(include / "openaccel").iterdir()]):
        if p.is_file() and p.suffix in (".c", ".h", ".txt"):
            h.update(p.name.encode())
            h.update(p.read_bytes())
    bdir = cache_dir() / "vendor_sim" / f"{t.name}-{h.hexdigest()[:16]}"
    bdir.mkdir(parents=True, exist_ok=True)
    lib = bdir / SIM_LIBRARY
    with (bdir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (bdir / ".done").exists() and lib.exists():
            return lib
        _say(log, f"building the vendor device example for {t.name} in {bdir} ...")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        cmd = ["cmake", "-S", str(src), "-B", str(bdir), *generator, "-DCMAKE_BUILD_TYPE=Release",
               f"-DCMAKE_C_FLAGS={t.c_flags}", f"-DOPENACCEL_INCLUDE_DIR={include}",
               f"-DOPENACCEL_LIBRARY={runtime.static_lib}"]
        if t.toolchain_file:
            cmd.append(f"-DCMAKE_TOOLCHAIN_FILE={t.toolchain_file}")
        log_path = bdir / "build.log"
        log_path.write_text("")
        _run_logged(cmd, bdir, "configuring the vendor device example", log_path)
        _run_logged(["cmake", "--build", str(bdir)], bdir, "building the vendor device example", log_path)
        (bdir / ".done").write_text(h.hexdigest())
        _say(log, f"built {lib}")
    return lib


def example_runner(target: str | Target = "host", *, log: Log | None = None) -> Path:
    """Path of the example's `run_model MODEL.oab LIB.so...` (built with the example)."""
    return build_vendor_example(target, log=log).parent / "run_model"


def conformance_tool(target: str | Target = "host", *, log: Log | None = None) -> Path:
    """Path of oa_conformance built for `target` (builds the runtime when needed)."""
    build = build_runtime(target, log=log)
    exe = build.directory / ("oa_conformance.exe" if os.name == "nt" else "oa_conformance")
    if not exe.exists():
        raise ToolchainError(f"{exe} is missing: the runtime build has no oa_conformance (OA_BUILD_TOOLS=OFF?)")
    return exe


def run_conformance(device: str | Path | None = None, *, target: str | Target = "host", seed: int = 1,
                    filter: str | None = None, env: Mapping[str, str] | None = None,
                    timeout: float = DEFAULT_TIMEOUT, log: Log | None = None,
                    isas: Sequence[str] | None = None) -> ConformanceReport:
    """Run the suite on the built-in CPU device (device=None) or on every device of a vendor
    library (a path, or "sim" / "skeleton" for the examples, built on demand). `isas` restricts
    the CPU device's optimized kernels to those ISAs ("avx2", "neon", "portable"; oa_conformance
    --isa), so each can be checked against the reference kernels. `env` adds environment variables
    (e.g. OA_SIM_FAULT for the example's fault injection). Raises RuntimeFailure when the tool
    cannot run at all (a library that does not load, a crash); failed checks are in the report."""
    t = target if isinstance(target, Target) else get_target(target)
    prefix = t.run_prefix()
    exe = conformance_tool(t, log=log)
    args = [*prefix, str(exe), "--json", "--seed", str(seed)]
    if device is not None:
        if prefix or t.name != "host":
            raise ToolchainError(f"--device loads a shared library with dlopen, which only the host build can do; "
                                 f"target {t.name} checks its built-in CPU device")
        if str(device) == SIM_DEVICE:
            lib = build_vendor_example("host", log=log)
        elif str(device) == SKELETON_DEVICE:
            lib = build_vendor_example("host", log=log).parent / SKELETON_LIBRARY
        else:
            lib = Path(device)
        args += ["--device", str(lib)]
    if filter:
        args += ["--filter", filter]
    if isas is not None:
        if device is not None:
            raise ToolchainError("isas applies to the built-in CPU device, not to a vendor library")
        args += ["--isa", ",".join(isas)]
    full_env = {**os.environ, **(env or {})}
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=full_env)
    except subprocess.TimeoutExpired:
        raise RuntimeFailure(f"oa_conformance on {t.name} did not finish within {timeout:.0f} s: "
                             f"{' '.join(args)}") from None
    report = ConformanceReport(target=t.name, emulated=bool(prefix), returncode=p.returncode, stderr=p.stderr)
    summary = None
    for line in p.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = e.get("event")
        if kind == "device":
            report.devices.append(e)
        elif kind == "check":
            report.checks.append(Check(int(e["device"]), str(e["name"]), str(e["result"]), str(e.get("detail", ""))))
        elif kind == "summary":
            summary = e
    if summary is None or p.returncode not in (0, 1):
        why = p.stderr.strip()[-2000:] or f"exit code {p.returncode}"
        raise RuntimeFailure(f"oa_conformance on {t.name} failed: {why}")
    return report
