"""openaccel's graph IR: values, ATen-level nodes (after import) and instructions (after lowering).

The exporter imports an edge-dialect FX graph into this IR, rewrites it with the named passes of
exporter/pipeline.py (ATen nodes until "lower to openaccel ops", instructions after it; the graph
is checked after each by exporter/verify.py) and serializes it. It is deliberately small: a list
of nodes in execution order over Value objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from . import dtypes, opset


@dataclass(frozen=True)
class Source:
    """Where a node came from in the user's model."""

    file: str = ""
    line: int = 0
    code: str = ""
    node: str = ""      # torch.fx node name
    module: str = ""    # nn.Module path, e.g. "features.3.conv.0"

    def describe(self) -> str:
        where = f"{self.file}:{self.line}" if self.file else "unknown location"
        mod = f" in module '{self.module}'" if self.module else ""
        code = f": `{self.code}`" if self.code else ""
        return f"{where}{mod}{code}"


@dataclass(frozen=True)
class QuantParams:
    """How an int8 / uint8 tensor maps to real numbers, real = (q - zero_point) * scale: one scale
    and zero point (axis -1), or one per index of dim `axis` (per-channel weights). Written to the
    file's Tensor.quant (runtime_c/schema/oab.fbs) and handed to devices (oa_tensor_t.quant)."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int = -1

    @classmethod
    def per_tensor(cls, scale: float, zero_point: int) -> QuantParams:
        return cls((float(scale),), (int(zero_point),), -1)

    def describe(self) -> str:
        if self.axis < 0:
            return f"scale {self.scale[0]:.6g}, zero point {self.zero_point[0]}"
        lo, hi = min(self.scale), max(self.scale)
        zps = sorted(set(self.zero_point))
        zp = str(zps[0]) if len(zps) == 1 else f"{zps[0]}..{zps[-1]}"
        return f"per-channel axis {self.axis}: {len(self.scale)} scales {lo:.6g}..{hi:.6g}, zero point {zp}"


@dataclass(eq=False)
class Value:
    """A tensor value: a graph input, a constant, or the output of a node/instruction."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    data: torch.Tensor | None = None    # payload of a constant
    # A view: this value's bytes are `alias_offset` bytes into `alias_of`'s. Set by lowering
    # (LowerCtx.alias: reshapes, slices ...), the layout pass and memory planning (in-place reuse).
    alias_of: Value | None = None
    alias_offset: int = 0
    # int8 / uint8 values of a quantized program: their scale and zero point (exporter/quant.py)
    quant: QuantParams | None = None

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * dtype_size(self.dtype)

    def __repr__(self) -> str:
        kind = "const " if self.is_const else ""
        return f"<{kind}{self.name}: {dtype_name(self.dtype)}{list(self.shape)}>"


@dataclass(eq=False)
class AtenNode:
    """An edge-dialect op call before lowering. `args`/`kwargs` hold Values where the FX graph
    had tensor nodes, and plain Python values elsewhere."""

    target: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: list[Value | None]
    source: Source = field(default_factory=Source)

    @property
    def op_name(self) -> str:
        """Edge op name such as 'aten.convolution.default'."""
        return op_name_of(self.target)

    def input_values(self) -> list[Value]:
        found: list[Value] = []

        def visit(a: Any) -> None:
            if isinstance(a, Value):
                found.append(a)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    visit(x)

        for a in self.args:
            visit(a)
        for a in self.kwargs.values():
            visit(a)
        return found


