"""The engines the benchmark runs side by side: PyTorch eager, ExecuTorch (portable kernels and
XNNPACK), ONNX Runtime and openaccel (host, through the ctypes binding), in fp32, and the int8
engines: ExecuTorch + XNNPACK and openaccel on the PT2E-quantized model, ONNX Runtime on its own
static QDQ quantization of the float ONNX export, all calibrated on the same inputs.

Every engine works from a file it exported (`export`), and `load` turns that file plus the shared
inputs (NumPy arrays) into a zero-argument callable that runs the model once and returns its
outputs as NumPy arrays. Heavy imports happen in `setup`, so a fresh process (the peak-RSS cells of
run.py) can import an engine's library before the memory baseline is taken.
"""

from __future__ import annotations

import importlib.util
import io
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

RunFn = Callable[[], list[np.ndarray]]


@dataclass
class Loaded:
    """A model ready to run: `run()` runs it once on the bound inputs; `info` has load-time facts."""

    run: RunFn
    info: dict[str, Any] = field(default_factory=dict)


def first_line(e: BaseException, limit: int = 300) -> str:
    """A one-line reason for a table cell: exception type and the first meaningful line (for
    openaccel's "no kernel for N op(s)" error: the op names it lists)."""
    text = str(e).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    ops = re.findall(r"^\s+(aten\.[\w.]+)", text, re.M)
    if ops and line.endswith(":"):
        line = f"{line} {', '.join(ops)}"
    line = re.sub(r"\s+", " ", line)
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    return f"{type(e).__name__}: {line}" if line else type(e).__name__


def _quiet(fn: Callable[[], Any]) -> Any:
    """Run fn with Python-level stdout/stderr captured (exporters are chatty)."""
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        return fn()


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null (native libraries log there: ExecuTorch's cpuinfo and
    thread-pool messages)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _flatten_outputs(out: Any) -> list[np.ndarray]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out.detach().numpy()]
    if isinstance(out, (list, tuple)):
        res: list[np.ndarray] = []
        for o in out:
            res += _flatten_outputs(o)
        return res
    raise TypeError(f"unexpected model output of type {type(out).__name__}")


# ---- int8: one calibration set and one PT2E model per model, shared by every int8 engine ----------
CALIBRATION_COUNT = 8
CALIBRATION_SEED = 20261202


def calibration_inputs(example: tuple[Any, ...], count: int = CALIBRATION_COUNT,
                       seed: int = CALIBRATION_SEED) -> list[tuple[Any, ...]]:
    """`count` seeded random inputs shaped like `example` (not the timed input itself): standard
    normal for float tensors; for integer tensors (token ids) uniform over the example's own
    min..max range."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        xs = []
        for t in example:
            if t.dtype.is_floating_point:
                xs.append(torch.randn(t.shape, generator=g, dtype=t.dtype))
            else:
                xs.append(torch.randint(int(t.min()), int(t.max()) + 1, t.shape, generator=g, dtype=t.dtype))
        out.append(tuple(xs))
    return out


def pt2e_quantize(model: Any, example: tuple[Any, ...], calibration: list[tuple[Any, ...]]) -> Any:
    """The PT2E int8 program: torch.export -> prepare_pt2e(XNNPACKQuantizer, symmetric per-channel
    weights, static activations) -> calibrate -> convert_pt2e, exported again (an ExportedProgram;
    its .module() is the PT2E reference the int8 engines are checked against)."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gm = torch.export.export(model, example).module()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = _quiet(lambda: prepare_pt2e(gm, quantizer))
    with torch.no_grad():
        for xs in calibration:
            prepared(*xs)
    converted = _quiet(lambda: convert_pt2e(prepared))
    return torch.export.export(converted, example)


@dataclass
class Int8Source:
    """What an int8 engine exports from: the float model (ONNX Runtime quantizes its own ONNX
    export), the shared calibration inputs, and the PT2E-converted program."""

    model: Any
    calibration: list[tuple[Any, ...]]
    converted: Any  # torch.export.ExportedProgram of the convert_pt2e graph


