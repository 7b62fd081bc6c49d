"""Lowering rules: matrix products (addmm, mm, bmm -> linear / matmul / addmm)."""

from __future__ import annotations

from typing import Any

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule


def _f32(ctx: LowerCtx, out: Value, *ins: Any) -> None:
    if out.dtype != torch.float32:
        raise ctx.unsupported(f"dtype {out.dtype} (float32 only)")
    for v in ins:
        if not isinstance(v, Value):
            raise ctx.unsupported(f"operand {v!r} is not a tensor")
        if v.dtype != torch.float32:
            raise ctx.unsupported(f"operand {v.name} has dtype {v.dtype} (float32 only)")


@rule("aten.addmm.default")
def addmm(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    bias, x, w_t = a["self"], a["mat1"], a["mat2"]
    beta, alpha = float(a["beta"]), float(a["alpha"])
    (out,) = node.outputs
    assert out is not None
    _f32(ctx, out, bias, x, w_t)
    if len(bias.shape) > 2:
        raise ctx.unsupported(f"bias of shape {list(bias.shape)} (at most 2-D)")
    # nn.Linear: addmm(b, x, W^T) with a constant W -> linear(x, W, b), the weight kept in
    # PyTorch's [out_features, in_features] layout that GEMM kernels pack from.
    n = w_t.shape[1]
    if w_t.is_const and beta == 1.0 and alpha == 1.0 and bias.shape in ((n,), (1, n)):
        assert w_t.data is not None
        w = ctx.const(w_t.data.t().contiguous(), hint=w_t.name)
        w.name = w_t.name.removesuffix(".T")
        b = bias
        if bias.shape != (n,):
            if bias.data is not None:
                b = ctx.const(bias.data.reshape(n), hint=bias.name)
                b.name = bias.name
            else:
                b = ctx.temp(bias.dtype, (n,), hint="bias")
                ctx.alias(b, bias)
        ctx.emit("linear", [x, w, b], [out])
        return
    ctx.emit("addmm", [bias, x, w_t], [out], floats=[beta, alpha])


@rule("aten.mm.default", "aten.bmm.default")
def mm(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, y = a["self"], a["mat2"]
    (out,) = node.outputs
    assert out is not None
    _f32(ctx, out, x, y)
    if y.is_const and len(y.shape) == 2:
        # x @ C with a constant C: linear(x, C^T), the weight in [N, K] layout
        assert y.data is not None
        w = ctx.const(y.data.t().contiguous(), hint=y.name)
        w.name = y.name.removesuffix(".T")
        ctx.emit("linear", [x, w, None], [out])
        return
    ctx.emit("matmul", [x, y], [out])
