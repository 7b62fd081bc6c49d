"""Graph-level passes before lowering: constant folding, batch-norm folding, dead-code removal."""

from __future__ import annotations

from typing import Any

import torch

from ..ir import AtenNode, Graph, Value

# Ops that must never be evaluated at export time (random, or with side effects).
_NO_FOLD_PREFIXES = ("aten.rand", "aten.randn", "aten.randint", "aten.bernoulli", "aten.dropout",
                     "aten.native_dropout", "aten.normal", "aten.uniform", "aten.multinomial")


def _materialize(a: Any) -> Any:
    if isinstance(a, Value):
        return a.data
    if isinstance(a, list):
        return [_materialize(x) for x in a]
    if isinstance(a, tuple):
        return tuple(_materialize(x) for x in a)
    return a


def fold_constants(graph: Graph, max_growth_bytes: int = 1024) -> int:
    """Evaluate nodes whose inputs are all constants with PyTorch itself (exact semantics).

    A node is folded only if its outputs are not much bigger than its constant inputs, so that
    folding never bloats the file (a large `full` stays a fill at run time). Returns how many
    nodes were folded.
    """
    folded = 0
    keep: list[AtenNode] = []
    for node in graph.nodes:
        ins = node.input_values()
        if node.op_name.startswith(_NO_FOLD_PREFIXES) or not all(v.is_const for v in ins):
            keep.append(node)
            continue
        in_bytes = sum(v.nbytes for v in ins)
        out_bytes = sum(o.nbytes for o in node.outputs if o is not None)
        if out_bytes > max(in_bytes, max_growth_bytes):
            keep.append(node)
            continue
        with torch.no_grad():
            result = node.target(*_materialize(node.args), **_materialize(node.kwargs))
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        named = [v for v in ins if "." in v.name]
        for out, r in zip(node.outputs, results):
            if out is not None:
                out.data = r.detach().to(out.dtype).contiguous().reshape(out.shape)
                if len(named) == 1 and len(node.outputs) == 1:
                    # keep the parameter's name visible in inspect: "fc.weight.T" not "permute_3"
                    suffix = ".T" if "permute" in node.op_name or "transpose" in node.op_name else "'"
                    out.name = named[0].name + suffix
        folded += 1
    graph.nodes = keep
    return folded


def _uses(graph: Graph) -> dict[Value, int]:
    count: dict[Value, int] = {}
    for n in graph.nodes:
        for v in n.input_values():
            count[v] = count.get(v, 0) + 1
    for v in graph.outputs:
        count[v] = count.get(v, 0) + 1
    return count


def fold_batch_norm(graph: Graph) -> int:
    """Fold inference batch norm into the preceding convolution's weight and bias:
    w' = w * g / sqrt(var + eps), b' = (b - mean) * g / sqrt(var + eps) + beta."""
    uses = _uses(graph)
    producer: dict[Value, AtenNode] = {}
    for n in graph.nodes:
        for o in n.outputs:
            if o is not None:
                producer[o] = n
    removed: set[int] = set()
    folded = 0
    for bn in graph.nodes:
        if bn.op_name != "aten._native_batch_norm_legit_no_training.default":
            continue
        x, gamma, beta, mean, var, _momentum, eps = bn.args[:7]
        conv = producer.get(x)
        if conv is None or conv.op_name != "aten.convolution.default" or uses.get(x, 0) != 1:
            continue
        if any(o is not None and uses.get(o, 0) for o in bn.outputs[1:]):
            continue
        w, b = conv.args[1], conv.args[2]
        transposed = conv.args[6]
        params = [w, mean, var] + [p for p in (b, gamma, beta) if p is not None]
        if transposed or not all(isinstance(p, Value) and p.is_const for p in params):
            continue
        with torch.no_grad():
            wd = w.data.double()
            scale = torch.rsqrt(var.data.double() + eps)
            if gamma is not None:
                scale = scale * gamma.data.double()
            shift = -mean.data.double() * scale
            if b is not None:
                shift = shift + b.data.double() * scale
            if beta is not None:
                shift = shift + beta.data.double()
            new_w = (wd * scale.reshape(-1, *([1] * (wd.dim() - 1)))).to(w.dtype)
            new_b = shift.to(w.dtype)
        w_val = Value(name=f"{w.name}.bn_folded", dtype=w.dtype, shape=w.shape, data=new_w.contiguous())
        b_val = Value(name=f"{w.name}.bn_folded_bias", dtype=w.dtype, shape=tuple(new_b.shape), data=new_b)
        args = list(conv.args)
        args[1], args[2] = w_val, b_val
        conv.args = tuple(args)
        # the conv now produces what the batch norm produced
        old_out = conv.outputs[0]
        new_out = bn.outputs[0]
        assert old_out is not None and new_out is not None
        conv.outputs = [new_out]
        removed.add(id(bn))
        folded += 1
    graph.nodes = [n for n in graph.nodes if id(n) not in removed]
    return folded


def remove_dead(graph: Graph) -> int:
    """Drop nodes none of whose outputs is used (all openaccel-supported ops are pure)."""
    removed = 0
    changed = True
    while changed:
        changed = False
        uses = _uses(graph)
        keep = []
        for n in graph.nodes:
            if any(o is not None and uses.get(o, 0) for o in n.outputs):
                keep.append(n)
            else:
                removed += 1
                changed = True
        graph.nodes = keep
    return removed
