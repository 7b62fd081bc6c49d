"""linear / matmul / addmm against PyTorch on several shapes."""

from __future__ import annotations

import pytest
import torch.nn.functional as F

from helpers import OpCase, randn, run_case

CASES = [
    OpCase("linear_1x784x512", lambda x, w, b: F.linear(x, w, b), (randn(1, 784),),
           consts=(randn(512, 784, seed=1), randn(512, seed=2)), ops=("linear",), atol=1e-4, rtol=1e-4),
    OpCase("linear_3d_nobias", lambda x, w: F.linear(x, w), (randn(2, 3, 17),), consts=(randn(5, 17, seed=1),),
           ops=("linear",), atol=1e-5, rtol=1e-5),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)
