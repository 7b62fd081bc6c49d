"""F.grid_sample against PyTorch: grid_sampler_2d (bilinear, nearest, bicubic) and grid_sampler_3d
(trilinear, nearest) with zeros / border / reflection padding and both align_corners, grids reaching
outside the input, special grid values (NaN, inf, huge, -0.0), ties for nearest (round half to even),
non-contiguous inputs and F.affine_grid in front (it decomposes into arange / mul / sum).

PyTorch's 2-D CPU kernel is vectorized and its x86 build fuses some multiply-adds: the interpolated
values differ from the reference kernel's by a few float32 ulps (default tolerances hold); indices
(nearest) and the 3-D scalar kernel agree exactly."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import Fn, OpCase, check_rejected, randn, run_case

MODES_2D = list(itertools.product(("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection"), (False, True)))
MODES_3D = list(itertools.product(("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True)))
# the huge values come last: reflection padding skips them (it would reflect 1e10 about a span of a
# few pixels, a pixel that float32 rounding picks: float64 eager picks another, and whether a CPU's
# PyTorch build fuses a multiply-add could move it)
SPECIAL = [float("nan"), float("inf"), -float("inf"), -0.0, 1.0, -1.0, 0.5, 1.75, 1e10, -3e9]
N_BOUNDED = 8


def _grid(seed: int, *shape: int) -> torch.Tensor:
    return (torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 3 - 1.5)  # also outside [-1, 1]


def _special_2d() -> torch.Tensor:
    v = torch.tensor(SPECIAL)
    return torch.stack(torch.meshgrid(v, v[:6], indexing="ij"), -1)[None]  # [1, 10, 6, 2]


def _special_3d() -> torch.Tensor:
    v = torch.tensor(SPECIAL)
    return torch.stack(torch.meshgrid(v, v[:4], v[3:7], indexing="ij"), -1)[None]  # [1, 10, 4, 4, 3]


def _all_modes(modes: list[tuple[str, str, bool]]) -> Any:
    def fn(x: torch.Tensor, g: torch.Tensor, gs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = x.transpose(-1, -2)  # non-contiguous input
        outs = []
        for mode, pad, ac in modes:
            outs.append(F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=ac))
            special = gs[:, :N_BOUNDED] if pad == "reflection" else gs
            outs.append(F.grid_sample(x[:1], special, mode=mode, padding_mode=pad, align_corners=ac))
        return tuple(outs)
    return fn


def _ties(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # W = 5 with align_corners: x = (g + 1) * 2 ties at g = -0.75, -0.25, 0.25, 0.75 (0.5 .. 3.5);
    # H = 4 without: y = (g + 1) * 2 - 0.5 ties at g = -0.5, 0, 0.5 (0.5, 1.5, 2.5)
    g = torch.tensor([[-0.75, -0.5], [-0.25, 0.0], [0.25, 0.5], [0.75, 0.0], [0.0, -1.0], [-1.0, 1.0]]).view(1, 2, 3, 2)
    return (F.grid_sample(x, g, mode="nearest", align_corners=True),
            F.grid_sample(x, g, mode="nearest", align_corners=False),
            F.grid_sample(x, g, mode="nearest", padding_mode="reflection", align_corners=False))


def _affine(x: torch.Tensor, x3: torch.Tensor, theta: torch.Tensor, theta3: torch.Tensor) -> tuple[torch.Tensor, ...]:
    g = F.affine_grid(theta, [2, 3, 6, 5], align_corners=False)
    g3 = F.affine_grid(theta3, [1, 2, 3, 4, 5], align_corners=True)
    return (F.grid_sample(x, g, align_corners=False), F.grid_sample(x3, g3, mode="nearest", align_corners=True))


CASES = [
    OpCase("sampling_grid_2d_modes", _all_modes(MODES_2D),
           (randn(2, 3, 7, 5, seed=1), _grid(2, 2, 6, 4, 2), _special_2d()), ops=("grid_sampler_2d",)),
    OpCase("sampling_grid_3d_modes", _all_modes(MODES_3D),
           (randn(2, 2, 4, 6, 5, seed=3), _grid(4, 2, 3, 4, 5, 3), _special_3d()), ops=("grid_sampler_3d",)),
    OpCase("sampling_nearest_ties", _ties, (torch.arange(20.0).view(1, 1, 4, 5),), ops=("grid_sampler_2d",)),
    OpCase("sampling_affine_grid", _affine,
           (randn(2, 3, 5, 4, seed=5), randn(1, 2, 3, 4, 5, seed=6), randn(2, 2, 3, seed=7) * 0.7,
            randn(1, 3, 4, seed=8) * 0.7), ops=("grid_sampler_2d", "grid_sampler_3d")),
    OpCase("sampling_empty_grid", lambda x, g: F.grid_sample(x, g, align_corners=False),
           (randn(1, 2, 3, 4), torch.zeros(1, 0, 3, 2)), ops=("grid_sampler_2d",)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_grid_sample_float64_unsupported() -> None:
    m = Fn(lambda x, g: F.grid_sample(x, g, align_corners=False))
    with pytest.raises(oa.UnsupportedOpError, match=r"grid_sampler_2d.*float64"):
        oa.export(m, (randn(1, 1, 3, 3).double(), torch.zeros(1, 2, 2, 2, dtype=torch.float64)))


@pytest.mark.parametrize("edge_op,ints,match", [
    ("aten.grid_sampler_2d.default", {0: 3}, r"grid_sampler_2d.*interpolation_mode = 3 .*\(expected 0 to 2"),
    ("aten.grid_sampler_2d.default", {1: -1}, r"grid_sampler_2d.*padding_mode = -1 is out of range"),
    ("aten.grid_sampler_2d.default", {2: 2}, r"grid_sampler_2d.*align_corners = 2 is out of range"),
    ("aten.grid_sampler_3d.default", {0: 2}, r"grid_sampler_3d.*interpolation_mode = 2 .*\(expected 0 to 1"),
])
def test_grid_sampler_bad_args_rejected(monkeypatch: pytest.MonkeyPatch, edge_op: str, ints: dict[int, int],
                                        match: str) -> None:
    if "3d" in edge_op:
        x, g = randn(1, 1, 2, 3, 3), torch.zeros(1, 2, 2, 2, 3)
    else:
        x, g = randn(1, 1, 3, 3), torch.zeros(1, 2, 2, 2)
    check_rejected(monkeypatch, edge_op, lambda t, gg=g: F.grid_sample(t, gg, align_corners=False), x, match, ints)
