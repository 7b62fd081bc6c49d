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


@dataclass
class OpCase:
    """One op test: `fn(*inputs)` exported, run, and compared with eager.

    `ops` lists openaccel ops that must appear in the program (so the kernel under test really
    ran and was not folded away); tolerances default to torch.testing.assert_close's for fp32."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple[torch.Tensor, ...]
    ops: tuple[str, ...] = ()
    atol: float = 1e-5
    rtol: float = 1.3e-6
    consts: tuple[torch.Tensor, ...] = ()
    module: torch.nn.Module | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)

    def model(self) -> torch.nn.Module:
        return self.module if self.module is not None else Fn(self.fn, self.consts)

    def __repr__(self) -> str:
        return self.name


def _flat(out: Any) -> list[torch.Tensor]:
    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def export_case(case: OpCase) -> oa.Program:
    """Export a case, caching the .oab under build/test-cache/ops (reused by the QEMU suites)."""
    model = case.model().eval()
    prog = oa.export(model, case.inputs, tolerance=(case.atol, case.rtol))
    CACHE.joinpath("ops").mkdir(parents=True, exist_ok=True)
    prog.save(CACHE / "ops" / f"{case.name}.oab")
    return prog


def run_case(case: OpCase, target: str = "host") -> oa.Program:
    """Export, run on `target`, compare with eager; also run the bundled test."""
    prog = export_case(case)
    missing = [op for op in case.ops if op not in prog.ops]
    assert not missing, f"{case.name}: expected ops {missing} in the program, got {prog.ops}"
    model = case.model().eval()
    with torch.no_grad():
        want = _flat(model(*case.inputs))
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
    return prog


def digest(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def randint(lo: int, hi: int, *shape: int, seed: int = 0, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g, dtype=dtype)
