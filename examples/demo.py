"""The openaccel demo (`make demo`): export a model, build the runtime for a board, run the
bundled tests and a check against PyTorch on that board, and benchmark it.

    python examples/demo.py [--target qemu-aarch64] [--model mobilenet_v2] [--size 96]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch
from rich.console import Console

import openaccel as oa
from openaccel import zoo
from openaccel.runtime.build import build_runtime
from openaccel.runtime.runner import Runner

console = Console(highlight=False)
warnings.filterwarnings("ignore", category=FutureWarning)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="qemu-aarch64")
    ap.add_argument("--model", default="mobilenet_v2", choices=zoo.NAMES)
    ap.add_argument("--out", default="out/demo")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    console.rule(f"[bold]openaccel demo: {args.model} -> {args.target}")
    model, example = zoo.build(args.model, small=True)
    archive = out / f"{args.model}.pt2"
    torch.export.save(torch.export.export(model, example), str(archive))
    console.print(f"[1/5] saved the PyTorch program with torch.export.save -> {archive}")

    t0 = time.perf_counter()
    prog = oa.export(torch.export.load(str(archive)), example, target=args.target,
                     progress=lambda step, s: console.print(f"      [green]✓[/] {step} [dim]{s * 1000:.0f} ms[/]"))
    path = out / f"{args.model}.oab"
    prog.save(path)
    console.print(f"[2/5] exported {path}: {len(prog.buffer):,} bytes, {len(prog.instructions)} instructions, "
                  f"{len(prog.ops)} ops, arena {prog.arena_bytes:,} bytes ({time.perf_counter() - t0:.1f} s)")

    t0 = time.perf_counter()
    build = build_runtime(args.target, log=lambda s: console.print(f"      [dim]{s}[/]"))
    size = build.oa_run.stat().st_size
    console.print(f"[3/5] runtime for {args.target}: oa_run {size:,} bytes ({time.perf_counter() - t0:.1f} s)")

    runner = Runner(args.target, build=build)
    res = runner.test(path)
    tests = res.of("test")
    passed = sum(bool(t.get("passed")) for t in tests)
    where = f"{args.target} ({'emulated' if runner.emulated else 'native'})"
    for t in tests:
        tag = "[green]PASS[/]" if t.get("passed") else "[red]FAIL[/]"
        console.print(f"[4/5] bundled test on {where}: {tag} {t.get('name')}: max abs error "
                      f"{t.get('max_abs_error', float('nan')):.2e} (atol {t.get('atol')}, rtol {t.get('rtol')})")

    mod = oa.load(prog, target=args.target)
    torch.manual_seed(123)
    fresh = tuple(torch.randn_like(x) if x.is_floating_point() else torch.randint_like(x, 0, 16) for x in example)
    (got,) = mod(*fresh)
    with torch.no_grad():
        want = model(*fresh)
    err = (got - want).abs().max().item()
    ok = torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    console.print(f"      new random input on {where}: output {tuple(got.shape)}, max abs error vs PyTorch eager "
                  f"{err:.2e} -> {'[green]match[/]' if ok else '[red]MISMATCH[/]'} (atol 1e-4, rtol 1e-4)")

    b = runner.bench(path, args.runs).of("bench")[0]
    note = " [yellow](emulated time under QEMU, not a performance figure)[/]" if runner.emulated else ""
    console.print(f"[5/5] latency on {args.target}: median {b['median_ms']:.2f} ms over {b['runs']} runs{note}")
    console.rule("[bold green]demo passed" if ok and passed == len(tests) else "[bold red]demo failed")
    return 0 if ok and passed == len(tests) and tests else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except oa.OpenAccelError as e:
        console.print(f"[red]openaccel: error:[/] {e}")
        sys.exit(e.exit_code)
