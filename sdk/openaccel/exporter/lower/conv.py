"""Lowering rules: convolutions (aten.convolution -> conv2d / conv_transpose2d).

1-D convolutions run as 2-D ones over zero-copy views with a unit height ([N, C, L] is byte for
byte [N, C, 1, L]); 3-D convolutions are not supported.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule


def _pair(ctx: LowerCtx, v: Sequence[int] | int, n: int, what: str) -> list[int]:
    vals = [int(v)] if isinstance(v, int) else [int(x) for x in v]
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise ctx.unsupported(f"{what} {vals} does not have {n} values")
    return vals


def _view(ctx: LowerCtx, v: Value, shape: tuple[int, ...]) -> Value:
    """A zero-copy view of `v` with another shape of the same number of elements."""
    t = ctx.temp(v.dtype, shape, hint=f"{v.name}_2d")
    ctx.alias(t, v)
    return t


@rule("aten.convolution.default")
def convolution(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, w, b = a["input"], a["weight"], a["bias"]
    (out,) = node.outputs
    assert out is not None and isinstance(x, Value) and isinstance(w, Value)
    if out.dtype != torch.float32 or x.dtype != torch.float32 or w.dtype != torch.float32 or (
            isinstance(b, Value) and b.dtype != torch.float32):
        raise ctx.unsupported(f"dtype {x.dtype} (float32 only)")
    if not isinstance(b, (Value, type(None))):
        raise ctx.unsupported("bias is not a tensor")
    spatial = len(x.shape) - 2
    if spatial not in (1, 2) or len(w.shape) != spatial + 2:
        raise ctx.unsupported(f"{spatial}-D convolution (input {list(x.shape)}); only 1-D and 2-D are supported")
    stride = _pair(ctx, a["stride"], spatial, "stride")
    padding = _pair(ctx, a["padding"], spatial, "padding")
    dilation = _pair(ctx, a["dilation"], spatial, "dilation")
    output_padding = _pair(ctx, a["output_padding"], spatial, "output_padding")
    groups = int(a["groups"])
    transposed = bool(a["transposed"])
    if spatial == 1:
        # [N, C, L] -> [N, C, 1, L]: unit kernel height, stride/dilation 1, no padding along H
        x = _view(ctx, x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        w = _view(ctx, w, (w.shape[0], w.shape[1], 1, w.shape[2]))
        out4 = ctx.temp(out.dtype, (out.shape[0], out.shape[1], 1, out.shape[2]), hint=f"{out.name}_2d")
        ctx.alias(out4, out)
        out = out4
        stride, padding, dilation = [1, *stride], [0, *padding], [1, *dilation]
        output_padding = [0, *output_padding]
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(output_padding) < 0:
        raise ctx.unsupported(f"stride {stride}, padding {padding}, dilation {dilation}, "
                              f"output_padding {output_padding}")
    ints = [*stride, *padding, *dilation, groups]
    if transposed:
        ctx.emit("conv_transpose2d", [x, w, b], [out], ints=[*ints, *output_padding])
    else:
        ctx.emit("conv2d", [x, w, b], [out], ints=[*ints, 0])
