"""PyTorch's quantized reference in float64 (oa.quantize.reference_outputs, reference_int8_activations,
local_int8_differences): the convert_pt2e graph's float32 eager rounding is not a defined answer,
so openaccel is compared with the same graph in float64. On a small model the two agree; float64
mode gives float64 outputs; the teacher-forced ("local") comparison is exact on the reference's own
activations, finds a planted difference where it is, and is close to exact on openaccel's run;
quantized ops without a float64 definition (dynamic choose_qparams) are an error naming the op."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

import openaccel as oa
from openaccel.quantize import (
    LocalDiff,
    QuantizedReferenceError,
    local_int8_differences,
    reference_int8_activations,
    reference_name,
    reference_outputs,
)
from openaccel.runtime.host import HostSession


class Small(torch.nn.Module):
    """conv -> relu -> conv + residual -> linear: a few int8 activations of each kind."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y) + y)
        return self.fc(y.flatten(1))


@pytest.fixture(scope="module")
def quantized() -> tuple[torch.export.ExportedProgram, tuple[torch.Tensor, ...]]:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    ex = (torch.randn(1, 3, 8, 8),)
    gm = torch.export.export(Small().eval(), ex).module()
    pm = prepare_pt2e(gm, XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
    g = torch.Generator().manual_seed(1)
    for _ in range(8):
        pm(torch.randn(1, 3, 8, 8, generator=g))
    return torch.export.export(convert_pt2e(pm), ex), ex


def _input(seed: int = 123) -> torch.Tensor:
    return torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(seed))


def _output_scale(ep: torch.export.ExportedProgram) -> float:
    last = [n for n in ep.graph.nodes if n.op == "call_function" and "dequantize_per_tensor" in str(n.target)][-1]
    return float(last.args[1])


def test_float64_agrees_with_float32_on_a_small_model(quantized: tuple[Any, Any]) -> None:
    """Small sums in float32 round the same as in float64 almost everywhere; the float32 mode is eager's."""
    ep, _ = quantized
    x = _input()
    (o32,) = reference_outputs(ep, [x], "float32")
    (o64,) = reference_outputs(ep, [x], "float64")
    assert o32.dtype == np.float32 and o64.dtype == np.float64
    with torch.no_grad():
        assert np.array_equal(o32, ep.module()(x).numpy())
    assert np.abs(o32 - o64).max() <= _output_scale(ep) * (1 + 1e-3)
    a32 = reference_int8_activations(ep, [x])
    a64 = reference_int8_activations(ep, [x], precision="float64")
    assert len(a32) >= 5 and sorted(a32) == sorted(a64)
    for k in a32:
        assert a64[k].dtype == np.int8
        d = np.abs(a32[k].astype(np.int64) - a64[k].astype(np.int64))
        assert d.max() <= 1 and (d == 0).mean() >= 0.99, (k, int(d.max()), float((d == 0).mean()))


def test_float64_dequantize_is_exact(quantized: tuple[Any, Any]) -> None:
    """The float64 output is (q - zp) * scale of the float64 graph's last int8 activation, exactly."""
    ep, _ = quantized
    x = _input(5)
    (o64,) = reference_outputs(ep, [x])   # float64 is the default
    acts = reference_int8_activations(ep, [x], precision="float64")
    last = [n for n in ep.graph.nodes if n.op == "call_function" and "dequantize_per_tensor" in str(n.target)][-1]
    q = acts[last.args[0].name].astype(np.float64)
    assert np.array_equal(o64, (q - float(last.args[2])) * float(last.args[1]))


def test_local_is_exact_on_the_references_own_activations(quantized: tuple[Any, Any]) -> None:
    ep, _ = quantized
    x = _input()
    acts = reference_int8_activations(ep, [x], precision="float64")
    local = local_int8_differences(ep, [x], acts)
    assert sorted(local) == sorted(acts)
    for k, d in local.items():
        assert d == LocalDiff(acts[k].size, 0, 0) and d.exact == 1.0, (k, d)


