"""Helpers for op and model tests: export a small program, run it on a target, compare with
PyTorch eager on the same inputs."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import openaccel as oa

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("OA_TEST_CACHE", REPO / "build" / "test-cache"))

# Every op test also runs its bundled vectors on these emulated boards (empty = host only).
QEMU_TARGETS = [t for t in os.environ.get("OA_QEMU_TARGETS", "qemu-aarch64,qemu-armv7,qemu-riscv64").split(",") if t]
_runners: dict[str, Any] = {}


def runner(target: str) -> Any:
    """A cached oa_run runner for `target` (builds the runtime once per source hash)."""
    from openaccel.runtime.runner import Runner

    if target not in _runners:
        _runners[target] = Runner(target)
    return _runners[target]


def check_on_boards(path: Path, name: str, targets: Sequence[str] = ()) -> None:
    """Run a file's bundled tests under each emulated target; every test must pass."""
    for t in targets or QEMU_TARGETS:
        res = runner(t).test(path)
        tests = res.of("test")
        assert tests, f"{name}: no bundled test ran on {t}"
        bad = [e for e in tests if not e.get("passed")]
        assert not bad, f"{name}: bundled test failed on {t}: {bad}"


class Fn(torch.nn.Module):
    """Wrap a function of tensors as a module (constants passed via `consts` become buffers)."""

    def __init__(self, fn: Callable[..., Any], consts: Sequence[torch.Tensor] = ()) -> None:
        super().__init__()
        self.fn = fn
        for i, c in enumerate(consts):
            self.register_buffer(f"c{i}", c)
        self.n = len(consts)

    def forward(self, *xs: torch.Tensor) -> Any:
        consts = [getattr(self, f"c{i}") for i in range(self.n)]
        return self.fn(*xs, *consts)


# OpCase tag: float32 eager is the defined answer, the same on every CPU (an exact float32 operation such
# as nextafter), and float64 is not; tests/ops/test_reference_stability.py does not ask such cases to
# use the float64 reference.
FLOAT32_DEFINED = "float32-defined"


@dataclass
class OpCase:
    """One op test: `fn(*inputs)` exported, run, and compared with eager.

    `ops` lists openaccel ops that must appear in the program (so the kernel under test really
    ran and was not folded away); tolerances default to torch.testing.assert_close's for fp32.
    `reference` is where the expected outputs come from: "float32" eager, or "float64" eager
    cast back where float32 eager is not the defined answer on every CPU (special values, near
    FLT_MAX: tests/ops/test_reference_stability.py finds those cases and names them)."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple[torch.Tensor, ...]
    ops: tuple[str, ...] = ()
    atol: float = 1e-5
    rtol: float = 1.3e-6
    consts: tuple[torch.Tensor, ...] = ()
    module: torch.nn.Module | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    export_kwargs: dict[str, Any] = field(default_factory=dict)  # more arguments of oa.export
    reference: str = "float32"

    def model(self) -> torch.nn.Module:
        return self.module if self.module is not None else Fn(self.fn, self.consts)

    def __repr__(self) -> str:
        return self.name


def expected_outputs(case: OpCase, reference: str | None = None) -> list[torch.Tensor]:
    """The case's expected outputs from its reference (or the one named), as the export bundles them."""
    from openaccel.exporter import reference_outputs

    return reference_outputs(case.model().eval(), case.inputs, reference or case.reference)


def case_path(case: OpCase) -> Path:
    return CACHE / "ops" / f"{case.name}.oab"


def export_case(case: OpCase) -> oa.Program:
    """Export a case and keep the .oab under build/test-cache/ops (a seed corpus for fuzzing)."""
    model = case.model().eval()
    prog = oa.export(model, case.inputs, tolerance=(case.atol, case.rtol), reference=case.reference,
                     **case.export_kwargs)
    CACHE.joinpath("ops").mkdir(parents=True, exist_ok=True)
    prog.save(case_path(case))
    return prog


def run_case(case: OpCase, target: str = "host") -> oa.Program:
    """Export, run on `target`, compare with eager; run the bundled test there and, for host
    runs, on every emulated board of QEMU_TARGETS (the same file must pass everywhere)."""
    prog = export_case(case)
    missing = [op for op in case.ops if op not in prog.ops]
    assert not missing, f"{case.name}: expected ops {missing} in the program, got {prog.ops}"
    want = expected_outputs(case)
    mod = oa.load(prog, target=target)
    got = mod(*case.inputs)
    assert len(got) == len(want), f"{case.name}: {len(got)} outputs, eager has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"{case.name} output {i}: dtype {g.dtype}, eager {w.dtype}"
        assert g.shape == w.shape, f"{case.name} output {i}: shape {tuple(g.shape)}, eager {tuple(w.shape)}"
        torch.testing.assert_close(g, w, atol=case.atol, rtol=case.rtol, equal_nan=True,
                                   msg=lambda m, i=i: f"{case.name} output {i}: {m}")
    report = mod.run_bundled_tests()
    assert report.ok, f"{case.name}: bundled test failed on {target}:\n{report}"
    if target == "host":
        check_on_boards(case_path(case), case.name)
    return prog


def digest(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def randint(lo: int, hi: int, *shape: int, seed: int = 0, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g, dtype=dtype)


def tamper(monkeypatch: Any, edge_op: str, ints: dict[int, int] | None = None,
           floats: list[float] | None = None) -> None:
    """Make the lowering rule for `edge_op` emit an instruction with altered arguments: the file
    a hostile or buggy exporter would write, which the runtime must refuse with a clear message."""
    from openaccel.exporter.lower import RULES, LowerCtx, supported_edge_ops
    from openaccel.ir import AtenNode

    supported_edge_ops()
    base = RULES[edge_op]

    def patched(ctx: LowerCtx, node: AtenNode) -> None:
        base(ctx, node)
        ins = ctx.instrs[-1]
        for k, v in (ints or {}).items():
            ins.ints[k] = v
        if floats is not None:
            ins.floats = list(floats)

    monkeypatch.setitem(RULES, edge_op, patched)


def check_rejected(monkeypatch: Any, edge_op: str, fn: Callable[..., Any], x: torch.Tensor, match: str,
                   ints: dict[int, int] | None = None, floats: list[float] | None = None) -> None:
    """Export `fn` with tampered arguments; running it must fail with a message matching `match`."""
    import pytest

    tamper(monkeypatch, edge_op, ints, floats)
    prog = oa.export(Fn(fn), (x,), bundle_tests=False)
    with pytest.raises(oa.RuntimeFailure, match=match):
        oa.load(prog)(x)