class Engine:
    """Base class; subclasses fill in the hooks."""

    name = ""
    label = ""
    suffix = ""
    peer = True  # counted in "best peer"
    int8 = False  # exported from an Int8Source; its outputs are checked against the PT2E reference
    fp32_engine = ""  # for an int8 engine: the fp32 engine of its family (the int8 / fp32 ratios)

    def unavailable(self) -> str | None:
        """None if this engine can run here, else why not."""
        return None

    def setup(self, threads: int) -> None:
        """Import the engine's libraries and apply process-wide thread settings."""

    def export(self, model: Any, example: tuple[Any, ...], path: Path) -> dict[str, Any]:
        """Write the model to `path`; return facts about it (arena_bytes, notes, ...). `model` is the
        float nn.Module, or for an int8 engine an Int8Source."""
        raise NotImplementedError

    def load(self, path: Path, inputs: list[np.ndarray], threads: int) -> Loaded:
        raise NotImplementedError

    def files(self, path: Path) -> list[Path]:
        """Every file the exported model consists of (for the file-size column)."""
        return [path]


class Eager(Engine):
    """PyTorch eager under torch.inference_mode; the 'file' is the pickled nn.Module (torch.save)."""

    name, label, suffix = "eager", "PyTorch eager", ".pt"

    def setup(self, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass  # only settable once, before inter-op work started

    def export(self, model: Any, example: tuple[Any, ...], path: Path) -> dict[str, Any]:
        import torch

        torch.save(model, path)
        return {"notes": []}

    def load(self, path: Path, inputs: list[np.ndarray], threads: int) -> Loaded:
        import torch

        model = torch.load(path, weights_only=False).eval()
        args = tuple(torch.from_numpy(a) for a in inputs)

        def run() -> list[np.ndarray]:
            with torch.inference_mode():
                return _flatten_outputs(model(*args))

        return Loaded(run)


class _ExecuTorch(Engine):
    suffix = ".pte"
    xnnpack = False

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("executorch") is None:
            return "executorch is not installed"
        return None

    def setup(self, threads: int) -> None:
        import torch
        from executorch.extension.pybindings import portable_lib

        torch.set_num_threads(threads)
        # process-wide pool shared by XNNPACK and the portable kernels; must not run concurrently
        with _native_stderr_silenced():
            portable_lib._unsafe_reset_threadpool(threads)

    def export(self, model: Any, example: tuple[Any, ...], path: Path) -> dict[str, Any]:
        import torch

        return self._lower(torch.export.export(model, example), path)

    def _lower(self, ep: Any, path: Path) -> dict[str, Any]:
        from executorch.exir import to_edge, to_edge_transform_and_lower

        if self.xnnpack:
            from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

            pm = _quiet(lambda: to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch())
        else:
            pm = _quiet(lambda: to_edge(ep).to_executorch())
        path.write_bytes(pm.buffer)
        plan = pm.executorch_program.execution_plan[0]
        sizes = [int(s) for s in plan.non_const_buffer_sizes]
        notes = []
        if self.xnnpack:
            ops = sorted({op.name for op in plan.operators})
            notes.append(f"{len(plan.delegates)} XNNPACK partition(s), "
                         + (f"{len(ops)} op kind(s) on portable kernels" if ops else "all ops delegated"))
        return {"arena_bytes": sum(sizes), "memory": {"non_const_buffer_sizes": sizes},
                "portable_ops": sorted({op.name for op in plan.operators}), "notes": notes}

    def load(self, path: Path, inputs: list[np.ndarray], threads: int) -> Loaded:
        import torch
        from executorch.extension.pybindings import portable_lib

        got = portable_lib._threadpool_get_thread_count()
        if got != threads:
            raise RuntimeError(f"ExecuTorch thread pool has {got} threads, {threads} requested")
        module = portable_lib._load_for_executorch(str(path))
        args = tuple(torch.from_numpy(a) for a in inputs)

        def run() -> list[np.ndarray]:
            return _flatten_outputs(module.forward(args))

        return Loaded(run)


class ExecuTorchPortable(_ExecuTorch):
    name, label = "et_portable", "ExecuTorch portable"


class ExecuTorchXnnpack(_ExecuTorch):
    name, label, xnnpack = "et_xnnpack", "ExecuTorch + XNNPACK", True


class ExecuTorchXnnpackInt8(_ExecuTorch):
    """The PT2E-quantized program lowered to XNNPACK (its int8 kernels take the q/dq patterns)."""

    name, label, xnnpack, int8, fp32_engine = "et_xnnpack_int8", "ExecuTorch + XNNPACK int8", True, True, "et_xnnpack"

    def export(self, model: Any, example: tuple[Any, ...], path: Path) -> dict[str, Any]:
        return self._lower(model.converted, path)


class OnnxRuntime(Engine):
    """ONNX Runtime CPU provider; exported with torch.onnx.export(dynamo=True), default graph
    optimizations (ORT_ENABLE_ALL), intra_op_num_threads = N, inter_op_num_threads = 1."""

    name, label, suffix = "ort", "ONNX Runtime", ".onnx"

    def unavailable(self) -> str | None:
        missing = [m for m in ("onnxruntime", "onnx", "onnxscript") if importlib.util.find_spec(m) is None]
        if missing:
            return f"{', '.join(missing)} not installed (make bench-setup)"
        return None

    def setup(self, threads: int) -> None:
        import onnxruntime  # noqa: F401

    def export(self, model: Any, example: tuple[Any, ...], path: Path) -> dict[str, Any]:
        import torch

        for f in self.files(path):
            f.unlink(missing_ok=True)
        _quiet(lambda: torch.onnx.export(model, example, str(path), dynamo=True, verbose=False))
        return {"notes": []}

    def files(self, path: Path) -> list[Path]:
        return [p for p in (path, path.with_name(path.name + ".data")) if p.exists()] or [path]

    def load(self, path: Path, inputs: list[np.ndarray], threads: int) -> Loaded:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        if len(names) != len(inputs):
            raise RuntimeError(f"the ONNX model takes {len(names)} inputs, {len(inputs)} given")
        feeds = dict(zip(names, inputs))

        def run() -> list[np.ndarray]:
            return list(sess.run(None, feeds))

        return Loaded(run)


class OnnxRuntimeInt8(OnnxRuntime):
    """ONNX Runtime on a static QDQ int8 model: the float ONNX export (as `ort`), quantized by
    onnxruntime.quantization.quantize_static (QDQ, int8 activations and weights, weights per
    channel, MinMax calibration on the shared calibration inputs). ORT's quantizer is not PT2E's
    (MinMax, not a histogram, for activations), so its outputs differ from the PT2E reference by
    both quantizations' rounding."""

    name, label, int8, fp32_engine = "ort_int8", "ONNX Runtime QDQ int8", True, "ort"

    def export(self, model: Any, example: tuple[Any, ...], path: Path) -> dict[str, Any]:
        import onnxruntime as ort
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

        src: Int8Source = model
        for f in self.files(path):
            f.unlink(missing_ok=True)
        fp32 = path.with_name(path.stem + "-fp32.onnx")
        pre = path.with_name(path.stem + "-pre.onnx")
        try:
            super().export(src.model, example, fp32)
            names = [i.name for i in ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"]).get_inputs()]
            # ORT's recommended pre-processing (shape inference, graph clean-up) before quantizing
            notes = []
            try:
                from onnxruntime.quantization.shape_inference import quant_pre_process

                _quiet(lambda: quant_pre_process(str(fp32), str(pre)))
                source = pre
            except Exception as e:
                notes.append(f"quant_pre_process failed ({first_line(e, 80)}), quantized without it")
                source = fp32
            feeds = [dict(zip(names, (t.numpy() for t in xs))) for xs in src.calibration]

            class Reader(CalibrationDataReader):
                def __init__(self) -> None:
                    self.it = iter(feeds)

                def get_next(self) -> dict[str, np.ndarray] | None:
                    return next(self.it, None)

            _quiet(lambda: quantize_static(str(source), str(path), Reader(), quant_format=QuantFormat.QDQ,
                                           activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                                           per_channel=True))
        finally:
            for f in (fp32, fp32.with_name(fp32.name + ".data"), pre, pre.with_name(pre.name + ".data")):
                f.unlink(missing_ok=True)
        return {"notes": notes}


class OpenAccel(Engine):
    """openaccel on the host: the C runtime through the ctypes binding (HostSession.run: copy the
    inputs in, execute, copy the outputs out)."""

    name, label, suffix, peer = "openaccel", "openaccel", ".oab", False
    export_args: ClassVar[dict[str, Any]] = {}
    isas: list[str] | None = None  # the kernels' ISAs (HostSession(isas=...)); None: all this CPU has

    def options(self) -> dict[str, Any]:
        """The keyword arguments of oa.export for this engine."""
        return dict(self.export_args)

    def setup(self, threads: int) -> None:
        from openaccel.runtime.host import library

        library()  # build (first time) and load the host runtime

    def export(self, model: Any, example: tuple[Any, ...], path: Path) -> dict[str, Any]:
        import openaccel as oa

        prog = oa.export(model, example, bundle_tests=False, **self.options())
        prog.save(path)
        return {"arena_bytes": prog.arena_bytes, "memory": prog.memory_plan, "ops": prog.ops, "notes": []}

    def load(self, path: Path, inputs: list[np.ndarray], threads: int) -> Loaded:
        from peer_isa import openaccel_isas

        from openaccel.runtime.host import HostSession

        sess = HostSession(path.read_bytes(), threads=threads, isas=self.isas or openaccel_isas())
        arrays = [np.ascontiguousarray(a) for a in inputs]

        def run() -> list[np.ndarray]:
            return sess.run(arrays)

        return Loaded(run, {"requirements": dict(sess.requirements)})


class OpenAccelInt8(OpenAccel):
    """openaccel on the PT2E-quantized program (oa.export of the convert_pt2e graph): int8
    instructions where the exporter folds a pattern, float32 between quantize / dequantize
    elsewhere (counted: `float32_instructions`)."""

    name, label, int8, fp32_engine = "openaccel_int8", "openaccel int8", True, "openaccel"

    def export(self, model: Any, example: tuple[Any, ...], path: Path) -> dict[str, Any]:
        import openaccel as oa

        prog = oa.export(model.converted, example, bundle_tests=False, **self.options())
        prog.save(path)
        f32 = prog.float32_in_quantized()
        ops = sorted({p.op for p in f32})
        notes = [f"{len(f32)} float32 instruction(s)" + (f": {', '.join(ops)}" if ops else "")]
        return {"arena_bytes": prog.arena_bytes, "memory": prog.memory_plan, "ops": prog.ops, "notes": notes,
                "float32_instructions": len(f32), "float32_ops": ops,
                "int8_instructions": sum(1 for p in prog.instructions if p.op.endswith("_q8"))}


class OpenAccelDirect(OpenAccel):
    """openaccel with every convolution direct (export(..., winograd_convs=False)): what the
    Winograd convolutions gain. Not run unless asked for (--engines)."""

    name, label = "openaccel_direct", "openaccel (direct convs)"
    export_args: ClassVar[dict[str, Any]] = {"winograd_convs": False}


class OpenAccelLayout(OpenAccel):
    """openaccel with one activation layout forced (export(..., layout=...)): what the
    channels-last pass gains or costs. Not run unless asked for (--engines)."""

    def __init__(self, layout: str) -> None:
        self.name, self.label = f"openaccel_{layout}", f"openaccel ({layout.upper()})"
        self.layout = layout

    def options(self) -> dict[str, Any]:
        return {"layout": self.layout}


class OpenAccelIsa(OpenAccel):
    """openaccel with its kernels restricted to one ISA and portable C (the same .oab,
    HostSession(isas=...)): e.g. openaccel_avx2 beside openaccel's AVX-512 kernels in one run. Not
    run unless asked for (--engines)."""

    def __init__(self, isa: str, label: str) -> None:
        self.name, self.label = f"openaccel_{isa}", f"openaccel ({label} kernels)"
        self.isas = [isa, "portable"]


class OpenAccelInt8Isa(OpenAccelInt8):
    """openaccel int8 with its kernels restricted to one ISA and portable C: e.g. openaccel_int8_avx2
    (the plain AVX2 int8 tiles, no VNNI) beside openaccel_int8's VNNI ones in one run. Not run
    unless asked for (--engines)."""

    def __init__(self, isa: str, label: str, isas: list[str] | None = None, fp32_engine: str | None = None) -> None:
        self.name, self.label = f"openaccel_int8_{isa}", f"openaccel int8 ({label} kernels)"
        self.isas = isas or [isa, "portable"]
        self.fp32_engine = fp32_engine or f"openaccel_{isa}"  # its int8 / fp32 pair: openaccel_avx2


ENGINES: dict[str, Engine] = {e.name: e for e in (Eager(), ExecuTorchPortable(), ExecuTorchXnnpack(), OnnxRuntime(),
                                                  OpenAccel(), ExecuTorchXnnpackInt8(), OnnxRuntimeInt8(),
                                                  OpenAccelInt8(), OpenAccelDirect(), OpenAccelLayout("nchw"),
                                                  OpenAccelLayout("nhwc"), OpenAccelIsa("avx2", "AVX2"),
                                                  OpenAccelInt8Isa("avx2", "AVX2"),
                                                  # the AVX512-VNNI int8 tiles beside openaccel_int8's AMX
                                                  # ones on a CPU that has AMX (elsewhere: the same tiles)
                                                  OpenAccelInt8Isa("vnni", "AVX512-VNNI", ["avx512", "vnni", "avx2",
                                                                                           "portable"], "openaccel"))}
# the engines of a run without --engines (the int8 ones run when named)
DEFAULT_ENGINES = [n for n in ENGINES if n not in ("openaccel_direct", "openaccel_nchw", "openaccel_nhwc",
                                                   "openaccel_avx2") and not ENGINES[n].int8]
