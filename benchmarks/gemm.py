#!/usr/bin/env python3
"""GEMM / convolution micro-benchmark: GFLOP/s of openaccel's kernels against PyTorch's.

    python benchmarks/gemm.py                    # 1 thread: 256/512/1024 cubed and ResNet-18 convs
    python benchmarks/gemm.py --threads 2 --small --json -
    python benchmarks/gemm.py --ab avx2,portable      # + openaccel on AVX2 only, in the same loop

Each case is a single-op model exported with openaccel (nn.Linear without bias -> `linear` with a
constant weight; a @ b of two inputs -> `matmul`; nn.Conv2d without bias -> `conv2d`) and run on the
host through the ctypes binding. openaccel's time is the C execute call alone (inputs are set once;
one ctypes call per run, about a microsecond); PyTorch's is torch.mm(a, b, out=c) or F.conv2d on
the same data. FLOPs = 2*M*N*K (GEMM) and 2*Cout*Hout*Wout*Cin*kh*kw/groups (conv). The roofline
column is openaccel's GFLOP/s as % of this core's measured fp32 FMA peak for the ISA its kernels used
(benchmarks/peak.py; times the thread count).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import hashlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "linear" | "matmul" | "conv2d"
    m: int = 0
    n: int = 0
    k: int = 0
    cin: int = 0
    cout: int = 0
    hw: int = 0
    kernel: int = 0
    stride: int = 1
    pad: int = 0

    @property
    def out_hw(self) -> int:
        return (self.hw + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def flops(self) -> int:
        if self.kind == "conv2d":
            return 2 * self.cout * self.out_hw * self.out_hw * self.cin * self.kernel * self.kernel
        return 2 * self.m * self.n * self.k

    @property
    def shape(self) -> str:
        if self.kind == "conv2d":
            return (f"{self.cin}->{self.cout} {self.kernel}x{self.kernel}/s{self.stride} "
                    f"on {self.hw}x{self.hw}")
        return f"{self.m}x{self.n}x{self.k}"


def cases(small: bool) -> list[Case]:
    sizes = (256,) if small else (256, 512, 1024)
    out = [Case(f"linear {s}", "linear", s, s, s) for s in sizes]
    out += [Case(f"matmul {s}", "matmul", s, s, s) for s in sizes[-1:]]
    convs = [  # ResNet-18 at 224x224
        Case("conv1 7x7/2", "conv2d", cin=3, cout=64, hw=224, kernel=7, stride=2, pad=3),
        Case("layer1 3x3", "conv2d", cin=64, cout=64, hw=56, kernel=3, pad=1),
        Case("layer2 3x3/2", "conv2d", cin=64, cout=128, hw=56, kernel=3, stride=2, pad=1),
        Case("layer2 down 1x1/2", "conv2d", cin=64, cout=128, hw=56, kernel=1, stride=2),
        Case("layer3 3x3", "conv2d", cin=256, cout=256, hw=14, kernel=3, pad=1),
        Case("layer4 3x3", "conv2d", cin=512, cout=512, hw=7, kernel=3, pad=1),
    ]
    return out + ([convs[1], convs[4]] if small else convs)


def _build(case: Case) -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    if case.kind == "linear":
        return nn.Linear(case.k, case.n, bias=False).eval(), (torch.randn(case.m, case.k),)
    if case.kind == "matmul":

        class MatMul(nn.Module):
            def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
                return a @ b

        return MatMul().eval(), (torch.randn(case.m, case.k), torch.randn(case.k, case.n))
    conv = nn.Conv2d(case.cin, case.cout, case.kernel, case.stride, case.pad, bias=False).eval()
    return conv, (torch.randn(1, case.cin, case.hw, case.hw),)


def _torch_fn(case: Case, model: Any, example: tuple[Any, ...]) -> Callable[[], Any]:
    import torch
    import torch.nn.functional as F

    if case.kind == "conv2d":
        w = model.weight.detach()
        x = example[0]
        return lambda: F.conv2d(x, w, None, case.stride, case.pad)
    if case.kind == "linear":
        a, b = example[0], model.weight.detach().t().contiguous()
    else:
        a, b = example
    c = torch.empty(case.m, case.n)
    return lambda: torch.mm(a, b, out=c)


def _time(fns: list[Callable[[], Any]], runs: int, warmup: int, budget: float) -> list[tuple[float, int]]:
    """Median seconds per call of each function and how many timed calls it had. The functions'
    timed calls alternate (PyTorch, openaccel, PyTorch, ...): on this class of shared VM the
    machine's speed changes by 1.5x for seconds at a time, and timed one after the other the
    1024^3 ratio moved between 0.86x and 1.21x from one run to the next."""
    gc.collect()
    gc.disable()
    try:
        for fn in fns:
            t0 = time.perf_counter()
            fn()
            w = 1
            while w < warmup and time.perf_counter() - t0 < budget / 4:
                fn()
                w += 1
        times: list[list[float]] = [[] for _ in fns]
        start = time.perf_counter()
        while len(times[0]) < runs:
            for fn, ts in zip(fns, times):
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
            if time.perf_counter() - start > budget * len(fns):
                break
    finally:
        gc.enable()
    return [(statistics.median(ts), len(ts)) for ts in times]


def _execute_only(sess: Any, diag: Any) -> Callable[[], None]:
    """One oa_method_execute through ctypes, on the inputs already set (the session's handles)."""
    lib, method, ref = sess._lib, sess._method, ctypes.byref(diag)

    def run() -> None:
        if lib.oa_method_execute(method, ref):
            raise RuntimeError(diag.message.decode())

    return run


def _export(case: Case, model: Any, example: tuple[Any, ...], cache: Path) -> bytes:
    import openaccel as oa

    src = hashlib.sha256()
    for p in sorted(Path(oa.__file__).parent.rglob("*.py")):
        src.update(p.read_bytes())
    key = hashlib.sha256(f"{case!r}|{src.hexdigest()}".encode()).hexdigest()[:20]
    f = cache / f"{case.kind}-{key}.oab"
    if f.exists():
        return f.read_bytes()
    prog = oa.export(model, example, bundle_tests=False)
    cache.mkdir(parents=True, exist_ok=True)
    prog.save(f)
    return prog.buffer


def run_micro(threads: int = 1, small: bool = False, runs: int = 20, warmup: int = 3, budget: float = 5.0,
              log: Callable[[str], None] = print, cache: Path | None = None,
              ab_isas: list[str] | None = None) -> list[dict[str, Any]]:
    """ab_isas: also time openaccel restricted to these ISAs (HostSession(isas=...), e.g. ["avx2",
    "portable"] against the AVX-512 kernels), interleaved with the other two in the same loop."""
    import torch

    from openaccel.runtime.host import Diag, HostSession

    torch.set_num_threads(threads)
    cache = cache or ROOT / "bench-results" / "artifacts" / "micro"
    rows: list[dict[str, Any]] = []
    for case in cases(small):
        log(f"micro: {case.name} ({case.shape})")
        model, example = _build(case)
        row: dict[str, Any] = {"name": case.name, "kind": case.kind, "shape": case.shape, "flops": case.flops,
                               "threads": threads}
        rows.append(row)
        tfn = _torch_fn(case, model, example)
        ofn: Callable[[], None] | None = None
        abfn: Callable[[], None] | None = None
        try:
            sess = HostSession(_export(case, model, example, cache), threads=threads)
            arrays = [x.numpy() for x in example]
            (got,) = sess.run(arrays)  # sets the inputs; they stay put for the execute-only loop
            with torch.inference_mode():
                want = model(*example).numpy()
            row["max_rel_error"] = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))
            ofn = _execute_only(sess, Diag())
            if ab_isas is not None:
                ab = HostSession(_export(case, model, example, cache), threads=threads, isas=ab_isas)
                ab.run(arrays)
                abfn = _execute_only(ab, Diag())
        except Exception as e:
            from engines import first_line

            row["reason"] = first_line(e)
        timed = _time([tfn] + ([ofn] if ofn else []) + ([abfn] if ofn and abfn else []), runs, warmup, budget)
        t_ms, n = timed[0]
        row.update(torch_ms=t_ms * 1e3, torch_gflops=case.flops / t_ms / 1e9, torch_runs=n)
        if ofn:
            o_ms, n = timed[1]
            row.update(openaccel_ms=o_ms * 1e3, openaccel_gflops=case.flops / o_ms / 1e9, openaccel_runs=n,
                       ratio=t_ms / o_ms)
        if ofn and abfn:
            ab_ms, n = timed[2]
            row.update(ab_isas=ab_isas, ab_ms=ab_ms * 1e3, ab_gflops=case.flops / ab_ms / 1e9, ab_runs=n,
                       ab_ratio=ab_ms / timed[1][0])
    return rows


