"""Errors raised by openaccel. Every user-facing error derives from OpenAccelError and says what
was wrong, where (op, input name, file offset, source line) and what was expected."""

from __future__ import annotations


class OpenAccelError(Exception):
    """Base class of every openaccel error. The CLI prints these without a traceback (exit 2)."""

    exit_code = 2


class ModelLoadError(OpenAccelError):
    """A model file could not be read or is not a format openaccel accepts."""


class ExportError(OpenAccelError):
    """torch.export / to_edge / openaccel's passes could not turn the model into bytecode."""


class UnsupportedOpError(ExportError):
    """The model uses an op (or an op variant) the runtime has no kernel for."""


class ProgramError(OpenAccelError):
    """An .oab file is malformed, truncated, or from a newer format."""


class InputError(OpenAccelError):
    """Inputs given to a program have the wrong count, shape or dtype."""


class RuntimeFailure(OpenAccelError):
    """The C runtime reported an error while loading, preparing or executing."""


class CpuFeatureError(RuntimeFailure):
    """The file was exported for CPU features (Program.required_features, from the target's
    cpu_features) that the CPU running it lacks: the message names them, the target and the CPU."""


class ToolchainError(OpenAccelError):
    """A compiler, emulator or build tool needed for a target is missing or failed."""


class ExportWarning(UserWarning):
    """The export did something the user may not expect and should know about: e.g. ops run on the
    CPU although an accelerator is preferred (how many, and why). `openaccel export` prints these."""


class CheckFailed(OpenAccelError):
    """A bundled test or comparison ran but its results were outside tolerance (exit 1)."""

    exit_code = 1
