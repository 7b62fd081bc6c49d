"""Lowering rules: scaled_dot_product_attention as one fused `sdpa` op."""

from __future__ import annotations

import math

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule


@rule("aten.scaled_dot_product_attention.default")
def sdpa(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    (out,) = node.outputs
    assert out is not None
    if float(a["dropout_p"] or 0.0) != 0.0:
        raise ctx.unsupported("dropout_p must be 0 for inference")
    for name, t in (("query", q), ("key", k), ("value", v)):
        if not isinstance(t, Value) or t.dtype != torch.float32:
            raise ctx.unsupported(f"{name} must be a float32 tensor")
        if len(t.shape) < 2:
            raise ctx.unsupported(f"{name} needs at least 2 dims, has shape {list(t.shape)}")
    is_causal = bool(a["is_causal"])
    if is_causal and mask is not None:
        raise ctx.unsupported("is_causal together with attn_mask")
    scale = a["scale"]
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    groups = 1
    if a.get("enable_gqa"):
        if len(q.shape) < 3 or len(k.shape) < 3 or q.shape[-3] % k.shape[-3]:
            raise ctx.unsupported(f"enable_gqa with query heads {q.shape[-3:-2]} and key heads {k.shape[-3:-2]}")
        groups = q.shape[-3] // k.shape[-3]
    if mask is not None:
        if not isinstance(mask, Value) or mask.dtype not in (torch.bool, torch.float32):
            raise ctx.unsupported("attn_mask must be a bool or float32 tensor")
    ctx.emit("sdpa", [q, k, v, mask], [out], ints=[int(is_causal), groups], floats=[scale])
