"""oa.load(...) -> Module: call a program on the host (ctypes) or on an emulated / native target
(oa_run), with PyTorch tensors or NumPy arrays in and PyTorch tensors out."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import InputError, OpenAccelError
from ..program import Program
from .host import TestReport


@dataclass
class TestSuiteReport:
    target: str
    tests: list[TestReport]

    @property
    def passed(self) -> int:
        return sum(t.passed for t in self.tests)

    @property
    def failed(self) -> int:
        return len(self.tests) - self.passed

    @property
    def ok(self) -> bool:
        return self.failed == 0 and bool(self.tests)

    def __str__(self) -> str:
        lines = []
        for t in self.tests:
            if t.error:
                lines.append(f"FAIL {t.name}: {t.error}")
            else:
                lines.append(f"{'PASS' if t.passed else 'FAIL'} {t.name}: max abs error {t.max_abs_error:.3g}, "
                             f"max rel error {t.max_rel_error:.3g} (atol {t.atol:g}, rtol {t.rtol:g})")
        lines.append(f"{self.passed} passed, {self.failed} failed")
        return "\n".join(lines)


def _as_numpy(x: Any, i: int) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().contiguous().numpy()
    if isinstance(x, (int, float, bool, list, tuple)):
        return np.asarray(x)
    raise InputError(f"input {i}: expected a torch.Tensor or numpy.ndarray, got {type(x).__name__}")


def _to_torch(arrays: list[np.ndarray]) -> tuple[Any, ...]:
    import torch

    return tuple(torch.from_numpy(np.array(a, copy=True)) for a in arrays)


class Module:
    """A program ready to run on one target."""

    def __init__(self, program: Program, target: str, threads: int | None,
                 device_libs: list[str] | None = None) -> None:
        self.program = program
        self.target = target
        self.threads = threads or 0
        self.device_libs = [str(p) for p in device_libs or []]
        self._session: Any = None
        self._runner: Any = None
        self._file: Path | None = None
        if target == "host":
            from .host import HostSession

            self._session = HostSession(program.buffer, threads=self.threads, device_libs=self.device_libs)
        else:
            from .runner import Runner

            if self.device_libs:
                raise OpenAccelError("vendor device libraries run on the host target only")
            self._runner = Runner(target)
            self._tmp = tempfile.TemporaryDirectory(prefix="oa-module-")
            self._file = Path(self._tmp.name) / "program.oab"
            program.save(self._file)

    def _check_inputs(self, arrays: list[np.ndarray]) -> None:
        specs = self.program.inputs
        if len(arrays) != len(specs):
            names = ", ".join(s.name for s in specs)
            raise InputError(f"the program takes {len(specs)} inputs ({names}), {len(arrays)} were given")
        for i, (a, s) in enumerate(zip(arrays, specs)):
            try:
                got = dtypes.name_of(dtypes.code_of_numpy(a.dtype))
            except KeyError:
                got = str(a.dtype)
            if got != s.dtype or tuple(a.shape) != s.shape:
                raise InputError(f"input {i} ('{s.name}'): expected {s.dtype}{list(s.shape)}, "
                                 f"received {got}{list(a.shape)}")

    def __call__(self, *inputs: Any) -> tuple[Any, ...]:
        arrays = [_as_numpy(x, i) for i, x in enumerate(inputs)]
        self._check_inputs(arrays)
        if self._session is not None:
            outs = self._session.run(arrays)
        else:
            assert self._file is not None
            outs = self._runner.execute(self._file, arrays)
        return _to_torch(outs)

    def run_bundled_tests(self) -> TestSuiteReport:
        if self._session is not None:
            return TestSuiteReport(self.target, self._session.run_tests())
        assert self._file is not None
        res = self._runner.test(self._file)
        reports = []
        for e in res.of("test"):
            if "error" in e:
                reports.append(TestReport(f"test {e['index']}", False, float("inf"), float("inf"), 0, 0, -1, -1, 0,
                                          0.0, error=e["error"]))
            else:
                reports.append(TestReport(e["name"], bool(e["passed"]), e["max_abs_error"] or 0.0,
                                          e["max_rel_error"] or 0.0, e["atol"], e["rtol"], e["mismatches"],
                                          e["first_mismatch"], e["output"], e["ms"]))
        return TestSuiteReport(self.target, reports)

    @property
    def memory(self) -> dict[str, int]:
        if self._session is not None:
            return dict(self._session.requirements)
        return {}


def load(source: Any, *, target: str = "host", threads: int | None = None,
         device_libs: list[str] | None = None) -> Module:
    if isinstance(source, Program):
        prog = source
    elif isinstance(source, (bytes, bytearray, memoryview)):
        prog = Program(bytes(source))
    elif isinstance(source, (str, Path)):
        prog = Program.load(source)
    else:
        raise OpenAccelError(f"oa.load takes a path, bytes or Program, not {type(source).__name__}")
    return Module(prog, target, threads, device_libs)


def devices(target: str = "host", device_libs: list[str] | None = None) -> list[dict[str, Any]]:
    """The runtime's devices on `target` as oa_run enumerates them there (under QEMU for
    emulated boards): properties, query answers and supported ops with dtypes. A CPU device also
    gets "cpu": the CPU's model, its vector extensions, the ISA openaccel's kernels use on it and
    whether it is emulated (so figures from different machines are never mixed up)."""
    from .runner import Runner

    runner = Runner(target)
    devs = runner.devices(device_libs or [])
    for d in devs:
        if d.get("kind") == "cpu":
            d["cpu"] = describe_cpu(runner.target, d.get("queries", {}))
    return devs


def describe_cpu(target: Any, queries: dict[str, int]) -> dict[str, Any]:
    """What the CPU device of `target` runs on: this machine's CPU, or the one QEMU emulates."""
    from ..hostinfo import host_cpu, kernel_isa

    host = host_cpu()
    isa = kernel_isa(queries)
    if target.runs_here_natively or not target.emulator:
        return {"model": host.model, "vector_extensions": list(host.vector_extensions), "kernel_isa": isa,
                "emulated": False}
    args = target.emulator_command_args()
    cpu = args[args.index("-cpu") + 1] if "-cpu" in args[:-1] else "default CPU"
    keys = ("cpu.neon", "cpu.fp16", "cpu.dotprod", "cpu.i8mm", "cpu.v")
    ext = [k.removeprefix("cpu.") for k in keys if queries.get(k)]
    return {"model": f"{cpu} emulated by {target.emulator} on {host.model}", "vector_extensions": ext,
            "kernel_isa": isa, "emulated": True}
