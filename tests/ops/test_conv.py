"""conv2d / conv_transpose2d (and 1-D convolutions through 2-D views, 3-D ones through conv2d) against
PyTorch.

Tolerances: rtol 1e-4, atol 1e-5. The reference kernel sums each output in double in
(channel, kernel row, kernel column) order while PyTorch sums in float in its own blocked order,
so results differ by float rounding of the reordered sum."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import Fn, OpCase, export_case, randn, run_case, tamper

TOL: dict[str, Any] = {"atol": 1e-5, "rtol": 1e-4}


def conv(name: str, x: tuple[int, ...], w: tuple[int, ...], bias: bool = True, layout: str = "nchw",
         **kw: Any) -> OpCase:
    consts = (randn(*w, seed=1),) + ((randn(w[0], seed=2),) if bias else ())
    fn = F.conv1d if len(x) == 3 else F.conv2d

    def f(inp: torch.Tensor, weight: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return fn(inp, weight, b, **kw)

    # the direct convolution under test (3x3 stride-1 layers would otherwise become Winograd
    # convolutions, tested in test_winograd.py), in the layout asked for (depthwise convolutions
    # would otherwise run channels-last, exporter/layout.py)
    return OpCase(name, f, (randn(*x),), consts=consts, ops=("conv2d_nhwc" if layout == "nhwc" else "conv2d",),
                  export_kwargs={"winograd_convs": False, "layout": layout}, **TOL)


def convt(name: str, x: tuple[int, ...], w: tuple[int, ...], groups: int = 1, bias: bool = True,
          **kw: Any) -> OpCase:
    consts = (randn(*w, seed=1),) + ((randn(w[1] * groups, seed=2),) if bias else ())
    fn = F.conv_transpose1d if len(x) == 3 else F.conv_transpose2d

    def f(inp: torch.Tensor, weight: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return fn(inp, weight, b, groups=groups, **kw)

    return OpCase(name, f, (randn(*x),), consts=consts, ops=("conv_transpose2d",), **TOL)


CASES = [
    conv("conv_3x3_pad1", (1, 3, 8, 8), (4, 3, 3, 3), padding=1),
    conv("conv_3x3_nopad_nobias", (1, 3, 7, 9), (5, 3, 3, 3), bias=False),
    conv("conv_stride2_pad1", (2, 4, 9, 9), (6, 4, 3, 3), stride=2, padding=1),
    conv("conv_stride3_pad0_uneven", (1, 2, 10, 11), (3, 2, 3, 3), stride=3),
    conv("conv_dilated", (1, 3, 11, 11), (4, 3, 3, 3), padding=2, dilation=2),
    conv("conv_dilation_stride_mixed", (1, 2, 13, 12), (3, 2, 3, 2), stride=(2, 1), padding=(3, 1),
         dilation=(3, 2)),
    conv("conv_grouped", (1, 4, 6, 6), (6, 2, 3, 3), padding=1, groups=2),
    conv("conv_depthwise", (2, 6, 8, 8), (6, 1, 3, 3), stride=2, padding=1, groups=6),
    conv("conv_depthwise_multiplier", (1, 3, 7, 7), (6, 1, 3, 3), padding=1, groups=3),
    conv("conv_1x1", (2, 8, 5, 5), (4, 8, 1, 1)),
    conv("conv_1x1_stride2", (1, 8, 6, 6), (4, 8, 1, 1), stride=2),
    conv("conv_nonsquare_kernel", (1, 3, 9, 10), (2, 3, 3, 5), stride=(2, 1), padding=(1, 2)),
    conv("conv_kernel_eq_input", (1, 2, 5, 5), (3, 2, 5, 5)),
    conv("conv_pad_larger_than_kernel", (1, 1, 4, 4), (2, 1, 3, 3), padding=3),
    conv("conv_1x1_spatial", (3, 4, 1, 1), (5, 4, 1, 1)),
    conv("conv_wide_channels", (1, 32, 6, 6), (16, 32, 3, 3), padding=1),
    conv("conv1d_basic", (2, 3, 20), (4, 3, 5), padding=2),
    conv("conv1d_stride_dilation", (1, 4, 31), (6, 4, 3), stride=2, padding=1, dilation=3),
    conv("conv1d_depthwise", (1, 4, 16), (4, 1, 3), padding=1, groups=4, bias=False),
    # channels-last (conv2d_nhwc between permutes): groups 1 (packed weights), depthwise, 1x1
    conv("nhwc_3x3_stride2", (2, 4, 9, 9), (6, 4, 3, 3), stride=2, padding=1, layout="nhwc"),
    conv("nhwc_depthwise", (1, 6, 8, 7), (6, 1, 3, 3), padding=1, groups=6, layout="nhwc"),
    conv("nhwc_1x1_nobias", (1, 20, 5, 5), (17, 20, 1, 1), bias=False, layout="nhwc"),
    conv("nhwc_dilated", (1, 4, 9, 9), (3, 4, 3, 3), padding=2, dilation=2, layout="nhwc"),
    convt("conv_transpose_stride2", (1, 4, 5, 5), (4, 3, 3, 3), stride=2, padding=1, output_padding=1),
    convt("conv_transpose_basic_nobias", (2, 3, 4, 6), (3, 2, 3, 3), bias=False),
    convt("conv_transpose_grouped", (1, 4, 5, 5), (4, 3, 3, 3), groups=2, stride=2),
    convt("conv_transpose_dilated", (1, 2, 4, 5), (2, 3, 3, 2), stride=(1, 2), padding=(2, 0), dilation=(2, 1)),
    convt("conv_transpose_outpad_dilation", (1, 2, 3, 3), (2, 2, 2, 2), stride=1, dilation=3, output_padding=2),
    convt("conv_transpose_kernel4_stride2", (1, 3, 4, 4), (3, 2, 4, 4), stride=2, padding=1),
    convt("conv_transpose_depthwise", (1, 3, 5, 5), (3, 1, 3, 3), groups=3, stride=2, padding=1),
    convt("conv_transpose1d", (1, 3, 7), (3, 2, 4), stride=3, padding=1, output_padding=2),
    OpCase("conv_runtime_weight", lambda x, w: F.conv2d(x, w, padding=1),
           (randn(1, 3, 6, 6), randn(4, 3, 3, 3, seed=1)), ops=("conv2d",), **TOL),
    OpCase("conv_module_then_relu", lambda x: x, (randn(1, 3, 8, 8),), ops=("conv2d",),
           module=torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU()), **TOL),
]


# 3-D convolutions (OpInfo's conv3d / conv_transpose3d): stride, padding, dilation, groups per dim,
# a constant and a run-time weight (a transposed one is flipped at export, or by instructions)
CASES_3D = [
    OpCase("conv3d_variants",
           lambda x, xg, w, b, wg: (F.conv3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1)),
                                    F.conv3d(xg, wg, groups=2, padding=1), F.conv3d(x[:1, :, :4], w[:2, :, :1])),
           (randn(2, 4, 7, 8, 6),  randn(1, 4, 4, 5, 5, seed=3)),
           consts=(randn(6, 4, 3, 2, 3, seed=1), randn(6, seed=2), randn(6, 2, 3, 3, 3, seed=4)),
           ops=("conv2d", "slice", "cat", "permute"), export_kwargs={"winograd_convs": False}, **TOL),
    OpCase("conv_transpose3d_variants",
           lambda x, xg, wr, w, b, wg: (
               F.conv_transpose3d(x, w, b, stride=2, padding=1, output_padding=1),
               F.conv_transpose3d(xg, wg, groups=2, stride=(1, 2, 3), dilation=(2, 1, 1), padding=(0, 1, 2)),
               F.conv_transpose3d(x[:, :2], wr, stride=2, padding=2)),
           (randn(1, 4, 3, 4, 3), randn(2, 4, 3, 3, 4, seed=5), randn(2, 3, 3, 3, 3, seed=6)),
           consts=(randn(4, 3, 3, 3, 3, seed=1), randn(3, seed=2), randn(4, 3, 2, 3, 3, seed=4)),
           ops=("conv2d", "pad", "flip"), export_kwargs={"winograd_convs": False}, **TOL),
]


@pytest.mark.parametrize("case", CASES + CASES_3D, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_conv3d_runs_as_one_conv2d() -> None:
    """the depth taps are gathered into channels: one conv2d, no per-depth instructions"""
    prog = export_case(CASES_3D[0])
    assert prog.ops.count("conv2d") == 1 and "conv_transpose2d" not in prog.ops, prog.ops




@pytest.mark.parametrize("ints,match", [
    ({6: 3}, r"groups = 3 does not divide the 4 input channels"),
    ({0: 0}, r"stride_h = 0 is out of range"),
    ({3: -1}, r"pad_w = -1 is out of range"),
    ({2: 5}, r"output 0 .*expected shape \[1, 4, 14, 6\]"),
    ({7: 9}, r"act = 9 is not a known activation"),
])
def test_conv_bad_args_rejected(monkeypatch: pytest.MonkeyPatch, ints: dict[int, int], match: str) -> None:
    tamper(monkeypatch, "aten.convolution.default", ints)
    m = Fn(lambda x, w: F.conv2d(x, w, padding=1), (randn(4, 4, 3, 3, seed=1),))
    prog = oa.export(m, (randn(1, 4, 6, 6),), bundle_tests=False)
    with pytest.raises(oa.RuntimeFailure, match=r"conv2d.*" + match):
        oa.load(prog)(randn(1, 4, 6, 6))


@pytest.mark.parametrize("act,lo,hi", [(1, 0.0, 0.0), (2, -0.5, 0.75)])
def test_conv_fused_act(monkeypatch: pytest.MonkeyPatch, act: int, lo: float, hi: float) -> None:
    """The act argument (set by a later fusion pass) clamps the output in the kernel."""
    tamper(monkeypatch, "aten.convolution.default", {7: act}, [lo, hi])
    w, b = randn(4, 3, 3, 3, seed=1), randn(4, seed=2)
    x = randn(1, 3, 6, 6)
    m = Fn(lambda inp, w_, b_: F.conv2d(inp, w_, b_, padding=1), (w, b))
    (got,) = oa.load(oa.export(m, (x,), bundle_tests=False))(x)
    ref = F.conv2d(x, w, b, padding=1)
    want = torch.relu(ref) if act == 1 else torch.clamp(ref, lo, hi)
    torch.testing.assert_close(got, want, **TOL)
