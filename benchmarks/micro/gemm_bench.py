"""GEMM / linear / conv micro-benchmark: openaccel's CPU kernels against PyTorch eager.

Each case is exported to a one-op .oab, loaded in this process and executed repeatedly through
the C API (oa_method_execute, inputs set once); PyTorch runs the same op in eager mode with
torch.set_num_threads(threads). Prints milliseconds, GFLOP/s and the ratio (> 1: openaccel
faster).

Timing: PyTorch and openaccel calls alternate (so both see the same machine state) and each
reports its best call. With --threads 1 (default) the clock is the calling thread's CPU time
(time.thread_time), which does not count time the thread was descheduled: on a machine shared
with other jobs, wall-clock medians of separate runs were off by 2-3x from one run to the next.
With more threads, the wall clock.

    PYTHONPATH=sdk python benchmarks/micro/gemm_bench.py [--threads 1] [--only gemm,conv] [--json]
    ... --reference    time the reference kernels instead (slow: use --only)
"""

from __future__ import annotations

import argparse
import json
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

CACHE = Path(__file__).resolve().parents[2] / "build" / "bench-micro"


@dataclass
class Case:
    group: str
    name: str
    fn: Callable[..., torch.Tensor]
    inputs: tuple[torch.Tensor, ...]
    consts: tuple[torch.Tensor, ...]
    flops: float


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def gemm(n: int, m: int | None = None, k: int | None = None) -> Case:
    m, k = m or n, k or n
    return Case("gemm", f"mm {m}x{k}x{n}", lambda a, b: a @ b, (_r(m, k), _r(k, n)), (), 2.0 * m * n * k)


def bmm(b: int, m: int, k: int, n: int, tag: str) -> Case:
    return Case("gemm", f"bmm {tag} {b}x{m}x{k}x{n}", lambda x, y: torch.bmm(x, y), (_r(b, m, k), _r(b, k, n)), (),
                2.0 * b * m * n * k)


def linear(m: int, k: int, n: int, tag: str, bias: bool = True) -> Case:
    if not bias:
        return Case("linear", f"linear {tag} M={m} {k}->{n} nobias", lambda x, w: F.linear(x, w), (_r(m, k),),
                    (_r(n, k),), 2.0 * m * n * k)
    return Case("linear", f"linear {tag} M={m} {k}->{n}", lambda x, w, b: F.linear(x, w, b), (_r(m, k),),
                (_r(n, k), _r(n)), 2.0 * m * n * k)


