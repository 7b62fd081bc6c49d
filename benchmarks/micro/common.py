"""What the micro-benchmarks share: a module wrapping a function and its constants, and a call
that runs an exported program once through the C API alone."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from openaccel.runtime.host import Diag, HostSession


class ConstFn(torch.nn.Module):
    """fn(*inputs, *consts) as a module whose constants are buffers (exported as weights)."""

    def __init__(self, fn: Callable[..., torch.Tensor], consts: tuple[torch.Tensor, ...]) -> None:
        super().__init__()
        self.fn = fn
        for i, c in enumerate(consts):
            self.register_buffer(f"c{i}", c)
        self.n = len(consts)

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(*xs, *[getattr(self, f"c{i}") for i in range(self.n)])


def execute_only(path: Path, inputs: list[np.ndarray], threads: int, reference: bool,
                 name: str, isas: list[str] | None = None) -> Callable[[], None]:
    """A function running the program at `path` once (oa_method_execute only: the inputs are set
    once here and stay set). `isas`: the ISAs the optimized kernels may use (None: all)."""
    sess = HostSession(path.read_bytes(), threads=threads, reference_only=reference, isas=isas)
    sess.run(inputs)
    lib, method, diag = sess._lib, sess._method, Diag()

    def run() -> None:
        if lib.oa_method_execute(method, ctypes.byref(diag)):
            raise RuntimeError(f"{name}: execute failed: {diag.message.decode(errors='replace')}")

    run.session = sess  # type: ignore[attr-defined]  # keeps the method alive
    return run
