"""Lowering rules: softmax / log_softmax, dim-list reductions (var, var_mean), argmax / argmin, and the
cumulative ops (cumsum, cumprod, cummax, cummin, logcumsumexp).

Kernels take canonical arguments: dims normalized to [0, ndim) (a 0-d input uses dim 0), sorted,
an empty dim list meaning "all dims". Input dtypes are brought to what the kernels compute in
(see opset.py) with `cast`, following PyTorch: `dtype=` casts the input before reducing; sum /
prod / cumsum of integers and bool give int64.
"""

from __future__ import annotations

from typing import Any

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule

_EXACT_INT32 = (torch.bool, torch.uint8, torch.int8)  # widened to int32 losslessly (order-preserving)
_ANY_IN = (torch.float32, torch.int32, torch.int64, torch.bool, torch.uint8, torch.int8)


def _io(ctx: LowerCtx, node: AtenNode) -> tuple[dict[str, Any], Value, Value]:
    a = ctx.bind(node)
    x = a["self"]
    (out, *_) = node.outputs
    assert out is not None
    if not isinstance(x, Value):
        raise ctx.unsupported("the input is not a tensor")
    return a, x, out


def _dim(ctx: LowerCtx, d: Any, ndim: int) -> int:
    lim = max(ndim, 1)
    if not isinstance(d, int) or isinstance(d, bool):
        raise ctx.unsupported(f"dim {d!r} is not a constant integer")
    if not -lim <= d < lim:
        raise ctx.unsupported(f"dim {d} is out of range for a {ndim}-d input")
    return d % lim


def _dims(ctx: LowerCtx, dim: Any, ndim: int) -> list[int]:
    """Normalized, sorted dims; [] for None / [] (all dims)."""
    if dim is None:
        return []
    if isinstance(dim, int):
        dim = [dim]
    out: list[int] = []
    for d in dim:
        n = _dim(ctx, d, ndim)
        if n in out:
            raise ctx.unsupported(f"dim {n} appears more than once in {list(dim)}")
        out.append(n)
    return sorted(out)


def _check_dtype_kwarg(ctx: LowerCtx, a: dict[str, Any], out: Value) -> None:
    dtype = a.get("dtype")
    if dtype is not None and dtype != out.dtype:
        raise ctx.unsupported(f"dtype={dtype} does not match the output dtype {out.dtype}")


def _sum_like_input(ctx: LowerCtx, x: Value, out: Value) -> Value:
    """The input of sum / prod / cumsum for an `out` dtype: float32 -> float32; int64 -> int32,
    int64 or bool as they are (accumulated in int64), others cast to int64; int32 -> int32
    (dtype=torch.int32: the input is cast first, as in PyTorch)."""
    if out.dtype == torch.float32:
        return ctx.cast(x, torch.float32)
    if out.dtype == torch.int64:
        return x if x.dtype in (torch.int32, torch.int64, torch.bool) else ctx.cast(x, torch.int64)
    if out.dtype == torch.int32:
        return ctx.cast(x, torch.int32)
    raise ctx.unsupported(f"output dtype {out.dtype} (float32, int32 and int64 are supported)")


# ---- softmax --------------------------------------------------------------------------------------

