"""Loading model files for `openaccel export`: torch.export archives (primary), and pickled
nn.Modules only with explicit opt-in (unpickling runs arbitrary code). Nothing in a file is
unpickled without that opt-in, whatever route torch takes inside the archive, and no member is
inflated past sane limits (archive.py)."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import pickle
import re
import sys
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ..errors import ModelLoadError
from . import archive
from .dynamic import check_static_inputs


def parse_input_shape(spec: str) -> tuple[str, tuple[int, ...], torch.dtype]:
    """'x=1x3x224x224' or 'idx=1x32:int64' -> (name, shape, dtype)."""
    if "=" not in spec:
        raise ModelLoadError(f"--input-shape {spec!r}: expected NAME=DxDxD (e.g. x=1x3x224x224)")
    name, rest = spec.split("=", 1)
    dtype = torch.float32
    if ":" in rest:
        rest, dt = rest.split(":", 1)
        found = getattr(torch, dt, None)
        if not isinstance(found, torch.dtype):
            raise ModelLoadError(f"--input-shape {spec!r}: unknown dtype {dt!r}")
        dtype = found
    try:
        shape = tuple(int(d) for d in rest.lower().split("x")) if rest else ()
    except ValueError:
        raise ModelLoadError(f"--input-shape {spec!r}: dimensions must be integers joined by 'x'") from None
    if any(d < 0 for d in shape):
        raise ModelLoadError(f"--input-shape {spec!r}: dimensions must be >= 0")
    return name.strip(), shape, dtype


def _kind(names: list[str]) -> str:
    if any(n.endswith("models/model.json") or "/models/" in n for n in names):
        return "export"
    if any("/code/" in n for n in names) or any(n.endswith("constants.pkl") for n in names):
        return "torchscript"
    if any(n.endswith("data.pkl") for n in names):
        return "pickle"
    return "unknown-zip"


def _inspect_zip(p: Path) -> str:
    """The archive's kind, after the checks torch does not make (sizes; pickled payloads are
    checked by the caller, which knows whether they are allowed)."""
    try:
        with zipfile.ZipFile(p) as z:
            archive.check_sizes(z.infolist(), p.stat().st_size, str(p))
            kind = _kind(z.namelist())
            if kind in ("export", "pickle"):
                for name in z.namelist():
                    if name.endswith(".pt"):  # sample inputs, legacy weights: torch.save archives
                        archive.check_nested(z, name, str(p))
            return kind
    except zipfile.BadZipFile:
        return "not-zip"
    except (zipfile.LargeZipFile, NotImplementedError, EOFError, ValueError) as e:
        raise ModelLoadError(f"{p}: a damaged zip archive ({type(e).__name__}: {e})") from None


def example_for(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    return torch.randint(0, 2, shape, generator=gen).to(dtype)


def import_model_module(path: str | Path) -> ModuleType:
    """Run FILE.py as a module (not as __main__: its `if __name__ == "__main__":` block does not
    run) so that a pickle can find the classes the saving script defined. Its directory goes on
    sys.path, as for `python FILE.py`, so its own imports of neighbouring files work."""
    f = Path(path)
    if not f.is_file():
        raise ModelLoadError(f"--model-module {f}: no such file")
    folder = str(f.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = "_openaccel_model_" + re.sub(r"\W", "_", f.stem)
    spec = importlib.util.spec_from_file_location(name, f)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"--model-module {f}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        frames = [fr for fr in traceback.extract_tb(e.__traceback__) if fr.filename == str(f)]
        at = f" at line {frames[-1].lineno}" if frames else ""
        raise ModelLoadError(f"--model-module {f}: importing it failed{at}: {type(e).__name__}: {e}") from None
    return module


@dataclass
class _Lookup:
    """What an unpickler looked for and did not find."""

    module: str
    name: str
    error: str


def _pickle_module(modules: dict[str, ModuleType], misses: list[_Lookup]) -> ModuleType:
    """A stand-in for the pickle module whose Unpickler finds `__main__.X` (and `stem.X`) in the
    --model-module and records every class it cannot find."""

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            try:
                if module in modules:
                    return functools.reduce(getattr, name.split("."), modules[module])
                return super().find_class(module, name)
            except (AttributeError, ImportError) as e:
                misses.append(_Lookup(module, name, f"{type(e).__name__}: {e}"))
                raise

    shim = ModuleType("openaccel_unpickler")
    shim.Unpickler = Unpickler  # type: ignore[attr-defined]
    shim.load = lambda f, **kw: Unpickler(f, **kw).load()  # type: ignore[attr-defined]
    shim.UnpicklingError = pickle.UnpicklingError  # type: ignore[attr-defined]
    return shim


def _explain_miss(p: Path, miss: _Lookup, model_module: str | Path | None) -> ModelLoadError:
    cls = f"{miss.module}.{miss.name}"
    if model_module is not None and miss.module in ("__main__", Path(model_module).stem):
        return ModelLoadError(f"{p}: the pickle needs class {cls}, and --model-module {model_module} does not "
                              f"define '{miss.name}'")
    save = ("or save the model with torch.export.save(torch.export.export(model, example_inputs), "
            "'model.pt2'), which needs no Python code to load")
    if miss.module == "__main__":
        return ModelLoadError(
            f"{p}: the pickle needs class {cls}: '{miss.name}' was defined in the script that saved the model "
            "(its __main__), and a pickle stores a class's name, not its code. Pass --model-module FILE.py, a "
            f"file that defines {miss.name} (the saving script will do: it is imported under another name, so "
            f"its `if __name__ == \"__main__\":` block does not run), {save}")
    if miss.error.startswith(("ModuleNotFoundError", "ImportError")):
        return ModelLoadError(
            f"{p}: the pickle needs class {cls}, but module '{miss.module}' cannot be imported here "
            f"({miss.error}). Pass --model-module path/to/{miss.module.rsplit('.', 1)[-1]}.py, put the "
            f"module's directory on PYTHONPATH, {save}")
    return ModelLoadError(f"{p}: the pickle needs class {cls}, which module '{miss.module}' does not have "
                          f"(renamed or moved since the file was saved?): {miss.error}")


def _register_quantized_ops() -> None:
    """Make the `quantized_decomposed::*` ops of PT2E-quantized programs known to torch before
    it deserializes a .pt2 (torch registers them on import of this module only; without it the
    load fails with "check the warnings above" and the warning goes to a logger nobody sees)."""
    with contextlib.suppress(ImportError):
        importlib.import_module("torch.ao.quantization.fx._decomposed")


@contextlib.contextmanager
def _load_errors() -> Any:
    """The errors torch.export.load logs (and then replaces by "check the warnings above")."""
    import logging

    found: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            exc = record.exc_info[1] if record.exc_info else None
            found.append(f"{type(exc).__name__}: {exc}" if exc is not None else record.getMessage())

    logger = logging.getLogger("torch.export")
    handler = _Keep(level=logging.WARNING)
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)


def load_model(path: str | Path, *, allow_pickle: bool = False, input_shapes: list[str] | None = None,
               model_module: str | Path | None = None) -> tuple[Any, tuple[torch.Tensor, ...]]:
    """Return (nn.Module or ExportedProgram, example inputs).

    Nothing in the file is unpickled without `allow_pickle` (see archive.py for the checks made
    before torch reads it). `model_module`: a .py file defining the classes a pickled module
    refers to (classes of the script that saved it are pickled as `__main__.Name`)."""
    p = Path(path)
    if not p.exists():
        raise ModelLoadError(f"{p}: no such file")
    if not p.is_file():
        raise ModelLoadError(f"{p}: not a regular file")
    try:
        kind = _inspect_zip(p)
    except OSError as e:
        raise ModelLoadError(f"{p}: cannot read ({e.strerror})") from None
    if model_module is not None and kind != "pickle":
        raise ModelLoadError(f"--model-module applies to pickled modules (torch.save) only; {p} is not one")
    gen = torch.Generator().manual_seed(0)
    if kind == "export":
        if input_shapes:
            raise ModelLoadError("--input-shape applies to pickled modules only; a torch.export "
                                 "archive already fixes its input shapes")
        guard: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if not allow_pickle:
            with zipfile.ZipFile(p) as z:
                archive.check_payloads(z, str(p))
                root = z.namelist()[0].split("/", 1)[0] if z.namelist() else ""
            guard = archive.refuse_unpickling(str(p), root)
        _register_quantized_ops()
        try:
            with guard, _load_errors() as hidden:
                ep = torch.export.load(str(p))
        except ModelLoadError:
            raise
        except Exception as e:
            cause = f" (the deserializer's error: {hidden[-1]})" if hidden else ""
            raise ModelLoadError(f"{p}: torch.export.load failed: {type(e).__name__}: {e}{cause}") from None
        check_static_inputs(ep)
        ex = getattr(ep, "example_inputs", None)
        args: tuple[Any, ...] = ()
        if ex is not None:
            args = tuple(ex[0])
        if not args:
            vals = [n.meta["val"] for n in ep.graph.nodes
                    if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs]
            args = tuple(example_for(tuple(v.shape), v.dtype, gen) for v in vals)
        return ep, args
    if kind == "torchscript":
        raise ModelLoadError(
            f"{p} is a TorchScript file; torch.export cannot trace TorchScript. Save the Python "
            "model with torch.export.save(torch.export.export(model, example_inputs), 'model.pt2')")
    if kind == "pickle":
        if not allow_pickle:
            raise ModelLoadError(
                f"{p} is a pickled nn.Module (torch.save); loading it runs arbitrary code. Pass "
                "--allow-pickle if you trust the file (with --input-shape NAME=DxD...), or save it "
                "with torch.export.save instead")
        if not input_shapes:
            raise ModelLoadError(f"{p}: a pickled module needs --input-shape NAME=DxD... for each input")
        specs = [parse_input_shape(s) for s in input_shapes]
        modules: dict[str, ModuleType] = {}
        if model_module is not None:
            mod = import_model_module(model_module)
            modules = {"__main__": mod, Path(model_module).stem: mod}
        misses: list[_Lookup] = []
        try:
            model = torch.load(str(p), weights_only=False, map_location="cpu",
                               pickle_module=_pickle_module(modules, misses))
        except Exception as e:
            if misses:
                raise _explain_miss(p, misses[0], model_module) from None
            raise ModelLoadError(f"{p}: unpickling failed: {type(e).__name__}: {e}") from None
        if not isinstance(model, torch.nn.Module):
            raise ModelLoadError(f"{p} holds a {type(model).__name__}, not an nn.Module (a state_dict "
                                 "needs the model's code: build the module and torch.export.save it)")
        params = [n for n, prm in inspect.signature(model.forward).parameters.items()
                  if prm.kind in (prm.POSITIONAL_ONLY, prm.POSITIONAL_OR_KEYWORD)]
        by_name = {name: (shape, dt) for name, shape, dt in specs}
        unknown = [n for n in by_name if n not in params]
        if unknown:
            raise ModelLoadError(f"--input-shape names {unknown} are not inputs of {type(model).__name__}"
                                 f".forward (inputs: {params})")
        missing = [n for n in params if n not in by_name]
        if len(by_name) < len(params) and missing and len(specs) != len(params):
            ordered = [(s[1], s[2]) for s in specs]
        else:
            ordered = [by_name[n] for n in params if n in by_name]
        args = tuple(example_for(shape, dt, gen) for shape, dt in ordered)
        return model.eval(), args
    if kind == "not-zip":
        raise ModelLoadError(f"{p} is not a torch.export archive (.pt2) or a torch.save file "
                             "(not a zip archive)")
    raise ModelLoadError(f"{p} is a zip archive but not a torch.export archive or torch.save file")
