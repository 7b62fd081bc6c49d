"""Lowering rules: the math family (opset.py): float32 functions of one argument, computed in double
and rounded once by the kernels (ref/math.c).

Most are outside core ATen (exp2, lgamma, digamma, polygamma, erfinv, erfc, i0, the torch.special
functions that to_edge keeps as single ops); the exporter lets to_edge's verifier pass every op that
has a rule here (exporter/__init__.py). Integer and bool inputs are converted to float32 first, as
PyTorch promotes them. torch.special functions that to_edge decomposes need no rule: ndtr (erf),
log_ndtr (erfcx, erfc, log), xlogy / xlog1py (log, log1p, where), logaddexp (exp, log1p) and
logaddexp2 (exp2, log1p), expit (sigmoid), entr, sinc, logit.
"""

from __future__ import annotations

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule
from .elementwise import compute_dtype, emit_as, output

# edge op name (without "aten." and ".default") -> openaccel op
_MATH = {
    "acos": "acos", "asin": "asin", "atan": "atan", "tan": "tan", "sinh": "sinh", "cosh": "cosh",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "log2": "log2", "log10": "log10", "exp2": "exp2",
    "erfc": "erfc", "erfinv": "erfinv", "special_erfcx": "erfcx", "special_ndtri": "ndtri", "lgamma": "lgamma",
    "digamma": "digamma", "i0": "i0", "special_i0e": "i0e", "special_i1": "i1", "special_i1e": "i1e",
}


def _input(ctx: LowerCtx, x: object) -> Value:
    if not isinstance(x, Value):
        raise ctx.unsupported("a non-tensor input")
    return x


@rule(*(f"aten.{name}.default" for name in _MATH))
def math_unary(ctx: LowerCtx, node: AtenNode) -> None:
    op = _MATH[node.op_name.split(".")[1]]
    x = _input(ctx, ctx.bind(node)["self"])
    out = output(node)
    dt = compute_dtype(ctx, op, out.dtype)
    emit_as(ctx, op, [ctx.cast(x, dt)], out, dt)


@rule("aten.polygamma.default")
def polygamma(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = _input(ctx, a["self"])
    n = a["n"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ctx.unsupported(f"n = {n!r} (polygamma takes an integer n >= 0)")
    out = output(node)
    dt = compute_dtype(ctx, "polygamma", out.dtype)
    emit_as(ctx, "polygamma", [ctx.cast(x, dt)], out, dt, ints=[n])


@rule("aten.signbit.default")
def signbit(ctx: LowerCtx, node: AtenNode) -> None:
    """signbit(x): the sign bit, of -0.0 and of a negative NaN too: copysign(1, x) < 0, exact. Integers:
    x < 0; bool: False."""
    x = _input(ctx, ctx.bind(node)["self"])
    out = output(node)
    if x.dtype == torch.bool:
        ctx.emit("full", [], [out], floats=[0.0])
        return
    if not x.dtype.is_floating_point:
        ctx.emit("lt", [x, ctx.scalar(0, x.dtype)], [out])
        return
    if x.dtype != torch.float32:
        raise ctx.unsupported(f"dtype {x.dtype} (float32 and integers only)")
    one = ctx.temp(torch.float32, x.shape, hint="sign")
    ctx.emit("copysign", [ctx.scalar(1.0, torch.float32), x], [one])
    ctx.emit("lt", [one, ctx.scalar(0.0, torch.float32)], [out])

