"""The exporter's passes as one pipeline: every pass is a `Pass` (a name and `run(graph, ctx)`),
every pass reads what it needs from one `ExportContext`, and `run_pipeline` runs them in order,
reports each one's time under its name and checks the graph after it (verify.py), so a pass that
breaks the graph is named in the error.

Devices are assigned right after lowering ("assign devices", from the preferences and profiles).
From then on no pass may move an instruction to another device (run_pipeline checks), and the
CPU-specific rewrites (`cpu_only=True`) are given the CPU's part of the graph only (boundary.py),
so an op an accelerator was given stays that op on that accelerator. When ops go to the CPU
although an accelerator is preferred (its profile lacks them), the export says how many and why
(an ExportWarning, which `openaccel export` prints). Transfers and events are placed after the
rewrites ("place ops on devices").

Adding a pass: write `run(graph, ctx)` (or a small adapter to a function of the graph, as below)
and add a `GraphPass("name", run)` to PIPELINE where it belongs (`cpu_only=True` for a rewrite
into CPU-only ops or layouts); the name is what `openaccel export` prints.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from ..errors import ExportError, ExportWarning
from ..ir import Graph, Instr
from ..targets import get_target
from . import fold, fuse, layout, memory_plan, pack, placement, quant, quant_checks, serialize, winograd
from .boundary import cpu_part
from .lower import lower_graph
from .verify import Placement, verify

Progress = Callable[[str, float], None]


@dataclass
class ExportOptions:
    """The knobs of export() that passes read (see its docstring)."""

    fold_limit_bytes: int = 1024
    winograd_convs: bool = True
    layout: str = "auto"
    bundle_tests: bool = True
    tolerance: tuple[float, float] = (1e-4, 1e-4)
    reference: str = "float32"
    int8_outputs: bool = False


@dataclass
class ExportContext:
    """Everything a pass may read besides the graph, and what passes hand to later ones."""

    target: str
    options: ExportOptions = field(default_factory=ExportOptions)
    prefer: list[str] = field(default_factory=lambda: [placement.CPU])  # device kinds, most preferred first
    profiles: dict[str, placement.DeviceProfile] = field(default_factory=dict)
    eager: Callable[..., Any] | None = None   # the model as the user runs it (bundled tests)
    example: tuple[Any, ...] = ()
    # set by passes
    lowered: bool = False                     # graph.instrs (not graph.nodes) is the program
    assigned: bool = False                    # each instruction has its device (assign devices)
    device_kinds: list[str] = field(default_factory=lambda: [placement.CPU])  # slot -> kind
    transfers_placed: bool = False
    plan: memory_plan.MemoryPlan | None = None
    tests: list[serialize.TestVector] = field(default_factory=list)
    buffer: bytes = b""

    @property
    def accelerators(self) -> bool:
        """The export prefers a device other than the CPU for some ops."""
        return any(k != placement.CPU for k in self.prefer)

    def where(self) -> Placement:
        """What the verifier checks placement against."""
        return Placement(self.device_kinds, self.profiles, self.transfers_placed)


class Pass(Protocol):
    """One step of the pipeline."""

    @property
    def name(self) -> str: ...

    def run(self, graph: Graph, ctx: ExportContext) -> object: ...


@dataclass(frozen=True)
class GraphPass:
    """A pass given as a function of the graph and the context. `cpu_only`: once devices are
    assigned, the function gets the CPU's part of the graph instead (boundary.cpu_part)."""

    name: str
    fn: Callable[[Graph, ExportContext], object]
    cpu_only: bool = False

    def run(self, graph: Graph, ctx: ExportContext) -> object:
        if not (self.cpu_only and ctx.assigned):
            return self.fn(graph, ctx)
        with cpu_part(graph, self.name) as part:
            return self.fn(part, ctx)


def run_pipeline(graph: Graph, ctx: ExportContext, passes: Sequence[Pass], report: Progress) -> None:
    """Run `passes` in order; after each, report its time, check that it moved no instruction to
    another device and verify the graph."""
    for p in passes:
        devices: list[tuple[Instr, int]] = [(i, i.device) for i in graph.instrs] if ctx.assigned else []
        t0 = time.perf_counter()
        p.run(graph, ctx)
        report(p.name, time.perf_counter() - t0)
        _check_devices_kept(graph, devices, ctx.device_kinds, p.name)
        verify(graph, p.name, ctx.lowered, ctx.where())


def _check_devices_kept(graph: Graph, before: list[tuple[Instr, int]], kinds: list[str], name: str) -> None:
    was = {id(i): d for i, d in before}
    for k, ins in enumerate(graph.instrs):
        d = was.get(id(ins))
        if d is not None and d != ins.device:
            def kind(s: int) -> str:
                return kinds[s] if 0 <= s < len(kinds) else f"slot {s}"
            raise ExportError(f"internal error: the pass '{name}' moved instruction {k} ({ins.op}, from "
                              f"{ins.source.describe()}) from {kind(d)} to {kind(ins.device)}")


