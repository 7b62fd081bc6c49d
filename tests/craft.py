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
               data: np.ndarray | None = None, raw: bool = False) -> int:
        """A tensor: planned at `offset` of pool 0, or a constant holding `data`, whose dtype and
        size must be the declared ones (a test that means to store other bytes says raw=True)."""
        t = TensorT()
        t.name, t.dtype, t.shape = name, dtype, list(shape)
        t.nbytes = int(np.prod(shape, dtype=object)) * dtypes.size_of(dtype)
        if data is not None and not raw:
            code = dtypes.code_of_numpy(np.asarray(data).dtype)
            if code != dtype or np.asarray(data).nbytes != t.nbytes:
                raise ValueError(f"craft: tensor {name!r} declared {dtypes.name_of(dtype)}{list(shape)} ({t.nbytes} "
                                 f"bytes) but given {np.asarray(data).dtype}{list(np.shape(data))} "
                                 f"({np.asarray(data).nbytes} bytes); pass raw=True to store other bytes on purpose")
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


# ---- programs breaking one rule of the verifier (each loaded before the rule was checked) ----------

def index_select_over_its_indices() -> bytes:
    """index_select's output planned over its own index tensor: the kernel checks the indices,
    then re-reads them after its first rows overwrote them with bytes of x (an out-of-bounds read)."""
    b = Builder(pool=1 << 16)
    x = b.tensor("x", (4, 16))
    idx = b.tensor("idx", (64,), I64, offset=256)
    y = b.tensor("y", (64, 16), offset=256)
    b.instr("index_select", [x, idx], [y], ints=[0])
    b.inputs, b.outputs = [x, idx], [y]
    xv = np.arange(64, dtype=np.float32).reshape(4, 16) + 1e6
    iv = np.zeros(64, dtype=np.int64)
    b.test([xv, iv], [xv[iv]])
    return b.build()


def select_over_its_input() -> bytes:
    """select writing rows of its own input (memcpy of overlapping ranges)"""
    b = Builder(pool=1 << 16)
    x = b.tensor("x", (64, 64))
    y = b.tensor("y", (64,), offset=4)
    b.instr("select", [x], [y], ints=[0, 1])
    b.inputs, b.outputs = [x], [y]
    b.test([np.ones((64, 64), np.float32)], [np.ones(64, np.float32)])
    return b.build()


def cat_over_its_inputs() -> bytes:
    b = Builder()
    a, c = b.tensor("a", (64,)), b.tensor("c", (64,), offset=256)
    y = b.tensor("y", (128,), offset=128)
    b.instr("cat", [a, c], [y], ints=[0])
    b.inputs, b.outputs = [a, c], [y]
    b.test([np.ones(64, np.float32), np.ones(64, np.float32)], [np.ones(128, np.float32)])
    return b.build()


def unary(op: str, y_offset: int) -> bytes:
    """relu or neg of x [4, 8] at offset 0 into y at `y_offset` (0: in place)"""
    b = Builder()
    x = b.tensor("x", (4, 8))
    y = b.tensor("y", (4, 8), offset=y_offset)
    b.instr(op, [x], [y])
    b.inputs, b.outputs = [x], [y]
    xv = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    b.test([xv], [np.maximum(xv, 0) if op == "relu" else -xv])
    return b.build()


def add(x_off: int, y_off: int, out_off: int, same: bool = False) -> bytes:
    """out = x + y (same: x + x) at the given pool offsets"""
    b = Builder()
    x = b.tensor("x", (4, 8), offset=x_off)
    y = x if same else b.tensor("y", (4, 8), offset=y_off)
    out = b.tensor("out", (4, 8), offset=out_off)
    b.instr("add", [x, y], [out], floats=[1.0])
    b.inputs, b.outputs = ([x] if same else [x, y]), [out]
    xv = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    yv = xv if same else xv * 3
    b.test([xv] if same else [xv, yv], [xv + yv])
    return b.build()


def layer_norm_outputs_overlap() -> bytes:
    b = Builder()
    x = b.tensor("x", (2, 8))
    out, mean, rstd = b.tensor("out", (2, 8), offset=64), b.tensor("mean", (2, 1), offset=64), \
        b.tensor("rstd", (2, 1), offset=256)
    b.instr("layer_norm", [x, -1, -1], [out, mean, rstd], ints=[1], floats=[1e-5])
    b.inputs, b.outputs = [x], [out]
    return b.build()


def sdpa_zero_head_dim() -> bytes:
    """sdpa with head dim 0 and a batch of 2^40: no tensor has a byte, the kernel loops 2^40 times"""
    b = Builder()
    q = b.tensor("q", (1 << 40, 1, 1, 0))
    k = b.tensor("k", (1, 1, 1, 0))
    v = b.tensor("v", (1, 1, 1, 0))
    o = b.tensor("o", (1 << 40, 1, 1, 0), offset=64)
    b.instr("sdpa", [q, k, v], [o], ints=[0, 1])
    b.inputs, b.outputs = [q], [o]
    return b.build()


