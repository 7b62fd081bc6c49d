"""Lowering rules: normalizations (batch norm, inference and with the batch's statistics, layer norm,
group norm).

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


@rule("aten._native_batch_norm_legit.default", "aten._native_batch_norm_legit_functional.default",
      "aten._native_batch_norm_legit.no_stats")
def batch_norm_legit(ctx: LowerCtx, node: AtenNode) -> None:
    """Batch norm as torch.export writes it outside eval mode: training=True (a module in train(),
    or F.batch_norm(..., training=True)) normalizes with the batch's own mean and biased variance;
    no_stats (track_running_stats=False) always does. The functional form's running_mean_out /
    running_var_out (the running-statistics update) are not computed: a graph that reads them is
    refused. training=False uses the running statistics, as the inference op."""
    a = ctx.bind(node)
    x, w, b = a["input"], a["weight"], a["bias"]
    out = node.outputs[0]
    assert out is not None and isinstance(x, Value)
    _check_f32(ctx, x, w, b, out)
    if len(x.shape) < 2:
        raise ctx.unsupported(f"input of rank {len(x.shape)} (expected [N, C, ...])")
    training = bool(a["training"])
    if not training:
        if node.op_name.endswith("no_stats"):
            raise ctx.unsupported("training=False without running statistics")
        if any(ctx.is_used(o) for o in node.outputs[1:]):
            raise ctx.unsupported("the saved mean / invstd or running statistics outputs with training=False")
        mean, var = a["running_mean"], a["running_var"]
        _check_f32(ctx, mean, var)
        ctx.emit("batch_norm", [x, w, b, mean, var], [out], floats=[float(a["eps"])])
        return
    if any(ctx.is_used(o) for o in node.outputs[3:5]):
        raise ctx.unsupported("the updated running statistics (running_mean_out / running_var_out) of a training-mode "
                              "batch norm: export the model in eval mode, or compute the statistics explicitly")
    ctx.emit("batch_norm_training", [x, w, b], _outputs(ctx, node), floats=[float(a["eps"])])


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
