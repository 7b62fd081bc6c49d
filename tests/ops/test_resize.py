"""upsample_nearest2d / upsample_bilinear2d against PyTorch: output size given vs scale factors
given (they change the index math), align_corners, up- and downsampling, odd sizes.

Nearest is exact. Bilinear uses rtol 1e-5: the source indices and weights are PyTorch's exactly,
but PyTorch's CPU kernels (separable vs channels-last) combine the four taps in different orders."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import Fn, OpCase, check_rejected, randn, run_case

TOL: dict[str, Any] = {"atol": 1e-5, "rtol": 1e-5}


def near(name: str, x: torch.Tensor, **kw: Any) -> OpCase:
    return OpCase(name, lambda t: F.interpolate(t, mode="nearest", **kw), (x,), ops=("upsample_nearest2d",))


def bil(name: str, x: torch.Tensor, **kw: Any) -> OpCase:
    kw.setdefault("align_corners", False)
    return OpCase(name, lambda t: F.interpolate(t, mode="bilinear", **kw), (x,), ops=("upsample_bilinear2d",),
                  **TOL)


CASES = [
    near("resize_nearest_scale2", randn(1, 3, 4, 4), scale_factor=2),
    near("resize_nearest_scale2_odd", randn(2, 2, 5, 7), scale_factor=2),
    near("resize_nearest_size_double", randn(1, 2, 5, 3), size=(10, 6)),
    near("resize_nearest_size_uneven", randn(1, 2, 3, 5), size=(7, 9)),
    near("resize_nearest_scale_1_7", randn(1, 2, 5, 6), scale_factor=1.7),
    near("resize_nearest_scale_2_1_special", randn(1, 2, 5, 5), scale_factor=2.1),
    near("resize_nearest_scale_1_1_same_size", randn(1, 2, 5, 5), scale_factor=1.1),
    near("resize_nearest_scale_hw", randn(1, 1, 4, 6), scale_factor=(1.5, 2.5)),
    near("resize_nearest_down", randn(1, 2, 9, 7), scale_factor=0.45),
    near("resize_nearest_down_size", randn(1, 2, 9, 7), size=(4, 3)),
    near("resize_nearest_recompute", randn(1, 2, 5, 6), scale_factor=1.7, recompute_scale_factor=True),
    bil("resize_bilinear_size", randn(1, 3, 4, 5), size=(7, 11)),
    bil("resize_bilinear_size_align", randn(1, 3, 4, 5), size=(7, 11), align_corners=True),
    bil("resize_bilinear_scale2", randn(2, 2, 4, 4), scale_factor=2),
    bil("resize_bilinear_scale2_align", randn(1, 2, 5, 3), scale_factor=2, align_corners=True),
    bil("resize_bilinear_scale_1_5", randn(1, 2, 5, 7), scale_factor=1.5),
    bil("resize_bilinear_scale_1_5_align", randn(1, 2, 5, 7), scale_factor=1.5, align_corners=True),
    bil("resize_bilinear_scale_hw", randn(1, 1, 6, 4), scale_factor=(1.3, 2.7)),
    bil("resize_bilinear_down", randn(1, 2, 9, 10), scale_factor=0.6),
    bil("resize_bilinear_down_size_align", randn(1, 2, 9, 10), size=(4, 3), align_corners=True),
    bil("resize_bilinear_to_1x1_align", randn(1, 2, 4, 4), size=(1, 1), align_corners=True),
    bil("resize_bilinear_scale_1_1_same_size", randn(1, 2, 5, 5), scale_factor=1.1),
    bil("resize_bilinear_recompute", randn(1, 2, 5, 7), scale_factor=1.5, recompute_scale_factor=True),
    bil("resize_bilinear_large", randn(1, 4, 16, 16), size=(40, 100)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_bilinear_float64_unsupported() -> None:
    m = Fn(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"))
    with pytest.raises(oa.UnsupportedOpError, match=r"upsample_bilinear2d.*float64"):
        oa.export(m, (randn(1, 1, 3, 3).double(),))






def test_bilinear_bad_align_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.upsample_bilinear2d.vec",
                   lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), randn(1, 1, 3, 3),
                   r"upsample_bilinear2d.*align_corners = 2 is out of range", {0: 2})


def test_nearest_nan_scale_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.upsample_nearest2d.vec", lambda t: F.interpolate(t, scale_factor=2),
                   randn(1, 1, 3, 3), r"upsample_nearest2d.*scale_w = nan is out of range", floats=[2.0, float("nan")])