def dims_overflow(op: str) -> bytes:
    """batch_norm / group_norm / permute of [0, 1, 2^40, 2^40]: no elements, dims whose product overflows"""
    g = 1 << 40
    b = Builder()
    x = b.tensor("x", (0, 1, g, g))
    if op == "batch_norm":
        c = b.tensor("c", (1,), data=np.ones(1, np.float32))
        y = b.tensor("y", (0, 1, g, g))
        b.instr(op, [x, c, c, c, c], [y], floats=[1e-5])
    elif op == "group_norm":
        y = b.tensor("y", (0, 1, g, g))
        b.instr(op, [x, -1, -1], [y], ints=[1], floats=[1e-5])
    else:
        y = b.tensor("y", (0, g, 1, g))
        b.instr(op, [x], [y], ints=[0, 2, 1, 3])
    b.inputs, b.outputs = [x], [y]
    return b.build()


def two_inputs(bundled: bool = True) -> bytes:
    """out = x + y, with a bundled test (x = 1, y = 2) or without"""
    b = Builder()
    x, y = b.tensor("x", (4, 8)), b.tensor("y", (4, 8), offset=128)
    out = b.tensor("out", (4, 8), offset=256)
    b.instr("add", [x, y], [out], floats=[1.0])
    b.inputs, b.outputs = [x, y], [out]
    if bundled:
        b.test([np.ones((4, 8), np.float32), np.full((4, 8), 2, np.float32)], [np.full((4, 8), 3, np.float32)])
    return b.build()


def winograd_without_input_channels() -> bytes:
    """conv2d_winograd of an input with 0 channels: the output is the bias (the fast kernel divided
    by the channel count)"""
    b = Builder()
    x = b.tensor("x", (1, 0, 6, 6))
    w = b.tensor("w", (16, 1, 0, 16), data=np.zeros(0, np.float32))
    bias = b.tensor("b", (16,), data=np.arange(16, dtype=np.float32))
    y = b.tensor("y", (1, 16, 4, 4))
    b.instr("conv2d_winograd", [x, w, bias], [y], ints=[2, 0, 0, 0, 16])
    b.inputs, b.outputs = [x], [y]
    b.test([np.zeros((1, 0, 6, 6), np.float32)],
           [np.repeat(np.arange(16, dtype=np.float32), 16).reshape(1, 16, 4, 4)])
    return b.build()


def mbconv_empty_batch() -> bytes:
    """mbconv_nhwc (1x1 expand to 24, 3x3 depthwise, 1x1 project to 8; weights packed in panels
    of 16) of a batch of 0 images: the fast kernel's prepare divided by the batch size"""
    rng = np.random.default_rng(0)

    def const(shape: tuple[int, ...]) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    b = Builder()
    x = b.tensor("x", (0, 7, 7, 8))
    ins = [x, b.tensor("expand_w", (2, 1, 1, 8, 16), data=const((2, 1, 1, 8, 16))),
           b.tensor("expand_b", (24,), data=const((24,))), b.tensor("dw_w", (3, 3, 1, 24), data=const((3, 3, 1, 24))),
           b.tensor("dw_b", (24,), data=const((24,))),
           b.tensor("project_w", (1, 1, 1, 24, 16), data=const((1, 1, 1, 24, 16))),
           b.tensor("project_b", (8,), data=const((8,)))]
    y = b.tensor("y", (0, 7, 7, 8))
    b.instr("mbconv_nhwc", ins, [y], ints=[1, 1, 1, 1, 1, 1, 2, 2, 0, 16], floats=[0, 6, 0, 6, 0, 0])
    b.inputs, b.outputs = [x], [y]
    b.test([np.zeros((0, 7, 7, 8), np.float32)], [np.zeros((0, 7, 7, 8), np.float32)])
    return b.build()


def refused() -> dict[str, bytes]:
    """Programs the loader must refuse, one broken rule each (for the C tests and the fuzz corpus)."""
    out = {"index_select_over_its_indices": index_select_over_its_indices(),
           "select_over_its_input": select_over_its_input(), "cat_over_its_inputs": cat_over_its_inputs(),
           "relu_shifted": unary("relu", 4), "add_over_other": add(0, 128, 128),
           "layer_norm_outputs_overlap": layer_norm_outputs_overlap(), "sdpa_zero_head_dim": sdpa_zero_head_dim(),
           "shared_tables": shared_tables(300)}
    for op in ("batch_norm", "group_norm", "permute"):
        out[f"{op}_dims_overflow"] = dims_overflow(op)
    return out


def accepted() -> dict[str, bytes]:
    """Programs at the edge of the rules that must load and pass their bundled test."""
    return {"relu_in_place": unary("relu", 0), "add_in_place": add(0, 128, 0), "add_x_x_in_place": add(0, 0, 0, True),
            "two_inputs": two_inputs(), "winograd_without_input_channels": winograd_without_input_channels(),
            "mbconv_empty_batch": mbconv_empty_batch()}