def add_roofline(rows: list[dict[str, Any]], isa: str, peaks: dict[str, float], threads: int) -> None:
    """Each row's openaccel GFLOP/s as % of the FMA peak of the ISA the kernels used (`isa`),
    times the thread count (the peak is one core's)."""
    from peak import roofline

    scaled = {k: v * max(threads, 1) for k, v in peaks.items()}
    for r in rows:
        r["roofline_isa"] = isa
        r["roofline_pct"] = roofline(r.get("openaccel_gflops"), isa, scaled)


def print_table(rows: list[dict[str, Any]], console: Any, threads: int, machine: dict[str, Any],
                peaks: dict[str, float]) -> None:
    from peak import peak_line
    from rich.table import Table

    from openaccel.hostinfo import summary_line

    isa = str(machine.get("kernel_isa"))
    t = Table(title=f"GEMM / conv micro-benchmark, GFLOP/s, {threads} thread(s) "
                    "(openaccel: C execute call only; PyTorch: torch.mm(out=) / F.conv2d)")
    ab = next((r["ab_isas"] for r in rows if "ab_isas" in r), None)
    ab_name = "+".join(ab) if ab else ""
    for c in ("case", "shape", "MFLOP", "PyTorch GFLOP/s", "openaccel GFLOP/s", f"% of {isa} peak",
              "openaccel / PyTorch", "max rel err") + ((f"openaccel {ab_name} GFLOP/s", f"speed-up over {ab_name}")
                                                       if ab else ()):
        t.add_column(c, justify="left" if c in ("case", "shape") else "right")
    for r in rows:
        if "openaccel_gflops" in r:
            ratio = r["ratio"]
            colour = "green" if ratio >= 0.9 else "yellow" if ratio >= 0.5 else "red"
            pct = r.get("roofline_pct")
            oa_cells = [f"{r['openaccel_gflops']:.1f}", f"{pct:.0f}%" if pct is not None else "n/a",
                        f"[{colour}]{ratio:.2f}x[/]", f"{r['max_rel_error']:.1e}"]
        else:
            oa_cells = [f"[dim]n/a ({r.get('reason', '?')})[/]", "", "", ""]
        if ab:
            oa_cells += [f"{r['ab_gflops']:.1f}", f"{r['ab_ratio']:.2f}x"] if "ab_gflops" in r else ["", ""]
        t.add_row(r["name"], r["shape"], f"{r['flops'] / 1e6:.0f}", f"{r['torch_gflops']:.1f}", *oa_cells)
    console.print(t)
    console.print(summary_line(machine), markup=False, soft_wrap=True)
    console.print(peak_line(peaks, isa) + (f" (x{threads} threads for the % column)" if threads > 1 else ""),
                  markup=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=5.0, help="seconds of timed runs per engine and case")
    ap.add_argument("--small", action="store_true", help="fewer, smaller cases")
    ap.add_argument("--json", nargs="?", const="-", metavar="PATH", help="JSON to PATH (or stdout)")
    ap.add_argument("--out", default=str(ROOT / "bench-results"), help="exports are cached under OUT/artifacts")
    ap.add_argument("--ab", metavar="ISAS", help="also time openaccel restricted to these ISAs (comma-separated, "
                    "e.g. avx2,portable: AVX-512 against AVX2), interleaved in the same loop")
    a = ap.parse_args(argv)
    from rich.console import Console

    console = Console(stderr=a.json == "-")
    if not console.is_terminal:  # logs and pipes: one line per row, headers unwrapped
        console = Console(stderr=a.json == "-", width=180)
    rows = run_micro(a.threads, a.small, a.runs, a.warmup, a.budget,
                     log=lambda s: console.print(f"[dim]{s}[/]"), cache=Path(a.out) / "artifacts" / "micro",
                     ab_isas=a.ab.split(",") if a.ab else None)
    from peak import measure

    from openaccel.hostinfo import machine_summary

    machine = machine_summary("host")
    peaks = measure()
    machine["fma_peak_gflops"] = peaks
    add_roofline(rows, str(machine.get("kernel_isa")), peaks, a.threads)
    print_table(rows, console, a.threads, machine, peaks)
    if a.json:
        text = json.dumps({"threads": a.threads, "machine": machine, "micro": rows}, indent=2)
        if a.json == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(a.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
