"""Lowering rules: matrix products (addmm, mm, bmm, addmv, addbmm -> linear / matmul / addmm)."""

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


def _view(ctx: LowerCtx, v: Value, shape: tuple[int, ...]) -> Value:
    """`v` with another shape of the same elements (a constant reshaped, else a zero-copy alias)."""
    if v.shape == shape:
        return v
    if v.data is not None:
        return ctx.const(v.data.reshape(shape), hint=v.name)
    t = ctx.temp(v.dtype, shape, hint=v.name)
    ctx.alias(t, v)
    return t


@rule("aten.addmv.default")
def addmv(ctx: LowerCtx, node: AtenNode) -> None:
    """beta * self + alpha * (mat @ vec) -> addmm on vec as a [K, 1] matrix, out viewed as [M, 1]."""
    a = ctx.bind(node)
    bias, mat, vec = a["self"], a["mat"], a["vec"]
    (out,) = node.outputs
    assert out is not None
    _f32(ctx, out, bias, mat, vec)
    m, k = mat.shape
    if bias.shape not in ((), (1,), (m,)):
        raise ctx.unsupported(f"self of shape {list(bias.shape)} (expected [], [1] or [{m}])")
    res = ctx.temp(out.dtype, (m, 1), hint="addmv")
    ctx.emit("addmm", [_view(ctx, bias, (m, 1) if bias.shape == (m,) else bias.shape), mat, _view(ctx, vec, (k, 1))],
             [res], floats=[float(a["beta"]), float(a["alpha"])])
    ctx.alias(out, res)


@rule("aten.addbmm.default")
def addbmm(ctx: LowerCtx, node: AtenNode) -> None:
    """beta * self + alpha * sum_b batch1[b] @ batch2[b] -> one addmm with the batch folded into K:
    [N, B * M] (batch1 permuted to [N, B, M]) @ [B * M, P] (batch2 as it is)."""
    a = ctx.bind(node)
    bias, b1, b2 = a["self"], a["batch1"], a["batch2"]
    (out,) = node.outputs
    assert out is not None
    _f32(ctx, out, bias, b1, b2)
    nb, n, m = b1.shape
    p = b2.shape[2]
    if len(bias.shape) > 2:
        raise ctx.unsupported(f"self of shape {list(bias.shape)} (at most 2-D)")
    if b1.data is not None:
        lhs = ctx.const(b1.data.permute(1, 0, 2).reshape(n, nb * m), hint=b1.name)
    else:
        perm = ctx.temp(b1.dtype, (n, nb, m), hint="addbmm_lhs")
        ctx.emit("permute", [b1], [perm], ints=[1, 0, 2])
        lhs = _view(ctx, perm, (n, nb * m))
    ctx.emit("addmm", [bias, lhs, _view(ctx, b2, (nb * m, p))], [out],
             floats=[float(a["beta"]), float(a["alpha"])])
