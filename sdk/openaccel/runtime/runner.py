"""Running oa_run on a target: natively for host/x86_64, under QEMU user-mode emulation for the
qemu-* targets. Every call has a time-out; output is read as JSON lines."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CpuFeatureError, InputError, ProgramError, RuntimeFailure, ToolchainError
from ..targets import Target, get_target
from .build import RuntimeBuild, build_runtime

DEFAULT_TIMEOUT = 900.0


@dataclass
class RunResult:
    events: list[dict[str, Any]]
    returncode: int
    stderr: str

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]

    def error(self) -> dict[str, Any] | None:
        errs = self.of("error")
        return errs[0] if errs else None


class Runner:
    """oa_run for one target. `echo_stderr`: pass what oa_run (and the vendor device libraries it
    loads) writes to stderr through to this process's stderr, as the CLI does: a device library's
    own diagnostics are often the only clue to why it refused to start."""

    def __init__(self, target: str | Target = "host", build: RuntimeBuild | None = None,
                 timeout: float = DEFAULT_TIMEOUT, echo_stderr: bool = False) -> None:
        self.target = target if isinstance(target, Target) else get_target(target)
        missing = self.target.missing()
        if missing:
            raise ToolchainError(f"target {self.target.name} needs {', '.join(missing)}, not found on PATH; "
                                 f"install with: {self.target.install_hint()}")
        self.build = build or build_runtime(self.target)
        self.timeout = timeout
        self.echo_stderr = echo_stderr

    @property
    def emulated(self) -> bool:
        return bool(self.target.run_prefix())

    def command(self, args: list[str]) -> list[str]:
        return [*self.target.run_prefix(), str(self.build.oa_run), *args]

    def run(self, args: list[str], timeout: float | None = None) -> RunResult:
        cmd = self.command([*args, "--json"])
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired as e:
            if self.echo_stderr and e.stderr:
                sys.stderr.write(e.stderr if isinstance(e.stderr, str) else e.stderr.decode(errors="replace"))
            raise RuntimeFailure(f"oa_run on {self.target.name} did not finish within "
                                 f"{timeout or self.timeout:.0f} s: {' '.join(cmd)}") from None
        if self.echo_stderr and p.stderr:
            sys.stderr.write(p.stderr)
            sys.stderr.flush()
        events = []
        for line in p.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return RunResult(events, p.returncode, p.stderr)

    def check(self, res: RunResult, what: str) -> None:
        """Turn an oa_run error event (or a crash) into the matching OpenAccelError."""
        err = res.error()
        if err:
            status = err.get("status", "")
            msg = f"{what} on {self.target.name}: {status}: {err.get('message', '')}"
            if status in ("INVALID_PROGRAM", "UNSUPPORTED_VERSION"):
                raise ProgramError(msg)
            if status == "INVALID_ARGUMENT":
                raise InputError(msg)
            if status == "UNSUPPORTED" and "needs CPU features" in msg:
                raise CpuFeatureError(msg)
            raise RuntimeFailure(msg)
        if res.returncode not in (0, 1):
            raise RuntimeFailure(f"{what} on {self.target.name}: oa_run exited with {res.returncode}"
                                 + (f": {res.stderr.strip()[-2000:]}" if res.stderr.strip() else ""))

    def test(self, path: Path, timeout: float | None = None) -> RunResult:
        res = self.run([str(path), "--test"], timeout)
        self.check(res, "running bundled tests")
        return res

    def bench(self, path: Path, runs: int, threads: int = 0, timeout: float | None = None) -> RunResult:
        res = self.run([str(path), "--bench", str(runs), "--threads", str(threads), "--info"], timeout)
        self.check(res, "benchmarking")
        return res

    def devices(self, device_libs: list[str] | None = None) -> list[dict[str, Any]]:
        args = ["--devices"]
        for lib in device_libs or []:
            args += ["--device", str(lib)]
        res = self.run(args)
        self.check(res, "listing devices")
        return res.of("device")

    def execute(self, path: Path, inputs: list[np.ndarray], timeout: float | None = None) -> list[np.ndarray]:
        with tempfile.TemporaryDirectory(prefix="oa-run-") as tmp:
            args = [str(path)]
            for i, a in enumerate(inputs):
                f = Path(tmp) / f"input_{i}.npy"
                np.save(f, np.require(a, requirements="C"))
                args += ["--input", f"{i}={f}"]
            args += ["--output-dir", tmp]
            res = self.run(args, timeout)
            self.check(res, "running the program")
            outs = res.of("output")
            return [np.load(Path(tmp) / f"output_{o['index']}.npy") for o in outs]
