"""Import an edge-dialect ExportedProgram into openaccel's IR (ir.Graph of AtenNodes).

Parameters, buffers and lifted constants become constant Values; user inputs become graph
inputs; `getitem` on multi-output ops is resolved to the op's individual output Values.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import torch
from torch.export import ExportedProgram

from ..errors import ExportError
from ..ir import AtenNode, Graph, Source, Value, op_name_of

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)')


def source_of(node: torch.fx.Node) -> Source:
    """The innermost frame of the user's own code that produced `node`."""
    trace = node.meta.get("stack_trace") or ""
    frames = _FRAME.findall(trace)
    pick = None
    for file, line, code in frames:
        internal = "site-packages" in file or "/torch/" in file or "dist-packages" in file
        if not internal:
            pick = (file, line, code)
    if pick is None and frames:
        pick = frames[-1]
    module = ""
    stack = node.meta.get("nn_module_stack")
    if stack:
        module = list(stack.values())[-1][0]
        module = re.sub(r"^L__self__[._]?", "", module.replace("L['self'].", ""))
    if pick is None:
        return Source(node=node.name, module=module)
    file, line, code = pick
    return Source(file=file, line=int(line), code=code.strip(), node=node.name, module=module)


def _static_shape(val: Any, where: str) -> tuple[int, ...]:
    shape = []
    for d in val.shape:
        if not isinstance(d, int):
            try:
                d = int(d)
            except Exception:  # a symbolic size
                raise ExportError(
                    f"{where}: dimension {d} is dynamic; this version of openaccel needs static "
                    "shapes (export without dynamic_shapes)") from None
        shape.append(d)
    return tuple(shape)


def _value_of(name: str, val: Any, where: str) -> Value:
    if not isinstance(val, torch.Tensor):
        raise ExportError(f"{where}: expected a tensor, got {type(val).__name__}")
    return Value(name=name, dtype=val.dtype, shape=_static_shape(val, where))


def import_program(ep: ExportedProgram, method: str = "forward") -> Graph:
    sig = ep.graph_signature
    mutated = dict(sig.buffers_to_mutate)
    if mutated:
        names = ", ".join(sorted(set(mutated.values())))
        raise ExportError(
            f"the model mutates buffers ({names}); put it in eval mode (model.eval()) or remove "
            "the in-place update before exporting")
    const_targets: dict[str, str] = {}
    const_targets.update(sig.inputs_to_parameters)
    const_targets.update(sig.inputs_to_buffers)
    const_targets.update(sig.inputs_to_lifted_tensor_constants)
    user_inputs = list(sig.user_inputs)

    env: dict[torch.fx.Node, Any] = {}
    inputs: list[Value] = []
    nodes: list[AtenNode] = []
    outputs: list[Value] = []

    def lookup(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            if a not in env:
                raise ExportError(f"node {a.name} used before it is defined")
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(lookup(x) for x in a)
        return a

    for node in ep.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            if node.name in const_targets:
                target = const_targets[node.name]
                data = ep.state_dict.get(target)
                if data is None:
                    data = ep.constants.get(target)
                if data is None:
                    raise ExportError(f"no data for constant '{target}' in the exported program")
                data = data.detach().contiguous()
                env[node] = Value(name=target, dtype=data.dtype, shape=tuple(data.shape), data=data)
            elif node.name in user_inputs:
                if not isinstance(val, torch.Tensor):
                    # a non-tensor input (e.g. an int) was specialized by torch.export; it has no
                    # runtime value and is not part of the signature
                    env[node] = val
                    continue
                v = _value_of(node.name, val, f"input '{node.name}'")
                env[node] = v
                inputs.append(v)
            else:
                raise ExportError(f"unexpected graph input '{node.name}' (not a user input or constant)")
        elif node.op == "call_function":
            if node.target is operator.getitem:
                src, idx = node.args
                produced = env[src]
                env[node] = produced[idx]
                continue
            val = node.meta.get("val")
            src = source_of(node)
            where = f"{op_name_of(node.target)} at {src.describe()}"
            outs: list[Value | None]
            if isinstance(val, (list, tuple)):
                outs = [
                    _value_of(f"{node.name}_{i}", v, where) if isinstance(v, torch.Tensor) else None
                    for i, v in enumerate(val)
                ]
                env[node] = outs
            else:
                v = _value_of(node.name, val, where)
                outs = [v]
                env[node] = v
            nodes.append(AtenNode(target=node.target, args=lookup(tuple(node.args)),
                                  kwargs={k: lookup(v) for k, v in node.kwargs.items()},
                                  outputs=outs, source=src))
        elif node.op == "get_attr":
            # a tensor constant to_edge left on the module instead of lifting it to an input (it does
            # so in a program without inputs: torch.linspace(-2, -3, 50) alone)
            data = ep.graph_module
            for part in str(node.target).split("."):
                data = getattr(data, part, None)
            if not isinstance(data, torch.Tensor):
                raise ExportError(f"graph attribute '{node.target}' is not a tensor ({type(data).__name__})")
            data = data.detach().contiguous()
            env[node] = Value(name=str(node.target), dtype=data.dtype, shape=tuple(data.shape), data=data)
        elif node.op == "output":
            flat = node.args[0]
            for i, o in enumerate(flat if isinstance(flat, (list, tuple)) else [flat]):
                v = lookup(o)
                if not isinstance(v, Value):
                    raise ExportError(f"output {i} is not a tensor ({type(v).__name__}); openaccel "
                                      "methods return tensors only")
                outputs.append(v)
        else:
            raise ExportError(f"unsupported FX node kind '{node.op}' ({node.name})")
    return Graph(name=method, inputs=inputs, outputs=outputs, nodes=nodes)
