"""The model families on the emulated boards: the same .oab passes its bundled tests under
qemu-aarch64, qemu-armv7 and qemu-riscv64, and oa.load(..., target=...) matches PyTorch eager
on a fresh input. Inputs are reduced (64x64 images, 32 tokens) to keep emulation quick."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import openaccel as oa
from openaccel import zoo

from helpers import CACHE, QEMU_TARGETS, check_on_boards, runner

pytestmark = [pytest.mark.slow, pytest.mark.qemu]
ATOL = RTOL = 1e-4


def _export_small(name: str) -> tuple[Path, torch.nn.Module, tuple[torch.Tensor, ...]]:
    model, example = zoo.build(name, small=True)
    path = CACHE / "models" / f"{name}_small.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    oa.export(model, example, tolerance=(ATOL, RTOL)).save(path)
    return path, model, example


@pytest.mark.parametrize("name", zoo.NAMES)
def test_model_on_emulated_boards(name: str) -> None:
    if not QEMU_TARGETS:
        pytest.skip("OA_QEMU_TARGETS is empty")
    path, model, example = _export_small(name)
    check_on_boards(path, name)
    g = torch.Generator().manual_seed(7)
    fresh = tuple(torch.randn(x.shape, generator=g) if x.is_floating_point()
                  else torch.randint(0, 512, x.shape, generator=g, dtype=x.dtype) for x in example)
    with torch.no_grad():
        want = model(*fresh)
    for target in QEMU_TARGETS:
        (got,) = oa.load(path, target=target)(*fresh)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL, msg=lambda m, t=target: f"{name} on {t}: {m}")


@pytest.mark.parametrize("vlen", [128, 512])
def test_model_on_the_rvv_board(vlen: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """qemu-riscv64-v (rv64gcv built by clang) at two vector lengths: a file exported for it (it
    requires `v`) passes its bundled tests and matches eager on a fresh input."""
    monkeypatch.setenv("OA_RVV_VLEN", str(vlen))
    model, example = zoo.build("mlp", small=True)
    path = CACHE / "models" / "mlp_small_rvv.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    prog = oa.export(model, example, target="qemu-riscv64-v", tolerance=(ATOL, RTOL))
    assert prog.required_features == ["v"]
    prog.save(path)
    check_on_boards(path, "mlp", ["qemu-riscv64-v"])
    (dev,) = oa.devices("qemu-riscv64-v")
    assert dev["queries"]["cpu.v"] == 1 and dev["queries"]["cpu.vlen"] == vlen, dev["queries"]
    g = torch.Generator().manual_seed(7)
    fresh = tuple(torch.randn(x.shape, generator=g) for x in example)
    with torch.no_grad():
        want = model(*fresh)
    (got,) = oa.load(path, target="qemu-riscv64-v")(*fresh)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL, msg=lambda m: f"mlp on qemu-riscv64-v vlen {vlen}: {m}")
    assert _rvv_kernels(path) == {("linear", "rvv"): 3}


def _rvv_kernels(path: Path) -> dict[tuple[str, str], int]:
    """(op, kernel) -> instruction count, from oa_run --profile on qemu-riscv64-v"""
    res = runner("qemu-riscv64-v").run([str(path), "--bench", "1", "--warmup", "0", "--profile"])
    runner("qemu-riscv64-v").check(res, f"profiling {path.name}")
    kernels: dict[tuple[str, str], int] = {}
    for e in res.of("profile_instruction"):
        kernels[(e["op"], e["kernel"])] = kernels.get((e["op"], e["kernel"]), 0) + 1
    return kernels


# the ops of each model that must run an RVV kernel (the rest: shape ops with no optimized kernel,
# and mobilenet's 2x2 global mean, which every ISA leaves to the reference kernel)
RVV_OPS = {
    "mobilenet_v2": {"mbconv_nhwc", "conv2d_nhwc", "linear", "add"},
    "resnet18": {"conv2d", "conv2d_winograd", "linear", "max_pool2d", "mean", "add", "relu"},
    "gpt": {"linear", "gelu", "sdpa", "layer_norm", "add"},
}


@pytest.mark.parametrize("name", sorted(RVV_OPS))
def test_zoo_on_the_rvv_board(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """the other zoo models exported for qemu-riscv64-v: their hot ops run the RVV kernels (the
    profile names the variant), they pass their bundled tests and match eager, and the outputs are
    bit-identical at VLEN 128, 256 and 512 (the kernels' vl does not depend on VLEN)"""
    model, example = zoo.build(name, small=True)
    path = CACHE / "models" / f"{name}_small_rvv.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    oa.export(model, example, target="qemu-riscv64-v", tolerance=(ATOL, RTOL)).save(path)
    monkeypatch.setenv("OA_RVV_VLEN", "256")
    check_on_boards(path, name, ["qemu-riscv64-v"])
    kernels = _rvv_kernels(path)
    ran = {op for (op, k) in kernels if k == "rvv"}
    assert ran >= RVV_OPS[name], f"{name}: {kernels}"
    assert not {op for (op, k) in kernels if k == "portable"}, f"{name}: {kernels}"
    g = torch.Generator().manual_seed(7)
    fresh = tuple(torch.randn(x.shape, generator=g) if x.is_floating_point()
                  else torch.randint(0, 512, x.shape, generator=g, dtype=x.dtype) for x in example)
    with torch.no_grad():
        want = model(*fresh)
    outs = {}
    for vlen in (128, 256, 512):
        monkeypatch.setenv("OA_RVV_VLEN", str(vlen))
        (outs[vlen],) = oa.load(path, target="qemu-riscv64-v")(*fresh)
    torch.testing.assert_close(outs[256], want, atol=ATOL, rtol=RTOL, msg=lambda m: f"{name} on qemu-riscv64-v: {m}")
    for vlen in (128, 512):
        assert torch.equal(outs[vlen], outs[256]), f"{name}: VLEN {vlen} differs from VLEN 256"