@dataclass(eq=False)
class Instr:
    """One openaccel instruction (see opset.py for each op's inputs and argument layout)."""

    op: str
    inputs: list[Value | None]
    outputs: list[Value]
    ints: list[int] = field(default_factory=list)
    floats: list[float] = field(default_factory=list)
    source: Source = field(default_factory=Source)
    device: int = 0                  # device slot (placement); 0 is the CPU
    kind: str = "op"                 # "op" or "transfer" (copy inputs[0] to another device)
    waits: list[int] = field(default_factory=list)   # events to wait for first
    signal: int = -1                 # event recorded when done

    # ---- arguments by their opset.py names (a missing trailing argument reads as its default) ----
    def _slot(self, name: str, kind: str) -> opset.ArgSlot:
        slot = opset.arg_slot(self.op, name)
        if slot.kind != kind:
            raise KeyError(f"argument '{name}' of '{self.op}' is in {slot.kind}, not {kind}")
        return slot

    def arg(self, name: str, default: int = 0) -> int:
        """The integer argument `name`."""
        k = self._slot(name, "ints").index
        return self.ints[k] if k < len(self.ints) else default

    def farg(self, name: str, default: float = 0.0) -> float:
        """The float argument `name`."""
        k = self._slot(name, "floats").index
        return self.floats[k] if k < len(self.floats) else default

    def arg_list(self, name: str) -> list[int]:
        """The variadic integer argument `name` (the tail of `ints`)."""
        slot = self._slot(name, "ints")
        assert slot.variadic, f"argument '{name}' of '{self.op}' is not variadic"
        return list(self.ints[slot.index:])

    def set_arg(self, name: str, value: opset.ArgValue) -> None:
        """Set argument `name`, padding the arguments before it with 0."""
        slot = opset.arg_slot(self.op, name)
        if slot.kind == "ints":
            ints = self.ints + [0] * max(0, slot.index + 1 - len(self.ints))
            if slot.variadic:
                assert not isinstance(value, (int, float)), f"{self.op}.{name} takes a list"
                ints[slot.index:] = [int(v) for v in value]
            else:
                assert isinstance(value, (int, float)), f"{self.op}.{name} takes one integer"
                ints[slot.index] = int(value)
            self.ints = ints
        else:
            assert isinstance(value, (int, float)), f"{self.op}.{name} takes one number"
            floats = self.floats + [0.0] * max(0, slot.index + 1 - len(self.floats))
            floats[slot.index] = float(value)
            self.floats = floats

    def become(self, op: str, **values: opset.ArgValue) -> None:
        """Turn into an `op` instruction: the arguments both ops name keep their values (those this
        instruction has), `values` set others; see opset.encode_args."""
        kept: dict[str, opset.ArgValue] = {}
        new = opset.arg_slots(op)
        for name, slot in opset.arg_slots(self.op).items():
            have: list[int] | list[float] = self.ints if slot.kind == "ints" else self.floats
            same = name in new and (new[name].kind, new[name].variadic) == (slot.kind, slot.variadic)
            if same and slot.index < len(have):
                kept[name] = self.ints[slot.index:] if slot.variadic else have[slot.index]
        self.op = op
        self.ints, self.floats = opset.encode_args(op, **{**kept, **values})


@dataclass(eq=False)
class Graph:
    """A method being exported."""

    name: str
    inputs: list[Value]
    outputs: list[Value]
    nodes: list[AtenNode] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)
    num_events: int = 0
    homes: dict[Value, int] = field(default_factory=dict)  # buffer root -> device slot of its pool
    # a quantized program's ops left in float32 (exporter/quant.py): their source -> the reason
    float32_reasons: dict[Source, str] = field(default_factory=dict)


def op_name_of(target: Any) -> str:
    """'aten.add.Tensor' for an EdgeOpOverload / OpOverload, the qualified name otherwise."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        schema = getattr(getattr(target, "_op", None), "_schema", None)
    if schema is not None and "::" in schema.name:
        ns, op = schema.name.split("::", 1)
        return f"{ns}.{op}.{schema.overload_name or 'default'}"
    name = getattr(target, "__name__", None)
    if isinstance(name, str) and "." in name:
        return name
    return str(target)


def dtype_code(dtype: torch.dtype) -> int:
    """c10::ScalarType number (the .oab DType) of a torch dtype."""
    try:
        return dtypes.code_of(dtype_name(dtype))
    except KeyError:
        raise KeyError(f"dtype {dtype} has no .oab encoding") from None


def dtype_from_code(code: int) -> torch.dtype:
    return getattr(torch, dtypes.name_of(code))


def dtype_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
