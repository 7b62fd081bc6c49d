"""Lowering rules: matrix products (addmm, mm, bmm -> linear / matmul / addmm)."""

from __future__ import annotations

from ...ir import AtenNode, Value
from . import LowerCtx, rule


@rule("aten.addmm.default")
def addmm(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    bias, x, w_t = a["self"], a["mat1"], a["mat2"]
    beta, alpha = float(a["beta"]), float(a["alpha"])
    (out,) = node.outputs
    assert out is not None
    if out.dtype.is_floating_point is False or out.dtype.itemsize != 4:
        raise ctx.unsupported(f"dtype {out.dtype} (float32 only)")
    # nn.Linear: addmm(b, x, W^T) with a constant W -> linear(x, W, b), the weight kept in
    # PyTorch's [out_features, in_features] layout that GEMM kernels pack from.
    if (isinstance(w_t, Value) and w_t.is_const and beta == 1.0 and alpha == 1.0
            and isinstance(bias, Value) and bias.shape in ((w_t.shape[1],), (1, w_t.shape[1]))):
        assert w_t.data is not None
        w = ctx.const(w_t.data.t().contiguous(), hint=w_t.name)
        w.name = w_t.name.removesuffix(".T")
        b = bias
        if bias.shape != (w_t.shape[1],):
            assert bias.data is not None or not bias.is_const
            b = ctx.temp(bias.dtype, (w_t.shape[1],), hint="bias")
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
    if out.dtype.itemsize != 4 or not out.dtype.is_floating_point:
        raise ctx.unsupported(f"dtype {out.dtype} (float32 only)")
    if isinstance(y, Value) and y.is_const and len(y.shape) == 2:
        assert y.data is not None
        w = ctx.const(y.data.t().contiguous(), hint=y.name)
        w.name = y.name.removesuffix(".T")
        ctx.emit("linear", [x, w, None], [out])
        return
    ctx.emit("matmul", [x, y], [out])
