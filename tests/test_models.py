"""Whole models (defined in openaccel.zoo, random weights, fixed seed) export and run on the host
and match PyTorch eager in fp32 within atol = rtol = 1e-4, on the example input and on a fresh one."""

from __future__ import annotations

import pytest
import torch

import openaccel as oa
from openaccel import zoo

from helpers import CACHE

ATOL = RTOL = 1e-4


def _fresh(example: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(99)
    return tuple(torch.randn(x.shape, generator=g) if x.is_floating_point()
                 else torch.randint(0, 512, x.shape, generator=g, dtype=x.dtype) for x in example)


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.NAMES)
def test_model_matches_eager_on_host(name: str) -> None:
    model, example = zoo.build(name)
    prog = oa.export(model, example, tolerance=(ATOL, RTOL))
    CACHE.joinpath("models").mkdir(parents=True, exist_ok=True)
    prog.save(CACHE / "models" / f"{name}.oab")
    mod = oa.load(prog)
    report = mod.run_bundled_tests()
    assert report.ok, str(report)
    for inputs in (example, _fresh(example)):
        (got,) = mod(*inputs)
        with torch.no_grad():
            want = model(*inputs)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL)


def test_op_set_and_runtime_kernels_agree() -> None:
    """Every op the exporter can emit has a CPU kernel in the runtime, and vice versa."""
    from openaccel.opset import OPS
    from openaccel.runtime.host import kernel_ops

    assert set(kernel_ops()) == set(OPS)
