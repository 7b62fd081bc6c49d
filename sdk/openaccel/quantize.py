"""oa.quantize: a float model to an int8 .oab program in one call (and `openaccel export
--quantize int8 --calibration DIR`).

    torch.export -> prepare_pt2e (executorch's XNNPACKQuantizer, symmetric int8, per-channel
    weights by default) -> calibration -> convert_pt2e -> torch.export -> oa.export

The quantizer config is the one openaccel's int8 kernels implement (docs/quantization.md), so
every conv / linear / add of a supported pattern folds into an int8 instruction.

Calibration data (the activation ranges come from it):
- an iterable of input sets, each a tuple of tensors / numpy arrays in the model's input order
  (a bare tensor or array is a set for a one-input model);
- a directory of .npy files (the layout: `calibration_dir_sets`; docs/quantization.md);
- None: only the example inputs are used, with a CalibrationWarning (ranges from one set are
  rarely representative of real data).

This module does not import torch at import time (the CLI's fast commands import the package).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .errors import ExportError, ExportWarning

if TYPE_CHECKING:
    import torch

    from .program import Program

Progress = Callable[[str, float], None]

# How often (seconds) calibration over many sets reports how far it is.
PROGRESS_EVERY_S = 2.0


class CalibrationWarning(ExportWarning):
    """Quantization ran without calibration data: the activation ranges come from the example
    inputs alone."""


class CalibrationError(ExportError):
    """Calibration data that does not fit the model: a set with the wrong number of inputs, a
    shape or dtype other than the model's, a file that is not a readable .npy array, or a
    directory that does not follow the documented layout."""


class AlreadyQuantizedError(ExportError):
    """The model given to oa.quantize / `--quantize` is already quantized (it has q/dq ops)."""


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    def describe(self) -> str:
        return f"{self.dtype.name}{list(self.shape)}"


# ---- model facts ---------------------------------------------------------------------------------
def _input_specs(ep: torch.export.ExportedProgram) -> list[InputSpec]:
    import torch

    user = set(ep.graph_signature.user_inputs)
    specs = []
    for n in ep.graph.nodes:
        if n.op == "placeholder" and n.name in user:
            v = n.meta.get("val")
            if isinstance(v, torch.Tensor):
                try:
                    dt = torch.empty((), dtype=v.dtype).numpy().dtype
                except TypeError:  # bfloat16 and the like have no numpy dtype
                    raise CalibrationError(f"input '{n.name}' is {v.dtype}, which has no .npy dtype") from None
                specs.append(InputSpec(n.name, tuple(int(d) for d in v.shape), dt))
    return specs


def quantized_nodes(ep: torch.export.ExportedProgram) -> list[tuple[str, str]]:
    """(op, where) of every quantize / dequantize-like node (PT2E's quantized_decomposed ops,
    torchao's *_affine ops), at most one per op name."""
    from .exporter.fx_import import source_of
    from .ir import op_name_of

    found: dict[str, str] = {}
    for n in ep.graph.nodes:
        if n.op != "call_function":
            continue
        name = op_name_of(n.target)
        if name.startswith(("quantized_decomposed.", "torchao.")) and name not in found:
            found[name] = source_of(n).describe()
    return list(found.items())


def _refuse_quantized(ep: torch.export.ExportedProgram) -> None:
    found = quantized_nodes(ep)
    if found:
        lines = "\n".join(f"  {op} (at {where})" for op, where in found[:6])
        raise AlreadyQuantizedError(
            "the model is already quantized, so it cannot be quantized again:\n" + lines
            + "\nExport it without --quantize (oa.export): its q/dq patterns are folded into int8 instructions")


# ---- calibration data ----------------------------------------------------------------------------
def _as_array(x: Any, what: str) -> np.ndarray:
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    raise CalibrationError(f"{what}: expected a tensor or numpy array, got {type(x).__name__}")


def check_set(values: Sequence[np.ndarray], specs: Sequence[InputSpec], what: str) -> None:
    """Each array of one calibration set against the model's inputs (count, shape, dtype)."""
    if len(values) != len(specs):
        names = ", ".join(f"'{s.name}' {s.describe()}" for s in specs)
        raise CalibrationError(f"{what}: {len(values)} input(s), the model takes {len(specs)} ({names})")
    for v, s in zip(values, specs):
        if v.dtype != s.dtype or tuple(v.shape) != s.shape:
            hint = (f" (save it as {s.dtype.name}: np.save(f, x.astype(np.{s.dtype.name})))"
                    if tuple(v.shape) == s.shape else "")
            raise CalibrationError(f"{what}: input '{s.name}' is {v.dtype.name}{list(v.shape)}, the model "
                                   f"takes {s.describe()}{hint}")


def _read_npy(f: Path) -> np.ndarray:
    try:
        a = np.load(f, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise CalibrationError(f"{f}: not a readable .npy array ({type(e).__name__}: {e})") from None
    if not isinstance(a, np.ndarray):  # an .npz renamed .npy
        raise CalibrationError(f"{f}: not a single .npy array")
    if a.dtype.fields is not None or a.dtype.kind not in "biuf":
        raise CalibrationError(f"{f}: dtype {a.dtype} is not a numeric array")
    return a


@dataclass(frozen=True)
class CalibrationSet:
    name: str                          # what errors name: the file or folder
    values: tuple[np.ndarray, ...]


def calibration_dir_sets(directory: str | Path, specs: Sequence[InputSpec]) -> list[Path]:
    """The entries of a calibration directory, checked against its layout (not yet read):

    - a model with one input: one `<set>.npy` file per set (e.g. 000.npy, 001.npy, ...), or
    - any model: one sub-folder per set, holding `<input name>.npy` for each input (the names
      `openaccel inspect` prints for the exported file, the forward()'s argument names).

    Sets are read in sorted name order; hidden entries (".name") are skipped. One layout per
    directory: .npy files and sub-folders side by side are an error, as is anything else."""
    d = Path(directory)
    if not d.exists():
        raise CalibrationError(f"--calibration {d}: no such directory")
    if not d.is_dir():
        raise CalibrationError(f"--calibration {d}: not a directory (it holds one .npy file, or one folder, per "
                               "calibration set)")
    entries = sorted(p for p in d.iterdir() if not p.name.startswith("."))
    files = [p for p in entries if p.is_file() and p.suffix == ".npy"]
    folders = [p for p in entries if p.is_dir()]
    other = [p for p in entries if p not in files and p not in folders]
    if other:
        raise CalibrationError(f"{other[0]}: not a .npy file or a folder (a calibration directory holds one "
                               "<set>.npy per set, or one folder per set with <input name>.npy files)")
    if files and folders:
        raise CalibrationError(f"{d}: holds both .npy files ({files[0].name}) and folders ({folders[0].name}); "
                               "use one layout: <set>.npy files (one-input models) or <set>/<input name>.npy")
    if not entries:
        raise CalibrationError(f"{d}: no calibration sets (expected <set>.npy files, or <set>/<input name>.npy)")
    if files and len(specs) != 1:
        names = ", ".join(s.name for s in specs)
        raise CalibrationError(f"{files[0]}: a .npy file per set works for one-input models only; this model "
                               f"takes {len(specs)} inputs ({names}): put each set in a folder holding "
                               + ", ".join(f"{s.name}.npy" for s in specs))
    return files or folders


def read_set(entry: Path, specs: Sequence[InputSpec]) -> CalibrationSet:
    """One calibration set of a directory (see calibration_dir_sets), checked against `specs`."""
    if entry.is_file():
        a = _read_npy(entry)
        check_set([a], specs, str(entry))
        return CalibrationSet(str(entry), (a,))
    want = {f"{s.name}.npy" for s in specs}
    have = sorted(p.name for p in entry.iterdir() if not p.name.startswith("."))
    extra = [n for n in have if n not in want]
    if extra:
        raise CalibrationError(f"{entry / extra[0]}: not an input of the model (expected "
                               + ", ".join(sorted(want)) + ")")
    values = []
    for s in specs:
        f = entry / f"{s.name}.npy"
        if not f.is_file():
            raise CalibrationError(f"{f}: missing (the model takes {s.name}: {s.describe()})")
        a = _read_npy(f)
        check_set([a], [s], str(f))
        values.append(a)
    return CalibrationSet(str(entry), tuple(values))


def _sets(calibration: Any, specs: Sequence[InputSpec]) -> tuple[Iterator[CalibrationSet], int | None]:
    """The calibration sets (lazily: a directory's files are read one at a time) and their count
    when known."""
    if isinstance(calibration, (str, Path)):
        entries = calibration_dir_sets(calibration, specs)
        return (read_set(e, specs) for e in entries), len(entries)
    if not isinstance(calibration, Iterable):
        raise CalibrationError(f"calibration: expected an iterable of input tuples or a directory path, got "
                               f"{type(calibration).__name__}")
    def one(k: int, item: Any) -> CalibrationSet:
        what = f"calibration set {k}"
        items = item if isinstance(item, (tuple, list)) else (item,)
        values = tuple(_as_array(x, f"{what}, input {i}") for i, x in enumerate(items))
        check_set(values, specs, what)
        return CalibrationSet(what, values)

    if isinstance(calibration, Sized):  # a list is in memory already: check it all before the slow steps
        checked = [one(k, item) for k, item in enumerate(calibration)]
        return iter(checked), len(checked)
    return (one(k, item) for k, item in enumerate(calibration)), None


def _calibrate(prepared: Any, sets: Iterator[CalibrationSet], count: int | None, report: Progress) -> int:
    import torch

    t0 = last = time.perf_counter()
    done = 0
    with torch.no_grad():
        for s in sets:
            try:
                prepared(*[torch.from_numpy(np.ascontiguousarray(v)) for v in s.values])
            except Exception as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                raise CalibrationError(f"{s.name}: the model failed on it: {type(e).__name__}: {first}") from None
            done += 1
            now = time.perf_counter()
            if now - last >= PROGRESS_EVERY_S:  # a long calibration says how far it is
                of = f"/{count}" if count is not None else ""
                report(f"calibrate: {done}{of} sets", now - t0)
                last = now
    if done == 0:
        raise CalibrationError("calibration: no input sets (an empty list or directory)")
    return done


# ---- the one call --------------------------------------------------------------------------------
def quantizer(per_channel: bool = True) -> Any:
    """The PT2E quantizer whose conventions openaccel's int8 kernels implement."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel))


def quantize(model: Any, example_inputs: Sequence[Any], calibration: Any = None, *, per_channel: bool = True,
             **export_kwargs: Any) -> Program:
    """Quantize a float `model` (nn.Module or ExportedProgram) to int8 and export it; returns the
    Program, as oa.export does (`.save(path)` writes the .oab).

    calibration: an iterable of input sets (tuples of tensors / arrays in input order), a
             directory of .npy files (the layout of `calibration_dir_sets`), or None (the example
             inputs only, with a CalibrationWarning).
    per_channel: one weight scale per output channel (default) or one per tensor.
    export_kwargs: passed to oa.export (target, progress, bundle_tests, ...). `progress` also
             gets this function's steps (prepare, calibrate, convert). Dynamic shapes are an
             error: an .oab program has fixed shapes, and so do its quantization parameters."""
    import torch

    from .exporter import export
    from .exporter.dynamic import check_static_inputs

    progress: Progress | None = export_kwargs.get("progress")
    report: Progress = progress or (lambda step, seconds: None)
    if export_kwargs.get("dynamic_shapes") is not None:
        raise ExportError("dynamic_shapes cannot be combined with quantization: an .oab program has fixed "
                          "shapes (and its quantization parameters are calibrated for them); quantize with "
                          "static example shapes, one file per input size you need")
    example = tuple(example_inputs)

    def step(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        result = fn()
        report(name, time.perf_counter() - t0)
        return result

    if isinstance(model, torch.export.ExportedProgram):
        ep = model
    elif isinstance(model, torch.nn.Module):
        module = model.eval()

        def do_export() -> torch.export.ExportedProgram:
            try:
                return torch.export.export(module, example)
            except Exception as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                raise ExportError(f"torch.export failed: {type(e).__name__}: {first}") from None

        ep = step("torch.export", do_export)
    else:
        raise ExportError(f"model must be an nn.Module or an ExportedProgram, not {type(model).__name__}")
    check_static_inputs(ep)
    _refuse_quantized(ep)
    specs = _input_specs(ep)
    ex_arrays = tuple(_as_array(x, f"example input {i}") for i, x in enumerate(example))
    check_set(ex_arrays, specs, "example_inputs")

    if calibration is not None:  # a directory's layout is checked before the slow steps (its files as read)
        sets, count = _sets(calibration, specs)
    else:
        warnings.warn("no calibration data: the activation ranges come from the example inputs alone, which are "
                      "rarely representative; pass calibration= (input sets, or a directory of .npy files; "
                      "`openaccel export --quantize int8 --calibration DIR`)", CalibrationWarning,
                      stacklevel=_stacklevel())
        sets, count = iter([CalibrationSet("example_inputs", ex_arrays)]), 1

    def imports() -> tuple[Any, Any]:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        quantizer()  # imports executorch's quantizer: seconds on the first call, reported apart
        return prepare_pt2e, convert_pt2e

    prepare_pt2e, convert_pt2e = step("import torchao and executorch's XNNPACKQuantizer", imports)
    kind = "per-channel" if per_channel else "per-tensor"
    prepared = step(f"prepare_pt2e (XNNPACKQuantizer, symmetric int8, {kind} weights)",
                    lambda: prepare_pt2e(ep.module(), quantizer(per_channel)))
    t0 = time.perf_counter()
    n = _calibrate(prepared, sets, count, report)
    report(f"calibrate ({n} set{'s' if n != 1 else ''})", time.perf_counter() - t0)
    converted = step("convert_pt2e", lambda: convert_pt2e(prepared))

    def export_quantized() -> torch.export.ExportedProgram:
        try:
            return torch.export.export(converted, example)
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ExportError(f"torch.export of the quantized model failed: {type(e).__name__}: {first}") from None

    qep = step("torch.export (quantized)", export_quantized)
    return export(qep, example, **export_kwargs)


def _stacklevel() -> int:
    """The stacklevel of the first frame outside the openaccel package (the user's call)."""
    import sys

    package = str(Path(__file__).resolve().parent)
    level, frame = 1, sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


# ---- PyTorch's quantized reference ---------------------------------------------------------------
# The convert_pt2e graph run in eager is "PyTorch's quantized reference". In float32 it is not a
# defined answer: its rounding moves with the machine and with the kernels' summation order (on
# the small ResNet-18 only 75% of the final int8 outputs equal the same graph's float64 values;
# GPT's agree), so the reference must not move with the machine: the float64 evaluation is the
# defined answer openaccel is compared with, the float32 one is what eager prints.

Precision = Literal["float32", "float64"]
PRECISIONS: tuple[Precision, ...] = ("float32", "float64")


class QuantizedReferenceError(ExportError):
    """The quantized reference cannot evaluate the program as asked: a quantized op without a
    float64 definition here (dynamic quantization's choose_qparams, torchao's *_affine ops), a
    precision other than float32 / float64, or an int8 tensor of openaccel's whose size is not
    its node's."""


@dataclass(frozen=True)
class LocalDiff:
    """One int8 activation of openaccel's against the float64 quantize of openaccel's own inputs to
    that node (`local_int8_differences`): the kernel's own disagreement, without what it inherits
    from the layers before it."""

    count: int       # elements compared
    differing: int   # of them, those not equal to the reference
    max_diff: int    # the largest |ours - reference|, in int8 steps

    @property
    def exact(self) -> float:
        """The share (0..1) of elements equal to the reference."""
        return 1.0 - self.differing / self.count if self.count else 1.0

    def __add__(self, other: LocalDiff) -> LocalDiff:
        """The two together (e.g. over several input sets)."""
        return LocalDiff(self.count + other.count, self.differing + other.differing,
                         max(self.max_diff, other.max_diff))


# what each float64 quantized op is (the others have no float64 definition here)
_QUANTIZE_PER_TENSOR = ("quantized_decomposed.quantize_per_tensor.default",
                        "quantized_decomposed.quantize_per_tensor.tensor",
                        "quantized_decomposed.quantize_per_tensor.tensor2")
_F64_QUANT_OPS = (*_QUANTIZE_PER_TENSOR, "quantized_decomposed.quantize_per_channel.default",
                  "quantized_decomposed.dequantize_per_tensor.default",
                  "quantized_decomposed.dequantize_per_tensor.tensor",
                  "quantized_decomposed.dequantize_per_tensor.tensor2",
                  "quantized_decomposed.dequantize_per_channel.default")
QuantizeHook = Callable[["torch.fx.Node", "torch.Tensor"], "torch.Tensor"]


def _f64_quant(name: str, args: Sequence[Any]) -> torch.Tensor:
    """A quantized_decomposed op in float64 (`_F64_QUANT_OPS`): quantize is
    clamp(round_half_even(x / scale) + zp, qmin, qmax), dequantize (q - zp) * scale (exact)."""
    import torch

    def num(v: Any) -> Any:   # a tensor parameter (the .tensor overloads) in float64, a number as is
        return v.double() if isinstance(v, torch.Tensor) else v

    def along(v: Any, x: torch.Tensor, axis: int) -> Any:  # per-channel parameters broadcast on `axis`
        if v is None:
            return 0.0
        shape = [1] * x.dim()
        shape[axis] = -1
        return v.double().reshape(shape)

    x = args[0]
    if name.startswith("quantized_decomposed.quantize_per_channel"):
        scale, zp, axis, qmin, qmax, dtype = args[1:7]
        q = torch.round(x.double() / along(scale, x, axis)) + along(zp, x, axis)
        return torch.clamp(q, int(qmin), int(qmax)).to(dtype)
    if name.startswith("quantized_decomposed.dequantize_per_channel"):
        scale, zp, axis = args[1:4]
        return (x.double() - along(zp, x, axis)) * along(scale, x, axis)
    scale, zp, qmin, qmax, dtype = args[1:6]
    if name.startswith("quantized_decomposed.quantize"):
        q = torch.round(x.double() / num(scale)) + num(zp)   # torch.round: half to even
        return torch.clamp(q, int(qmin), int(qmax)).to(dtype)
    return (x.double() - num(zp)) * num(scale)


def _run_reference(ep: torch.export.ExportedProgram, inputs: Sequence[Any], precision: str, what: str,
                   at_quantize: QuantizeHook | None = None) -> list[torch.Tensor]:
    """The output tensors of `ep`'s graph (convert_pt2e) on `inputs`, in eager float32 or in float64:
    every float32 value (inputs, parameters, op results, float32 dtype arguments) as float64 and the
    quantized ops defined by `_f64_quant`. `at_quantize(node, int8)` sees each per-tensor quantize
    node's result and returns the tensor the graph goes on with."""
    import torch
    from torch.utils import _pytree as pytree

    from .exporter.fx_import import source_of
    from .ir import op_name_of

    if precision not in PRECISIONS:
        raise QuantizedReferenceError(f"{what}: precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    f64 = precision == "float64"

    def widen(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.dtype == torch.float32:
            return v.double()
        return torch.float64 if v is torch.float32 else v

    class Reference(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            name = op_name_of(n.target) if n.op == "call_function" else ""
            if f64 and name.startswith(("quantized_decomposed.", "torchao.")) and name not in _F64_QUANT_OPS:
                raise QuantizedReferenceError(
                    f"{what}: {name} (at {source_of(n).describe()}) has no float64 definition in the quantized "
                    "reference (a parameter chosen at run time is float32 arithmetic); use precision='float32'")
            r = super().run_node(n)
            if f64:
                r = pytree.tree_map(widen, r)
            if at_quantize is not None and name in _QUANTIZE_PER_TENSOR and isinstance(r, torch.Tensor):
                r = at_quantize(n, r)
            return r

        def call_function(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if not f64:
                return super().call_function(target, args, kwargs)
            name = op_name_of(target)
            if name in _F64_QUANT_OPS:
                return _f64_quant(name, args)
            return super().call_function(target, pytree.tree_map(widen, args), pytree.tree_map(widen, kwargs))

    gm = ep.module()
    if not isinstance(gm, torch.fx.GraphModule):
        raise QuantizedReferenceError(f"{what}: the program's module is not a torch.fx.GraphModule")
    args = [torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x for x in inputs]
    with torch.no_grad():
        out = Reference(gm).run(*args)
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def reference_outputs(ep: torch.export.ExportedProgram, inputs: Sequence[Any],
                      precision: Precision = "float64") -> list[np.ndarray]:
    """The outputs of a convert_pt2e program on `inputs`: PyTorch's quantized reference.
    "float32" runs the graph as eager does (its rounding moves with the machine); "float64" is the
    defined answer: every float32 value in float64, quantize = clamp(round_half_even(x / scale) +
    zp, qmin, qmax), dequantize = (q - zp) * scale, and float64 outputs. Dynamic quantization
    (choose_qparams) has no float64 definition here: a QuantizedReferenceError naming the op."""
    outs = _run_reference(ep, inputs, precision, "reference_outputs")
    return [t.detach().numpy().copy() for t in outs]


def reference_int8_activations(ep: torch.export.ExportedProgram, inputs: Sequence[Any],
                               precision: Precision = "float32") -> dict[str, np.ndarray]:
    """The int8 output of every quantize node of a convert_pt2e program run on `inputs` (in eager
    float32, or in float64 as `reference_outputs` defines it), by node name ("quantize_per_tensor",
    "quantize_per_tensor_1", ...): PyTorch's quantized reference, activation by activation.
    `oa.export(ep, ..., int8_outputs=True)` names each int8 output after the same node
    ("quantized_decomposed_quantize_per_tensor_default_1"; see `reference_name`), so a run can be
    compared with it layer by layer (benchmarks/quant_accuracy.py --per-layer)."""

    seen: dict[str, np.ndarray] = {}

    def record(n: torch.fx.Node, r: torch.Tensor) -> torch.Tensor:
        seen[n.name] = r.detach().numpy().copy()
        return r

    _run_reference(ep, inputs, precision, "reference_int8_activations", record)
    return seen


def local_int8_differences(ep: torch.export.ExportedProgram, inputs: Sequence[Any],
                           ours: Mapping[str, np.ndarray]) -> dict[str, LocalDiff]:
    """Each int8 activation of openaccel's against the float64 quantize of openaccel's own inputs
    to it (teacher forcing): the graph runs in float64 (`reference_outputs`), but every quantize
    node named in `ours` (reference node names, as `reference_name` gives them) goes on with
    openaccel's tensor instead of its own. A difference is then the kernel's own, not one inherited
    from earlier layers (which a whole-graph comparison counts again at every layer after it).
    Returns a LocalDiff per quantize node found in `ours`; other names in `ours` are ignored."""
    import torch

    found: dict[str, LocalDiff] = {}

    def force(n: torch.fx.Node, r: torch.Tensor) -> torch.Tensor:
        mine = ours.get(n.name)
        if mine is None:
            return r
        if mine.size != r.numel():
            raise QuantizedReferenceError(f"local_int8_differences: ours['{n.name}'] has {mine.size} elements, the "
                                          f"node's int8 output {list(r.shape)} has {r.numel()}")
        o = torch.from_numpy(np.ascontiguousarray(mine)).reshape(r.shape)
        d = (o.long() - r.long()).abs()
        found[n.name] = LocalDiff(int(d.numel()), int((d != 0).sum()), int(d.max()) if d.numel() else 0)
        return o.to(r.dtype)

    _run_reference(ep, inputs, "float64", "local_int8_differences", force)
    return found


def reference_name(tensor: str) -> str:
    """The convert_pt2e node name of an exported int8 value (int8_outputs=True):
    quantized_decomposed_quantize_per_tensor_default_5 -> quantize_per_tensor_5."""
    return tensor.replace("quantized_decomposed_", "").replace("_default", "")
