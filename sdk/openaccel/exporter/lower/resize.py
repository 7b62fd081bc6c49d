"""Lowering rules: resizing (F.interpolate): upsample_nearest2d / upsample_bilinear2d (.vec and .default),
the 1-D / 3-D, nearest-exact, bicubic and antialiased modes (kept whole through to_edge).

The output size comes from the output tensor; scale factors are passed on only when PyTorch
passes them to its kernel (interpolate(scale_factor=...) without recompute_scale_factor), since
they change the index math (see opset.py and runtime_c/src/cpu/kernels/ref/resize.c). 0 = not given.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...ir import AtenNode, Value
from ...opset import encode_args
from . import LowerCtx, keep_whole, rule


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


# ---- 1-D / 3-D, nearest-exact, bicubic and antialiased resizing ----------------------------------
# to_edge would write these as gathers (arange, index with one index tensor per spatial dim): they
# stay whole and run as one kernel each.
_NEAREST_ND = ("aten.upsample_nearest1d.vec", "aten.upsample_nearest1d.default", "aten.upsample_nearest3d.vec",
               "aten.upsample_nearest3d.default", "aten._upsample_nearest_exact1d.vec",
               "aten._upsample_nearest_exact1d.default", "aten._upsample_nearest_exact2d.vec",
               "aten._upsample_nearest_exact2d.default", "aten._upsample_nearest_exact3d.vec",
               "aten._upsample_nearest_exact3d.default")
_LINEAR_ND = ("aten.upsample_linear1d.vec", "aten.upsample_linear1d.default", "aten.upsample_trilinear3d.vec",
              "aten.upsample_trilinear3d.default")
_BICUBIC = ("aten.upsample_bicubic2d.vec", "aten.upsample_bicubic2d.default")
_AA = ("aten._upsample_bilinear2d_aa.vec", "aten._upsample_bilinear2d_aa.default",
       "aten._upsample_bicubic2d_aa.vec", "aten._upsample_bicubic2d_aa.default")
keep_whole(*(n for n in _NEAREST_ND + _LINEAR_ND + _BICUBIC if n.endswith(".vec")))

_SCALE_NAMES = ("scale_d", "scale_h", "scale_w")


def _nd_io(ctx: LowerCtx, node: AtenNode, dtypes: tuple[torch.dtype, ...],
           ranks: tuple[int, ...]) -> tuple[Value, Value, dict[str, object]]:
    a = ctx.bind(node)
    x = a.get("input", a.get("self"))
    out = ctx.output(node)
    assert isinstance(x, Value)
    if x.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ctx.unsupported(f"dtype {x.dtype} (supported: {names})")
    if len(x.shape) not in ranks:
        raise ctx.unsupported(f"input of rank {len(x.shape)} (expected {' or '.join(map(str, ranks))})")
    return x, out, a


def _nd_scales(ctx: LowerCtx, a: dict[str, object], n: int) -> dict[str, float]:
    """The scale arguments of the last n spatial dims by opset name (scale_d, scale_h, scale_w)."""
    if "scale_factors" in a:
        sf = a["scale_factors"]
        if sf is None:
            vals = [0.0] * n
        else:
            assert isinstance(sf, Sequence)
            vals = [_scale(float(s)) for s in sf]
            if len(vals) != n:
                raise ctx.unsupported(f"scale_factors {vals} do not have {n} values")
    else:
        keys = [k for k in ("scales_d", "scales_h", "scales_w", "scales") if k in a]
        vals = []
        for k in keys:
            v = a[k]
            vals.append(_scale(float(v) if isinstance(v, (int, float)) else None))
        if len(vals) != n:
            raise ctx.unsupported(f"scale arguments {keys} for {n} spatial dims")
    return dict(zip(_SCALE_NAMES[3 - n:], vals))


@rule(*_NEAREST_ND)
def upsample_nearest_nd(ctx: LowerCtx, node: AtenNode) -> None:
    x, out, a = _nd_io(ctx, node, (torch.float32, torch.uint8), (3, 4, 5))
    exact = int("nearest_exact" in node.op_name)
    ints, floats = encode_args("upsample_nearest_nd", exact=exact, **_nd_scales(ctx, a, len(x.shape) - 2))
    ctx.emit("upsample_nearest_nd", [x], [out], ints=ints, floats=floats)


@rule(*_LINEAR_ND)
def upsample_linear_nd(ctx: LowerCtx, node: AtenNode) -> None:
    x, out, a = _nd_io(ctx, node, (torch.float32,), (3, 5))
    ints, floats = encode_args("upsample_linear_nd", align_corners=int(bool(a["align_corners"])),
                               **_nd_scales(ctx, a, len(x.shape) - 2))
    ctx.emit("upsample_linear_nd", [x], [out], ints=ints, floats=floats)


@rule(*_BICUBIC)
def upsample_bicubic2d(ctx: LowerCtx, node: AtenNode) -> None:
    x, out, a = _nd_io(ctx, node, (torch.float32,), (4,))
    ints, floats = encode_args("upsample_bicubic2d", align_corners=int(bool(a["align_corners"])),
                               **_nd_scales(ctx, a, 2))
    ctx.emit("upsample_bicubic2d", [x], [out], ints=ints, floats=floats)


@rule(*_AA)
def upsample_aa2d(ctx: LowerCtx, node: AtenNode) -> None:
    x, out, a = _nd_io(ctx, node, (torch.float32,), (4,))
    mode = int("bicubic" in node.op_name)
    ints, floats = encode_args("upsample_aa2d", mode=mode, align_corners=int(bool(a["align_corners"])),
                               **_nd_scales(ctx, a, 2))
    ctx.emit("upsample_aa2d", [x], [out], ints=ints, floats=floats)
