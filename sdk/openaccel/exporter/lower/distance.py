"""Lowering rules: distances (torch.cdist -> aten._cdist_forward, F.pdist -> aten._pdist_forward).

torch.cdist itself picks PyTorch's matrix-product path for p = 2 with more than 25 rows (or
compute_mode='use_mm_for_euclid_dist'): to_edge then holds mm / sum / sqrt, not _cdist_forward.
F.pairwise_distance and F.cosine_similarity decompose into elementwise ops and reductions.
"""

from __future__ import annotations

import math

import torch

from ...ir import AtenNode, Value
from ...opset import encode_args
from . import LowerCtx, rule


def _p(ctx: LowerCtx, p: object) -> float:
    v = float(p)  # type: ignore[arg-type]
    if math.isnan(v) or v < 0:
        raise ctx.unsupported(f"p = {v} (expected a non-negative p-norm)")
    return v


def _expanded(ctx: LowerCtx, x: Value, batch: tuple[int, ...]) -> Value:
    """x [*, R, M] with its batch dims broadcast to `batch` (a copy only where they differ)."""
    shape = (*batch, *x.shape[-2:])
    if tuple(x.shape) == shape:
        return x
    out = ctx.temp(x.dtype, shape, hint=f"{x.name}_expanded")
    ctx.emit("expand", [x], [out])
    return out


@rule("aten._cdist_forward.default")
def cdist(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x1, x2, out = ctx.tensor_arg(a, "x1"), ctx.tensor_arg(a, "x2"), ctx.output(node)
    if x1.dtype != torch.float32 or x2.dtype != torch.float32:
        raise ctx.unsupported(f"dtypes {x1.dtype} / {x2.dtype} (supported: float32)")
    batch = tuple(out.shape[:-2])
    _, floats = encode_args("cdist", p=_p(ctx, a["p"]))
    ctx.emit("cdist", [_expanded(ctx, x1, batch), _expanded(ctx, x2, batch)], [out], floats=floats)


@rule("aten._pdist_forward.default")
def pdist(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    if x.dtype != torch.float32:
        raise ctx.unsupported(f"dtype {x.dtype} (supported: float32)")
    _, floats = encode_args("pdist", p=_p(ctx, a["p"]))
    ctx.emit("pdist", [x], [out], floats=floats)
