"""The IR verifier, run on the graph after every pass of the pipeline (pipeline.py), so a pass
that breaks the graph is named at once instead of surfacing as a wrong answer or a runtime
refusal several passes later.

It checks what every later pass and the serializer rely on:
- the graph's inputs and outputs are values with a dtype and a static shape; a constant's data
  has that dtype and shape; a view lies inside the bytes it views, and views form no cycle;
- every value an ATen node or an instruction reads exists by then: a graph input, a constant, the
  output of an earlier node / instruction, or a view of one; the graph's outputs exist at the end;
  no instruction writes a constant, and no value is written by two instructions;
- each instruction names an op of the op set (or is a transfer) with the inputs, outputs and
  integer / float argument counts its opset.py entry allows;
- placement: each instruction's device slot exists; an accelerator only gets ops its profile
  supports; once transfers are placed, every instruction reads and writes memory of its own
  device, transfers cross devices and events are in range.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import ExportError
from ..ir import AtenNode, Graph, Instr, Value, dtype_name
from ..opset import OPS
from .memory_plan import root_of
from .placement import CPU, DeviceProfile, compute_dtype

MAX_REPORTED = 5


@dataclass
class Placement:
    """What the verifier needs to know about devices: slot -> kind, the profiles, and whether
    transfers and memory homes have been placed (graph.homes, events)."""

    device_kinds: list[str] = field(default_factory=lambda: [CPU])
    profiles: dict[str, DeviceProfile] = field(default_factory=dict)
    transfers_placed: bool = False


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> None:
        self.items.append(text)


def _value_problem(v: object) -> str | None:
    if not isinstance(v, Value):
        return f"{v!r} is not a Value"
    if not isinstance(v.dtype, torch.dtype):
        return f"value '{v.name}' has no dtype ({v.dtype!r})"
    if not isinstance(v.shape, tuple) or not all(isinstance(d, int) and d >= 0 for d in v.shape):
        return f"value '{v.name}' has no static shape ({v.shape!r})"
    if v.data is not None and (v.data.dtype != v.dtype or tuple(v.data.shape) != v.shape):
        return (f"constant '{v.name}' is recorded as {dtype_name(v.dtype)}{list(v.shape)} but its data is "
                f"{dtype_name(v.data.dtype)}{list(v.data.shape)}")
    seen = 0
    w = v
    while w.alias_of is not None:
        if w.alias_offset < 0 or w.nbytes + w.alias_offset > w.alias_of.nbytes:
            return (f"view '{w.name}' ({w.nbytes} bytes at offset {w.alias_offset}) runs past "
                    f"'{w.alias_of.name}' ({w.alias_of.nbytes} bytes)")
        w = w.alias_of
        seen += 1
        if seen > 10_000:
            return f"views of '{v.name}' form a cycle"
    return None


def _where(k: int, ins: Instr) -> str:
    src = f", from {ins.source.describe()}" if ins.source.file else ""
    return f"instruction {k} ({ins.op}{src})"


def _counts(names: tuple[str, ...]) -> tuple[int, int | None]:
    """(fewest, most) values a list of opset names takes (most None: variadic)."""
    most: int | None = len(names)
    fewest = 0
    for k, name in enumerate(names):
        if name.endswith("*"):
            most = None
        elif not name.endswith("?"):
            fewest = k + 1
    return fewest, most


def _check_signature(k: int, ins: Instr, bad: _Problems) -> None:
    d = OPS.get(ins.op)
    if d is None:
        bad.add(f"{_where(k, ins)}: '{ins.op}' is not an op of the op set (opset.py)")
        return
    for what, names, values in (("inputs", d.inputs, ins.inputs), ("outputs", d.outputs, ins.outputs)):
        fewest, most = _counts(names)
        if len(values) < fewest or (most is not None and len(values) > most):
            bad.add(f"{_where(k, ins)}: {len(values)} {what}, expected {fewest}"
                    + ("" if most == fewest else f" to {most}" if most is not None else " or more")
                    + f" ({', '.join(names) or 'none'})")
            continue
        for j, name in enumerate(names[:len(values)]):
            if values[j] is None and not name.endswith(("?", "*")):
                bad.add(f"{_where(k, ins)}: {what[:-1]} {j} ({name}) is missing")
    for what, names, args, typ in (("integer", d.ints, ins.ints, int), ("float", d.floats, ins.floats, float)):
        variadic = bool(names) and names[-1].endswith("*")
        if not variadic and len(args) > len(names):
            bad.add(f"{_where(k, ins)}: {len(args)} {what} arguments, the op has {len(names)} "
                    f"({', '.join(names) or 'none'})")
        if not all(isinstance(a, typ) and not isinstance(a, bool) for a in args):
            bad.add(f"{_where(k, ins)}: {what} arguments {list(args)} are not all {typ.__name__}s")


def _exists(v: Value, defined: set[Value]) -> bool:
    """v can be read: a constant (or a view of one), or written already (itself, or any view of
    the buffer it views: a buffer may be written piecewise through views)"""
    r = root_of(v)[0]
    return r.is_const or v in defined or r in defined


def _define(v: Value, defined: set[Value]) -> None:
    defined.add(v)
    defined.add(root_of(v)[0])


def _check_nodes(graph: Graph, defined: set[Value], bad: _Problems) -> None:
    for k, node in enumerate(graph.nodes):
        if not isinstance(node, AtenNode):
            bad.add(f"node {k} is not an AtenNode ({type(node).__name__})")
            continue
        for v in node.input_values():
            problem = _value_problem(v)
            if problem:
                bad.add(f"node {k} ({node.op_name}): {problem}")
            elif not _exists(v, defined):
                bad.add(f"node {k} ({node.op_name}) reads '{v.name}' before anything defines it")
        for o in node.outputs:
            if o is None:
                continue
            problem = _value_problem(o)
            if problem:
                bad.add(f"node {k} ({node.op_name}): output {problem}")
            _define(o, defined)


def _check_instrs(graph: Graph, defined: set[Value], where: Placement, bad: _Problems) -> None:
    written: dict[Value, int] = {}
    slots = len(where.device_kinds)
    homes = graph.homes

    def home(v: Value) -> int | None:
        r = root_of(v)[0]
        return None if r.is_const else homes.get(r, 0)

    for k, ins in enumerate(graph.instrs):
        if not isinstance(ins, Instr):
            bad.add(f"instruction {k} is not an Instr ({type(ins).__name__})")
            continue
        if ins.kind == "transfer":
            if len(ins.inputs) != 1 or len(ins.outputs) != 1 or ins.inputs[0] is None:
                bad.add(f"{_where(k, ins)}: a transfer copies one input to one output")
                continue
        elif ins.kind == "op":
            _check_signature(k, ins, bad)
        else:
            bad.add(f"{_where(k, ins)}: kind '{ins.kind}' is neither 'op' nor 'transfer'")
            continue
        for j, v in enumerate(ins.inputs):
            if v is None:
                continue
            problem = _value_problem(v)
            if problem:
                bad.add(f"{_where(k, ins)}: input {j}: {problem}")
            elif not _exists(v, defined):
                bad.add(f"{_where(k, ins)}: input {j} '{v.name}' is read before any instruction writes it")
        for j, o in enumerate(ins.outputs):
            problem = _value_problem(o)
            if problem:
                bad.add(f"{_where(k, ins)}: output {j}: {problem}")
                continue
            if root_of(o)[0].is_const:
                bad.add(f"{_where(k, ins)}: output {j} '{o.name}' writes a constant")
            if o in written:
                bad.add(f"{_where(k, ins)}: output {j} '{o.name}' was already written by instruction {written[o]}")
            written[o] = k
            _define(o, defined)
        # placement
        if not 0 <= ins.device < slots:
            kinds = ", ".join(where.device_kinds)
            bad.add(f"{_where(k, ins)}: device slot {ins.device}, the program has {slots} ({kinds})")
            continue
        kind = where.device_kinds[ins.device]
        if ins.kind == "op" and kind != CPU:
            prof = where.profiles.get(kind)
            if prof is None or not prof.supports(ins.op, compute_dtype(ins)):
                bad.add(f"{_where(k, ins)}: placed on {kind}, whose profile has no {ins.op} ({compute_dtype(ins)})")
        if not where.transfers_placed:
            continue
        if ins.kind == "transfer":
            x = ins.inputs[0]
            assert x is not None
            src, dst = home(x), home(ins.outputs[0])
            if src is None or src == dst or ins.device not in (src, dst):
                bad.add(f"{_where(k, ins)}: copies from device {src} to {dst} on device {ins.device}")
        else:
            for j, v in enumerate(ins.inputs):
                if v is not None and home(v) not in (None, ins.device):
                    bad.add(f"{_where(k, ins)} on device {ins.device}: input {j} '{v.name}' lives on device {home(v)}")
            for j, o in enumerate(ins.outputs):
                if home(o) != ins.device:
                    bad.add(f"{_where(k, ins)} on device {ins.device}: output {j} '{o.name}' lives on device {home(o)}")
        events = [*ins.waits, *([ins.signal] if ins.signal >= 0 else [])]
        if any(not 0 <= e < graph.num_events for e in events):
            bad.add(f"{_where(k, ins)}: events {events}, the method has {graph.num_events}")


def problems(graph: Graph, lowered: bool, where: Placement | None = None) -> list[str]:
    """Everything wrong with `graph` (empty when it is well formed). `lowered`: check the
    instructions (after lowering) rather than the ATen nodes."""
    where = where or Placement()
    bad = _Problems()
    defined: set[Value] = set()
    for j, v in enumerate(graph.inputs):
        problem = _value_problem(v)
        if problem:
            bad.add(f"graph input {j}: {problem}")
        elif v.is_const:
            bad.add(f"graph input {j} '{v.name}' is a constant")
        _define(v, defined)
    if lowered:
        _check_instrs(graph, defined, where, bad)
    else:
        _check_nodes(graph, defined, bad)
    for j, v in enumerate(graph.outputs):
        problem = _value_problem(v)
        if problem:
            bad.add(f"graph output {j}: {problem}")
        elif not _exists(v, defined):
            bad.add(f"graph output {j} '{v.name}' is never written")
        elif where.transfers_placed and lowered and not v.is_const and graph.homes.get(root_of(v)[0], 0) != 0:
            bad.add(f"graph output {j} '{v.name}' is not in host memory")
    return bad.items


def verify(graph: Graph, after: str, lowered: bool, where: Placement | None = None) -> None:
    """Raise an ExportError naming the pass `after` which `graph` is broken."""
    found = problems(graph, lowered, where)
    if found:
        more = f"\n  ... and {len(found) - MAX_REPORTED} more" if len(found) > MAX_REPORTED else ""
        raise ExportError(f"internal error: the graph is broken after the pass '{after}':\n  "
                          + "\n  ".join(found[:MAX_REPORTED]) + more)
