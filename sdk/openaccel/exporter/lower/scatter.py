"""Lowering rules: the scatter family (see opset.py for the openaccel side): scatter, scatter_add,
scatter_reduce, index_reduce, index_put (which index_add, index_copy, index_fill and `x[idx] = v` become),
slice_scatter, masked_scatter.

Index tensors stay int32 / int64 and are range-checked by the kernels at run time; targets named
twice by an assigning (not reducing) scatter are undefined in PyTorch and here."""

from __future__ import annotations

from typing import Any

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule
from .index import _index_dtype, _norm_dim, index_tensors, indexed_shape
from .shape import _slice_bounds

# scatter's `reduce` argument (opset.py)
_REDUCE = {"sum": 1, "add": 1, "prod": 2, "multiply": 2, "mean": 3, "amax": 4, "amin": 5}


def _same_dtype(ctx: LowerCtx, v: Value, like: Value) -> Value:
    return v if v.dtype == like.dtype else ctx.cast(v, like.dtype)


def _value_tensor(ctx: LowerCtx, value: Any, like: Value) -> Value:
    """A 0-d constant of like's dtype, converted as PyTorch converts the Scalar argument."""
    if not isinstance(value, (bool, int, float)):
        raise ctx.unsupported(f"value of type {type(value).__name__}")
    return ctx.const(torch.tensor(value).to(like.dtype), hint="value")


def _scatter(ctx: LowerCtx, node: AtenNode, src: Any, reduce: str | None, include_self: bool = True) -> None:
    a = ctx.bind(node)
    x, idx, out = ctx.tensor_arg(a, "self"), ctx.tensor_arg(a, "index"), ctx.output(node)
    _index_dtype(ctx, idx, "index")
    if len(idx.shape) != len(x.shape):
        raise ctx.unsupported(f"index of shape {list(idx.shape)} for self of shape {list(x.shape)} (expected the "
                              "same number of dims)")
    dim = _norm_dim(ctx, int(a["dim"]), len(x.shape))
    code = 0
    if reduce is not None:
        if reduce not in _REDUCE:
            raise ctx.unsupported(f"reduce = {reduce!r} (expected one of {', '.join(_REDUCE)})")
        code = _REDUCE[reduce]
    if code == _REDUCE["mean"] and x.dtype == torch.bool:
        raise ctx.unsupported("mean of a bool tensor")
    s = _same_dtype(ctx, src, x) if isinstance(src, Value) else _value_tensor(ctx, src, x)
    if s.shape and len(s.shape) != len(idx.shape):
        raise ctx.unsupported(f"src of shape {list(s.shape)} for index of shape {list(idx.shape)} (expected the "
                              "same number of dims)")
    if out.numel == 0 or idx.numel == 0:
        ctx.alias(out, x)  # nothing is scattered
        return
    ctx.emit("scatter", [x, idx, s], [out], ints=[dim, code, int(bool(include_self))])


@rule("aten.scatter.src")
def scatter_src(ctx: LowerCtx, node: AtenNode) -> None:
    _scatter(ctx, node, ctx.tensor_arg(ctx.bind(node), "src"), None)


@rule("aten.scatter.value")
def scatter_value(ctx: LowerCtx, node: AtenNode) -> None:
    _scatter(ctx, node, ctx.bind(node)["value"], None)


