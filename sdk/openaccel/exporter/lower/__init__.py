"""Lowering: edge-dialect ATen nodes -> openaccel instructions (see opset.py).

Each module in this package registers rules with @rule("aten.op.overload", ...). A rule gets a
LowerCtx and the node; it emits instructions, aliases (zero-copy views) and constants through
the context. An op with no rule, or a rule that rejects an argument, is an export-time
UnsupportedOpError naming the op and the model's source line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ...errors import UnsupportedOpError
from ...ir import AtenNode, Graph, Instr, Source, Value, dtype_name
from ...opset import OPS

Rule = Callable[["LowerCtx", AtenNode], None]
RULES: dict[str, Rule] = {}
# Ops the runtime deliberately does not run, each with the reason a user reads in the export error
# and in docs/ops.md's coverage table (a random op, a data-dependent output size, ...).
REFUSED: dict[str, str] = {}
# Edge ops that to_edge must keep whole instead of decomposing (keep_whole): ops whose core-ATen
# decomposition is slower than their one kernel or lowers to ops the runtime lacks (a 3-D resize
# becomes a gather with three index tensors).
KEPT_WHOLE: list[str] = []

_MODULES = ("elementwise", "binary", "matmul", "conv", "pool", "norm", "reduce", "shape", "index", "scatter",
            "resize", "attention", "quant", "sort", "math", "fft", "refused", "pool3d", "sampling", "distance",
            "embedding_bag")


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Register a lowering rule for edge op names such as 'aten.add.Tensor'."""

    def deco(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn

    return deco


def refuse(*names: str, why: str) -> None:
    """Declare edge ops that are refused on purpose, with the reason the export error gives."""
    for n in names:
        REFUSED[n] = why


def refusal(name: str) -> str | None:
    """Why edge op `name` is refused on purpose (REFUSED), or None."""
    if not RULES:
        _load_rules()
    return REFUSED.get(name)


def keep_whole(*names: str) -> None:
    """Ask to_edge not to decompose these edge ops (each must also have a rule)."""
    for n in names:
        if n not in KEPT_WHOLE:
            KEPT_WHOLE.append(n)


def _aten_overload(name: str) -> Any:
    """torch.ops.aten.<op>.<overload> for an edge op name "aten.<op>.<overload>", else None."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        return None
    packet = getattr(torch.ops.aten, parts[1], None)
    return getattr(packet, parts[2], None) if packet is not None else None


def edge_ops_to_keep() -> list[Any]:
    """The aten overloads to_edge should preserve (keep_whole), as EdgeCompileConfig.preserve_ops wants them."""
    if not RULES:
        _load_rules()
    return [op for op in map(_aten_overload, KEPT_WHOLE) if op is not None]


def _load_rules() -> None:
    for mod in _MODULES:
        importlib.import_module(f"{__name__}.{mod}")


class LowerCtx:
    """What a lowering rule can do: read arguments, emit instructions, make aliases/constants."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.instrs: list[Instr] = []
        self.node: AtenNode | None = None
        self._tmp = 0

    # ---- arguments ---------------------------------------------------------------------------
    def bind(self, node: AtenNode) -> dict[str, Any]:
        """Arguments by schema name, with schema defaults filled in."""
        schema = getattr(node.target, "_schema", None)
        if schema is None:
            op = getattr(node.target, "_op", None)
            schema = getattr(op, "_schema", None)
        if schema is None:
            return {f"arg{i}": a for i, a in enumerate(node.args)} | dict(node.kwargs)
        out: dict[str, Any] = {}
        for i, arg in enumerate(schema.arguments):
            if i < len(node.args):
                out[arg.name] = node.args[i]
            elif arg.name in node.kwargs:
                out[arg.name] = node.kwargs[arg.name]
            elif arg.has_default_value():
                out[arg.name] = arg.default_value
            else:
                out[arg.name] = None
        return out

    def tensor_arg(self, args: dict[str, Any], key: str = "self") -> Value:
        """The tensor argument `key` of `bind`'s result (an error naming it when it is not one)."""
        v = args[key]
        if not isinstance(v, Value):
            raise self.unsupported(f"argument '{key}' is not a tensor ({type(v).__name__})")
        return v

    def output(self, node: AtenNode) -> Value:
        """The node's first (tensor) output."""
        out = node.outputs[0]
        if out is None:
            raise self.unsupported("the op has no tensor output")
        return out

    def is_used(self, v: Value | None) -> bool:
        """Whether another node or the graph's outputs read `v`."""
        if v is None:
            return False
        if any(o is v for o in self.graph.outputs):
            return True
        return any(any(i is v for i in n.input_values()) for n in self.graph.nodes if n is not self.node)

    # ---- failures ----------------------------------------------------------------------------
    def unsupported(self, why: str) -> UnsupportedOpError:
        node = self.node
        assert node is not None
        return UnsupportedOpError(
            f"{node.op_name} is not supported: {why} (from {node.source.describe()})")

    # ---- building ----------------------------------------------------------------------------
    def emit(self, op: str, inputs: Sequence[Value | None], outputs: Sequence[Value],
             ints: Sequence[int] = (), floats: Sequence[float] = ()) -> Instr:
        if op not in OPS:
            raise KeyError(f"lowering emitted unknown op '{op}'")
        assert self.node is not None
        ins = Instr(op=op, inputs=list(inputs), outputs=list(outputs), ints=[int(i) for i in ints],
                    floats=[float(f) for f in floats], source=self.node.source)
        self.instrs.append(ins)
        return ins

    def alias(self, dst: Value, src: Value, byte_offset: int = 0) -> None:
        """`dst` is a zero-copy view of `src`'s bytes starting at `byte_offset`."""
        if dst.nbytes + byte_offset > src.nbytes:
            raise AssertionError(f"alias {dst} of {src} at {byte_offset} runs past its source")
        dst.alias_of = src
        dst.alias_offset = byte_offset

    def temp(self, dtype: torch.dtype, shape: Sequence[int], hint: str = "t") -> Value:
        self._tmp += 1
        return Value(name=f"{hint}_{self._tmp}", dtype=dtype, shape=tuple(shape))

    def const(self, data: torch.Tensor, hint: str = "c") -> Value:
        self._tmp += 1
        data = data.detach().contiguous()
        return Value(name=f"{hint}_{self._tmp}", dtype=data.dtype, shape=tuple(data.shape), data=data)

    def scalar(self, value: float | int | bool | complex, dtype: torch.dtype) -> Value:
        """A 0-d constant of `dtype` (for .Scalar op overloads)."""
        return self.const(torch.tensor(value, dtype=dtype), hint="scalar")

    def cast(self, v: Value, dtype: torch.dtype) -> Value:
        """`v` converted to `dtype` (a constant is converted at export time)."""
        if v.dtype == dtype:
            return v
        if v.is_const:
            assert v.data is not None
            return self.const(v.data.to(dtype), hint=f"{v.name}_{dtype_name(dtype)}")
        out = self.temp(dtype, v.shape, hint=f"{v.name}_{dtype_name(dtype)}")
        self.emit("cast", [v], [out])
        return out

    def copy_into(self, src: Value, dst: Value) -> None:
        self.emit("copy", [src], [dst])


def lower_graph(graph: Graph) -> list[Instr]:
    """Lower every AtenNode of `graph` into instructions (graph.instrs)."""
    if not RULES:
        _load_rules()
    ctx = LowerCtx(graph)
    missing: dict[str, AtenNode] = {}
    for node in graph.nodes:
        fn = RULES.get(node.op_name)
        if fn is None:
            missing.setdefault(node.op_name, node)
            continue
        ctx.node = node
        fn(ctx, node)
    if missing:
        raise no_kernel_error({name: n.source for name, n in missing.items()})
    graph.instrs = ctx.instrs
    return ctx.instrs


def no_kernel_error(missing: Mapping[str, Source]) -> UnsupportedOpError:
    """The one error for ops the runtime has no kernel for: each op with the model line that
    first uses it (file:line and its source text), and the reason where the op is refused on
    purpose (REFUSED)."""
    if not RULES:
        _load_rules()
    lines = [f"  {name}  (first used at {src.describe()})"
             + (f": refused, {REFUSED[name]}" if name in REFUSED else "") for name, src in missing.items()]
    return UnsupportedOpError(
        f"the runtime has no kernel for {len(missing)} op(s) in this model:\n" + "\n".join(lines)
        + "\nSee docs/ops.md for the supported op set.")


def supported_edge_ops() -> list[str]:
    if not RULES:
        _load_rules()
    return sorted(RULES)


def rules_outside_core() -> list[torch._ops.OpOverload]:
    """The ATen ops outside core ATen that have a lowering rule (kthvalue, cummax, var_mean, ...):
    to_edge keeps them (no decomposition), and its verifier must let them through
    (EdgeCompileConfig._core_aten_ops_exception_list) for the rules to see them."""
    found = []
    for name in supported_edge_ops():
        ns, _, rest = name.partition(".")
        packet_name, _, overload = rest.rpartition(".")
        if ns != "aten" or not packet_name:
            continue
        packet = getattr(torch.ops.aten, packet_name, None)
        op = getattr(packet, overload, None) if packet is not None else None
        if isinstance(op, torch._ops.OpOverload) and torch.Tag.core not in op.tags:
            found.append(op)
    return found
