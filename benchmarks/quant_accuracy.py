"""openaccel int8 against PyTorch's quantized reference (the convert_pt2e graph in eager).

Quantizes the zoo models with PT2E (XNNPACKQuantizer, per-channel, 4 seeded calibration inputs,
as tests/test_quant_zoo.py does), exports them with oa.export, runs them on the host and prints
per model the SQNR, the share of outputs within 1 LSB of the output's scale, the exact share and
the largest difference in LSB (docs/quantization.md, "Accuracy", has the figures), against two
references: the graph in float32 eager (what PyTorch prints; its rounding is not a defined answer)
and the same graph in float64 (oa.quantize.reference_outputs: the defined answer). A third line,
float32 eager against float64, is the float32 reference's own noise.

    python benchmarks/quant_accuracy.py                      # the four models, full size
    python benchmarks/quant_accuracy.py --small --inputs 4   # the test's sizes
    python benchmarks/quant_accuracy.py --gpt-layers 0,1,2,4 # how GPT's differences grow with depth
    python benchmarks/quant_accuracy.py --models resnet18 --per-layer   # every int8 activation
    python benchmarks/quant_accuracy.py --models gpt --per-layer --reference float32   # against eager

--per-layer exports with int8_outputs=True (every int8 activation is also a method output) and
compares each with the int8 tensor of the matching quantize node of the convert_pt2e graph
(recorded while it runs in float64, or float32 eager with --reference float32), in instruction
order: SQNR of the integers around their zero point, the shares within 1 and exact, the largest
difference. "local exact" is the share of openaccel's values equal to the float64 quantize of
openaccel's own inputs to that layer (oa.quantize.local_int8_differences): the kernel's own
disagreement, without the differences it inherits from the layers before it.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import numpy as np
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.quantize import (
    LocalDiff,
    Precision,
    local_int8_differences,
    reference_int8_activations,
    reference_name,
    reference_outputs,
)
from openaccel.runtime.host import HostSession


def _input(ex: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    if ex.dtype == torch.int64:
        return torch.randint(0, 512, ex.shape, generator=g)
    return torch.randn(ex.shape, generator=g)


def quantized(model: torch.nn.Module, ex: tuple[torch.Tensor, ...], calib: int = 4) -> Any:
    """The convert_pt2e module of `model` (per-channel XNNPACKQuantizer, seeded calibration)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gm = torch.export.export(model, ex).module()
    pm = prepare_pt2e(gm, XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
    g = torch.Generator().manual_seed(1)
    for _ in range(calib):
        pm(_input(ex[0], g))
    return convert_pt2e(pm)


def compare(got: np.ndarray, want: np.ndarray, scale: float) -> dict[str, float]:
    """SQNR (dB), within-1-LSB and exact shares (%), max difference (LSB) of `got` against `want`."""
    lsb = np.abs(got - want) / scale
    noise = float(((got - want) ** 2).sum())
    return {"sqnr_db": 10 * float(np.log10((want**2).sum() / max(noise, 1e-30))),
            "within_1_lsb": 100 * float((lsb <= 1 + 1e-3).mean()), "exact": 100 * float((lsb < 1e-3).mean()),
            "max_lsb": float(lsb.max())}


def measure(cm: Any, ex: tuple[torch.Tensor, ...], inputs: int) -> dict[str, dict[str, float]]:
    """openaccel against the float32 eager and the float64 reference, and float32 eager against
    float64 (`compare`'s figures each), over `inputs` inputs."""
    ep = torch.export.export(cm, ex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = oa.export(ep, ex)
    scale = dict([i for i in prog.instructions if i.op == "dequantize"][-1].args)["scale"]
    assert isinstance(scale, float), scale
    g = torch.Generator().manual_seed(123)
    xs = [_input(ex[0], g) for _ in range(inputs)]

    def reference(precision: Precision) -> np.ndarray:
        return np.concatenate([reference_outputs(ep, [x], precision)[0].ravel() for x in xs]).astype(np.float64)

    w32, w64 = reference("float32"), reference("float64")
    s = HostSession(prog.buffer, threads=1)
    got = np.concatenate([s.run([x.numpy()])[0].ravel() for x in xs]).astype(np.float64)
    return {"openaccel vs float32 eager": compare(got, w32, scale), "openaccel vs float64": compare(got, w64, scale),
            "float32 eager vs float64": compare(w32, w64, scale)}


def per_layer(name: str, small: bool, inputs: int, reference: Precision = "float64") -> None:
    """One line per int8 activation: openaccel's against the quantized reference's (float64 or
    float32 eager), and its local exact share (`local_int8_differences`)."""
    model, ex = zoo.build(name, small=small)
    cm = quantized(model, ex)
    ep = torch.export.export(cm, ex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = oa.export(ep, ex, int8_outputs=True)
    g = torch.Generator().manual_seed(123)
    xs = [_input(ex[0], g) for _ in range(inputs)]
    ref = [reference_int8_activations(ep, [x], reference) for x in xs]
    s = HostSession(prog.buffer, threads=1)
    ours = [dict(zip([t.name for t in prog.outputs], s.run([x.numpy()]))) for x in xs]
    local: dict[str, LocalDiff] = {}
    for x, o in zip(xs, ours):
        for key, d in local_int8_differences(ep, [x], {reference_name(t): v for t, v in o.items()}).items():
            local[key] = local[key] + d if key in local else d
    zp = {q.tensor: q.zero_point[0] for q in prog.quant_params()}
    what = "float64" if reference == "float64" else "float32 eager"
    print(f"{name}{' (small)' if small else ''}: {inputs} input(s); int8 activations in instruction order, "
          f"against the {what} reference; local: against the float64 quantize of openaccel's own inputs")
    for ins in prog.instructions:
        for t in ins.outputs:
            key = reference_name(t)  # the convert_pt2e quantize node it comes from
            if t not in ours[0] or key not in ref[0]:
                continue
            a = np.concatenate([o[t].astype(np.int64).ravel() for o in ours])
            b = np.concatenate([r[key].astype(np.int64).ravel() for r in ref])
            d = np.abs(a - b)
            centred = b - zp.get(t, 0)
            noise = float((d.astype(np.float64) ** 2).sum())
            sq = 10 * np.log10(float((centred.astype(np.float64) ** 2).sum()) / max(noise, 1e-30))
            within, exact = 100 * float((d <= 1).mean()), 100 * float((d == 0).mean())
            own = f"{100 * local[key].exact:7.3f}%" if key in local else "      -"
            print(f"  {ins.index:4d} {ins.op:12s} {key:24s} SQNR {min(sq, 999.0):6.1f} dB  within 1 {within:6.2f}%  "
                  f"exact {exact:6.2f}%  max {int(d.max())}  local exact {own}", flush=True)


def _lines(label: str, results: dict[str, dict[str, float]]) -> str:
    """`measure`'s three comparisons, one line each: openaccel against the two references, then
    the float32 reference against the float64 one (its own noise)."""
    return "\n".join(f"{label:20s} {k:26s}  SQNR {r['sqnr_db']:6.1f} dB  within 1 LSB {r['within_1_lsb']:6.2f}%  "
                     f"exact {r['exact']:6.2f}%  max {r['max_lsb']:.0f} LSB" for k, r in results.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(zoo.NAMES), help="comma-separated zoo models")
    ap.add_argument("--small", action="store_true", help="the test sizes (64x64 images, 32 tokens)")
    ap.add_argument("--inputs", type=int, default=2, help="random inputs compared (default 2)")
    ap.add_argument("--gpt-layers", default="", help="comma-separated GPT depths to measure instead of --models")
    ap.add_argument("--per-layer", action="store_true", help="every int8 activation against the reference's")
    ap.add_argument("--reference", choices=("float64", "float32"), default="float64",
                    help="--per-layer: the graph in float64 (default, the defined answer) or float32 eager")
    a = ap.parse_args(argv)
    if a.per_layer:
        for name in a.models.split(","):
            per_layer(name, a.small, a.inputs, a.reference)
        return 0
    if a.gpt_layers:
        for n in (int(v) for v in a.gpt_layers.split(",")):
            torch.manual_seed(0)
            idx: tuple[torch.Tensor, ...] = (torch.randint(0, 512, (1, 32 if a.small else 128)),)
            print(_lines(f"gpt, {n} layer(s)", measure(quantized(zoo.GPT(layers=n).eval(), idx), idx, a.inputs)),
                  flush=True)
        return 0
    for name in a.models.split(","):
        model, ex = zoo.build(name, small=a.small)
        print(_lines(f"{name}{' (small)' if a.small else ''}", measure(quantized(model, ex), ex, a.inputs)),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
