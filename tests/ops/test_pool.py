"""max_pool2d (with and without indices) / avg_pool2d / adaptive_avg_pool2d / adaptive_max_pool2d against
PyTorch (float32; max pooling also int32, int64, int8 and uint8). Averages are summed in double like
PyTorch's CPU kernels, so default tolerances hold; maxima and indices are exact."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import Fn, OpCase, check_rejected, randint, randn, run_case


def maxp(name: str, x: torch.Tensor, *args: Any, **kw: Any) -> OpCase:
    return OpCase(name, lambda t: F.max_pool2d(t, *args, **kw), (x,), ops=("max_pool2d",))


def avgp(name: str, x: torch.Tensor, *args: Any, **kw: Any) -> OpCase:
    return OpCase(name, lambda t: F.avg_pool2d(t, *args, **kw), (x,), ops=("avg_pool2d",))


def adap(name: str, x: torch.Tensor, size: tuple[int, int]) -> OpCase:
    return OpCase(name, lambda t: F.adaptive_avg_pool2d(t, size), (x,), ops=("adaptive_avg_pool2d",))


def with_nans(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    flat = x.view(-1)
    flat[::7] = float("nan")
    return x


CASES = [
    maxp("pool_max_2x2", randn(1, 3, 8, 8), 2),
    maxp("pool_max_3x3_s2_p1", randn(2, 4, 9, 9), 3, 2, 1),
    maxp("pool_max_ceil_extra_window", randn(1, 2, 5, 5), 2, 2, 0, ceil_mode=True),
    maxp("pool_max_ceil_drop_pad_window", randn(1, 2, 5, 5), 2, 2, 1, ceil_mode=True),
    maxp("pool_max_ceil_3x3_s2_p1", randn(1, 2, 8, 7), 3, 2, 1, ceil_mode=True),
    maxp("pool_max_dilated", randn(1, 2, 10, 9), 3, 1, 1, dilation=2),
    maxp("pool_max_dilated_ceil", randn(1, 1, 11, 10), (3, 2), (2, 3), (1, 1), dilation=(2, 3), ceil_mode=True),
    maxp("pool_max_nonsquare", randn(1, 3, 7, 12), (2, 4), (1, 3), (1, 2)),
    maxp("pool_max_empty_window_neginf", randn(1, 1, 2, 2), 2, 1, 1, dilation=3),
    maxp("pool_max_nan", with_nans(randn(1, 2, 6, 6)), 3, 2, 1),
    maxp("pool_max_3d_input", randn(3, 6, 6), 2),
    maxp("pool_max_int32", randint(-100, 100, 1, 2, 7, 7, dtype=torch.int32), 3, 2, 1),
    maxp("pool_max_int64", randint(-100, 100, 2, 1, 6, 5), 2, 2, 1, ceil_mode=True),
    maxp("pool_max_int32_empty_window", randint(-5, 5, 1, 1, 2, 2, dtype=torch.int32), 2, 1, 1, dilation=3),
    avgp("pool_avg_2x2", randn(1, 3, 8, 8), 2),
    avgp("pool_avg_3x3_s1_p1", randn(2, 2, 6, 7), 3, 1, 1),
    avgp("pool_avg_3x3_p1_no_pad_count", randn(1, 2, 6, 7), 3, 2, 1, count_include_pad=False),
    avgp("pool_avg_ceil_include_pad", randn(1, 2, 6, 6), 3, 2, 1, ceil_mode=True),
    avgp("pool_avg_ceil_exclude_pad", randn(1, 2, 6, 6), 3, 2, 1, ceil_mode=True, count_include_pad=False),
    avgp("pool_avg_ceil_no_pad", randn(1, 2, 5, 7), 2, 2, 0, ceil_mode=True),
    avgp("pool_avg_divisor_override", randn(1, 2, 6, 6), 3, 2, 1, divisor_override=5),
    avgp("pool_avg_nonsquare", randn(1, 1, 9, 8), (3, 2), (2, 3), (1, 1)),
    avgp("pool_avg_3d_input", randn(2, 5, 5), 2, 1),
    adap("pool_adaptive_divides", randn(2, 3, 8, 8), (4, 2)),
    adap("pool_adaptive_uneven", randn(1, 3, 7, 9), (3, 4)),
    adap("pool_adaptive_upsample", randn(1, 2, 3, 4), (5, 7)),
    adap("pool_adaptive_row", randn(1, 2, 10, 10), (1, 3)),
    adap("pool_adaptive_3d_input", randn(3, 11, 5), (4, 3)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


# indices: the first maximum in window order, the last NaN; a window of -inf only gives its first element
NAN, INF = float("nan"), float("inf")
SPECIAL = torch.tensor([[[[1.0, 3.0, 3.0, -1.0, 0.5], [3.0, NAN, 2.0, NAN, 3.0],
                          [-INF, -INF, 0.0, -0.0, 7.0], [-INF, -INF, 7.0, 7.0, 1.0]]]])


def test_max_pool_indices_and_adaptive_max() -> None:
    def f(x: torch.Tensor, s: torch.Tensor, i: torch.Tensor, lg: torch.Tensor, i8: torch.Tensor, u: torch.Tensor,
          x3: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*F.max_pool2d(x, 3, 2, 1, return_indices=True),
                *F.max_pool2d(x, (2, 3), (1, 2), (1, 0), dilation=(2, 1), ceil_mode=True, return_indices=True),
                *F.max_pool2d(s, 2, 1, return_indices=True), *F.max_pool2d(s, (2, 2), 2, 1, return_indices=True),
                *F.max_pool2d(i, 2, return_indices=True),
                *F.max_pool2d(lg, 3, 2, 1, ceil_mode=True, return_indices=True),
                *F.max_pool2d(i8, 2, 1, return_indices=True), *F.max_pool2d(u, 2, return_indices=True),
                *F.max_pool2d(x3.transpose(1, 2), 2, return_indices=True),
                *F.adaptive_max_pool2d(x, (3, 4), return_indices=True), F.adaptive_max_pool2d(x, 1),
                *F.adaptive_max_pool2d(s, (2, 3), return_indices=True),
                *F.adaptive_max_pool2d(x3, (5, 7), return_indices=True))
    run_case(OpCase("pool_max_indices", f, (
        randn(2, 3, 7, 8), SPECIAL, randint(-5, 5, 1, 2, 6, 6, seed=1, dtype=torch.int32), randint(-9, 9, 2, 1, 5, 5),
        randint(-128, 128, 1, 2, 5, 4, seed=2, dtype=torch.int8),
        randint(0, 256, 1, 1, 6, 4, seed=3, dtype=torch.uint8),
        randn(2, 3, 4, seed=4)), ops=("max_pool2d", "adaptive_max_pool2d")))


def _direct(op: str, x: torch.Tensor, outs: list[tuple[torch.dtype, tuple[int, ...]]], ints: list[int]) -> None:
    """Run one hand-built instruction (the file a buggy or hostile exporter could write)."""
    from openaccel.exporter.memory_plan import plan_memory
    from openaccel.exporter.serialize import serialize
    from openaccel.ir import Graph, Instr, Value
    from openaccel.program import Program

    xv = Value("x", x.dtype, tuple(x.shape))
    ov = [Value(f"out{i}", dt, shape) for i, (dt, shape) in enumerate(outs)]
    g = Graph(name="forward", inputs=[xv], outputs=ov)
    g.instrs = [Instr(op=op, inputs=[xv], outputs=ov, ints=ints)]
    oa.load(Program(serialize(g, plan_memory(g), [], target="host", required_features=[])))(x)


@pytest.mark.parametrize("op,outs,match", [
    ("max_pool2d", [(torch.float32, (1, 2, 3, 3)), (torch.int32, (1, 2, 3, 3))],
     r"output 1 \(indices\).*dtype int32 is not supported \(expected one of: int64\)"),
    ("max_pool2d", [(torch.float32, (1, 2, 3, 3)), (torch.int64, (1, 2, 9))],
     r"output 1 \(indices\).*expected shape \[1, 2, 3, 3\], received \[1, 2, 9\]"),
    ("adaptive_max_pool2d", [(torch.float32, (1, 2, 3, 3))] * 3,
     r"expected 1 or 2 outputs \(out, indices\), received 3"),
])
def test_max_pool_indices_output_checked(op: str, outs: list[tuple[torch.dtype, tuple[int, ...]]], match: str) -> None:
    ints = [2, 2, 2, 2, 0, 0, 1, 1, 0] if op == "max_pool2d" else []
    with pytest.raises(oa.OpenAccelError, match=match):
        _direct(op, randn(1, 2, 6, 6), outs, ints)


def test_avg_pool_int_unsupported() -> None:
    m = Fn(lambda x: F.avg_pool2d(x, 2))
    with pytest.raises(oa.UnsupportedOpError, match=r"avg_pool2d.*int64"):
        oa.export(m, (randint(0, 9, 1, 1, 4, 4),))






@pytest.mark.parametrize("ints,match", [
    ({4: 2}, r"pad_h = 2 is out of range \(expected 0 to 1\)"),
    ({8: 2}, r"ceil_mode = 2 is out of range"),
    ({6: 0}, r"dilation_h = 0 is out of range"),
    ({0: 9}, r"too small for kernel 9 x 3"),
])
def test_max_pool_bad_args_rejected(monkeypatch: pytest.MonkeyPatch, ints: dict[int, int], match: str) -> None:
    check_rejected(monkeypatch, "aten.max_pool2d_with_indices.default", lambda t: F.max_pool2d(t, 3, 2, 1),
                   randn(1, 2, 6, 6), r"max_pool2d.*" + match, ints)


def test_avg_pool_bad_output_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.avg_pool2d.default", lambda t: F.avg_pool2d(t, 2), randn(1, 2, 6, 6),
                   r"avg_pool2d.*output 0 .*expected shape \[1, 2, 2, 2\], received \[1, 2, 3, 3\]", {2: 3, 3: 3})
