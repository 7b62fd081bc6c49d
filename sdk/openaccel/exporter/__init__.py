"""The export pipeline: a PyTorch program -> one .oab file, as a sequence of named steps.

    torch.export -> to_edge (core ATen) -> import graph, then the passes of pipeline.PIPELINE:
    fold constants -> fold batch norm -> remove dead code -> lower to openaccel ops -> Winograd
    convolutions -> fuse residual adds -> fuse activations -> pack linear weights -> channels-last
    layout -> fuse inverted-residual blocks -> place ops on devices -> label quantized tensors ->
    plan memory -> bundle test vectors -> serialize, with the graph checked after each (verify.py).
"""

from __future__ import annotations

import copy
import logging
import operator
import re
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import ExportError
from ..ir import Source, op_name_of
from ..program import Program
from ..targets import get_target
from . import pipeline
from .dynamic import check_data_independent, check_static_inputs
from .fx_import import import_program, source_of
from .lower import edge_ops_to_keep, no_kernel_error, rules_outside_core, supported_edge_ops
from .pipeline import ExportContext, ExportOptions, Progress, run_pipeline
from .placement import CPU, load_profiles
from .verify import verify

# executorch imports torchao, which logs warnings about optional CUDA extensions, and torch warns
# about its own internals; none of it concerns an openaccel user.
for _name in ("torchao", "torch.utils._pytree", "torch._export", "torch.export"):
    logging.getLogger(_name).setLevel(logging.ERROR)
warnings.filterwarnings("ignore", category=FutureWarning, module="torch")
warnings.filterwarnings("ignore", category=FutureWarning, module="copyreg")

DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 1e-4
REFERENCES = ("float32", "float64")


def _flatten(out: Any) -> list[torch.Tensor]:
    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def reference_outputs(model: Callable[..., Any], inputs: Sequence[Any],
                      reference: str = "float32") -> list[torch.Tensor]:
    """The model's outputs on `inputs`, flattened: in float32 eager as given, or ("float64") from a
    float64 copy of the model on float64 copies of the floating-point inputs, each output cast
    back to the dtype the float32 model gives it."""
    with torch.no_grad():
        outs = _flatten(model(*inputs))
        if reference == "float32":
            return outs
        try:
            m64 = copy.deepcopy(model)
            if isinstance(m64, torch.nn.Module):
                m64 = m64.double()
            ins = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            outs64 = _flatten(m64(*ins))
        except Exception as e:
            raise ExportError(f"the float64 reference failed: the model does not run in float64 "
                              f"({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}); "
                              "use reference='float32'") from None
        if len(outs64) != len(outs):
            raise ExportError(f"the float64 model returned {len(outs64)} tensors, the float32 one {len(outs)}")
        return [o64.to(o.dtype) for o, o64 in zip(outs, outs64)]


def preserved_ops() -> list[torch._ops.OpOverload]:
    """Ops to_edge keeps whole instead of decomposing them: scaled_dot_product_attention (a fused
    kernel instead of ~20 decomposed ops), the non-constant pads (one pad_mode instead of arange / abs /
    index arithmetic, or for circular padding a chain of slice_scatters over the whole output), and
    the ops the rules keep whole (lower.keep_whole: the 1-D / 3-D / bicubic resizes)."""
    aten = torch.ops.aten
    preserve = [aten.scaled_dot_product_attention.default,
                aten.reflection_pad1d.default, aten.reflection_pad2d.default, aten.reflection_pad3d.default,
                aten.replication_pad1d.default, aten.replication_pad2d.default, aten.replication_pad3d.default,
                aten._pad_circular.default]
    return preserve + [op for op in edge_ops_to_keep() if op not in preserve]


