"""Lowering rules: binary elementwise ops with broadcasting, comparisons, logical ops, where.

Type promotion follows eager: arithmetic computes in the node's output dtype (to_edge already
promoted it: int tensor + float scalar -> float, true division of ints -> float, 0-d tensors
promote weakly); comparisons compute in torch.result_type of their operands. Operands are cast to
that dtype (constants at export time) and Python scalars become 0-d constants, which the kernels
broadcast without copies.
"""

from __future__ import annotations

from typing import Any

import torch

from ...ir import AtenNode, Value, dtype_name
from ...opset import OPS
from . import LowerCtx, rule
from .elementwise import compute_dtype, emit_as, int_arg, operand, output


def _meta(a: Any) -> Any:
    if isinstance(a, Value):
        return torch.empty(a.shape, dtype=a.dtype, device="meta")
    return a


def _result_type(ctx: LowerCtx, a: Any, b: Any) -> torch.dtype:
    if not isinstance(a, Value) and not isinstance(b, Value):
        raise ctx.unsupported("no tensor operand")
    return torch.result_type(_meta(a), _meta(b))


# ---- arithmetic ---------------------------------------------------------------------------------

_ARITH = {
    "aten.add.Tensor": "add", "aten.add.Scalar": "add", "aten.sub.Tensor": "sub", "aten.sub.Scalar": "sub",
    "aten.rsub.Scalar": "sub", "aten.rsub.Tensor": "sub",
    "aten.mul.Tensor": "mul", "aten.mul.Scalar": "mul",
    "aten.div.Tensor": "div", "aten.div.Scalar": "div", "aten.div.Tensor_mode": "div", "aten.div.Scalar_mode": "div",
    "aten.pow.Tensor_Tensor": "pow", "aten.pow.Tensor_Scalar": "pow", "aten.pow.Scalar": "pow",
    "aten.minimum.default": "minimum", "aten.maximum.default": "maximum",
    "aten.remainder.Tensor": "remainder", "aten.remainder.Scalar": "remainder",
    "aten.fmod.Tensor": "fmod", "aten.fmod.Scalar": "fmod",
    "aten.bitwise_and.Tensor": "bitwise_and", "aten.bitwise_and.Scalar": "bitwise_and",
    "aten.bitwise_or.Tensor": "bitwise_or", "aten.bitwise_or.Scalar": "bitwise_or",
    "aten.bitwise_xor.Tensor": "bitwise_xor", "aten.bitwise_xor.Scalar": "bitwise_xor",
}

# bool results of ops the kernels do not compute in bool: PyTorch's meaning on {0, 1}
_BOOL_AS = {"add": "logical_or", "maximum": "logical_or", "minimum": "logical_and"}

# pow(x, c) for float tensors: ATen's dedicated kernels for these exponents (exact special values)
_POW_UNARY = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}


@rule(*_ARITH)
def arith(ctx: LowerCtx, node: AtenNode) -> None:
    op = _ARITH[node.op_name]
    a = ctx.bind(node)
    out = output(node)
    ints: list[int] = []
    floats: list[float] = []
    if op == "pow":
        x, y = a["self"], a["exponent"]
    elif node.op_name.startswith("aten.rsub"):
        x, y = a["other"], a["self"]  # rsub(self, other, alpha) = other - alpha * self
    else:
        x, y = a["self"], a["other"]
    if out.dtype == torch.bool and op in _BOOL_AS:
        if op == "add" and not a["alpha"]:
            raise ctx.unsupported("bool add with alpha = False")
        op = _BOOL_AS[op]
        ctx.emit(op, [operand(ctx, x, torch.bool), operand(ctx, y, torch.bool)], [out])
        return
    dt = compute_dtype(ctx, op, out.dtype)
    if op in ("add", "sub"):
        alpha = a.get("alpha", 1)
        alpha = 1 if alpha is None else alpha
        if isinstance(alpha, complex):
            raise ctx.unsupported(f"complex alpha = {alpha!r}")
        floats = [float(alpha) if dt.is_floating_point or dt.is_complex else int_arg(ctx, "alpha", alpha, dt)]
    elif op == "div":
        mode = a.get("rounding_mode")
        if mode is None:
            if not (dt.is_floating_point or dt.is_complex):
                raise ctx.unsupported(f"true division producing {dtype_name(out.dtype)}")
        elif mode in ("trunc", "floor"):
            ints = [1 if mode == "trunc" else 2]
        else:
            raise ctx.unsupported(f"rounding_mode='{mode}'")
    elif op == "pow" and dt == torch.float32 and isinstance(y, (int, float)) and not isinstance(y, bool):
        if float(y) in _POW_UNARY:
            emit_as(ctx, _POW_UNARY[float(y)], [operand(ctx, x, dt)], out, dt)
            return
        if float(y) == 2.0:  # ATen: x * x
            xv = operand(ctx, x, dt)
            emit_as(ctx, "mul", [xv, xv], out, dt)
            return
    xv = operand(ctx, x, dt)
    emit_as(ctx, op, [xv, xv if y is x else operand(ctx, y, dt)], out, dt, ints, floats)


