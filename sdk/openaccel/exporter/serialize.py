"""Serialization: IR + memory plan + test vectors -> .oab bytes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..fileformat import FORMAT_MAJOR, FORMAT_MINOR, SegmentWriter, pack
from ..ir import Graph, Instr, Source, Value, dtype_code
from ..oab.DeviceSlot import DeviceSlotT
from ..oab.Instruction import InstructionT
from ..oab.MemoryPlan import MemoryPlanT
from ..oab.MemoryPool import MemoryPoolT
from ..oab.Method import MethodT
from ..oab.Operator import OperatorT
from ..oab.Program import ProgramT
from ..oab.QuantParams import QuantParamsT
from ..oab.SourceLocation import SourceLocationT
from ..oab.Tensor import TensorT
from ..oab.TensorData import TensorDataT
from ..oab.TestCase import TestCaseT
from ..version import __version__
from .memory_plan import MemoryPlan, root_of


@dataclass
class TestVector:
    name: str
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]
    atol: float
    rtol: float


def tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def _data(seg: SegmentWriter, t: torch.Tensor) -> TensorDataT:
    d = TensorDataT()
    d.dtype = dtype_code(t.dtype)
    d.shape = list(t.shape)
    raw = tensor_bytes(t)
    d.segment = seg.add(raw)
    d.offset = 0
    d.nbytes = len(raw)
    return d


def serialize(graph: Graph, plan: MemoryPlan, tests: list[TestVector], *, target: str,
              required_features: list[str], device_kinds: list[str] | None = None) -> bytes:
    """Write the program; `device_kinds[slot]` names each device slot (slot 0 is the CPU)."""
    seg = SegmentWriter()
    op_names: list[str] = []
    for ins in graph.instrs:
        if ins.op not in op_names and ins.kind == "op":
            op_names.append(ins.op)

    index: dict[Value, int] = {}
    tensors: list[TensorT] = []
    const_segment: dict[Value, int] = {}

    def tensor(v: Value) -> int:
        if v in index:
            return index[v]
        t = TensorT()
        t.name = v.name
        t.dtype = dtype_code(v.dtype)
        t.shape = list(v.shape)
        t.nbytes = v.nbytes
        if v.quant is not None:
            q = QuantParamsT()
            q.scale = [float(x) for x in v.quant.scale]
            # all zero (symmetric weights): not stored, an absent zero_point means every one is 0 (1.2)
            zps = [int(z) for z in v.quant.zero_point]
            if any(zps):
                q.zeroPoint = zps
            q.axis = int(v.quant.axis)
            t.quant = q
        root, off = root_of(v)
        if root.is_const:
            if root not in const_segment:
                assert root.data is not None
                const_segment[root] = seg.add(tensor_bytes(root.data))
            t.storage = 1
            t.segment = const_segment[root]
            t.offset = off
        else:
            t.storage = 0
            t.pool, t.offset = plan.placement[v]
        index[v] = len(tensors)
        tensors.append(t)
        return index[v]

    debug: list[SourceLocationT] = []
    debug_index: dict[Source, int] = {}

    def source(s: Source) -> int:
        if not s.file and not s.node:
            return -1
        if s not in debug_index:
            d = SourceLocationT()
            d.file, d.line, d.code, d.node, d.module = s.file, s.line, s.code, s.node, s.module
            debug_index[s] = len(debug)
            debug.append(d)
        return debug_index[s]

    quantized = any(v.quant is not None for i in graph.instrs for v in i.outputs)

    def instruction(ins: Instr) -> InstructionT:
        x = InstructionT()
        if ins.kind == "transfer":
            x.kind = 1
            x.op = 0
        else:
            x.op = op_names.index(ins.op)
        x.waitEvents = list(ins.waits)
        x.signalEvent = ins.signal
        x.inputs = [-1 if v is None else tensor(v) for v in ins.inputs]
        x.outputs = [tensor(v) for v in ins.outputs]
        x.ints = list(ins.ints)
        x.floats = list(ins.floats)
        x.device = ins.device
        x.debug = source(ins.source)
        if quantized and ins.kind == "op" and ins.op not in ("quantize", "dequantize") \
                and not any(o.quant is not None for o in ins.outputs):
            # a float32 op in a quantized program: the fold's reason, or where it sits
            why = graph.float32_reasons.get(ins.source) or "inside a float32 region (no int8 input or output)"
            x.note = f"stays float32: {why}"
        return x

    m = MethodT()
    m.name = graph.name
    m.inputs = [tensor(v) for v in graph.inputs]
    m.instructions = [instruction(i) for i in graph.instrs]
    m.outputs = [tensor(v) for v in graph.outputs]
    m.tensors = tensors
    kinds = device_kinds or ["cpu"]
    m.devices = []
    for k in kinds:
        slot = DeviceSlotT()
        slot.kind = k
        slot.index = 0
        m.devices.append(slot)
    mp = MemoryPlanT()
    mp.pools = []
    for slot_index, size in enumerate(plan.pool_sizes):
        pool = MemoryPoolT()
        pool.device = slot_index
        pool.size = size
        pool.alignment = 64
        mp.pools.append(pool)
    mp.naiveBytes = plan.naive_bytes
    m.memoryPlan = mp
    m.tests = []
    for tv in tests:
        tc = TestCaseT()
        tc.name = tv.name
        tc.inputs = [_data(seg, t) for t in tv.inputs]
        tc.outputs = [_data(seg, t) for t in tv.outputs]
        tc.atol, tc.rtol = tv.atol, tv.rtol
        m.tests.append(tc)
    m.debug = debug
    m.numEvents = graph.num_events

    p = ProgramT()
    p.formatMajor, p.formatMinor = FORMAT_MAJOR, FORMAT_MINOR
    p.producer = f"openaccel {__version__} (torch {torch.__version__})"
    p.target = target
    p.requiredFeatures = list(required_features)
    p.operators = []
    for name in op_names:
        o = OperatorT()
        o.name = name
        o.version = 1
        p.operators.append(o)
    p.methods = [m]
    return pack(p, seg)


def numpy_of(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy()
