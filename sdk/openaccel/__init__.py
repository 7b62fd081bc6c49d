"""openaccel: export PyTorch programs to .oab bytecode and run them on edge boards.

    import openaccel as oa
    prog = oa.export(model, (x,))            # torch.export -> edge -> openaccel passes -> .oab
    prog.save("model.oab")
    qprog = oa.quantize(model, (x,), calibration=[(x1,), (x2,)])   # PT2E int8 -> .oab (quantize.py)
    mod = oa.load("model.oab", target="host")
    (y,) = mod(x)

Importing this package does not import torch (the CLI's fast commands rely on that); `export`
imports it on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# before `def targets` / `def quantize` below (see there): the functions, not these submodules, are
# `oa.targets` / `oa.quantize`
from . import quantize as _quantize
from . import targets as _targets
from .errors import (
    CheckFailed,
    CpuFeatureError,
    ExportError,
    ExportWarning,
    InputError,
    ModelLoadError,
    OpenAccelError,
    ProgramError,
    RuntimeFailure,
    ToolchainError,
    UnsupportedOpError,
)
from .program import Program
from .version import __version__

if TYPE_CHECKING:
    from .runtime.module import Module

__all__ = [
    "CheckFailed", "CpuFeatureError", "ExportError", "ExportWarning", "InputError", "ModelLoadError",
    "OpenAccelError", "Program", "ProgramError", "RuntimeFailure", "ToolchainError", "UnsupportedOpError",
    "__version__",
    "devices", "export", "load", "quantize", "targets",
]


def export(model: Any, example_inputs: Any, **kwargs: Any) -> Program:
    """Export an nn.Module or ExportedProgram to an openaccel Program (see export.export)."""
    from .exporter import export as _export

    return _export(model, example_inputs, **kwargs)


def quantize(model: Any, example_inputs: Any, calibration: Any = None, *, per_channel: bool = True,
             **export_kwargs: Any) -> Program:
    """Quantize a float model to int8 (PT2E, XNNPACKQuantizer) with `calibration` (input sets or
    a directory of .npy files) and export it, as oa.export does (see quantize.quantize)."""
    return _quantize.quantize(model, example_inputs, calibration, per_channel=per_channel, **export_kwargs)


def load(source: Any, *, target: str = "host", threads: int | None = None,
         device_libs: list[str] | None = None) -> Module:
    """Load a program (path, Program or bytes) for `target`; returns a callable Module.
    `device_libs`: vendor device libraries whose devices the program may be placed on."""
    from .runtime.module import load as _load

    return _load(source, target=target, threads=threads, device_libs=device_libs)


def targets() -> list[Any]:
    """Known targets and whether each is ready on this machine.

    The submodule openaccel.targets (cheap: no torch) is imported at the top of this file so that
    this function, defined after it, is what `oa.targets` names: importing a submodule for the
    first time sets the package attribute of its name, which replaced this function with the
    module on the first call."""
    return _targets.list_targets()


def devices(target: str = "host", device_libs: list[str] | None = None) -> list[dict[str, Any]]:
    """Devices the runtime enumerates on `target`, with their properties and capabilities."""
    from .runtime.module import devices as _devices

    return _devices(target, device_libs)
