"""Lowering rules: 2-D resizing (upsample_nearest2d / upsample_bilinear2d, .vec and .default).

The output size comes from the output tensor; scale factors are passed on only when PyTorch
passes them to its kernel (interpolate(scale_factor=...) without recompute_scale_factor), since
they change the index math (see opset.py and runtime_c/src/cpu/kernels/ref/resize.c). 0 = not given.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...ir import AtenNode, Value
from . import LowerCtx, rule


def _scale(v: float | None) -> float:
    return 0.0 if v is None or float(v) <= 0.0 else float(v)


def _scales(ctx: LowerCtx, a: dict[str, object]) -> list[float]:
    if "scale_factors" in a:
        sf = a["scale_factors"]
        if sf is None:
            return [0.0, 0.0]
        assert isinstance(sf, Sequence)
        vals = [float(s) for s in sf]
        if len(vals) != 2:
            raise ctx.unsupported(f"scale_factors {vals} do not have 2 values")
        return [_scale(v) for v in vals]
    sh, sw = a.get("scales_h"), a.get("scales_w")
    return [_scale(sh if isinstance(sh, (int, float)) else None),
            _scale(sw if isinstance(sw, (int, float)) else None)]


def _io(ctx: LowerCtx, node: AtenNode, dtypes: tuple[torch.dtype, ...]) -> tuple[Value, Value, dict[str, object]]:
    a = ctx.bind(node)
    x = a.get("input", a.get("self"))
    (out,) = node.outputs
    assert out is not None and isinstance(x, Value)
    if x.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ctx.unsupported(f"dtype {x.dtype} (supported: {names})")
    if len(x.shape) != 4:
        raise ctx.unsupported(f"input of rank {len(x.shape)} (expected [N, C, H, W])")
    return x, out, a


@rule("aten.upsample_nearest2d.vec", "aten.upsample_nearest2d.default")
def upsample_nearest2d(ctx: LowerCtx, node: AtenNode) -> None:
    x, out, a = _io(ctx, node, (torch.float32, torch.int32, torch.int64))
    ctx.emit("upsample_nearest2d", [x], [out], floats=_scales(ctx, a))


@rule("aten.upsample_bilinear2d.vec", "aten.upsample_bilinear2d.default")
def upsample_bilinear2d(ctx: LowerCtx, node: AtenNode) -> None:
    x, out, a = _io(ctx, node, (torch.float32,))
    ctx.emit("upsample_bilinear2d", [x], [out], ints=[int(bool(a["align_corners"]))], floats=_scales(ctx, a))
