"""3-D pooling against PyTorch: max_pool3d (values and int64 indices; dilation, ceil_mode, NaN, every
integer dtype), avg_pool3d (ceil_mode, count_include_pad, divisor_override, padding; float32 and
int64), adaptive avg / max 3-D; and the 1-D pools, which reach the 2-D kernels. Each case puts
several pools into one program.

Everything is exact: the kernels sum in PyTorch's order and precision (float32, window order)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import Fn, OpCase, check_rejected, randint, randn, run_case


def with_nans(x: torch.Tensor, every: int = 7) -> torch.Tensor:
    x = x.clone()
    x.view(-1)[::every] = float("nan")
    return x


X = randn(2, 3, 7, 6, 9, seed=1)
XN = with_nans(randn(1, 2, 6, 5, 7, seed=2))
XT = randn(2, 9, 6, 7, 3, seed=3)  # transposed inside the model: a non-contiguous input


def _max_float(x: torch.Tensor, xn: torch.Tensor, xt: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a, ai = F.max_pool3d(xn, 3, 2, 1, return_indices=True)
    b, bi = F.max_pool3d(xn, (3, 2, 2), (2, 1, 2), (1, 1, 0), dilation=(1, 2, 2), ceil_mode=True, return_indices=True)
    c = F.max_pool3d(xt.permute(0, 4, 1, 2, 3), 2, ceil_mode=True)
    d, di = F.max_pool3d(x[0], (2, 3, 2), 1, 1, return_indices=True)  # [C, D, H, W]
    e, ei = F.max_pool3d(x[:1, :1, :2, :2, :2], 2, 1, 1, dilation=3, return_indices=True)  # empty windows: -inf
    return a, ai, b, bi, c, d, di, e, ei


def _max_ints(i32: torch.Tensor, i64: torch.Tensor, i8: torch.Tensor, u8: torch.Tensor) -> tuple[torch.Tensor, ...]:
    outs: list[torch.Tensor] = []
    for t in (i32, i64, i8, u8):
        v, i = F.max_pool3d(t, (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True, return_indices=True)
        outs += [v, i]
    outs.append(F.max_pool3d(i32[:1, :1, :2, :2, :2], 2, 1, 1, dilation=3))  # empty windows: the lowest int32
    return tuple(outs)


def _avg(x: torch.Tensor, xt: torch.Tensor, xi: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (F.avg_pool3d(x, 3, 2, 1),
            F.avg_pool3d(x, (3, 2, 4), (2, 2, 3), (1, 1, 2), ceil_mode=True, count_include_pad=False),
            F.avg_pool3d(x, 3, 2, 1, ceil_mode=True),
            F.avg_pool3d(x, 3, 2, 1, divisor_override=5),
            F.avg_pool3d(x[1], 2, 1),
            F.avg_pool3d(xt.permute(0, 4, 1, 2, 3), (1, 2, 3), padding=(0, 1, 1), count_include_pad=False),
            F.avg_pool3d(xi, 2, 1, 1),
            F.avg_pool3d(xi, 3, 2, 1, ceil_mode=True, count_include_pad=False, divisor_override=-3))


def _adaptive(x: torch.Tensor, xn: torch.Tensor) -> tuple[torch.Tensor, ...]:
    m, mi = F.adaptive_max_pool3d(xn, (3, 4, 5), return_indices=True)
    return (F.adaptive_avg_pool3d(x, (7, 3, 3)), F.adaptive_avg_pool3d(x, (3, 4, 5)),
            F.adaptive_avg_pool3d(x[0, :, :3, :2], (5, 3, 7)), m, mi, F.adaptive_max_pool3d(x[0], (2, 5, 4)))


def _one_d(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """1-D pools reach the 2-D kernels (to_edge writes them between unsqueeze and squeeze)"""
    c, ci = F.max_pool1d(x[0], 3, 2, 1, return_indices=True)
    e, ei = F.adaptive_max_pool1d(x[0], 4, return_indices=True)
    return (c, ci, e, ei, F.max_pool1d(x.transpose(1, 2), 2, ceil_mode=True), F.avg_pool1d(x[0], 3, 2, 1),
            F.avg_pool1d(x[0], 2, ceil_mode=True, count_include_pad=False), F.adaptive_avg_pool1d(x[0], 4))


CASES = [
    OpCase("pool3d_max", _max_float, (X, XN, XT), ops=("max_pool3d",)),
    OpCase("pool3d_max_ints", _max_ints,
           (randint(-100, 100, 1, 2, 4, 5, 6, dtype=torch.int32), randint(-100, 100, 2, 1, 3, 5, 4),
            randint(-128, 127, 1, 2, 4, 4, 5, seed=1, dtype=torch.int8),
            randint(0, 255, 2, 3, 4, 5, seed=2, dtype=torch.uint8)), ops=("max_pool3d",)),
    OpCase("pool3d_avg", _avg, (X, XT, randint(-1000, 1000, 1, 2, 5, 4, 6)), ops=("avg_pool3d",)),
    OpCase("pool3d_adaptive", _adaptive, (X, XN), ops=("adaptive_avg_pool3d", "adaptive_max_pool3d")),
    OpCase("pool3d_one_d", _one_d, (with_nans(randn(2, 3, 9, seed=4), 5),),
           ops=("max_pool2d", "adaptive_max_pool2d", "avg_pool2d", "adaptive_avg_pool2d")),
    OpCase("pool3d_empty_batch", lambda x: (*F.max_pool3d(x, 2, return_indices=True), F.avg_pool3d(x, 2)),
           (torch.zeros(0, 1, 2, 2, 3),), ops=("max_pool3d", "avg_pool3d")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_avg_pool3d_int32_unsupported() -> None:
    m = Fn(lambda x: F.avg_pool3d(x, 2))
    with pytest.raises(oa.UnsupportedOpError, match=r"avg_pool3d.*int32"):
        oa.export(m, (randint(0, 9, 1, 1, 4, 4, 4, dtype=torch.int32),))


@pytest.mark.parametrize("ints,match", [
    ({7: 2}, r"pad_h = 2 is out of range \(expected 0 to 1\)"),
    ({12: 2}, r"ceil_mode = 2 is out of range"),
    ({10: 0}, r"dilation_h = 0 is out of range"),
    ({0: 9}, r"too small for kernel 9 x 3 x 3"),
])
def test_max_pool3d_bad_args_rejected(monkeypatch: pytest.MonkeyPatch, ints: dict[int, int], match: str) -> None:
    check_rejected(monkeypatch, "aten.max_pool3d_with_indices.default", lambda t: F.max_pool3d(t, 3, 2, 1),
                   randn(1, 2, 5, 6, 6), r"max_pool3d.*" + match, ints)


def test_avg_pool3d_bad_args_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.avg_pool3d.default", lambda t: F.avg_pool3d(t, 2), randn(1, 2, 4, 6, 6),
                   r"avg_pool3d.*output 0 .*expected shape \[1, 2, 2, 2, 2\], received \[1, 2, 2, 3, 3\]",
                   {4: 3, 5: 3})
    check_rejected(monkeypatch, "aten.avg_pool3d.default", lambda t: F.avg_pool3d(t, 2), randn(1, 2, 4, 6, 6),
                   r"avg_pool3d.*count_include_pad = 3 is out of range", {10: 3})
