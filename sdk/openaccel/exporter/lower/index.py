"""Lowering rules: index ops (see opset.py for the openaccel side).

Index tensors stay int32 / int64 and are range-checked by the kernels at run time (an
out-of-range index is a run-time error naming the value and its position, as in PyTorch).
"""

from __future__ import annotations

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule

_INDEX_DTYPES = (torch.int32, torch.int64)


def _index_dtype(ctx: LowerCtx, v: Value, what: str) -> None:
    if v.dtype not in _INDEX_DTYPES:
        raise ctx.unsupported(f"{what} of dtype {v.dtype} (int32 or int64 indices only)")


def _norm_dim(ctx: LowerCtx, dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise ctx.unsupported(f"dim = {dim} is out of range for a {ndim}-dim tensor")
    return dim + n if dim < 0 else dim


@rule("aten.embedding.default")
def embedding(ctx: LowerCtx, node: AtenNode) -> None:
    # padding_idx / scale_grad_by_freq / sparse only affect gradients
    a = ctx.bind(node)
    w, idx, out = ctx.tensor_arg(a, "weight"), ctx.tensor_arg(a, "indices"), ctx.output(node)
    _index_dtype(ctx, idx, "indices")
    if len(w.shape) != 2:
        raise ctx.unsupported(f"weight of shape {list(w.shape)} (expected 2 dims)")
    ctx.emit("embedding", [w, idx], [out])


@rule("aten.index_select.default")
def index_select(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, idx, out = ctx.tensor_arg(a, "self"), ctx.tensor_arg(a, "index"), ctx.output(node)
    _index_dtype(ctx, idx, "index")
    if len(idx.shape) > 1:
        raise ctx.unsupported(f"index of shape {list(idx.shape)} (expected 0 or 1 dims)")
    dim = _norm_dim(ctx, int(a["dim"]), len(x.shape))
    if not x.shape:  # a 0-dim self reads as [1] (its index must be 0), the result as [len(index)]
        x1 = ctx.temp(x.dtype, (1,), hint=x.name)
        ctx.alias(x1, x)
        i1 = ctx.temp(idx.dtype, (idx.numel,), hint=idx.name)
        ctx.alias(i1, idx)
        o1 = ctx.temp(out.dtype, (out.numel,), hint=out.name)
        ctx.emit("index_select", [x1, i1], [o1], ints=[0, 0])
        ctx.alias(out, o1)
        return
    ctx.emit("index_select", [x, idx], [out], ints=[dim, 0])


def index_tensors(ctx: LowerCtx, x: Value, indices: list[object]) -> list[tuple[int, Value]]:
    """aten.index / index_put's `indices` (None = the whole dim) as (dim of x, index tensor) pairs."""
    while indices and indices[-1] is None:
        indices.pop()
    given: list[tuple[int, Value]] = []
    for k, v in enumerate(indices):
        if v is None:
            continue
        if not isinstance(v, Value):
            raise ctx.unsupported(f"index {k} is not a tensor")
        given.append((k, v))
    if not given:
        raise ctx.unsupported("no index tensor")
    if len(indices) > len(x.shape):
        raise ctx.unsupported(f"{len(indices)} indices for a {len(x.shape)}-dim tensor")
    return given


def indexed_shape(x: Value, given: list[tuple[int, Value]]) -> tuple[int, ...]:
    """The shape of x[indices] for integer index tensors (PyTorch's rule: the broadcast index shape
    replaces the indexed dims when they are consecutive, else it comes first)."""
    b = tuple(torch.broadcast_shapes(*(v.shape for _, v in given)))
    dims = [d for d, _ in given]
    rest = [n for d, n in enumerate(x.shape) if d not in dims]
    if dims[-1] - dims[0] == len(dims) - 1:
        return (*x.shape[:dims[0]], *b, *x.shape[dims[-1] + 1:])
    return (*b, *rest)


@rule("aten.index.Tensor")
def index_tensor(ctx: LowerCtx, node: AtenNode) -> None:
    """x[..., idx, ...]: one integer index tensor -> index_select on the flattened index (negative
    indices wrap, as in PyTorch), viewed to the result's shape; several (with None for whole dims
    between them, broadcasting together) -> index."""
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a, "self"), ctx.output(node)
    given = index_tensors(ctx, x, list(a["indices"]))
    for _, idx in given:
        if idx.dtype in (torch.bool, torch.uint8):
            raise ctx.unsupported("boolean mask indexing (the result's shape depends on the data)")
        _index_dtype(ctx, idx, "index")
    try:
        want = indexed_shape(x, given)
    except RuntimeError as e:
        raise ctx.unsupported(f"the index tensors do not broadcast together ({e})") from None
    if want != out.shape:
        raise ctx.unsupported(f"indexing {list(x.shape)} by {[list(v.shape) for _, v in given]} gives {list(want)}, "
                              f"the graph expects {list(out.shape)}")
    if len(given) > 1:
        ctx.emit("index", [x, *(v for _, v in given)], [out], ints=[d for d, _ in given])
        return
    dim, idx = given[0]
    flat = idx
    if len(idx.shape) != 1:
        flat = ctx.temp(idx.dtype, (idx.numel,), hint="index")
        ctx.alias(flat, idx)
    mid = (*x.shape[:dim], idx.numel, *x.shape[dim + 1:])
    dst = out
    if mid != out.shape:
        dst = ctx.temp(out.dtype, mid, hint="index_select")
    ctx.emit("index_select", [x, flat], [dst], ints=[dim, 1])
    if dst is not out:
        ctx.alias(out, dst)


@rule("aten.gather.default")
def gather(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, idx, out = ctx.tensor_arg(a, "self"), ctx.tensor_arg(a, "index"), ctx.output(node)
    _index_dtype(ctx, idx, "index")
    if len(idx.shape) != len(x.shape):
        raise ctx.unsupported(f"index of shape {list(idx.shape)} for self of shape {list(x.shape)} "
                              "(expected the same number of dims)")
    dim = _norm_dim(ctx, int(a["dim"]), len(x.shape))
    ctx.emit("gather", [x, idx], [out], ints=[dim])
