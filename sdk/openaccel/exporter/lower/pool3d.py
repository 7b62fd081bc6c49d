"""Lowering rules: 3-D pooling (max_pool3d_with_indices, avg_pool3d, _adaptive_avg_pool3d,
adaptive_max_pool3d; adaptive_max_pool3d is outside core ATen and passes to_edge by its rule).

1-D pooling reaches the 2-D rules (lower/pool.py): to_edge writes max_pool1d / avg_pool1d / the
adaptive 1-D pools as the 2-D op between unsqueeze and squeeze.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...ir import AtenNode, Value
from ...opset import encode_args
from . import LowerCtx, rule

_MAX_DTYPES = (torch.float32, torch.int32, torch.int64, torch.int8, torch.uint8)


def _triple(ctx: LowerCtx, v: Sequence[int] | int | None, default: list[int], what: str) -> list[int]:
    if v is None:
        return default
    vals = [int(v)] if isinstance(v, int) else [int(x) for x in v]
    if not vals:
        return default
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3:
        raise ctx.unsupported(f"{what} {vals} does not have 3 values")
    return vals


def _check_input(ctx: LowerCtx, x: Value, dtypes: tuple[torch.dtype, ...], ranks: tuple[int, ...]) -> None:
    if x.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ctx.unsupported(f"dtype {x.dtype} (supported: {names})")
    if len(x.shape) not in ranks:
        raise ctx.unsupported(f"input of rank {len(x.shape)} (expected {' or '.join(map(str, ranks))})")


def _outputs(ctx: LowerCtx, node: AtenNode) -> list[Value]:
    """The values output, plus the indices when another node or the graph reads them."""
    out = ctx.output(node)
    ind = node.outputs[1] if len(node.outputs) > 1 else None
    return [out, ind] if ind is not None and ctx.is_used(ind) else [out]


def emit_max_pool3d(ctx: LowerCtx, x: Value, outs: list[Value], kernel: list[int], stride: list[int],
                    padding: list[int], dilation: list[int], ceil_mode: bool) -> None:
    ints, _ = encode_args("max_pool3d", kernel_d=kernel[0], kernel_h=kernel[1], kernel_w=kernel[2],
                          stride_d=stride[0], stride_h=stride[1], stride_w=stride[2], pad_d=padding[0],
                          pad_h=padding[1], pad_w=padding[2], dilation_d=dilation[0], dilation_h=dilation[1],
                          dilation_w=dilation[2], ceil_mode=int(bool(ceil_mode)))
    ctx.emit("max_pool3d", [x], outs, ints=ints)


@rule("aten.max_pool3d_with_indices.default", "aten.max_pool3d.default")
def max_pool3d(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = ctx.tensor_arg(a)
    _check_input(ctx, x, _MAX_DTYPES, (4, 5))
    kernel = _triple(ctx, a["kernel_size"], [], "kernel_size")
    if len(kernel) != 3:
        raise ctx.unsupported(f"kernel_size {a['kernel_size']}")
    stride = _triple(ctx, a["stride"], kernel, "stride")
    padding = _triple(ctx, a["padding"], [0, 0, 0], "padding")
    dilation = _triple(ctx, a["dilation"], [1, 1, 1], "dilation")
    emit_max_pool3d(ctx, x, _outputs(ctx, node), kernel, stride, padding, dilation, bool(a["ceil_mode"]))


@rule("aten.avg_pool3d.default")
def avg_pool3d(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    _check_input(ctx, x, (torch.float32, torch.int64), (4, 5))
    kernel = _triple(ctx, a["kernel_size"], [], "kernel_size")
    if len(kernel) != 3:
        raise ctx.unsupported(f"kernel_size {a['kernel_size']}")
    stride = _triple(ctx, a["stride"], kernel, "stride")
    padding = _triple(ctx, a["padding"], [0, 0, 0], "padding")
    divisor = a["divisor_override"]
    if divisor is not None and int(divisor) == 0:
        raise ctx.unsupported("divisor_override = 0")
    ints, _ = encode_args("avg_pool3d", kernel_d=kernel[0], kernel_h=kernel[1], kernel_w=kernel[2],
                          stride_d=stride[0], stride_h=stride[1], stride_w=stride[2], pad_d=padding[0],
                          pad_h=padding[1], pad_w=padding[2], ceil_mode=int(bool(a["ceil_mode"])),
                          count_include_pad=int(bool(a["count_include_pad"])), divisor_override=int(divisor or 0))
    ctx.emit("avg_pool3d", [x], [out], ints=ints)


@rule("aten._adaptive_avg_pool3d.default", "aten.adaptive_avg_pool3d.default")
def adaptive_avg_pool3d(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    _check_input(ctx, x, (torch.float32,), (4, 5))
    ctx.emit("adaptive_avg_pool3d", [x], [out])


@rule("aten.adaptive_max_pool3d.default")
def adaptive_max_pool3d(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = ctx.tensor_arg(a)
    _check_input(ctx, x, (torch.float32,), (4, 5))
    ctx.emit("adaptive_max_pool3d", [x], _outputs(ctx, node))
