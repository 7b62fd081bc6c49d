"""Lowering rules: 2-D pooling (max_pool2d[_with_indices], avg_pool2d, _adaptive_avg_pool2d,
adaptive_max_pool2d).

Global average pooling usually arrives as mean.dim and belongs to the reduce family.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule


def _pair(ctx: LowerCtx, v: Sequence[int] | int | None, default: list[int], what: str) -> list[int]:
    if v is None:
        return default
    vals = [int(v)] if isinstance(v, int) else [int(x) for x in v]
    if not vals:
        return default
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2:
        raise ctx.unsupported(f"{what} {vals} does not have 2 values")
    return vals


def _check_input(ctx: LowerCtx, x: Value, dtypes: tuple[torch.dtype, ...]) -> None:
    if x.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ctx.unsupported(f"dtype {x.dtype} (supported: {names})")
    if len(x.shape) not in (3, 4):
        raise ctx.unsupported(f"input of rank {len(x.shape)} (expected [N, C, H, W] or [C, H, W])")


@rule("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default")
def max_pool2d(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = a["self"]
    out = node.outputs[0]
    assert out is not None and isinstance(x, Value)
    outs = [out]
    if len(node.outputs) > 1 and ctx.is_used(node.outputs[1]):
        indices = node.outputs[1]
        assert indices is not None
        outs.append(indices)
    _check_input(ctx, x, (torch.float32, torch.int32, torch.int64, torch.int8, torch.uint8))
    kernel = _pair(ctx, a["kernel_size"], [], "kernel_size")
    if len(kernel) != 2:
        raise ctx.unsupported(f"kernel_size {a['kernel_size']}")
    stride = _pair(ctx, a["stride"], kernel, "stride")
    padding = _pair(ctx, a["padding"], [0, 0], "padding")
    dilation = _pair(ctx, a["dilation"], [1, 1], "dilation")
    ceil_mode = int(bool(a["ceil_mode"]))
    ctx.emit("max_pool2d", [x], outs, ints=[*kernel, *stride, *padding, *dilation, ceil_mode])


@rule("aten.avg_pool2d.default")
def avg_pool2d(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = a["self"]
    (out,) = node.outputs
    assert out is not None and isinstance(x, Value)
    _check_input(ctx, x, (torch.float32,))
    kernel = _pair(ctx, a["kernel_size"], [], "kernel_size")
    if len(kernel) != 2:
        raise ctx.unsupported(f"kernel_size {a['kernel_size']}")
    stride = _pair(ctx, a["stride"], kernel, "stride")
    padding = _pair(ctx, a["padding"], [0, 0], "padding")
    divisor = a["divisor_override"]
    if divisor is not None and int(divisor) == 0:
        raise ctx.unsupported("divisor_override = 0")
    ints = [*kernel, *stride, *padding, int(bool(a["ceil_mode"])), int(bool(a["count_include_pad"])),
            int(divisor or 0)]
    ctx.emit("avg_pool2d", [x], [out], ints=ints)


@rule("aten._adaptive_avg_pool2d.default")
def adaptive_avg_pool2d(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = a["self"]
    (out,) = node.outputs
    assert out is not None and isinstance(x, Value)
    _check_input(ctx, x, (torch.float32,))
    ctx.emit("adaptive_avg_pool2d", [x], [out])


@rule("aten.adaptive_max_pool2d.default")
def adaptive_max_pool2d(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = a["self"]
    out, indices = node.outputs[0], node.outputs[1]
    assert out is not None and indices is not None and isinstance(x, Value)
    _check_input(ctx, x, (torch.float32,))
    ctx.emit("adaptive_max_pool2d", [x], [out, indices] if ctx.is_used(indices) else [out])
