"""torch.cdist (aten._cdist_forward) and F.pdist (aten._pdist_forward) against PyTorch: p = 0, 1, 2, 3,
0.5, inf; broadcast batch dims, non-contiguous inputs, empty rows / columns, NaN and inf.

The kernels sum in double; PyTorch sums in float32 (cdist row by row, pdist in vector lanes), so
sums of M terms differ by up to ~M float32 ulps: rtol 1e-5 for the M <= 9 used here. cdist with
p = 2 and more than 25 rows is a matrix product in PyTorch (aten._cdist_forward called directly,
or torch.cdist itself, which then never reaches _cdist_forward): cancellation makes float32 eager
off by far more than the direct sum, so that case is checked against float64 eager."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import OpCase, check_rejected, randn, run_case

NORMS = (0.0, 1.0, 2.0, 3.0, 0.5, math.inf)
TOL = {"atol": 1e-5, "rtol": 1e-5}


def _cdist(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
    bt = b.transpose(-1, -2)  # non-contiguous
    outs = [torch.cdist(a, bt, p=p) for p in NORMS]
    outs.append(torch.cdist(a[:1], c, p=1.0))  # batch dims [1] and [3, 1] broadcast to [3, 2]
    outs.append(torch.cdist(a[0, :, :0], bt[0, :, :0]))  # M = 0: zeros
    outs.append(torch.cdist(a[0, :0], bt[0]))  # no rows
    return tuple(outs)


def _pdist(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (*(F.pdist(x, p=p) for p in NORMS), F.pdist(x[:1]), F.pdist(x.t()[:5]))


def _special() -> tuple[torch.Tensor, torch.Tensor]:
    a = randn(4, 3, seed=9)
    a[1, 1] = float("nan")
    a[2, 0] = float("inf")
    a[3, 2] = -0.0
    b = randn(5, 3, seed=10)
    b[0, 0] = float("inf")
    b[4] = a[3]
    return a, b


def _special_fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # inf-norm NaN rules differ: cdist's scalar std::max skips NaN, pdist's vector maximum propagates it
    return (*(torch.cdist(a, b, p=p) for p in (0.0, 1.0, 2.0, math.inf)),
            *(F.pdist(torch.cat([a, b]), p=p) for p in (0.0, 1.0, 2.0, math.inf)))


CASES = [
    OpCase("distance_cdist", _cdist, (randn(2, 4, 7, seed=1), randn(2, 7, 6, seed=2), randn(3, 1, 5, 7, seed=3)),
           ops=("cdist",), **TOL),
    OpCase("distance_pdist", _pdist, (randn(6, 9, seed=4),), ops=("pdist",), **TOL),
    OpCase("distance_special", _special_fn, _special(), ops=("cdist", "pdist"), **TOL),
    # eager float32 takes the matrix-product path here (> 25 rows): float64 eager is the defined value
    OpCase("distance_cdist_mm_path", lambda a, b: torch.ops.aten._cdist_forward(a, b, 2.0, None),
           (randn(30, 5, seed=5) * 10, randn(27, 5, seed=6) * 10), ops=("cdist",), reference="float64", **TOL),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_torch_cdist_large_goes_through_matmul() -> None:
    """torch.cdist picks PyTorch's matrix-product formula itself for p = 2 with > 25 rows: no cdist op"""
    case = OpCase("distance_cdist_torch_mm", lambda a, b: torch.cdist(a, b), (randn(30, 4), randn(26, 4, seed=1)),
                  ops=("matmul",), **TOL)
    prog = run_case(case)
    assert "cdist" not in prog.ops


@pytest.mark.parametrize("edge_op,fn,floats,match", [
    ("aten._cdist_forward.default", lambda t: torch.cdist(t, t), [-1.0], r"cdist.*p = -1 is out of range"),
    ("aten._pdist_forward.default", lambda t: F.pdist(t), [float("nan")], r"pdist.*p = nan is out of range"),
])
def test_distance_bad_p_rejected(monkeypatch: pytest.MonkeyPatch, edge_op: str, fn: object, floats: list[float],
                                 match: str) -> None:
    check_rejected(monkeypatch, edge_op, fn, randn(4, 3), match, floats=floats)  # type: ignore[arg-type]