# scatter(reduce="add" / "multiply") is outside core ATen: exporter/__init__.py lets to_edge keep it
@rule("aten.scatter.reduce")
def scatter_reduce_src(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    _scatter(ctx, node, ctx.tensor_arg(a, "src"), str(a["reduce"]))


@rule("aten.scatter.value_reduce")
def scatter_reduce_value(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    _scatter(ctx, node, a["value"], str(a["reduce"]))


@rule("aten.scatter_add.default")
def scatter_add(ctx: LowerCtx, node: AtenNode) -> None:
    _scatter(ctx, node, ctx.tensor_arg(ctx.bind(node), "src"), "sum")


@rule("aten.scatter_reduce.two")
def scatter_reduce(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    if str(a["reduce"]) not in ("sum", "prod", "mean", "amax", "amin"):
        raise ctx.unsupported(f"reduce = {a['reduce']!r} (expected sum, prod, mean, amax or amin)")
    _scatter(ctx, node, ctx.tensor_arg(a, "src"), str(a["reduce"]), bool(a["include_self"]))


# index_reduce is outside core ATen without a decomposition: to_edge keeps it (the verifier's exception
# list takes every op with a rule)
@rule("aten.index_reduce.default")
def index_reduce(ctx: LowerCtx, node: AtenNode) -> None:
    """self.index_reduce(dim, index, source, reduce) reduces source[..., i, ...] into self[..., index[i], ...]:
    a scatter whose index is `index` along `dim`, expanded to source's shape (as scatter_reduce with
    index[..., i, ...] = index[i])."""
    a = ctx.bind(node)
    x, idx, src = ctx.tensor_arg(a, "self"), ctx.tensor_arg(a, "index"), ctx.tensor_arg(a, "source")
    out = ctx.output(node)
    reduce = str(a["reduce"])
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ctx.unsupported(f"reduce = {reduce!r} (expected prod, mean, amax or amin)")
    _index_dtype(ctx, idx, "index")
    if len(idx.shape) > 1 or len(src.shape) != len(x.shape):
        raise ctx.unsupported(f"index of shape {list(idx.shape)} and source of shape {list(src.shape)} for self of "
                              f"shape {list(x.shape)} (expected a 1-D index and source with self's dims)")
    if reduce == "mean" and x.dtype == torch.bool:
        raise ctx.unsupported("mean of a bool tensor")
    dim = _norm_dim(ctx, int(a["dim"]), len(x.shape))
    if out.numel == 0 or idx.numel == 0:
        ctx.alias(out, x)  # nothing is reduced
        return
    dst = out
    if not x.shape:  # a 0-dim self (and source): read as [1], the index must be 0
        if src.numel != 1:
            raise ctx.unsupported(f"source of shape {list(src.shape)} for a 0-dim self")
        x, src = _as_1d(ctx, x), _as_1d(ctx, src)
        dst = ctx.temp(out.dtype, (1,), hint="index_reduce")
    lined = ctx.temp(idx.dtype, tuple(idx.numel if d == dim else 1 for d in range(len(x.shape))), hint="index")
    ctx.alias(lined, idx)
    full = lined
    if lined.shape != src.shape:
        full = ctx.temp(idx.dtype, src.shape, hint="index")
        ctx.emit("expand", [lined], [full])
    ctx.emit("scatter", [x, full, _same_dtype(ctx, src, x)], [dst],
             ints=[dim, _REDUCE[reduce], int(bool(a["include_self"]))])
    if dst is not out:
        ctx.alias(out, dst)


def _as_1d(ctx: LowerCtx, v: Value) -> Value:
    """A [1] view of a 0-dim (or one-element) tensor."""
    t = ctx.temp(v.dtype, (1,), hint=v.name)
    ctx.alias(t, v)
    return t


@rule("aten.index_put.default")
def index_put(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a, "self"), ctx.output(node)
    values = _same_dtype(ctx, ctx.tensor_arg(a, "values"), x)
    accumulate = int(bool(a["accumulate"]))
    given = index_tensors(ctx, x, list(a["indices"]))
    masks = [(d, v) for d, v in given if v.dtype in (torch.bool, torch.uint8)]
    if masks:
        if len(given) != 1:
            raise ctx.unsupported("a bool mask index together with other index tensors")
        d0, mask = masks[0]
        m = len(mask.shape)
        if m == 0 or tuple(x.shape[d0:d0 + m]) != mask.shape:
            raise ctx.unsupported(f"mask of shape {list(mask.shape)} for dims {d0}.. of {list(x.shape)}")
        rest = (*x.shape[:d0], -1, *x.shape[d0 + m:])
        if len(values.shape) > len(rest) or any(
                v != 1 and r != -1 and v != r for v, r in zip(values.shape[::-1], rest[::-1])):
            raise ctx.unsupported(f"values of shape {list(values.shape)} do not broadcast to {list(rest)} "
                                  "(-1: the mask's count of true elements)")
        if out.numel == 0:
            ctx.alias(out, x)
            return
        ctx.emit("index_put", [x, values, ctx.cast(mask, torch.bool)], [out], ints=[accumulate, d0])
        return
    for _, idx in given:
        _index_dtype(ctx, idx, "indices")
    try:
        result = indexed_shape(x, given)
        torch.broadcast_shapes(values.shape, result)
        ok = len(values.shape) <= len(result)
    except RuntimeError:
        ok = False
    if not ok:
        raise ctx.unsupported(f"values of shape {list(values.shape)} do not broadcast to the indexed shape")
    if len(result) > 8:
        raise ctx.unsupported(f"the indexed shape {list(result)} has more than 8 dims")
    if out.numel == 0 or not all(result):
        ctx.alias(out, x)  # no element is written
        return
    ctx.emit("index_put", [x, values, *(v for _, v in given)], [out], ints=[accumulate, *(d for d, _ in given)])


@rule("aten.slice_scatter.default")
def slice_scatter(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a, "self"), ctx.output(node)
    src = _same_dtype(ctx, ctx.tensor_arg(a, "src"), x)
    if not x.shape:
        raise ctx.unsupported("slice_scatter into a 0-dim tensor")
    dim = _norm_dim(ctx, int(a["dim"]), len(x.shape))
    step = int(a["step"])
    if step < 1:
        raise ctx.unsupported(f"step = {step} (must be positive)")
    s, e, length = _slice_bounds(x.shape[dim], a["start"], a["end"], step)
    want = list(x.shape)
    want[dim] = length
    if tuple(want) != src.shape:
        raise ctx.unsupported(f"src of shape {list(src.shape)} for the slice {want} of {list(x.shape)}")
    if src.numel == 0:
        ctx.alias(out, x)  # nothing is replaced
    elif src.shape == x.shape:
        ctx.alias(out, src)  # everything is
    else:
        ctx.emit("slice_scatter", [x, src], [out], ints=[dim, s, e, step])


@rule("aten.masked_scatter.default")
def masked_scatter(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, mask, out = ctx.tensor_arg(a, "self"), ctx.tensor_arg(a, "mask"), ctx.output(node)
    source = _same_dtype(ctx, ctx.tensor_arg(a, "source"), x)
    if mask.dtype not in (torch.bool, torch.uint8):
        raise ctx.unsupported(f"mask of dtype {mask.dtype} (expected bool)")
    try:
        want = tuple(torch.broadcast_shapes(x.shape, mask.shape))
    except RuntimeError:
        raise ctx.unsupported(f"mask {list(mask.shape)} does not broadcast with self {list(x.shape)}") from None
    if want != out.shape:
        raise ctx.unsupported(f"self {list(x.shape)} and mask {list(mask.shape)} give {list(want)}, the graph "
                              f"expects {list(out.shape)}")
    if out.numel == 0 and x.shape == out.shape:
        ctx.alias(out, x)
        return
    ctx.emit("masked_scatter", [x, ctx.cast(mask, torch.bool), source], [out])
