"""Lowering rules: spatial sampling, F.grid_sample (grid_sampler_2d, grid_sampler_3d).

F.affine_grid needs no rule: to_edge decomposes it into arange / mul / sum / permute.
"""

from __future__ import annotations

import torch

from ...ir import AtenNode
from ...opset import encode_args
from . import LowerCtx, rule

_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}


@rule("aten.grid_sampler_2d.default", "aten.grid_sampler_3d.default")
def grid_sampler(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, grid, out = ctx.tensor_arg(a, "input"), ctx.tensor_arg(a, "grid"), ctx.output(node)
    spatial = 3 if node.op_name.startswith("aten.grid_sampler_3d") else 2
    if x.dtype != torch.float32 or grid.dtype != torch.float32:
        raise ctx.unsupported(f"dtypes {x.dtype} / {grid.dtype} (supported: float32)")
    if len(x.shape) != spatial + 2:
        raise ctx.unsupported(f"input of rank {len(x.shape)} (expected {spatial + 2})")
    mode, padding = int(a["interpolation_mode"]), int(a["padding_mode"])
    if mode not in _MODES or (spatial == 3 and mode == 2):
        raise ctx.unsupported(f"interpolation mode {_MODES.get(mode, mode)} for {spatial}-D sampling")
    if padding not in (0, 1, 2):
        raise ctx.unsupported(f"padding mode {padding}")
    ints, _ = encode_args(f"grid_sampler_{spatial}d", interpolation_mode=mode, padding_mode=padding,
                          align_corners=int(bool(a["align_corners"])))
    ctx.emit(f"grid_sampler_{spatial}d", [x, grid], [out], ints=ints)
