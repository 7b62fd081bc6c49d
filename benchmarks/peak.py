"""One core's fp32 FMA peak per vector ISA, measured on this machine (benchmarks/peak/fma_peak.c,
built with the host C compiler on first use and cached by its source hash), and the roofline
figure the benchmarks print beside a GFLOP/s: achieved as a percentage of the peak of the ISA
openaccel's kernels used there (hostinfo.kernel_isa: "avx2+fma", "avx512", "neon", "portable C").

    .venv/bin/python benchmarks/peak.py          # prints the peaks (JSON lines with --json)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from openaccel.errors import ToolchainError
from openaccel.paths import cache_dir

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "peak" / "fma_peak.c"
CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def build(cache: Path | None = None) -> Path:
    """The fma_peak binary for this machine (built once per source and flags)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise ToolchainError(f"no C compiler on PATH to build {SOURCE}; install with: apt-get install -y gcc")
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join([cc, *CFLAGS]).encode()).hexdigest()[:16]
    out = (cache or cache_dir() / "peak") / f"fma_peak-{key}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        r = subprocess.run([cc, *CFLAGS, str(SOURCE), "-o", str(tmp)], capture_output=True, text=True)
        if r.returncode:
            raise ToolchainError(f"building {SOURCE} with {cc} failed:\n{r.stderr[-2000:]}")
        tmp.replace(out)
    return out


def measure(seconds: float = 0.25, cache: Path | None = None) -> dict[str, float]:
    """GFLOP/s of one core's fp32 FMA per ISA this CPU has, e.g. {"portable C": 11.0,
    "avx2+fma": 90.0, "avx512": 175.0}."""
    exe = build(cache)
    r = subprocess.run([str(exe), str(seconds)], capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise ToolchainError(f"{exe} failed (exit {r.returncode}): {r.stderr[-2000:]}")
    return {d["isa"]: float(d["gflops"]) for d in map(json.loads, r.stdout.splitlines()) if d.get("isa")}


def roofline(gflops: float | None, isa: str, peaks: dict[str, float]) -> float | None:
    """`gflops` as a percentage of the FMA peak of `isa` (None when either is unknown)."""
    peak = peaks.get(isa)
    return 100.0 * gflops / peak if gflops and peak else None


def roofline_cell(gflops: float | None, isa: str, peaks: dict[str, float]) -> str:
    pct = roofline(gflops, isa, peaks)
    return f"{pct:.0f}%" if pct is not None else "n/a"


def peak_line(peaks: dict[str, float], isa: str) -> str:
    """"FMA peak, 1 core: portable C 11.0, avx2+fma 90.1 (roofline), avx512 177.3 GFLOP/s"."""
    parts = [f"{k} {v:.1f}" + (" (roofline)" if k == isa else "") for k, v in peaks.items()]
    return "fp32 FMA peak, 1 core: " + ", ".join(parts) + " GFLOP/s" if parts else "fp32 FMA peak: n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=0.25, help="timed seconds per ISA")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from openaccel.hostinfo import host_cpu

    peaks = measure(a.seconds)
    if a.json:
        print(json.dumps({"cpu": host_cpu().model, "fma_peak_gflops": peaks}))
    else:
        print(f"CPU: {host_cpu().model}")
        for isa, g in peaks.items():
            print(f"  {isa:12} {g:8.1f} GFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
