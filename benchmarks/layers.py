"""Per-layer benchmark: every distinct convolution and linear layer of a zoo model, exported alone
(with the activation after it) for each engine and timed side by side on the same input.

It answers "which layers make this model slower than a peer", which a whole-model time cannot.
An isolated layer runs with warm caches, and a peer's layer time includes whatever it adds at the
boundaries of its graph (ExecuTorch + XNNPACK converts NCHW <-> NHWC around each one), so the
column sums are not the whole-model times: compare the columns row by row.

    .venv/bin/python benchmarks/layers.py --model mobilenet_v2
    .venv/bin/python benchmarks/layers.py --model resnet18 --engines et_xnnpack,openaccel --json -
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as harness
from engines import ENGINES, Engine

from openaccel import zoo


@dataclass
class Layer:
    key: str                # what makes two layers the same, e.g. "conv 96->96 3x3/2 g96 on 112x112"
    module: torch.nn.Module
    example: torch.Tensor
    count: int              # how many times the model uses it
    flops: int = 0          # of one use: 2 per multiply-add


def layer_flops(m: torch.nn.Module, out_shape: tuple[int, ...]) -> int:
    """2 x multiply-adds of one call: conv 2*N*Cout*Hout*Wout*(Cin/groups)*kh*kw, linear 2*rows*in*out."""
    if isinstance(m, torch.nn.Conv2d):
        kh, kw = m.kernel_size
        return 2 * int(np.prod(out_shape)) * (m.in_channels // m.groups) * kh * kw
    assert isinstance(m, torch.nn.Linear)
    return 2 * int(np.prod(out_shape)) * m.in_features


def _describe(m: torch.nn.Module, shape: tuple[int, ...]) -> str:
    if isinstance(m, torch.nn.Conv2d):
        kh, kw = m.kernel_size
        g = f" g{m.groups}" if m.groups > 1 else ""
        return (f"conv {m.in_channels}->{m.out_channels} {kh}x{kw}/{m.stride[0]}{g} "
                f"on {shape[2]}x{shape[3]}")
    assert isinstance(m, torch.nn.Linear)
    return f"linear {m.in_features}->{m.out_features} x{int(np.prod(shape[:-1]))} rows"


def distinct_layers(model: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> list[Layer]:
    """The model's Conv2d and Linear layers with the input each receives, one per distinct shape."""
    seen: dict[str, Layer] = {}

    def hook(m: torch.nn.Module, inputs: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        key = _describe(m, tuple(inputs[0].shape))
        if key in seen:
            seen[key].count += 1
        else:
            seen[key] = Layer(key, m, inputs[0].detach().clone(), 1, layer_flops(m, tuple(out.shape)))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    try:
        with torch.no_grad():
            model(*example)
    finally:
        for h in handles:
            h.remove()
    return list(seen.values())


def time_layer(layer: Layer, engine: Engine, work: Path, args: argparse.Namespace) -> float | None:
    one = torch.nn.Sequential(layer.module, torch.nn.ReLU()).eval()
    path = work / f"{abs(hash(layer.key))}-{engine.name}"
    try:
        engine.export(one, (layer.example,), path)
        loaded = engine.load(path, [layer.example.numpy()], args.threads)
    except Exception as e:  # a peer that cannot take this layer is a cell, not a crash
        print(f"  {engine.label}: {layer.key}: {harness.first_line(e)}", file=sys.stderr)
        return None
    cell = harness.time_cell(loaded.run, args.runs, args.warmup, args.budget)
    return float(cell["median_ms"])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mobilenet_v2", choices=zoo.NAMES)
    p.add_argument("--engines", default="et_xnnpack,ort,openaccel",
                   help="comma-separated engines (as in run.py; default et_xnnpack,ort,openaccel)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--budget", type=float, default=3.0, help="seconds of timed runs per cell")
    p.add_argument("--small", action="store_true", help="the zoo's reduced input sizes")
    p.add_argument("--json", metavar="PATH", help="write the rows as JSON ('-': stdout)")
    a = p.parse_args(argv)
    a.engine_list = [e.strip() for e in a.engines.split(",") if e.strip()]
    unknown = [e for e in a.engine_list if e not in ENGINES]
    if unknown:
        p.error(f"unknown engine(s) {', '.join(unknown)}; known: {', '.join(ENGINES)}")
    int8 = [e for e in a.engine_list if ENGINES[e].int8]
    if int8:
        p.error(f"{', '.join(int8)}: this script times float32 layers; the int8 engines need a PT2E-quantized "
                "model (int8 layers alone: benchmarks/micro/quant_bench.py; whole models: run.py)")
    return a


def main(argv: list[str] | None = None) -> int:
    harness.quiet_libraries()
    args = parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=args.json == "-")
    if not console.is_terminal:
        console = Console(stderr=args.json == "-", width=160)
    torch.manual_seed(0)
    model, example = zoo.build(args.model, small=args.small)
    model.eval()
    engines = [ENGINES[e] for e in args.engine_list]
    missing = {e.name: why for e in engines if (why := e.unavailable())}
    engines = [e for e in engines if e.name not in missing]
    for name, why in missing.items():
        console.print(f"[yellow]{name} skipped: {why}[/]")
    for e in engines:
        e.setup(args.threads)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="oa-layers-") as tmp:
        for layer in distinct_layers(model, example):
            ms = {e.name: time_layer(layer, e, Path(tmp), args) for e in engines}
            rows.append({"layer": layer.key, "count": layer.count, "flops": layer.flops, "ms": ms})
            console.print(f"[dim]{layer.key} x{layer.count}: "
                          + ", ".join(f"{n} {v:.3f}" if v is not None else f"{n} n/a" for n, v in ms.items())
                          + "[/]")
    from peak import measure, peak_line, roofline

    from openaccel.hostinfo import machine_summary, summary_line

    machine = machine_summary("host")
    isa = str(machine.get("kernel_isa"))
    peaks = {k: v * max(args.threads, 1) for k, v in measure().items()}  # the peak is one core's
    machine["fma_peak_gflops"] = peaks
    table = Table(title=f"{args.model}: median ms per layer alone, {args.threads} thread(s)")
    table.add_column("layer")
    table.add_column("uses", justify="right")
    table.add_column("MFLOP", justify="right")
    for e in engines:
        table.add_column(e.label, justify="right")
    oa = "openaccel" if "openaccel" in args.engine_list else None
    if oa:
        table.add_column("openaccel GFLOP/s", justify="right")
        table.add_column(f"% of {isa} peak", justify="right")
        table.add_column("openaccel / best peer", justify="right")
    for r in rows:
        cells = [f"{v:.3f}" if v is not None else "n/a" for v in r["ms"].values()]
        extra: list[str] = []
        if oa:
            ms_oa = r["ms"].get(oa)
            r["openaccel_gflops"] = r["flops"] / (ms_oa * 1e6) if ms_oa else None
            r["roofline_pct"] = roofline(r["openaccel_gflops"], isa, peaks)
            ratio = ""
            peers = [v for n, v in r["ms"].items() if n != oa and v is not None]
            if ms_oa is not None and peers:
                ratio = f"{ms_oa / min(peers):.2f}x"
            extra = [f"{r['openaccel_gflops']:.1f}" if r["openaccel_gflops"] else "n/a",
                     f"{r['roofline_pct']:.0f}%" if r["roofline_pct"] is not None else "n/a", ratio]
        table.add_row(r["layer"], str(r["count"]), f"{r['flops'] / 1e6:.1f}", *cells, *extra)
    console.print(table)
    console.print(summary_line(machine), markup=False, soft_wrap=True)
    console.print(peak_line(peaks, isa) + (f" (x{args.threads} threads)" if args.threads > 1 else ""),
                  markup=False, soft_wrap=True)
    if args.json:
        text = json.dumps({"model": args.model, "threads": args.threads, "machine": machine, "rows": rows},
                          indent=1)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
