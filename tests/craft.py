"""Hand-built .oab programs for the bad-input tests and the fuzzer's seed corpus: a few tensors
and instructions laid out exactly as a test wants (overlapping outputs, zero-size dims, shared
tables), which the exporter would never write."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import flatbuffers
import numpy as np

from openaccel import dtypes
from openaccel.fileformat import FORMAT_MAJOR, FORMAT_MINOR, IDENTIFIER, SegmentWriter, container, pack, unpack
from openaccel.oab import DeviceSlot, MemoryPlan, MemoryPool, Method, Tensor
from openaccel.oab import Program as FbProgram
from openaccel.oab.DeviceSlot import DeviceSlotT
from openaccel.oab.Instruction import InstructionT
from openaccel.oab.MemoryPlan import MemoryPlanT
from openaccel.oab.MemoryPool import MemoryPoolT
from openaccel.oab.Method import MethodT
from openaccel.oab.Operator import OperatorT
from openaccel.oab.Program import ProgramT
from openaccel.oab.Tensor import TensorT
from openaccel.oab.TensorData import TensorDataT
from openaccel.oab.TestCase import TestCaseT

F32, I32, I64 = dtypes.code_of("float32"), dtypes.code_of("int32"), dtypes.code_of("int64")


class Builder:
    """One method on one CPU pool of `pool` bytes. `tensor` returns the tensor's index."""

    def __init__(self, pool: int = 4096) -> None:
        self.seg = SegmentWriter()
        self.tensors: list[TensorT] = []
        self.instrs: list[InstructionT] = []
        self.ops: list[str] = []
        self.tests: list[TestCaseT] = []
        self.pool = pool
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(self, name: str, shape: Sequence[int], dtype: int = F32, offset: int = 0,
               data: np.ndarray | None = None) -> int:
        t = TensorT()
        t.name, t.dtype, t.shape = name, dtype, list(shape)
        t.nbytes = int(np.prod(shape, dtype=object)) * dtypes.size_of(dtype)
        if data is not None:
            t.storage, t.segment, t.offset = 1, self.seg.add(np.ascontiguousarray(data).tobytes()), 0
        else:
            t.storage, t.pool, t.offset = 0, 0, offset
        self.tensors.append(t)
        return len(self.tensors) - 1

    def instr(self, op: str, inputs: Sequence[int], outputs: Sequence[int], ints: Sequence[int] = (),
              floats: Sequence[float] = ()) -> None:
        if op not in self.ops:
            self.ops.append(op)
        i = InstructionT()
        i.op, i.inputs, i.outputs = self.ops.index(op), list(inputs), list(outputs)
        i.ints, i.floats = list(ints), list(floats)
        self.instrs.append(i)

    def test(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], atol: float = 1e-5,
             rtol: float = 1e-5) -> None:
        def data(a: np.ndarray) -> TensorDataT:
            d = TensorDataT()
            d.dtype = dtypes.code_of_numpy(a.dtype)
            d.shape, d.segment, d.offset, d.nbytes = list(a.shape), self.seg.add(a.tobytes()), 0, a.nbytes
            return d

        tc = TestCaseT()
        tc.name, tc.atol, tc.rtol = f"case{len(self.tests)}", atol, rtol
        tc.inputs, tc.outputs = [data(a) for a in inputs], [data(a) for a in outputs]
        self.tests.append(tc)

    def program(self) -> ProgramT:
        m = MethodT()
        m.name, m.inputs, m.outputs, m.tensors, m.instructions = "forward", self.inputs, self.outputs, \
            self.tensors, self.instrs
        slot = DeviceSlotT()
        slot.kind, slot.index = "cpu", 0
        m.devices = [slot]
        plan, pool = MemoryPlanT(), MemoryPoolT()
        pool.device, pool.size, pool.alignment = 0, self.pool, 64
        plan.pools, plan.naiveBytes = [pool], self.pool
        m.memoryPlan, m.tests, m.debug = plan, self.tests, []
        p = ProgramT()
        p.formatMajor, p.formatMinor, p.producer, p.target = FORMAT_MAJOR, FORMAT_MINOR, "tests/craft.py", "host"
        p.requiredFeatures, p.operators, p.methods = [], [], [m]
        for name in self.ops:
            o = OperatorT()
            o.name, o.version = name, 1
            p.operators.append(o)
        return p

    def build(self) -> bytes:
        return pack(self.program(), self.seg)


def segments_of(buf: bytes) -> SegmentWriter:
    """The segments of file `buf`, in order (for `pack` after editing its tables)."""
    fb, header = unpack(buf)
    seg = SegmentWriter()
    for s in fb.segments or []:
        start = header.segment_base + s.offset
        seg.offsets.append(seg.size)
        seg.blobs.append(bytes(buf[start:start + s.size]))
        seg._size = (seg.size + s.size + 63) // 64 * 64
    return seg


def shared_tables(n: int) -> bytes:
    """A program whose methods vector holds n offsets to one Method, whose tensors vector holds n
    offsets to one Tensor: about 8n bytes that a reader expanding every reference visits n^2 times."""
    b = flatbuffers.Builder(1024 + 8 * n)
    name = b.CreateString("t")
    Tensor.StartShapeVector(b, 1)
    b.PrependInt64(1)
    shape = b.EndVector()
    Tensor.Start(b)
    Tensor.AddName(b, name)
    Tensor.AddShape(b, shape)
    Tensor.AddNbytes(b, 4)
    tensor = Tensor.End(b)
    Method.StartTensorsVector(b, n)
    for _ in range(n):
        b.PrependUOffsetTRelative(tensor)
    tensors = b.EndVector()
    kind = b.CreateString("cpu")
    DeviceSlot.Start(b)
    DeviceSlot.AddKind(b, kind)
    slot = DeviceSlot.End(b)
    Method.StartDevicesVector(b, 1)
    b.PrependUOffsetTRelative(slot)
    devices = b.EndVector()
    MemoryPool.Start(b)
    MemoryPool.AddSize(b, 64)
    pool = MemoryPool.End(b)
    MemoryPlan.StartPoolsVector(b, 1)
    b.PrependUOffsetTRelative(pool)
    pools = b.EndVector()
    MemoryPlan.Start(b)
    MemoryPlan.AddPools(b, pools)
    plan = MemoryPlan.End(b)
    mname = b.CreateString("forward")
    Method.Start(b)
    Method.AddName(b, mname)
    Method.AddTensors(b, tensors)
    Method.AddDevices(b, devices)
    Method.AddMemoryPlan(b, plan)
    method = Method.End(b)
    FbProgram.StartMethodsVector(b, n)
    for _ in range(n):
        b.PrependUOffsetTRelative(method)
    methods = b.EndVector()
    FbProgram.Start(b)
    FbProgram.AddFormatMajor(b, FORMAT_MAJOR)
    FbProgram.AddMethods(b, methods)
    b.Finish(FbProgram.End(b), file_identifier=IDENTIFIER)
    out = container(bytes(b.Output()), SegmentWriter())
    assert struct.unpack_from("<I", out, 0)[0] < len(out)
    return out