# ---- the passes: adapters from the context to each pass's own arguments --------------------------
def _lower(graph: Graph, ctx: ExportContext) -> object:
    out = lower_graph(graph)
    ctx.lowered = True
    return out


def _assign(graph: Graph, ctx: ExportContext) -> object:
    done = placement.assign(graph, ctx.profiles, ctx.prefer)
    ctx.device_kinds = done.device_kinds
    ctx.assigned = True
    note = done.fallback_note()
    if note:
        warnings.warn(note, ExportWarning, stacklevel=_caller_outside_openaccel())
    return done


def _caller_outside_openaccel() -> int:
    """The stacklevel (for a warning issued by this function's caller) of the first frame outside
    the openaccel package: the user's oa.export call."""
    package = str(Path(__file__).resolve().parents[1])
    level, frame = 1, sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _place(graph: Graph, ctx: ExportContext) -> object:
    report = placement.place_transfers(graph, ctx.device_kinds)
    ctx.transfers_placed = True
    return report


def _int8_outputs(graph: Graph, ctx: ExportContext) -> object:
    """export(int8_outputs=True): every int8 value an instruction writes becomes an output of the
    method too (after the model's own), kept alive by the memory plan, so a run can be compared
    with the quantized reference layer by layer (benchmarks/quant_accuracy.py --per-layer)."""
    if not ctx.options.int8_outputs:
        return 0
    have = {id(v) for v in graph.outputs}
    extra = [v for ins in graph.instrs for v in ins.outputs
             if v is not None and v.dtype == torch.int8 and id(v) not in have]
    graph.outputs.extend(extra)
    return len(extra)


def _plan_memory(graph: Graph, ctx: ExportContext) -> object:
    ctx.plan = memory_plan.plan_memory(graph, n_pools=len(ctx.device_kinds))
    return ctx.plan


def _bundle_tests(graph: Graph, ctx: ExportContext) -> object:
    from . import reference_outputs

    if not ctx.options.bundle_tests or ctx.options.int8_outputs:
        return 0
    assert ctx.eager is not None
    outs = reference_outputs(ctx.eager, ctx.example, ctx.options.reference)
    ins = [x for x in ctx.example if isinstance(x, torch.Tensor)]
    if len(outs) != len(graph.outputs):
        raise ExportError(f"eager model returned {len(outs)} tensors, the exported graph {len(graph.outputs)}")
    outs = [o.to(v.dtype) for o, v in zip(outs, graph.outputs)]
    atol, rtol = ctx.options.tolerance
    atol = max(atol, quant.bundled_atol(graph))
    ctx.tests = [serialize.TestVector("example_inputs", ins, outs, atol, rtol)]
    return len(ctx.tests)


def _serialize(graph: Graph, ctx: ExportContext) -> object:
    assert ctx.plan is not None
    ctx.buffer = serialize.serialize(graph, ctx.plan, ctx.tests, target=ctx.target,
                                     required_features=list(get_target(ctx.target).cpu_features),
                                     device_kinds=ctx.device_kinds)
    return len(ctx.buffer)


# Module attributes are looked up when a pass runs (not bound here), so a test can patch a pass's
# function (e.g. winograd.rewrite) to tamper with what it writes.
PIPELINE: list[Pass] = [
    GraphPass("check int8 patterns", lambda g, c: quant_checks.check_quantized(g)),
    GraphPass("fold int8 patterns", lambda g, c: quant.fold_quantized(g, _caller_outside_openaccel())),
    GraphPass("fold constants", lambda g, c: fold.fold_constants(g, c.options.fold_limit_bytes)),
    GraphPass("fold batch norm", lambda g, c: fold.fold_batch_norm(g)),
    GraphPass("remove dead code", lambda g, c: fold.remove_dead(g)),
    GraphPass("lower to openaccel ops", _lower),
    GraphPass("assign devices", _assign),
    GraphPass("Winograd convolutions", lambda g, c: winograd.rewrite(g, c.options.winograd_convs), cpu_only=True),
    GraphPass("fuse residual adds", lambda g, c: fuse.fuse_residual_adds(g)),
    GraphPass("fuse activations", lambda g, c: fuse.fuse_activations(g)),
    GraphPass("pack linear weights", lambda g, c: pack.rewrite(g), cpu_only=True),
    GraphPass("channels-last layout", lambda g, c: layout.rewrite(g, c.options.layout, c.accelerators),
              cpu_only=True),
    GraphPass("fuse inverted-residual blocks", lambda g, c: fuse.fuse_mbconv(g), cpu_only=True),
    GraphPass("place ops on devices", _place),
    GraphPass("label quantized tensors", lambda g, c: quant.attach_quant_params(g)),
    GraphPass("keep int8 activations as outputs", _int8_outputs),
    GraphPass("plan memory", _plan_memory),
    GraphPass("bundle test vectors", _bundle_tests),
    GraphPass("serialize", _serialize),
]