def test_local_finds_a_planted_difference(quantized: tuple[Any, Any]) -> None:
    """One element of one activation changed by 3: that node shows one differing element, 3 steps
    off; the earlier ones stay exact (the later ones see the change as their input, so are not checked)."""
    ep, _ = quantized
    x = _input()
    acts = reference_int8_activations(ep, [x], precision="float64")
    order = list(acts)          # graph order
    key = order[len(order) // 2]
    planted = {k: v.copy() for k, v in acts.items()}
    flat = planted[key].reshape(-1)
    i = int(np.argmin(flat))    # the smallest value: +3 stays in the int8 range
    flat[i] += 3
    local = local_int8_differences(ep, [x], planted)
    assert local[key] == LocalDiff(acts[key].size, 1, 3), local[key]
    assert local[key].exact == pytest.approx(1 - 1 / acts[key].size)
    for k in order[: order.index(key)]:
        assert local[k].differing == 0, (k, local[k])
    total = sum(local.values(), LocalDiff(0, 0, 0))
    assert total.count == sum(a.size for a in acts.values()) and total.max_diff >= 3
    # teacher forcing: the graph goes on with `ours`, so a whole activation replaced moves the later ones
    forced = dict(acts, **{key: np.full_like(acts[key], 127)})
    later = local_int8_differences(ep, [x], forced)
    assert later[key].differing > 0
    assert any(later[k].differing > 0 for k in order[order.index(key) + 1:]), later


def test_local_on_openaccels_run(quantized: tuple[Any, Any]) -> None:
    """The real use: openaccel's int8 activations (int8_outputs=True), each against the float64
    quantize of its own inputs, are within 1 step and almost all exact."""
    ep, ex = quantized
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = oa.export(ep, ex, int8_outputs=True)
    x = _input()
    outs = HostSession(prog.buffer, threads=1).run([x.numpy()])
    ours = {reference_name(t.name): v for t, v in zip(prog.outputs, outs)}
    local = local_int8_differences(ep, [x], ours)
    acts = reference_int8_activations(ep, [x], precision="float64")
    assert len(local) >= len(acts) - 1, (sorted(local), sorted(acts))
    for k, d in local.items():
        assert d.count == acts[k].size and d.max_diff <= 1 and d.exact >= 0.97, (k, d)


def test_wrong_size_in_ours_is_an_error(quantized: tuple[Any, Any]) -> None:
    ep, _ = quantized
    x = _input()
    acts = reference_int8_activations(ep, [x], precision="float64")
    key = next(iter(acts))
    with pytest.raises(QuantizedReferenceError, match=f"ours\\['{key}'\\] has 3 elements"):
        local_int8_differences(ep, [x], {key: np.zeros(3, np.int8)})


class StaticTensorQParams(torch.nn.Module):
    """quantize_per_tensor.tensor / dequantize_per_tensor.tensor with constant tensor parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor(0.03125))
        self.register_buffer("zp", torch.tensor(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qd = torch.ops.quantized_decomposed
        q = qd.quantize_per_tensor.tensor(x, self.scale, self.zp, -128, 127, torch.int8)
        return qd.dequantize_per_tensor.tensor(q, self.scale, self.zp, -128, 127, torch.int8)


class Dynamic(torch.nn.Module):
    """Dynamic quantization's choose_qparams: its scale is float32 arithmetic at run time."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qd = torch.ops.quantized_decomposed
        s, z = qd.choose_qparams.tensor(x, -128, 127, 1e-5, torch.int8)
        q = qd.quantize_per_tensor.tensor(x, s, z, -128, 127, torch.int8)
        return qd.dequantize_per_tensor.tensor(q, s, z, -128, 127, torch.int8)


def test_tensor_qparams_and_unsupported_ops() -> None:
    import torch.ao.quantization.fx._decomposed  # registers the quantized_decomposed ops

    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(0)) * 2
    # half-way values (k + 0.5) * scale: float64 rounds them to even, as torch.round does
    x[0, :4] = torch.tensor([0.5, 1.5, -2.5, 100.5]) * 0.03125
    ep = torch.export.export(StaticTensorQParams(), (x,))
    (o32,) = reference_outputs(ep, [x], "float32")
    (o64,) = reference_outputs(ep, [x], "float64")
    q = np.clip(np.round(x.double().numpy() / 0.03125) + 3, -128, 127)
    assert list(q[0, :4]) == [3, 5, 1, 103]
    assert np.array_equal(o64, (q - 3) * 0.03125)
    assert np.array_equal(o32.astype(np.float64), o64)   # scale a power of two: float32 is exact too

    ep = torch.export.export(Dynamic(), (x,))
    assert reference_outputs(ep, [x], "float32")[0].shape == (2, 16)
    with pytest.raises(QuantizedReferenceError, match=r"quantized_decomposed\.choose_qparams\.tensor .*no float64"):
        reference_outputs(ep, [x], "float64")
    with pytest.raises(QuantizedReferenceError, match="precision 'float16' is not one of float32, float64"):
        reference_outputs(ep, [x], "float16")  # type: ignore[arg-type]
