"""Lowering rules: convolutions (aten.convolution -> conv2d / conv_transpose2d).

1-D convolutions run as 2-D ones over zero-copy views with a unit height ([N, C, L] is byte for
byte [N, C, 1, L]). 3-D convolutions run as one conv2d over the depth taps gathered into channels
(see _conv3d); transposed 3-D ones as a 3-D convolution of the stride-dilated input with the
flipped kernel. Both are exact (the same products, summed by conv2d) but copy the input kD times
(and a transposed one stride^3 times more): correct, not fast.
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
    if spatial not in (1, 2, 3) or len(w.shape) != spatial + 2:
        raise ctx.unsupported(f"{spatial}-D convolution (input {list(x.shape)}, weight {list(w.shape)}); "
                              "1-D, 2-D and 3-D are supported")
    stride = _pair(ctx, a["stride"], spatial, "stride")
    padding = _pair(ctx, a["padding"], spatial, "padding")
    dilation = _pair(ctx, a["dilation"], spatial, "dilation")
    output_padding = _pair(ctx, a["output_padding"], spatial, "output_padding")
    groups = int(a["groups"])
    transposed = bool(a["transposed"])
    if spatial == 3:
        if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(output_padding) < 0 or groups < 1:
            raise ctx.unsupported(f"stride {stride}, padding {padding}, dilation {dilation}, "
                                  f"output_padding {output_padding}, groups {groups}")
        if out.numel == 0:
            ctx.alias(out, x)  # no bytes to write
        elif transposed:
            _conv_transpose3d(ctx, x, w, b, out, stride, padding, dilation, output_padding, groups)
        else:
            _conv3d(ctx, x, w, b, out, stride, padding, dilation, groups)
        return
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


# ---- 3-D convolutions -------------------------------------------------------------------------------

def _conv3d(ctx: LowerCtx, x: Value, w: Value, b: Value | None, out: Value, stride: list[int],
            padding: list[int], dilation: list[int], groups: int) -> None:
    """out[n, o, od] = sum over kd of conv2d(x[n, :, od * sD - pD + kd * dD], w[o, :, kd]): the kD
    depth taps of every output depth, gathered next to the channels ([N, OD, C, kD, H, W], a slice per
    tap, one cat, one permute), make one conv2d over a batch of N * OD with C * kD input channels
    (the weight [O, C/g, kD, kH, kW] is byte for byte [O, C/g * kD, kH, kW]; a group's channels stay
    contiguous), whose [N, OD, O, OH, OW] result is permuted back to [N, O, OD, OH, OW]."""
    n, c, d, h, wd = x.shape
    o, cg, kd, kh, kw = w.shape
    od, oh, ow = out.shape[2:]
    s_d, p_d, d_d = stride[0], padding[0], dilation[0]
    if c != cg * groups:
        raise ctx.unsupported(f"weight {list(w.shape)} with {groups} groups for {c} input channels")
    if kd > 64:
        raise ctx.unsupported(f"kernel depth {kd} (at most 64)")
    xp = x
    if p_d:
        xp = ctx.temp(x.dtype, (n, c, d + 2 * p_d, h, wd), hint="conv3d_pad")
        ctx.emit("pad", [x], [xp], ints=[0, 0, 0, 0, p_d, p_d], floats=[0.0])
    taps: list[Value] = []
    for k in range(kd):
        start = k * d_d
        end = start + (od - 1) * s_d + 1
        if start == 0 and end == xp.shape[2] and s_d == 1:
            tap = xp
        else:
            tap = ctx.temp(x.dtype, (n, c, od, h, wd), hint="conv3d_tap")
            ctx.emit("slice", [xp], [tap], ints=[2, start, end, s_d])
        taps.append(_view(ctx, tap, (n, c, 1, od, h, wd)))
    gathered = taps[0]
    if kd > 1:
        gathered = ctx.temp(x.dtype, (n, c, kd, od, h, wd), hint="conv3d_taps")
        ctx.emit("cat", taps, [gathered], ints=[2])
    moved = ctx.temp(x.dtype, (n, od, c, kd, h, wd), hint="conv3d_taps")
    ctx.emit("permute", [gathered], [moved], ints=[0, 3, 1, 2, 4, 5])
    x2 = _view(ctx, moved, (n * od, c * kd, h, wd))
    w2 = _view(ctx, w, (o, cg * kd, kh, kw))
    y2 = ctx.temp(out.dtype, (n * od, o, oh, ow), hint="conv3d_2d")
    ctx.emit("conv2d", [x2, w2, b], [y2], ints=[stride[1], stride[2], padding[1], padding[2], dilation[1],
                                                  dilation[2], groups, 0])
    ctx.emit("permute", [_view(ctx, y2, (n, od, o, oh, ow))], [out], ints=[0, 2, 1, 3, 4])


def _conv_transpose3d(ctx: LowerCtx, x: Value, w: Value, b: Value | None, out: Value, stride: list[int],
                      padding: list[int], dilation: list[int], output_padding: list[int], groups: int) -> None:
    """conv_transpose3d = a 3-D convolution (stride 1, the same dilation) of the input with stride - 1
    zeros after each element along each dim, padded by d * (k - 1) - p before and that plus
    output_padding after (negative: cropped), with the kernel flipped and its in / out channels
    swapped within each group."""
    ci, cog, kd, kh, kw = w.shape
    if ci != x.shape[1] or ci % groups:
        raise ctx.unsupported(f"weight {list(w.shape)} with {groups} groups for {x.shape[1]} input channels")
    z = x
    for axis, s in zip((2, 3, 4), stride):
        if s == 1:
            continue
        shp = z.shape
        inner = 1
        for dim in shp[axis + 1:]:
            inner *= dim
        spread = ctx.temp(x.dtype, (*shp[:axis + 1], s, inner), hint="convt3d_zeros")
        ctx.emit("pad", [_view(ctx, z, (*shp[:axis + 1], 1, inner))], [spread], ints=[0, 0, 0, s - 1], floats=[0.0])
        z = _view(ctx, spread, (*shp[:axis], shp[axis] * s, *shp[axis + 1:]))
    pads: list[int] = []
    shape = list(z.shape)
    for axis, k, s, p, d, op in zip((4, 3, 2), (kw, kh, kd), stride[::-1], padding[::-1], dilation[::-1],
                                    output_padding[::-1]):
        before, after = d * (k - 1) - p, d * (k - 1) - p + op - (s - 1)
        pads += [before, after]
        shape[axis] += before + after
    if min(shape) < 1:
        raise ctx.unsupported(f"padding {padding} leaves no input for the transposed convolution")
    if any(pads):
        zp = ctx.temp(x.dtype, tuple(shape), hint="convt3d_pad")
        ctx.emit("pad", [z], [zp], ints=pads, floats=[0.0])
        z = zp
    cg_in = ci // groups
    conv_w_shape = (cog * groups, cg_in, kd, kh, kw)
    if w.is_const:
        assert w.data is not None
        data = w.data.reshape(groups, cg_in, cog, kd, kh, kw).transpose(1, 2).reshape(conv_w_shape)
        wt = ctx.const(data.flip(2, 3, 4), hint=f"{w.name}_conv3d")
    else:
        swapped = ctx.temp(w.dtype, (groups, cog, cg_in, kd, kh, kw), hint="convt3d_w")
        ctx.emit("permute", [_view(ctx, w, (groups, cg_in, cog, kd, kh, kw))], [swapped], ints=[0, 2, 1, 3, 4, 5])
        wt = ctx.temp(w.dtype, conv_w_shape, hint="convt3d_w")
        ctx.emit("flip", [_view(ctx, swapped, conv_w_shape)], [wt], ints=[2, 3, 4])
    _conv3d(ctx, z, wt, b, out, [1, 1, 1], [0, 0, 0], dilation, groups)
