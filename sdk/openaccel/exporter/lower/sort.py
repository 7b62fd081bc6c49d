"""Lowering rules: sorting and selection (sort, topk, kthvalue, median / nanmedian, mode) and
nonzero_static; the refusals of the ops whose output size depends on the input's values.

The kernels sort stably (ties keep their input order; NaN is the largest value), which is one of
the answers PyTorch allows where it leaves the order of ties unspecified (sort without
stable=True, topk, kthvalue, median).
"""

from __future__ import annotations

from typing import Any

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, refuse, rule

_ALL = (torch.float32, torch.int32, torch.int64, torch.bool, torch.uint8, torch.int8)
_NUMERIC = (torch.float32, torch.int32, torch.int64, torch.uint8, torch.int8)  # no bool: PyTorch has none


def _input(ctx: LowerCtx, a: dict[str, Any], dtypes: tuple[torch.dtype, ...]) -> Value:
    x = ctx.tensor_arg(a, "self")
    if x.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ctx.unsupported(f"dtype {x.dtype} (supported: {names})")
    return x


def _dim(ctx: LowerCtx, d: Any, ndim: int) -> int:
    lim = max(ndim, 1)
    if not isinstance(d, int) or isinstance(d, bool) or not -lim <= d < lim:
        raise ctx.unsupported(f"dim {d!r} is out of range for a {ndim}-d input")
    return d % lim


def _outs(node: AtenNode) -> tuple[Value, Value]:
    values, indices = node.outputs[0], node.outputs[1]
    assert values is not None and indices is not None
    return values, indices


@rule("aten.sort.default", "aten.sort.stable")
def sort(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = _input(ctx, a, _ALL)
    dim = _dim(ctx, a["dim"], len(x.shape))
    ctx.emit("sort", [x], list(_outs(node)), ints=[dim, int(bool(a["descending"]))])


@rule("aten.topk.default")
def topk(ctx: LowerCtx, node: AtenNode) -> None:
    # sorted=False: PyTorch leaves the order open; the kernel's sorted order is one answer
    a = ctx.bind(node)
    x = _input(ctx, a, _NUMERIC)
    dim = _dim(ctx, a["dim"], len(x.shape))
    values, indices = _outs(node)
    k = a["k"]
    if not isinstance(k, int) or (values.shape and values.shape[dim] != k):
        raise ctx.unsupported(f"k = {k!r} (a constant integer giving the output's size along dim {dim})")
    ctx.emit("topk", [x], [values, indices], ints=[dim, int(bool(a["largest"]))])


@rule("aten.kthvalue.default")
def kthvalue(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = _input(ctx, a, _NUMERIC)
    dim = _dim(ctx, a["dim"], len(x.shape))
    n = x.shape[dim] if x.shape else 1
    k = a["k"]
    if not isinstance(k, int) or not 1 <= k <= n:
        raise ctx.unsupported(f"k = {k!r} is out of range for a dim of size {n}")
    ctx.emit("kthvalue", [x], list(_outs(node)), ints=[k, dim, int(bool(a["keepdim"]))])


@rule("aten.median.dim", "aten.nanmedian.dim", "aten.median.default", "aten.nanmedian.default")
def median(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = _input(ctx, a, _NUMERIC)
    ignore_nan = int(node.op_name.startswith("aten.nanmedian"))
    if node.op_name.endswith(".default"):
        # the median of all elements: over the flattened input, a 0-d result
        out = ctx.output(node)
        if x.numel == 0:
            if x.dtype != torch.float32:
                raise ctx.unsupported("the median of an empty integer tensor")
            ctx.emit("full", [], [out], floats=[float("nan")])
            return
        flat = ctx.temp(x.dtype, (x.numel,), hint="flat")
        ctx.alias(flat, x)
        ctx.emit("median", [flat], [out], ints=[0, 0, ignore_nan])
        return
    dim = _dim(ctx, a["dim"], len(x.shape))
    values, indices = _outs(node)
    outs = [values, indices] if ctx.is_used(indices) else [values]
    ctx.emit("median", [x], outs, ints=[dim, int(bool(a["keepdim"])), ignore_nan])


@rule("aten.mode.default")
def mode(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = _input(ctx, a, _ALL)
    dim = _dim(ctx, a["dim"], len(x.shape))
    ctx.emit("mode", [x], list(_outs(node)), ints=[dim, int(bool(a["keepdim"]))])


@rule("aten.nonzero_static.default")
def nonzero_static(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = _input(ctx, a, _ALL)
    out = ctx.output(node)
    if out.shape != (int(a["size"]), len(x.shape)):
        raise ctx.unsupported(f"output shape {list(out.shape)} (expected [size, ndim])")
    ctx.emit("nonzero_static", [x], [out], ints=[int(a["fill_value"])])


# ---- data-dependent output sizes -----------------------------------------------------------------
# Every tensor of an .oab program has a shape fixed at export time (the memory plan, the kernels'
# checks and the bundled tests rely on it). An upper-bound output plus its length would need every
# consumer of the result to read that length: torch.export instead gives the result an unbacked
# size, and the ops after it are shaped by that symbol. So these ops are refused, each with a
# fixed-size form that computes the same thing.
refuse("aten.nonzero.default",
       why="the number of rows is the number of nonzero elements, known only at run time, and every tensor of "
           "an .oab program has a fixed shape: use torch.nonzero_static(x, size=n) (at most n rows, the rest "
           "filled with fill_value), or keep the mask (x != 0) and compute with torch.where")
refuse("aten.masked_select.default",
       why="the output's length is the number of True elements of the mask, known only at run time, and every "
           "tensor of an .oab program has a fixed shape: keep the shape with torch.where(mask, x, fill) (or "
           "x * mask) and reduce over it, e.g. (x * mask).sum() / mask.sum() for a masked mean")
refuse("aten._unique2.default", "aten._unique.default", "aten.unique_dim.default", "aten.unique_consecutive.default",
       "aten.unique_dim_consecutive.default",
       why="the number of distinct values is known only at run time, and every tensor of an .oab program has a "
           "fixed shape: torch.sort keeps the shape, and sorted[1:] != sorted[:-1] marks where each distinct "
           "value starts (a mask to compute with instead of a shorter tensor)")
