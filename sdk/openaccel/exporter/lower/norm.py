"""Lowering rules: normalizations (inference batch norm, layer norm, group norm).

Batch norm that follows a convolution is folded into it before lowering (fold.fold_batch_norm);
what reaches here is standalone. layer_norm / group_norm emit their mean / rstd outputs only when
the model reads them.
"""

from __future__ import annotations

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule


def _check_f32(ctx: LowerCtx, *vals: object) -> None:
    for v in vals:
        if isinstance(v, Value) and v.dtype != torch.float32:
            raise ctx.unsupported(f"dtype {v.dtype} of '{v.name}' (float32 only)")


def _outputs(ctx: LowerCtx, node: AtenNode) -> list[Value]:
    """[out], or [out, mean, rstd] when the model reads either statistic."""
    out = node.outputs[0]
    assert out is not None
    stats = node.outputs[1:3]
    if not any(ctx.is_used(s) for s in stats):
        return [out]
    res = [out]
    for s in stats:
        assert s is not None
        res.append(s)
    return res


@rule("aten._native_batch_norm_legit_no_training.default")
def batch_norm(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, w, b, mean, var = a["input"], a["weight"], a["bias"], a["running_mean"], a["running_var"]
    out = node.outputs[0]
    assert out is not None and isinstance(x, Value)
    if any(ctx.is_used(o) for o in node.outputs[1:]):
        raise ctx.unsupported("the saved mean / invstd outputs are not supported (inference only)")
    _check_f32(ctx, x, w, b, mean, var, out)
    if len(x.shape) < 2:
        raise ctx.unsupported(f"input of rank {len(x.shape)} (expected [N, C, ...])")
    ctx.emit("batch_norm", [x, w, b, mean, var], [out], floats=[float(a["eps"])])


@rule("aten.native_layer_norm.default")
def layer_norm(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, w, b = a["input"], a["weight"], a["bias"]
    assert isinstance(x, Value)
    shape = [int(s) for s in a["normalized_shape"]]
    _check_f32(ctx, x, w, b)
    k = len(shape)
    if k < 1 or k > len(x.shape) or list(x.shape[len(x.shape) - k:]) != shape:
        raise ctx.unsupported(f"normalized_shape {shape} does not match the input's trailing dims {list(x.shape)}")
    ctx.emit("layer_norm", [x, w, b], _outputs(ctx, node), ints=[k], floats=[float(a["eps"])])


@rule("aten.native_group_norm.default")
def group_norm(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, w, b = a["input"], a["weight"], a["bias"]
    assert isinstance(x, Value)
    _check_f32(ctx, x, w, b)
    groups = int(a["group"])
    if len(x.shape) < 2 or groups < 1 or x.shape[1] % groups:
        raise ctx.unsupported(f"{groups} groups for input {list(x.shape)}")
    ctx.emit("group_norm", [x, w, b], _outputs(ctx, node), ints=[groups], floats=[float(a["eps"])])
