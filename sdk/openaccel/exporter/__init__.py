"""The export pipeline: a PyTorch program -> one .oab file, as a sequence of named steps.

    torch.export -> to_edge (core ATen) -> import -> fold constants -> fold batch norm
    -> remove dead code -> lower to openaccel ops -> Winograd convolutions -> fuse residual adds
    -> fuse activations -> pack linear weights -> channels-last layout -> fuse inverted-residual
    blocks -> place
    -> plan memory -> bundle tests -> serialize
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import ExportError, UnsupportedOpError
from ..program import Program
from ..targets import get_target
from . import fold, winograd
from . import layout as layout_pass
from . import pack as pack_pass
from .dynamic import check_static_inputs
from .fuse import fuse_activations, fuse_mbconv, fuse_residual_adds
from .fx_import import import_program, source_of
from .lower import lower_graph
from .memory_plan import plan_memory
from .placement import load_profiles, place
from .serialize import TestVector, serialize

Progress = Callable[[str, float], None]

# executorch imports torchao, which logs warnings about optional CUDA extensions, and torch warns
# about its own internals; none of it concerns an openaccel user.
for _name in ("torchao", "torch.utils._pytree", "torch._export", "torch.export"):
    logging.getLogger(_name).setLevel(logging.ERROR)
warnings.filterwarnings("ignore", category=FutureWarning, module="torch")
warnings.filterwarnings("ignore", category=FutureWarning, module="copyreg")

DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 1e-4


def _flatten(out: Any) -> list[torch.Tensor]:
    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _to_edge(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    from executorch.exir import EdgeCompileConfig, to_edge

    try:
        # scaled_dot_product_attention stays one op (a fused kernel) instead of ~20 decomposed ones
        config = EdgeCompileConfig(_check_ir_validity=True,
                                   preserve_ops=[torch.ops.aten.scaled_dot_product_attention.default])
        edge = to_edge(ep, compile_config=config)
    except Exception as e:
        msg = str(e)
        m = re.search(r"Operator (\S+) is not in Core ATen opset", msg)
        if m:
            op = m.group(1).replace("torch._ops.", "")
            where = ""
            for n in ep.graph.nodes:
                if n.op == "call_function" and str(n.target).endswith(op.split("aten.", 1)[-1]):
                    where = f" (from {source_of(n).describe()})"
                    break
            raise UnsupportedOpError(f"{op} is not a core ATen op and has no decomposition; "
                                     f"openaccel cannot lower it{where}") from None
        raise ExportError(f"to_edge failed: {type(e).__name__}: {msg.splitlines()[0] if msg else ''}") from None
    return edge.exported_program()


def export(model: torch.nn.Module | torch.export.ExportedProgram,
           example_inputs: Sequence[Any], *, target: str = "host", dynamic_shapes: Any = None,
           bundle_tests: bool = True, tolerance: tuple[float, float] = (DEFAULT_ATOL, DEFAULT_RTOL),
           progress: Progress | None = None, fold_limit_bytes: int = 1024,
           devices: Any = None, prefer: Sequence[str] | None = None, winograd_convs: bool = True,
           layout: str = "auto") -> Program:
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
    target:  a name from `openaccel targets` (toolchains/targets/*.toml); another is a ToolchainError.
    Dynamic input dimensions (torch.export.Dim) are an error naming each: every tensor of an .oab
    program has a fixed shape."""
    get_target(target)  # an unknown name is an error listing the known targets
    example = tuple(example_inputs)
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
    step("import executorch", lambda: __import__("executorch.exir"))
    edge = step("to_edge (core ATen)", lambda: _to_edge(ep))
    graph = step("import graph", lambda: import_program(edge))
    if len(graph.inputs) != len([x for x in example if isinstance(x, torch.Tensor)]):
        raise ExportError(f"the program takes {len(graph.inputs)} tensor inputs but "
                          f"{len(example)} example inputs were given")
    step("fold constants", lambda: fold.fold_constants(graph, fold_limit_bytes))
    step("fold batch norm", lambda: fold.fold_batch_norm(graph))
    step("remove dead code", lambda: fold.remove_dead(graph))
    step("lower to openaccel ops", lambda: lower_graph(graph))
    step("Winograd convolutions", lambda: winograd.rewrite(graph, target, winograd_convs))
    step("fuse residual adds", lambda: fuse_residual_adds(graph))
    step("fuse activations", lambda: fuse_activations(graph))
    accelerators = any(k != "cpu" for k in (prefer or ["cpu"]))
    step("pack linear weights", lambda: pack_pass.rewrite(graph, accelerators))
    step("channels-last layout", lambda: layout_pass.rewrite(graph, layout, accelerators))
    step("fuse inverted-residual blocks", lambda: fuse_mbconv(graph))
    profiles = load_profiles(devices)
    placement = step("place ops on devices", lambda: place(graph, profiles, list(prefer or ["cpu"])))
    plan = step("plan memory", lambda: plan_memory(graph, n_pools=len(placement.device_kinds)))

    def make_tests() -> list[TestVector]:
        if not bundle_tests:
            return []
        with torch.no_grad():
            outs = _flatten(eager(*example))
        ins = [x for x in example if isinstance(x, torch.Tensor)]
        if len(outs) != len(graph.outputs):
            raise ExportError(f"eager model returned {len(outs)} tensors, the exported graph "
                              f"{len(graph.outputs)}")
        outs = [o.to(v.dtype) for o, v in zip(outs, graph.outputs)]
        return [TestVector("example_inputs", ins, outs, tolerance[0], tolerance[1])]

    tests = step("bundle test vectors", make_tests)
    buf = step("serialize", lambda: serialize(graph, plan, tests, target=target, required_features=[],
                                              device_kinds=placement.device_kinds))
    return Program(buf)
