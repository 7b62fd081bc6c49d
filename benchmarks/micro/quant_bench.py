"""int8 conv2d_q8 / linear_q8 (reference and optimized kernels) against the float32 optimized
conv2d / linear kernels on ResNet-18-like layers, one instruction per program, one thread by
default. Prints ms (median of --runs) and GOP/s (2 ops per multiply-add).

    .venv/bin/python benchmarks/micro/quant_bench.py [--threads 1] [--runs 20] [--no-ref] [--json]
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
    shift = torch.full((cout,), 38 + int(np.log2(max(k, 1)) / 2), dtype=torch.int32)
    return bias, mult, shift


def cases(ref: bool) -> list[tuple[str, str, bytes, list[np.ndarray], int]]:
    """(layer, kernel, program, inputs, flops); kernel 'fp32' / 'int8' / 'int8 ref'"""
    quant.register_ops()
    g = torch.Generator().manual_seed(0)
    out = []
    for name, (c, h, w), o, k, s, p, groups in CONVS:
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
    for name, m, k, n in LINEARS:
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
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="oa-q8bench-") as tmp:
        clock = time.perf_counter if a.wall or a.threads != 1 else time.thread_time
        for i, (layer, kernel, buf, inputs, flops) in enumerate(cases(not a.no_ref)):
            if a.only not in layer:
                continue
            path = Path(tmp) / f"p{i}.oab"
            path.write_bytes(buf)
            fn = execute_only(path, inputs, a.threads, kernel == "int8 ref", layer)
            ms = _time(fn, max(2, a.runs // 10) if kernel == "int8 ref" else a.runs, clock)
            rows.append({"layer": layer, "kernel": kernel, "ms": round(ms, 4), "gops": round(flops / ms / 1e6, 2)})
            if not a.json:
                print(f"{layer:30s} {kernel:9s} {ms:9.3f} ms {flops / ms / 1e6:8.1f} GOP/s", flush=True)
    if a.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