@rule("aten._softmax.default", "aten._log_softmax.default")
def softmax(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, out = _io(ctx, node)
    if a["half_to_float"]:
        raise ctx.unsupported("half_to_float=True (float16 inputs are not supported)")
    if x.dtype != torch.float32 or out.dtype != torch.float32:
        raise ctx.unsupported(f"dtype {x.dtype} -> {out.dtype} (float32 only)")
    op = "log_softmax" if "log_softmax" in node.op_name else "softmax"
    ctx.emit(op, [x], [out], ints=[_dim(ctx, a["dim"], len(x.shape))])


# ---- dim-list reductions --------------------------------------------------------------------------

def _reduce_args(ctx: LowerCtx, a: dict[str, Any], x: Value) -> list[int]:
    dims = _dims(ctx, a.get("dim"), len(x.shape))
    return [int(bool(a.get("keepdim") or False)), *dims]


@rule("aten.sum.dim_IntList", "aten.sum.default", "aten.prod.default", "aten.prod.dim_int")
def sum_prod(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, out = _io(ctx, node)
    _check_dtype_kwarg(ctx, a, out)
    op = "prod" if node.op_name.startswith("aten.prod") else "sum"
    ints = _reduce_args(ctx, a, x)
    ctx.emit(op, [_sum_like_input(ctx, x, out)], [out], ints=ints)


@rule("aten.mean.dim", "aten.mean.default")
def mean(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, out = _io(ctx, node)
    _check_dtype_kwarg(ctx, a, out)
    if out.dtype != torch.float32:
        raise ctx.unsupported(f"output dtype {out.dtype} (float32 only)")
    ctx.emit("mean", [ctx.cast(x, torch.float32)], [out], ints=_reduce_args(ctx, a, x))


@rule("aten.amax.default", "aten.amin.default", "aten.max.default", "aten.min.default")
def amax_amin(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, out = _io(ctx, node)
    op = "amax" if node.op_name.startswith(("aten.amax", "aten.max")) else "amin"
    ints = _reduce_args(ctx, a, x)
    if x.dtype in (torch.float32, torch.int32, torch.int64):
        ctx.emit(op, [x], [out], ints=ints)
    elif x.dtype in _EXACT_INT32:
        t = ctx.temp(torch.int32, out.shape, hint=op)
        ctx.emit(op, [ctx.cast(x, torch.int32)], [t], ints=ints)
        ctx.emit("cast", [t], [out])
    else:
        raise ctx.unsupported(f"dtype {x.dtype}")


@rule("aten.any.dim", "aten.any.dims", "aten.any.default", "aten.all.dim", "aten.all.dims",
      "aten.all.default")
def any_all(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, out = _io(ctx, node)
    op = "any" if node.op_name.startswith("aten.any") else "all"
    if x.dtype not in _ANY_IN:
        raise ctx.unsupported(f"dtype {x.dtype}")
    dim = a.get("dim")
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        # any.dims / all.dims with dim=[] reduce nothing: a nonzero test
        if x.dtype == out.dtype == torch.bool:
            ctx.copy_into(x, out)
        elif out.dtype == torch.bool:
            ctx.emit("cast", [x], [out])
        else:
            ctx.emit("cast", [ctx.cast(x, torch.bool)], [out])
        return
    ctx.emit(op, [x], [out], ints=_reduce_args(ctx, a, x))


@rule("aten.var.correction", "aten.var_mean.correction")
def var(ctx: LowerCtx, node: AtenNode) -> None:
    """var, and var_mean (var with its optional mean output; std / std_mean arrive as these + sqrt)."""
    a, x, out = _io(ctx, node)
    if x.dtype != torch.float32 or out.dtype != torch.float32:
        raise ctx.unsupported(f"dtype {x.dtype} (float32 only)")
    corr = a.get("correction")
    correction = 1.0 if corr is None else float(corr)
    outs = [out]
    if len(node.outputs) > 1 and ctx.is_used(node.outputs[1]):
        mean = node.outputs[1]
        assert mean is not None
        outs.append(mean)
    ctx.emit("var", [x], outs, ints=_reduce_args(ctx, a, x), floats=[correction])


# ---- argmax / argmin ------------------------------------------------------------------------------

@rule("aten.argmax.default", "aten.argmin.default")
def argmax_argmin(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, out = _io(ctx, node)
    op = "argmax" if "argmax" in node.op_name else "argmin"
    if x.dtype in _EXACT_INT32:
        x = ctx.cast(x, torch.int32)
    elif x.dtype not in (torch.float32, torch.int32, torch.int64):
        raise ctx.unsupported(f"dtype {x.dtype}")
    dim = a.get("dim")
    keepdim = int(bool(a.get("keepdim") or False))
    if dim is None:
        ctx.emit(op, [x], [out], ints=[0, 0, keepdim])
    else:
        ctx.emit(op, [x], [out], ints=[1, _dim(ctx, dim, len(x.shape)), keepdim])


@rule("aten.max.dim", "aten.min.dim")
def max_min_dim(ctx: LowerCtx, node: AtenNode) -> None:
    """(values, indices) = amax/amin + argmax/argmin over one dim (first occurrence, NaN wins)."""
    a, x, _ = _io(ctx, node)
    values, indices = node.outputs
    is_max = node.op_name.startswith("aten.max")
    dim = _dim(ctx, a["dim"], len(x.shape))
    keepdim = int(bool(a.get("keepdim") or False))
    if x.dtype in _EXACT_INT32:  # bool, uint8, int8: exactly (and in order) in int32
        x = ctx.cast(x, torch.int32)
    elif x.dtype not in (torch.float32, torch.int32, torch.int64):
        raise ctx.unsupported(f"dtype {x.dtype}")
    if values is not None:
        op = "amax" if is_max else "amin"
        if values.dtype == x.dtype:
            ctx.emit(op, [x], [values], ints=[keepdim, dim])
        else:
            t = ctx.temp(x.dtype, values.shape, hint=op)
            ctx.emit(op, [x], [t], ints=[keepdim, dim])
            ctx.emit("cast", [t], [values])
    if indices is not None:
        ctx.emit("argmax" if is_max else "argmin", [x], [indices], ints=[1, dim, keepdim])


# ---- cumulative -----------------------------------------------------------------------------------

@rule("aten.cumsum.default", "aten.cumprod.default")
def cumsum(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, out = _io(ctx, node)
    _check_dtype_kwarg(ctx, a, out)
    dim = _dim(ctx, a["dim"], len(x.shape))
    op = "cumprod" if node.op_name.startswith("aten.cumprod") else "cumsum"
    ctx.emit(op, [_sum_like_input(ctx, x, out)], [out], ints=[dim])


@rule("aten.cummax.default", "aten.cummin.default")
def cummax_cummin(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, values = _io(ctx, node)
    indices = node.outputs[1]
    assert indices is not None
    if x.dtype not in _ANY_IN:
        raise ctx.unsupported(f"dtype {x.dtype}")
    op = "cummax" if node.op_name.startswith("aten.cummax") else "cummin"
    ctx.emit(op, [x], [values, indices], ints=[_dim(ctx, a["dim"], len(x.shape))])


@rule("aten.logcumsumexp.default")
def logcumsumexp(ctx: LowerCtx, node: AtenNode) -> None:
    a, x, out = _io(ctx, node)
    if x.dtype != torch.float32 or out.dtype != torch.float32:
        raise ctx.unsupported(f"dtype {x.dtype} (float32 only)")
    ctx.emit("logcumsumexp", [x], [out], ints=[_dim(ctx, a["dim"], len(x.shape))])
