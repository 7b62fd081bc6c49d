"""Micro-benchmark of the SIMD elementwise / softmax / norm / pooling / attention kernels
(runtime_c/src/cpu/kernels/opt/simd_kernels.inc) against the reference kernels and PyTorch eager.

Each case is exported to a one-op .oab (shapes from the four benchmark models), loaded in this
process and executed repeatedly through the C API (oa_method_execute, inputs set once), once with
the reference kernels only (reference_only) and once with the optimized variants (on this machine
the AVX2 ones when the CPU has avx2 and fma). PyTorch runs the same op with
torch.set_num_threads(threads). With --portable a second optimized column is the portable C
variants: the same runtime with its optimized kernels restricted to portable C (the CPU device
option disable_isas, HostSession(isas=["portable"])).

Timing: the best of 5 repetitions of enough calls to last 50 ms each (and, with --repeat N, the
best of N such measurements, interleaved). With one thread the clock is the calling thread's CPU
time (time.thread_time), which does not count time the thread was descheduled (the machine is
shared); with more threads the wall clock. "(ref)" in the portable column: no portable variant
for that op (OA_OPT_SIMD(op, OA_ISA_NO) in runtime_c/src/cpu/kernels/opt/), the reference kernel runs.

    PYTHONPATH=sdk python benchmarks/micro/simd.py [--threads 1] [--only gelu,softmax] [--portable]
                                                   [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from common import ConstFn, execute_only

import openaccel as oa

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "bench-micro-simd"
OPT_DIR = ROOT / "runtime_c" / "src" / "cpu" / "kernels" / "opt"


def ops_without_portable() -> set[str]:
    """SIMD-family ops whose optimized kernel has no portable C variant (the reference runs)."""
    return {m.group(1) for p in sorted(OPT_DIR.glob("*.c"))
            for m in re.finditer(r"OA_OPT_SIMD\((\w+), OA_ISA_NO\)", p.read_text())}


@dataclass
class Case:
    op: str
    name: str
    fn: Callable[..., torch.Tensor]
    inputs: tuple[torch.Tensor, ...]
    consts: tuple[torch.Tensor, ...] = ()


def _r(*shape: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(*shape, generator=g) * scale


def cases() -> list[Case]:
    act = (1, 128, 1024)  # GPT MLP hidden activations
    return [
        Case("relu", "relu resnet 64x56x56", F.relu, (_r(1, 64, 56, 56),)),
        Case("hardtanh", "relu6 mv2 96x112x112", F.relu6, (_r(1, 96, 112, 112),)),
        Case("add", "add resnet residual 64x56x56", lambda a, b: a + b, (_r(1, 64, 56, 56), _r(1, 64, 56, 56))),
        Case("add", "add channel bias 32x112x112", lambda a, c: a + c, (_r(1, 32, 112, 112),), (_r(1, 32, 1, 1),)),
        Case("add", "add gpt bias 128x256", lambda a, c: a + c, (_r(1, 128, 256),), (_r(256),)),
        Case("mul", "mul 96x56x56", lambda a, b: a * b, (_r(1, 96, 56, 56), _r(1, 96, 56, 56))),
        Case("sigmoid", "sigmoid 128x1024", torch.sigmoid, (_r(*act, scale=3),)),
        Case("tanh", "tanh 128x1024", torch.tanh, (_r(*act, scale=3),)),
        Case("exp", "exp 128x1024", torch.exp, (_r(*act, scale=3),)),
        Case("erf", "erf 128x1024", torch.erf, (_r(*act, scale=2),)),
        Case("gelu", "gelu tanh gpt 128x1024", lambda x: F.gelu(x, approximate="tanh"), (_r(*act, scale=3),)),
        Case("gelu", "gelu erf 128x1024", F.gelu, (_r(*act, scale=3),)),
        Case("softmax", "softmax attn 4x128x128", lambda x: torch.softmax(x, -1), (_r(1, 4, 128, 128, scale=4),)),
        Case("softmax", "softmax 32x1000", lambda x: torch.softmax(x, -1), (_r(32, 1000, scale=4),)),
        Case("log_softmax", "log_softmax vocab 128x512", lambda x: torch.log_softmax(x, -1),
             (_r(1, 128, 512, scale=4),)),
        Case("layer_norm", "layer_norm gpt 128x256", lambda x, w, b: F.layer_norm(x, (256,), w, b),
             (_r(1, 128, 256, scale=2),), (_r(256), _r(256))),
        Case("max_pool2d", "maxpool 3x3s2p1 resnet 64x112x112", lambda x: F.max_pool2d(x, 3, 2, 1),
             (_r(1, 64, 112, 112),)),
        Case("max_pool2d", "maxpool 2x2 64x56x56", lambda x: F.max_pool2d(x, 2), (_r(1, 64, 56, 56),)),
        Case("avg_pool2d", "avgpool 3x3s2p1 64x56x56", lambda x: F.avg_pool2d(x, 3, 2, 1), (_r(1, 64, 56, 56),)),
        Case("avg_pool2d", "avgpool 2x2 64x56x56", lambda x: F.avg_pool2d(x, 2), (_r(1, 64, 56, 56),)),
        Case("mean", "global avgpool mv2 1280x7x7", lambda x: F.adaptive_avg_pool2d(x, 1), (_r(1, 1280, 7, 7),)),
        Case("adaptive_avg_pool2d", "adaptive 64x28x28->7x7", lambda x: F.adaptive_avg_pool2d(x, 7),
             (_r(1, 64, 28, 28),)),
        Case("sdpa", "sdpa causal gpt 4x128x64",
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
             (_r(1, 4, 128, 64), _r(1, 4, 128, 64, scale=1.1), _r(1, 4, 128, 64, scale=0.9))),
        Case("sdpa", "sdpa 8x256x64",
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
             (_r(1, 8, 256, 64), _r(1, 8, 256, 64, scale=1.1), _r(1, 8, 256, 64, scale=0.9))),
        Case("sdpa", "sdpa bool mask 4x128x64",
             lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
             (_r(1, 4, 128, 64), _r(1, 4, 128, 64, scale=1.1), _r(1, 4, 128, 64, scale=0.9)),
             (torch.rand(128, 128, generator=torch.Generator().manual_seed(1)) > 0.2,)),
    ]


def best_ms(fn: Callable[[], Any], threads: int, min_time: float = 0.25, reps: int = 5) -> float:
    """Best per-call time of `reps` repetitions, each of enough calls to last min_time / reps."""
    clock = time.thread_time if threads <= 1 else time.perf_counter
    fn()
    t0 = clock()
    fn()
    once = max(clock() - t0, 1e-6)
    calls = max(1, int(min_time / reps / once))
    best = float("inf")
    for _ in range(reps):
        t0 = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - t0) / calls)
    return best * 1e3


def case_path(case: Case) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / ("".join(ch if ch.isalnum() else "_" for ch in case.name) + ".oab")
    if not path.exists():
        prog = oa.export(ConstFn(case.fn, case.consts).eval(), case.inputs)
        missing = [case.op] if case.op not in prog.ops else []
        if missing:
            raise RuntimeError(f"{case.name}: expected op {case.op} in the program, got {prog.ops}")
        prog.save(path)
    return path


def torch_ms(case: Case, threads: int) -> float:
    torch.set_num_threads(threads)
    model = ConstFn(case.fn, case.consts).eval()
    with torch.no_grad():
        return best_ms(lambda: model(*case.inputs), threads)


def oa_ms(case: Case, threads: int, reference: bool, isas: list[str] | None = None) -> float:
    run = execute_only(case_path(case), [x.numpy() for x in case.inputs], threads, reference, case.name, isas)
    return best_ms(run, threads)


def selected(keys: list[str]) -> list[Case]:
    return [c for c in cases() if not keys or any(k == c.op or k in c.name for k in keys)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated ops or name substrings")
    ap.add_argument("--portable", action="store_true", help="also time the portable C variants")
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure each case this many times (interleaved) and keep the best")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    keys = [s for s in a.only.split(",") if s]
    todo = selected(keys)
    for c in todo:
        case_path(c)  # export first (slow), so the timings run back to back
    no_portable = ops_without_portable() if a.portable else set()
    rows: list[dict[str, Any]] = []
    if not a.json:
        head = f"{'case':36s} {'torch ms':>9s} {'ref ms':>9s} {'simd ms':>9s} {'x ref':>7s} {'x torch':>7s}"
        print(head + (f" {'portable':>9s} {'x ref':>7s}" if a.portable else ""))
    for c in todo:
        t = r = s = p = float("inf")
        portable = a.portable and c.op not in no_portable
        for _ in range(a.repeat):
            t = min(t, torch_ms(c, a.threads))
            r = min(r, oa_ms(c, a.threads, True))
            s = min(s, oa_ms(c, a.threads, False))
            if portable:
                p = min(p, oa_ms(c, a.threads, False, ["portable"]))
        row = {"case": c.name, "op": c.op, "threads": a.threads, "torch_ms": t, "ref_ms": r, "simd_ms": s,
               "speedup_vs_ref": r / s, "speedup_vs_torch": t / s}
        if a.portable:
            row["portable_ms"] = p if portable else None
            row["portable_speedup_vs_ref"] = r / p if portable else None
        rows.append(row)
        if not a.json:
            line = f"{c.name:36s} {t:9.4f} {r:9.4f} {s:9.4f} {r / s:7.2f} {t / s:7.2f}"
            if portable:
                line += f" {p:9.4f} {r / p:7.2f}"
            elif a.portable:
                line += f" {'(ref)':>9s} {'':>7s}"
            print(line, flush=True)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
