"""F.interpolate modes beyond 2-D nearest / bilinear against PyTorch: nearest and nearest-exact in 1-D,
2-D (exact) and 3-D (float32, uint8), linear 1-D and trilinear, bicubic, and antialiased bilinear /
bicubic; output size vs scale factors (they change the index math), align_corners, up- and
downsampling, one dim unchanged, non-contiguous inputs, inf inputs. to_edge keeps these ops whole
(exporter/lower/resize.py) instead of writing gathers.

Nearest is exact. The interpolating modes use rtol 1e-5: the indices and weights are PyTorch's
exactly, but its x86 build fuses some of the multiply-adds that combine the taps."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import OpCase, check_rejected, randint, randn, run_case

TOL = {"atol": 1e-5, "rtol": 1e-5}


def _nearest(x3: torch.Tensor, x4: torch.Tensor, x5: torch.Tensor, u8: torch.Tensor) -> tuple[torch.Tensor, ...]:
    outs = []
    for mode in ("nearest", "nearest-exact"):
        outs += [F.interpolate(x3, scale_factor=2, mode=mode), F.interpolate(x3, scale_factor=2.3, mode=mode),
                 F.interpolate(x3, size=4, mode=mode), F.interpolate(x3.transpose(1, 2), size=11, mode=mode),
                 F.interpolate(x5, scale_factor=(1.5, 2.3, 0.7), mode=mode),
                 F.interpolate(x5, size=(5, 3, 9), mode=mode),
                 F.interpolate(u8, scale_factor=2, mode=mode)]
    outs += [F.interpolate(x4, scale_factor=(1.5, 0.7), mode="nearest-exact"),
             F.interpolate(x4, size=(100, 50), mode="nearest-exact"),
             F.interpolate(x3, scale_factor=1.7, mode="nearest", recompute_scale_factor=True)]
    return tuple(outs)


def _linear(x3: torch.Tensor, x5: torch.Tensor) -> tuple[torch.Tensor, ...]:
    outs = []
    for ac in (False, True):
        outs += [F.interpolate(x3, scale_factor=2.3, mode="linear", align_corners=ac),
                 F.interpolate(x3, size=4, mode="linear", align_corners=ac),
                 F.interpolate(x3.transpose(1, 2), size=1, mode="linear", align_corners=ac),
                 F.interpolate(x5, scale_factor=2, mode="trilinear", align_corners=ac),
                 F.interpolate(x5, scale_factor=(1.5, 2.3, 0.7), mode="trilinear", align_corners=ac),
                 F.interpolate(x5, size=(4, 3, 9), mode="trilinear", align_corners=ac)]  # depth unchanged
    return tuple(outs)


def _bicubic(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    outs = []
    for ac in (False, True):
        outs += [F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=ac),
                 F.interpolate(x, scale_factor=(1.5, 0.7), mode="bicubic", align_corners=ac),
                 F.interpolate(x.transpose(2, 3), size=(5, 23), mode="bicubic", align_corners=ac),
                 F.interpolate(x, size=(1, 1), mode="bicubic", align_corners=ac)]
    return tuple(outs)


def _aa(x: torch.Tensor, big: torch.Tensor) -> tuple[torch.Tensor, ...]:
    outs = []
    for mode in ("bilinear", "bicubic"):
        for ac in (False, True):
            outs += [F.interpolate(big, size=(3, 4), mode=mode, antialias=True, align_corners=ac),
                     F.interpolate(x, scale_factor=(1.5, 0.6), mode=mode, antialias=True, align_corners=ac)]
        outs += [F.interpolate(x, size=(9, 4), mode=mode, antialias=True),  # the height stays
                 F.interpolate(x.transpose(2, 3), size=(3, 9), mode=mode, antialias=True),  # the width stays
                 F.interpolate(x, size=(9, 11), mode=mode, antialias=True),  # nothing changes
                 F.interpolate(x, size=(20, 5), mode=mode, antialias=True)]
    return tuple(outs)


def _inf(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # a tap with weight 0 next to inf gives NaN (inf * 0), as in PyTorch; size 7 -> 7 copies
    return (F.interpolate(x, scale_factor=2, mode="linear"), F.interpolate(x, size=7, mode="linear"),
            F.interpolate(x, scale_factor=3, mode="nearest"))


def _with_inf_nan(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[0, 0, 2] = float("inf")
    x[1, 1, 4] = float("nan")
    return x


X3 = randn(2, 3, 7, seed=1)
X4 = randn(2, 3, 9, 11, seed=2)
X5 = randn(1, 2, 4, 5, 6, seed=3)

CASES = [
    OpCase("upsample_nearest_nd", _nearest, (X3, X4, X5, randint(0, 256, 1, 2, 3, 4, 5, seed=4, dtype=torch.uint8)),
           ops=("upsample_nearest_nd",)),
    OpCase("upsample_linear_nd", _linear, (X3, X5), ops=("upsample_linear_nd",), **TOL),
    OpCase("upsample_bicubic2d", _bicubic, (X4,), ops=("upsample_bicubic2d",), **TOL),
    OpCase("upsample_aa2d", _aa, (X4, randn(1, 2, 20, 30, seed=5)), ops=("upsample_aa2d",), **TOL),
    OpCase("upsample_inf_nan", _inf, (_with_inf_nan(X3),), ops=("upsample_linear_nd", "upsample_nearest_nd")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


@pytest.mark.parametrize("edge_op,fn,x,ints,match", [
    ("aten.upsample_nearest3d.vec", lambda t: F.interpolate(t, scale_factor=2), randn(1, 1, 2, 2, 2), {0: 2},
     r"upsample_nearest_nd.*exact = 2 is out of range"),
    ("aten.upsample_linear1d.vec", lambda t: F.interpolate(t, scale_factor=2, mode="linear"), randn(1, 1, 3), {0: -1},
     r"upsample_linear_nd.*align_corners = -1 is out of range"),
    ("aten._upsample_bilinear2d_aa.default", lambda t: F.interpolate(t, size=(2, 2), mode="bilinear", antialias=True),
     randn(1, 1, 4, 4), {0: 2}, r"upsample_aa2d.*mode = 2 is out of range"),
])
def test_resize_bad_args_rejected(monkeypatch: pytest.MonkeyPatch, edge_op: str, fn: object, x: torch.Tensor,
                                  ints: dict[int, int], match: str) -> None:
    check_rejected(monkeypatch, edge_op, fn, x, match, ints)  # type: ignore[arg-type]


def test_bicubic_bad_scale_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.upsample_bicubic2d.vec",
                   lambda t: F.interpolate(t, scale_factor=2, mode="bicubic"), randn(1, 1, 3, 3),
                   r"upsample_bicubic2d.*scale_w = nan is out of range", floats=[2.0, float("nan")])