def _edge_config(check: bool) -> Any:
    from executorch.exir import EdgeCompileConfig

    aten = torch.ops.aten
    # Ops outside core ATen that torch.export writes and openaccel runs (the verifier would refuse
    # them): every non-core op with a lowering rule, Tensor.unfold (a strided view read as a copy),
    # scatter(reduce="add" / "multiply").
    beyond_core = [aten.unfold.default, aten.scatter.reduce, aten.scatter.value_reduce]
    beyond_core += [op for op in rules_outside_core() if op not in beyond_core]
    return EdgeCompileConfig(_check_ir_validity=check, preserve_ops=preserved_ops(),
                             _core_aten_ops_exception_list=beyond_core)


def _unlowerable(ep: torch.export.ExportedProgram) -> dict[str, Source]:
    """Ops of an edge program without a lowering rule, each with its first source line."""
    supported = set(supported_edge_ops())
    missing: dict[str, Source] = {}
    for n in ep.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        target = n.target
        if getattr(target, "__name__", "") == "with_effects" and len(n.args) > 1:
            target = n.args[1]  # an effectful op wrapped in a higher-order op: name the op
        name = op_name_of(target)
        if name not in supported:
            missing.setdefault(name, source_of(n))
    return missing


def _clip(msg: str, lines: int = 12, chars: int = 1500) -> str:
    kept = [ln for ln in msg.strip().splitlines() if ln.strip()][:lines]
    text = "\n  ".join(kept)
    return text if len(text) <= chars else text[:chars] + " ..."


