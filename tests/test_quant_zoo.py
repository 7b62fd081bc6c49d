"""The four benchmark models of openaccel.zoo (small variants: 64x64 images, 32 tokens), quantized
with PT2E (XNNPACKQuantizer, per-channel, calibrated on a few random inputs), exported through
oa.export: every conv / linear is an int8 instruction (what stays float32 is only what the
quantizer itself leaves in float: GPT's layer norms, GELUs, attention and the split / permutes
around it), the result matches the convert_pt2e graph evaluated in float64 (SQNR, shares within 1
LSB and exact: printed, with the figures against float32 eager, which depend on the CPU), and the
bytes are the same with 1 and 2 threads, on the emulated boards of OA_QEMU_TARGETS and (int8-only
models) on the reference kernels alone."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.errors import ExportWarning
from openaccel.runtime.host import HostSession

from helpers import CACHE, QEMU_TARGETS

pytestmark = [pytest.mark.xdist_group("quant_zoo"), pytest.mark.slow]

FLOAT_GEMM = {"conv2d", "conv2d_nhwc", "conv2d_winograd", "mbconv_nhwc", "conv_transpose2d", "linear",
              "linear_packed", "matmul", "addmm"}
# what XNNPACKQuantizer leaves in float (it annotates none of these): they run in float32
# between the int8 instructions' dequantize / quantize
QUANTIZER_FLOAT = {"gpt": {"layer_norm", "gelu", "sdpa", "split", "permute"}}
# against the PT2E reference evaluated in float64 (issue 15's bar: SQNR >= 45 dB, >= 99.5% within 1
# LSB). The float32 eager run of the same graph is no anchor for it: it disagrees with its own
# float64 evaluation at 38-40 dB on the CNNs, by CPU (docs/quantization.md, "Accuracy"). Since
# format 1.4 an input set is bit-identical to the float64 evaluation unless one of its outputs lands
# within about 1e-7 of a step of a rounding boundary (the float32 bias's precision), which the
# layers after it carry on (34-40 dB for that set): about one set in 20 per model over 8
# calibrations of each CNN and GPT here, and the calibration, in float32, moves with the CPU. So
# the bar holds per input set on at least 3 of the 4, and every set stays close.
BAR = (45.0, 0.995)
FLOOR = (30.0, 0.97)


def _input(ex: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    if ex.dtype == torch.int64:
        return torch.randint(0, 512, ex.shape, generator=g)
    return torch.randn(ex.shape, generator=g)


def quantize_zoo(name: str, calib: int = 4) -> tuple[Any, torch.export.ExportedProgram, tuple[torch.Tensor, ...]]:
    """(convert_pt2e module, its torch.export, example inputs) of zoo model `name` (small)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model, ex = zoo.build(name, small=True)
    gm = torch.export.export(model, ex).module()
    pm = prepare_pt2e(gm, XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
    g = torch.Generator().manual_seed(1)
    for _ in range(calib):
        pm(_input(ex[0], g))
    cm = convert_pt2e(pm)
    return cm, torch.export.export(cm, ex), ex


@pytest.fixture(scope="module", params=zoo.NAMES)
def exported(request: pytest.FixtureRequest) -> tuple[str, Any, oa.Program, list[str], tuple[torch.Tensor, ...]]:
    name = request.param
    _, ep, ex = quantize_zoo(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = oa.export(ep, ex)
    notes = [str(w.message) for w in caught if issubclass(w.category, ExportWarning)]
    return name, ep, prog, notes, ex


def test_every_conv_and_linear_is_int8(exported: tuple[str, Any, oa.Program, list[str], Any]) -> None:
    name, _, prog, notes, _ = exported
    assert not FLOAT_GEMM & set(prog.ops), (name, prog.ops)
    assert "linear_q8" in prog.ops, prog.ops
    left = {p.op for p in prog.float32_in_quantized()}
    allowed = QUANTIZER_FLOAT.get(name, set())
    assert left <= allowed, (name, left - allowed)
    if not allowed:
        assert not notes, notes
        assert [i.op for i in prog.instructions].count("quantize") == 1   # the image / features only


def _figures(got: np.ndarray, want: np.ndarray, scale: float) -> tuple[float, float, float, float]:
    """SQNR (dB), shares within 1 LSB and exact, largest difference (LSB)"""
    sqnr = 10 * np.log10((want**2).sum() / max(((got - want) ** 2).sum(), 1e-30))
    lsb = np.abs(got - want) / scale
    return float(sqnr), float((lsb <= 1 + 1e-3).mean()), float((lsb < 1e-3).mean()), float(lsb.max())


def test_matches_the_pt2e_reference(exported: tuple[str, Any, oa.Program, list[str], Any]) -> None:
    from openaccel.quantize import reference_outputs

    name, ep, prog, _, ex = exported
    s = HostSession(prog.buffer, threads=1)
    g = torch.Generator().manual_seed(123)
    xs = [_input(ex[0], g) for _ in range(4)]
    got = np.concatenate([s.run([x.numpy()])[0].ravel() for x in xs]).astype(np.float64)
    scale = float(dict([i for i in prog.instructions if i.op == "dequantize"][-1].args)["scale"])
    wants = {}
    for precision in ("float64", "float32"):
        wants[precision] = [reference_outputs(ep, [x], precision)[0].ravel().astype(np.float64) for x in xs]
        f = _figures(got, np.concatenate(wants[precision]), scale)
        print(f"int8 {name} (small) vs the convert_pt2e graph in {precision}: SQNR {f[0]:.1f} dB, "
              f"{100 * f[1]:.2f}% within 1 LSB, {100 * f[2]:.2f}% exact, max {f[3]:.1f} LSB")
    n = got.size // len(xs)
    per_set = [_figures(got[i * n:(i + 1) * n], w, scale) for i, w in enumerate(wants["float64"])]
    print(f"  per input set vs float64: {[(round(f[0], 1), round(100 * f[1], 2)) for f in per_set]}")
    assert sum(f[0] >= BAR[0] and f[1] >= BAR[1] for f in per_set) >= 3, (name, per_set)
    assert all(f[0] >= FLOOR[0] and f[1] >= FLOOR[1] for f in per_set), (name, per_set)


def test_bit_identical_across_threads_and_boards(exported: tuple[str, Any, oa.Program, list[str], Any]) -> None:
    name, _, prog, _, ex = exported
    g = torch.Generator().manual_seed(7)
    xs = [_input(ex[0], g) for _ in range(2)]
    one = [HostSession(prog.buffer, threads=1).run([x.numpy()])[0] for x in xs]
    two = [HostSession(prog.buffer, threads=2).run([x.numpy()])[0] for x in xs]
    ref = [HostSession(prog.buffer, reference_only=True).run([x.numpy()])[0] for x in xs]
    scale = float(dict([i for i in prog.instructions if i.op == "dequantize"][-1].args)["scale"])
    for a, b, c in zip(one, two, ref):
        assert a.tobytes() == b.tobytes(), name
        if name in QUANTIZER_FLOAT:
            # the float32 ops the quantizer leaves (layer norm, gelu, sdpa) have optimized kernels
            # that round differently from the reference ones, and a quantize after them may then
            # land one step away, which the layers after it carry on (a step or two at the output,
            # on a few inputs in ten); the int8 ops themselves are exact either way (the int8-only
            # models below, tests/ops/test_quant_kernels.py)
            steps = np.abs(a.astype(np.float64) - c) / scale
            assert steps.max() <= 2 + 1e-4 and (steps < 1e-4).mean() >= 0.8, (name, steps.max())
        else:
            assert a.tobytes() == c.tobytes(), name
    path = CACHE / "models" / f"quant_{name}_small.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    prog.save(path)
    for target in QEMU_TARGETS:
        (got,) = oa.load(path, target=target)(xs[0])
        assert got.numpy().tobytes() == one[0].tobytes(), f"{name}: {target} differs from the host"
