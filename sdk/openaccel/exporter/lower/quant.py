"""Lowering rules: int8 quantization (exporter/quant.py folds PT2E's q/dq patterns first).

The folded nodes (`openaccel.conv2d_q8`, `openaccel.linear_q8`, `openaccel.linear_dq8`, `openaccel.add_q8`,
`openaccel.mean_q8`, `openaccel.mul_q8`) become their
instruction; a quantize_per_tensor / dequantize_per_tensor left standing (graph inputs and outputs,
ops that stay float32) becomes a `quantize` / `dequantize` instruction; a dequantize_per_channel
of a constant weight is evaluated at export (the float32 weight of an op that stays float32).
"""

from __future__ import annotations

import torch

from ...ir import AtenNode, QuantParams, Value
from .. import quant
from . import LowerCtx, rule


def _folded(ctx: LowerCtx, node: AtenNode) -> None:
    op = node.target.op
    out = node.outputs[0]
    assert out is not None
    ctx.emit(op, list(node.args), [out], *_encode(op, node.kwargs))


def _encode(op: str, kw: dict[str, object]) -> tuple[list[int], list[float]]:
    from ...opset import encode_args

    return encode_args(op, **kw)  # type: ignore[arg-type]


for _name in ("conv2d_q8", "linear_q8", "add_q8", "mean_q8", "mul_q8", "linear_dq8"):
    rule(f"openaccel.{_name}")(_folded)


def _qparams(ctx: LowerCtx, node: AtenNode, x: Value) -> tuple[float, int, int, int, torch.dtype]:
    a = node.args
    scale, zp, qmin, qmax, dt = float(a[1]), int(a[2]), int(a[3]), int(a[4]), a[5]
    if dt not in (torch.int8, torch.uint8):
        raise ctx.unsupported(f"quantized dtype {dt} (int8 and uint8 only)")
    lo, hi = (-128, 127) if dt == torch.int8 else (0, 255)
    where = f"{node.op_name} at {node.source.describe()}"
    quant.check_scale(scale, where)
    quant.check_zero_point(zp, where, lo, hi)
    if not lo <= qmin <= qmax <= hi:
        raise quant.QuantParamError(f"{where}: quant range [{qmin}, {qmax}] is outside {dt} [{lo}, {hi}]")
    return scale, zp, qmin, qmax, dt


@rule(quant.Q)
def quantize(ctx: LowerCtx, node: AtenNode) -> None:
    x = ctx.tensor_arg({"x": node.args[0]}, "x")
    scale, zp, qmin, qmax, _ = _qparams(ctx, node, x)
    if x.dtype != torch.float32:
        x = ctx.cast(x, torch.float32)
    quant.set_quant(ctx.output(node), QuantParams.per_tensor(scale, zp))
    ctx.emit("quantize", [x], [ctx.output(node)], *_encode("quantize", dict(scale=scale, zero_point=zp, qmin=qmin,
                                                                             qmax=qmax)))


@rule(quant.DQ)
def dequantize(ctx: LowerCtx, node: AtenNode) -> None:
    x = ctx.tensor_arg({"x": node.args[0]}, "x")
    scale, zp, _, _, _ = _qparams(ctx, node, x)
    quant.set_quant(x, QuantParams.per_tensor(scale, zp))
    out = ctx.output(node)
    if out.dtype != torch.float32:
        raise ctx.unsupported(f"dequantize to {out.dtype} (float32 only)")
    if x.is_const:
        assert x.data is not None
        out.data = ((x.data.to(torch.float32) - zp) * scale).contiguous()
        return
    ctx.emit("dequantize", [x], [out], *_encode("dequantize", dict(scale=scale, zero_point=zp)))


@rule(quant.DQC)
def dequantize_per_channel(ctx: LowerCtx, node: AtenNode) -> None:
    x = node.args[0]
    if not isinstance(x, Value) or not all(isinstance(v, Value) and v.is_const for v in node.input_values()):
        raise ctx.unsupported("per-channel dequantize of a tensor computed at run time (only constant weights)")
    with torch.no_grad():
        r = node.target(*[a.data if isinstance(a, Value) else a for a in node.args],
                        **{k: (v.data if isinstance(v, Value) else v) for k, v in node.kwargs.items()})
    out = ctx.output(node)
    out.data = r.detach().to(out.dtype).contiguous()