def _to_edge(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    from executorch.exir import to_edge

    try:
        edge = to_edge(ep, compile_config=_edge_config(check=True))
    except Exception as e:
        try:
            loose: torch.export.ExportedProgram | None = to_edge(
                ep, compile_config=_edge_config(check=False)).exported_program()
        except Exception:
            loose = None
        if loose is not None and _has_complex(loose) and not _unlowerable(loose):
            # the verifier's dtype tables (ExecuTorch's portable kernels) list no complex64 for abs,
            # mul or _fft_c2r; openaccel's rules check their dtypes themselves
            return loose
        raise _explain_edge_failure(ep, e, loose) from None
    return edge.exported_program()


def _has_complex(ep: torch.export.ExportedProgram) -> bool:
    for n in ep.graph.nodes:
        vals = n.meta.get("val")
        for v in vals if isinstance(vals, (list, tuple)) else [vals]:
            if isinstance(v, torch.Tensor) and v.dtype.is_complex:
                return True
    return False


def _explain_edge_failure(ep: torch.export.ExportedProgram, e: Exception,
                          loose: torch.export.ExportedProgram | None) -> ExportError:
    """to_edge's verifier refused the program: usually for an op outside core ATen (linalg_inv_ex)
    or one with a dtype the edge dialect rejects. `loose` is the program converted again without
    the verifier (None if that failed too): name the ops openaccel cannot lower, with their source
    lines; else pass to_edge's message on whole (its first line alone says nothing)."""
    msg = str(e)
    if loose is not None:
        missing = _unlowerable(loose)
        if missing:
            return no_kernel_error(missing)
    m = re.search(r"Operator (\S+) is not in Core ATen opset", msg)
    if m:
        op = m.group(1).replace("torch._ops.", "")
        where = Source()
        for n in ep.graph.nodes:
            if n.op == "call_function" and op_name_of(n.target) == op:
                where = source_of(n)
                break
        return no_kernel_error({op: where})
    return ExportError(f"to_edge failed: {type(e).__name__}: {_clip(msg)}")


def export(model: torch.nn.Module | torch.export.ExportedProgram,
           example_inputs: Sequence[Any], *, target: str = "host", dynamic_shapes: Any = None,
           bundle_tests: bool = True, tolerance: tuple[float, float] = (DEFAULT_ATOL, DEFAULT_RTOL),
           progress: Progress | None = None, fold_limit_bytes: int = 1024,
           devices: Any = None, prefer: Sequence[str] | None = None, winograd_convs: bool = True,
           layout: str = "auto", reference: str = "float32", int8_outputs: bool = False) -> Program:
    """Export `model` for `target`; returns the program (bytes plus a parsed view).

    devices: a device profile (the JSON of `openaccel devices --json`, as a path or parsed list)
    prefer:  device kinds in order of preference, e.g. ["vendor.sim", "cpu"]; each op goes to the
             first that supports it (op and dtype), else to the CPU.
    winograd_convs: 3x3 stride-1 convolutions large enough to gain run as Winograd convolutions
             with weights transformed here (faster: ResNet-18 at 224 x 224 1.6x on x86_64; their
             weights take 16/9 (F(2x2)) or 4x (F(4x4)) the bytes, ResNet-18's file 1.7x: see
             exporter/winograd.py); False keeps every convolution direct.
    layout:  "auto" (default), "nhwc" or "nchw": where convolution stacks run channels-last
             (conv2d_nhwc, permutes at the stack's edges; exporter/layout.py). auto picks NHWC
             when the model has depthwise convolutions (MobileNet-style networks) and `prefer`
             names no device but the CPU.
    reference: how the bundled test vectors' expected outputs are computed: "float32" (the
             model in eager, as the user runs it) or "float64" (a float64 copy of the model on
             float64 copies of the inputs, cast back to each output's dtype). float32 eager is
             not the same on every CPU where the answer is a special value or near overflow
             (e.g. gelu(+inf) is NaN on some Intel CPUs, inf on AMD); float64 is the defined
             answer there, but not for programs whose float32 rounding is the point.
    int8_outputs: every int8 activation of a quantized program is also an output of the method
             (after the model's own, named after its value), for comparing a run with the PT2E
             reference layer by layer (benchmarks/quant_accuracy.py --per-layer); no bundled tests.
    target:  a name from `openaccel targets` (toolchains/targets/*.toml); another is a ToolchainError.
    Dynamic input dimensions (torch.export.Dim) and data-dependent sizes (nonzero, ...) are errors
    naming the dimension or the op: every tensor of an .oab program has a fixed shape."""
    get_target(target)  # an unknown name is an error listing the known targets
    example = tuple(example_inputs)
    if reference not in REFERENCES:
        raise ExportError(f"reference={reference!r}: expected one of {', '.join(REFERENCES)}")
    if dynamic_shapes is not None:
        raise ExportError("dynamic_shapes are not supported yet: export with static example shapes")
    report = progress or (lambda step, seconds: None)

    def step(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        result = fn()
        report(name, time.perf_counter() - t0)
        return result

    if isinstance(model, torch.export.ExportedProgram):
        ep = model
        eager: Callable[..., Any] = ep.module()
    elif isinstance(model, torch.nn.Module):
        model = model.eval()
        eager = model

        def do_export() -> torch.export.ExportedProgram:
            try:
                return torch.export.export(model, example)
            except Exception as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                raise ExportError(f"torch.export failed: {type(e).__name__}: {first}") from None

        ep = step("torch.export", do_export)
    else:
        raise ExportError(f"model must be an nn.Module or an ExportedProgram, not {type(model).__name__}")

    check_static_inputs(ep)
    check_data_independent(ep)
    step("import executorch", lambda: __import__("executorch.exir"))
    edge = step("to_edge (core ATen)", lambda: _to_edge(ep))
    graph = step("import graph", lambda: import_program(edge))
    if len(graph.inputs) != len([x for x in example if isinstance(x, torch.Tensor)]):
        raise ExportError(f"the program takes {len(graph.inputs)} tensor inputs but "
                          f"{len(example)} example inputs were given")
    verify(graph, "import graph", lowered=False)
    ctx = ExportContext(
        target=target,
        options=ExportOptions(fold_limit_bytes=fold_limit_bytes, winograd_convs=winograd_convs, layout=layout,
                              bundle_tests=bundle_tests, tolerance=tolerance, reference=reference,
                              int8_outputs=int8_outputs),
        prefer=list(prefer or [CPU]), profiles=load_profiles(devices), eager=eager, example=example)
    run_pipeline(graph, ctx, pipeline.PIPELINE, report)
    return Program(ctx.buffer)