# ---- comparisons and logical ops ----------------------------------------------------------------

_CMP = {f"aten.{c}.{k}": c for c in ("eq", "ne", "lt", "le", "gt", "ge") for k in ("Tensor", "Scalar")}


@rule(*_CMP)
def compare(ctx: LowerCtx, node: AtenNode) -> None:
    op = _CMP[node.op_name]
    a = ctx.bind(node)
    x, y = a["self"], a["other"]
    dt = _result_type(ctx, x, y)
    cdt = compute_dtype(ctx, op, dt)
    xv = operand(ctx, x, cdt)
    ctx.emit(op, [xv, xv if y is x else operand(ctx, y, cdt)], [output(node)])


@rule("aten.logical_and.default", "aten.logical_or.default", "aten.logical_xor.default")
def logical(ctx: LowerCtx, node: AtenNode) -> None:
    op = node.op_name.split(".")[1]
    a = ctx.bind(node)
    x, y = a["self"], a["other"]
    allowed = OPS[op].dtypes
    if (isinstance(x, Value) and isinstance(y, Value) and x.dtype == y.dtype
            and dtype_name(x.dtype) in allowed):
        ctx.emit(op, [x, y], [output(node)])
        return
    # mixed dtypes: compare the nonzero tests (a cast to bool is exactly that)
    ctx.emit(op, [operand(ctx, x, torch.bool), operand(ctx, y, torch.bool)], [output(node)])


# ---- where --------------------------------------------------------------------------------------

@rule("aten.where.self")
def where(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    out = output(node)
    cond = a["condition"]
    if not isinstance(cond, Value):
        raise ctx.unsupported("a non-tensor condition")
    cond = ctx.cast(cond, torch.bool)
    dt = compute_dtype(ctx, "where", out.dtype)
    emit_as(ctx, "where", [cond, operand(ctx, a["self"], dt), operand(ctx, a["other"], dt)], out, dt)


# ---- float math of two arguments ----------------------------------------------------------------

_FLOAT2 = {
    "aten.atan2.default": "atan2", "aten.atan2.out": "atan2", "aten.copysign.Tensor": "copysign",
    "aten.copysign.Scalar": "copysign", "aten.hypot.default": "hypot", "aten.nextafter.default": "nextafter",
}


@rule(*_FLOAT2)
def float_binary(ctx: LowerCtx, node: AtenNode) -> None:
    """atan2, copysign, hypot, nextafter: float32 with broadcasting; integer / bool operands and Python
    scalars are converted to float32 (the output's dtype), as PyTorch promotes them. torch.export
    functionalizes atan2(..., out=t) into atan2.default; an atan2.out node writes the node's own output
    (its `out` argument is only the buffer eager would have reused)."""
    op = _FLOAT2[node.op_name]
    a = ctx.bind(node)
    out = output(node)
    x, y = a["self"], a["other"]
    dt = compute_dtype(ctx, op, out.dtype)
    xv = operand(ctx, x, dt)
    emit_as(ctx, op, [xv, xv if y is x else operand(ctx, y, dt)], out, dt)


# ---- fmax / fmin ----------------------------------------------------------------------------------

@rule("aten.fmax.default", "aten.fmin.default")
def fmax_fmin(ctx: LowerCtx, node: AtenNode) -> None:
    """fmax / fmin: maximum / minimum where a NaN operand loses to a number (NaN only when both are):
    where(x != x, y, where(y != y, x, maximum(x, y))), exact. Integers: maximum / minimum."""
    is_max = node.op_name == "aten.fmax.default"
    a = ctx.bind(node)
    out = output(node)
    x, y = a["self"], a["other"]
    if out.dtype == torch.bool:
        op = "logical_or" if is_max else "logical_and"
        ctx.emit(op, [operand(ctx, x, torch.bool), operand(ctx, y, torch.bool)], [out])
        return
    op = "maximum" if is_max else "minimum"
    dt = compute_dtype(ctx, op, out.dtype)
    xv, yv = operand(ctx, x, dt), operand(ctx, y, dt)
    if not dt.is_floating_point:
        emit_as(ctx, op, [xv, yv], out, dt)
        return
    m = ctx.temp(dt, out.shape, hint=op)
    ctx.emit(op, [xv, yv], [m])
    y_nan = ctx.temp(torch.bool, yv.shape, hint="isnan")
    ctx.emit("ne", [yv, yv], [y_nan])
    t = ctx.temp(dt, out.shape, hint=op)
    ctx.emit("where", [y_nan, xv, m], [t])
    x_nan = ctx.temp(torch.bool, xv.shape, hint="isnan")
    ctx.emit("ne", [xv, xv], [x_nan])
    emit_as(ctx, "where", [x_nan, yv, t], out, dt)