def conv(tag: str, c: int, h: int, o: int, k: int, s: int = 1, p: int | None = None, groups: int = 1) -> Case:
    p = k // 2 if p is None else p
    oh = (h + 2 * p - k) // s + 1
    flops = 2.0 * o * (c // groups) * k * k * oh * oh
    kind = "dw" if groups == c and groups > 1 else f"{k}x{k}"
    return Case("conv", f"{tag} {kind} s{s} {c}->{o} @{h}",
                lambda x, w, b: F.conv2d(x, w, b, stride=s, padding=p, groups=groups), (_r(1, c, h, h),),
                (_r(o, c // groups, k, k), _r(o)), flops)


def cases() -> list[Case]:
    return [
        gemm(256), gemm(512), gemm(1024),
        bmm(4, 128, 64, 128, "gpt q@k^T"), bmm(4, 128, 128, 64, "gpt p@v"),
        linear(1, 784, 512, "mlp"), linear(1, 512, 512, "mlp"), linear(1, 512, 10, "mlp"),
        linear(128, 256, 768, "gpt"), linear(128, 256, 256, "gpt"), linear(128, 256, 1024, "gpt"),
        linear(128, 1024, 256, "gpt"), linear(128, 256, 512, "gpt head", bias=False),
        # ResNet-18 layers (one of each shape)
        conv("r18", 3, 224, 64, 7, 2, 3), conv("r18", 64, 56, 64, 3), conv("r18", 64, 56, 128, 3, 2),
        conv("r18", 128, 28, 128, 3), conv("r18", 128, 28, 256, 3, 2), conv("r18", 256, 14, 256, 3),
        conv("r18", 256, 14, 512, 3, 2), conv("r18", 512, 7, 512, 3), conv("r18", 64, 56, 128, 1, 2, 0),
        # MobileNetV2 layers
        conv("mv2", 3, 224, 32, 3, 2), conv("mv2", 32, 112, 32, 3, 1, 1, 32), conv("mv2", 32, 112, 16, 1),
        conv("mv2", 16, 112, 96, 1), conv("mv2", 96, 112, 96, 3, 2, 1, 96), conv("mv2", 96, 56, 24, 1),
        conv("mv2", 24, 56, 144, 1), conv("mv2", 144, 56, 144, 3, 1, 1, 144), conv("mv2", 144, 56, 24, 1),
        conv("mv2", 192, 28, 192, 3, 1, 1, 192), conv("mv2", 384, 14, 384, 3, 1, 1, 384),
        conv("mv2", 384, 14, 64, 1), conv("mv2", 960, 7, 960, 3, 1, 1, 960), conv("mv2", 960, 7, 160, 1),
        conv("mv2", 320, 7, 1280, 1),
    ]


def prepare_oa(case: Case, threads: int, reference: bool) -> Callable[[], None]:
    """A function running the case's program once through the C API (inputs set once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / (case.name.replace(" ", "_").replace(">", "").replace("@", "at") + ".oab")
    if not path.exists():
        prog = oa.export(ConstFn(case.fn, case.consts).eval(), case.inputs)
        prog.save(path)
    return execute_only(path, [x.numpy() for x in case.inputs], threads, reference, case.name)


def interleaved_ms(a: Callable[[], Any], b: Callable[[], Any], threads: int, budget: float = 0.6,
                   rounds: int = 15) -> tuple[float, float]:
    """Best call time (ms) of a and b, called alternately within about `budget` seconds."""
    clock = time.thread_time if threads <= 1 else time.perf_counter
    a()
    b()
    t0 = clock()
    a()
    b()
    per_round = max(1, int(budget / rounds / max(clock() - t0, 1e-6)))
    best_a = best_b = float("inf")
    for _ in range(rounds * per_round):
        t0 = clock()
        a()
        t1 = clock()
        b()
        t2 = clock()
        best_a, best_b = min(best_a, t1 - t0), min(best_b, t2 - t1)
    return best_a * 1e3, best_b * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated groups or name substrings")
    ap.add_argument("--reference", action="store_true", help="time the reference kernels")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    keys = [s for s in a.only.split(",") if s]
    rows: list[dict[str, Any]] = []
    if not a.json:
        print(f"{'case':42s} {'torch ms':>9s} {'oa ms':>9s} {'torch GF/s':>10s} {'oa GF/s':>8s} {'oa/torch':>8s}")
    for c in cases():
        if keys and not any(k == c.group or k in c.name for k in keys):
            continue
        torch.set_num_threads(a.threads)
        model = ConstFn(c.fn, c.consts).eval()
        run_oa = prepare_oa(c, a.threads, a.reference)
        def run_torch(m: ConstFn = model, inputs: tuple[Any, ...] = tuple(c.inputs)) -> Any:
            return m(*inputs)

        with torch.no_grad():
            t, o = interleaved_ms(run_torch, run_oa, a.threads)
        row = {"case": c.name, "group": c.group, "torch_ms": t, "oa_ms": o, "torch_gflops": c.flops / t / 1e6,
               "oa_gflops": c.flops / o / 1e6, "speedup": t / o, "threads": a.threads}
        rows.append(row)
        if not a.json:
            print(f"{c.name:42s} {t:9.3f} {o:9.3f} {row['torch_gflops']:10.1f} {row['oa_gflops']:8.1f} "
                  f"{row['speedup']:8.2f}", flush=True)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
