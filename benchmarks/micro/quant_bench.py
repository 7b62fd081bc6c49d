"""int8 conv2d_q8 / linear_q8 (reference and optimized kernels) against the float32 optimized
conv2d / linear kernels on ResNet-18-like layers (and MobileNetV2's with --mobilenet), one
instruction per program, one thread by default. Prints ms (median of --runs) and GOP/s (2 ops per
multiply-add).

    .venv/bin/python benchmarks/micro/quant_bench.py [--threads 1] [--runs 20] [--no-ref] [--json]
        [--mobilenet] [--isas "avx512,vnni;avx512;avx2,vnni;avx2"]

--isas: the int8 kernels once per ISA set (HostSession(isas=...); "vnni" is the option that lets
avx512 / avx2 use their VNNI tiles), in the same run, for a per-layer comparison.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import execute_only

from openaccel.exporter import quant
from openaccel.exporter.memory_plan import plan_memory
from openaccel.exporter.serialize import serialize
from openaccel.ir import Graph, Instr, Value
from openaccel.opset import encode_args

# name, (C_in, H, W), C_out, k, stride, pad, groups
CONVS = [
    ("conv 3x3 64->64 56x56", (64, 56, 56), 64, 3, 1, 1, 1),
    ("conv 3x3 128->128 28x28", (128, 28, 28), 128, 3, 1, 1, 1),
    ("conv 3x3/2 128->256 28x28", (128, 28, 28), 256, 3, 2, 1, 1),
    ("conv 3x3 512->512 7x7", (512, 7, 7), 512, 3, 1, 1, 1),
    ("conv 1x1 256->64 56x56", (256, 56, 56), 64, 1, 1, 0, 1),
    ("conv 1x1/2 64->128 56x56", (64, 56, 56), 128, 1, 2, 0, 1),
    ("conv 7x7/2 3->64 224x224", (3, 224, 224), 64, 7, 2, 3, 1),
    ("dw 3x3 96 56x56", (96, 56, 56), 96, 3, 1, 1, 96),
]
# MobileNetV2 (224x224): the stem, the expansion / projection 1x1 convs and the depthwise 3x3s
MOBILENET = [
    ("conv 3x3/2 3->32 224x224", (3, 224, 224), 32, 3, 2, 1, 1),
    ("dw 3x3 32 112x112", (32, 112, 112), 32, 3, 1, 1, 32),
    ("conv 1x1 32->16 112x112", (32, 112, 112), 16, 1, 1, 0, 1),
    ("conv 1x1 16->96 112x112", (16, 112, 112), 96, 1, 1, 0, 1),
    ("dw 3x3/2 96 112x112", (96, 112, 112), 96, 3, 2, 1, 96),
    ("conv 1x1 96->24 56x56", (96, 56, 56), 24, 1, 1, 0, 1),
    ("conv 1x1 24->144 56x56", (24, 56, 56), 144, 1, 1, 0, 1),
    ("dw 3x3 144 56x56", (144, 56, 56), 144, 3, 1, 1, 144),
    ("conv 1x1 144->24 56x56", (144, 56, 56), 24, 1, 1, 0, 1),
    ("dw 3x3/2 144 56x56", (144, 56, 56), 144, 3, 2, 1, 144),
    ("conv 1x1 192->32 28x28", (192, 28, 28), 32, 1, 1, 0, 1),
    ("dw 3x3 192 28x28", (192, 28, 28), 192, 3, 1, 1, 192),
    ("conv 1x1 64->384 14x14", (64, 14, 14), 384, 1, 1, 0, 1),
    ("dw 3x3 384 14x14", (384, 14, 14), 384, 3, 1, 1, 384),
    ("conv 1x1 384->96 14x14", (384, 14, 14), 96, 1, 1, 0, 1),
    ("dw 3x3 960 7x7", (960, 7, 7), 960, 3, 1, 1, 960),
    ("conv 1x1 960->160 7x7", (960, 7, 7), 160, 1, 1, 0, 1),
    ("conv 1x1 320->1280 7x7", (320, 7, 7), 1280, 1, 1, 0, 1),
]
RESNET_EXTRA = [("conv 3x3 256->256 14x14", (256, 14, 14), 256, 3, 1, 1, 1)]
# name, rows M, K, N
LINEARS = [("linear 1x512->1000", 1, 512, 1000), ("linear 64x512->512", 64, 512, 512)]


def _program(op: str, ins: list[tuple[str, torch.Tensor]], out_shape: tuple[int, ...], out_dtype: torch.dtype,
             ints: list[int], floats: list[float]) -> bytes:
    vals: list[Value | None] = []
    inputs: list[Value] = []
    for j, (kind, t) in enumerate(ins):
        v = Value(name=f"in{j}", dtype=t.dtype, shape=tuple(t.shape), data=t.clone() if kind == "const" else None)
        if kind == "in":
            inputs.append(v)
        vals.append(v)
    out = Value(name="out", dtype=out_dtype, shape=out_shape)
    g = Graph(name="forward", inputs=inputs, outputs=[out])
    g.instrs = [Instr(op=op, inputs=vals, outputs=[out], ints=ints, floats=floats)]
    return serialize(g, plan_memory(g), [], target="host", required_features=[])


def _time(fn: Callable[[], None], runs: int, clock: Callable[[], float]) -> float:
    fn()
    ts = []
    for _ in range(runs):
        t0 = clock()
        fn()
        ts.append(clock() - t0)
    return statistics.median(ts) * 1e3


def _q8_args(cout: int, k: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    bias = torch.randint(-5000, 5000, (cout,), generator=g, dtype=torch.int32)
    mult = torch.randint(1 << 30, (1 << 31) - 1, (cout,), generator=g, dtype=torch.int64).to(torch.int32)
    shift = torch.full((cout,), 38 + int(np.log2(max(k, 1)) / 2), dtype=torch.int8)
    return bias, mult, shift


def cases(ref: bool, mobilenet: bool = False) -> list[tuple[str, str, bytes, list[np.ndarray], int]]:
    """(layer, kernel, program, inputs, flops); kernel 'fp32' / 'int8' / 'int8 ref'"""
    quant.register_ops()
    g = torch.Generator().manual_seed(0)
    out = []
    for name, (c, h, w), o, k, s, p, groups in (MOBILENET if mobilenet else CONVS[:4] + RESNET_EXTRA + CONVS[4:]):
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        flops = 2 * o * oh * ow * (c // groups) * k * k
        xf, wf = torch.randn(1, c, h, w, generator=g), torch.randn(o, c // groups, k, k, generator=g)
        bf = torch.randn(o, generator=g)
        fp = _program("conv2d", [("in", xf), ("const", wf), ("const", bf)], (1, o, oh, ow), torch.float32,
                      [s, s, p, p, 1, 1, groups, 1], [])
        out.append((name, "fp32", fp, [xf.numpy()], flops))
        xq = torch.randint(-128, 128, (1, c, h, w), generator=g, dtype=torch.int8)
        wq = torch.randint(-127, 128, (o, c // groups, k, k), generator=g, dtype=torch.int8)
        bias, mult, shift = _q8_args(o, c // groups * k * k, g)
        ints, floats = encode_args("conv2d_q8", stride_h=s, stride_w=s, pad_h=p, pad_w=p, dilation_h=1, dilation_w=1,
                                   groups=groups, input_zp=3, output_zp=-2, act_min=-128, act_max=127)
        q8 = _program("conv2d_q8", [("in", xq), ("const", wq), ("const", bias), ("const", mult), ("const", shift)],
                      (1, o, oh, ow), torch.int8, ints, floats)
        out.append((name, "int8", q8, [xq.numpy()], flops))
        if ref:
            out.append((name, "int8 ref", q8, [xq.numpy()], flops))
    for name, m, k, n in [] if mobilenet else LINEARS:
        flops = 2 * m * k * n
        xf, wf, bf = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g), torch.randn(n, generator=g)
        fp = _program("linear", [("in", xf), ("const", wf), ("const", bf)], (m, n), torch.float32, [0], [])
        out.append((name, "fp32", fp, [xf.numpy()], flops))
        xq = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8)
        wq = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
        bias, mult, shift = _q8_args(n, k, g)
        ints, floats = encode_args("linear_q8", input_zp=3, output_zp=-2, act_min=-128, act_max=127)
        q8 = _program("linear_q8", [("in", xq), ("const", wq), ("const", bias), ("const", mult), ("const", shift)],
                      (m, n), torch.int8, ints, floats)
        out.append((name, "int8", q8, [xq.numpy()], flops))
        if ref:
            out.append((name, "int8 ref", q8, [xq.numpy()], flops))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--no-ref", action="store_true", help="skip the (slow) int8 reference kernels")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--wall", action="store_true",
                    help="wall-clock time (default with --threads 1: the thread's CPU time, which other "
                         "processes on a shared machine do not inflate)")
    ap.add_argument("--only", default="", help="layers whose name contains this text")
    ap.add_argument("--mobilenet", action="store_true", help="MobileNetV2's layers instead of ResNet-18's")
    ap.add_argument("--isas", default="", help="int8 once per ISA set, ';'-separated (e.g. 'avx512,vnni;avx2')")
    a = ap.parse_args()
    isa_sets: list[list[str] | None] = [s.split(",") for s in a.isas.split(";")] if a.isas else [None]
    rows = []
    with tempfile.TemporaryDirectory(prefix="oa-q8bench-") as tmp:
        clock = time.perf_counter if a.wall or a.threads != 1 else time.thread_time
        for i, (layer, kernel, buf, inputs, flops) in enumerate(cases(not a.no_ref, a.mobilenet)):
            if a.only not in layer:
                continue
            path = Path(tmp) / f"p{i}.oab"
            path.write_bytes(buf)
            for isas in isa_sets if kernel == "int8" else [None]:
                label = f"int8 {'+'.join(isas)}" if isas else kernel
                fn = execute_only(path, inputs, a.threads, kernel == "int8 ref", layer, isas)
                ms = _time(fn, max(2, a.runs // 10) if kernel == "int8 ref" else a.runs, clock)
                rows.append({"layer": layer, "kernel": label, "ms": round(ms, 4), "gops": round(flops / ms / 1e6, 2)})
                if not a.json:
                    print(f"{layer:30s} {label:18s} {ms:9.3f} ms {flops / ms / 1e6:8.1f} GOP/s", flush=True)
    if a.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
