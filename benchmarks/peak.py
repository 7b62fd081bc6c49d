"""One core's fp32 FMA peak per vector ISA, measured on this machine (benchmarks/peak/fma_peak.c,
built with the host C compiler on first use and cached by its source hash), and the roofline
figure the benchmarks print beside a GFLOP/s: achieved as a percentage of the peak of the ISA
openaccel's kernels used there (hostinfo.kernel_isa: "avx2+fma", "avx512", "neon", "portable C").

With --gemm, also the steps from that peak down to a whole GEMM (benchmarks/peak/gemm_ceiling.c,
linked with the host runtime): openaccel's own fp32 tile with its operands in L1, with B
streamed from L2, then 1024^3 through the blocked driver. A GEMM cannot beat its tile with B
from L2 by more than the noise; that bounds what any fp32 GEMM on this core can reach.

    .venv/bin/python benchmarks/peak.py          # prints the peaks (JSON with --json)
    .venv/bin/python benchmarks/peak.py --gemm   # + the GEMM steps (--isa avx2: another ISA's tile)
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
from typing import Any

from openaccel.errors import ToolchainError
from openaccel.paths import cache_dir

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "peak" / "fma_peak.c"
CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def _compile(source: Path, flags: list[str], libs: list[str], cache: Path | None) -> Path:
    """`source` built with the host C compiler into the cache, once per source, flags and libraries."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise ToolchainError(f"no C compiler on PATH to build {source}; install with: apt-get install -y gcc")
    key = hashlib.sha256(source.read_bytes() + " ".join([cc, *flags, *libs]).encode()).hexdigest()[:16]
    out = (cache or cache_dir() / "peak") / f"{source.stem}-{key}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        r = subprocess.run([cc, *flags, str(source), *libs, "-o", str(tmp)], capture_output=True, text=True)
        if r.returncode:
            raise ToolchainError(f"building {source} with {cc} failed:\n{r.stderr[-2000:]}")
        tmp.replace(out)
    return out


def build(cache: Path | None = None) -> Path:
    """The fma_peak binary for this machine (built once per source and flags)."""
    return _compile(SOURCE, CFLAGS, [], cache)


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


CEILING_SOURCE = HERE / "peak" / "gemm_ceiling.c"
CEILING_CASES = {
    "tile_l1": "tile, A and B in L1",
    "tile_l2": "tile, B streamed from L2",
    "gemm_linear": "1024^3, B packed beforehand (linear)",
    "gemm_matmul": "1024^3, B packed every run (matmul)",
}
# gemm_ceiling names ISAs as the runtime does (oa_isa_name); the peaks as hostinfo.kernel_isa does
_PEAK_NAME = {"avx2": "avx2+fma", "portable": "portable C"}


def build_ceiling(cache: Path | None = None) -> Path:
    """The gemm_ceiling binary, linked with this checkout's host runtime (built once per source)."""
    from openaccel.runtime.build import build_runtime

    rt = build_runtime("host")
    runtime = rt.include_dir.parent
    flags = [*CFLAGS, f"-I{runtime / 'src'}", f"-I{runtime / 'src' / 'cpu'}", f"-I{rt.include_dir}"]
    return _compile(CEILING_SOURCE, flags, [str(rt.static_lib), "-lm", "-lpthread"], cache)


def measure_ceiling(seconds: float = 0.25, repeats: int = 3, isa: str | None = None,
                    cache: Path | None = None) -> dict[str, Any]:
    """The best GFLOP/s of each gemm_ceiling case over `repeats` runs of the program, e.g.
    {"isa": "avx512", "peak_isa": "avx512", "tile": "12x32", "kc": {"tile_l1": 256, ...},
    "gflops": {"tile_l1": 229.0, ...}} (peak_isa: the name of its peak in measure())."""
    exe = build_ceiling(cache)
    best: dict[str, float] = {}
    kc: dict[str, int] = {}
    name = tile = ""
    for _ in range(max(1, repeats)):
        r = subprocess.run([str(exe), str(seconds), *([isa] if isa else [])], capture_output=True, text=True,
                           timeout=600)
        if r.returncode:
            raise ToolchainError(f"{exe} failed (exit {r.returncode}): {r.stderr[-2000:]}")
        for d in map(json.loads, r.stdout.splitlines()):
            best[d["case"]] = max(best.get(d["case"], 0.0), float(d["gflops"]))
            kc[d["case"]] = int(d["kc"])
            name, tile = d["isa"], d["tile"]
    return {"isa": name, "peak_isa": _PEAK_NAME.get(name, name), "tile": tile, "kc": kc, "gflops": best}


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
    ap.add_argument("--gemm", action="store_true", help="also the GEMM steps: tile in L1, B from L2, 1024^3")
    ap.add_argument("--isa", help="the tile of this ISA (avx512, avx2, neon, rvv, portable; default: the best)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the GEMM steps, best of (default 3)")
    a = ap.parse_args(argv)
    from openaccel.hostinfo import host_cpu

    peaks = measure(a.seconds)
    ceiling = measure_ceiling(a.seconds, a.repeats, a.isa) if a.gemm else None
    if a.json:
        print(json.dumps({"cpu": host_cpu().model, "fma_peak_gflops": peaks, "gemm_ceiling": ceiling}))
        return 0
    print(f"CPU: {host_cpu().model}")
    for isa, g in peaks.items():
        print(f"  {isa:12} {g:8.1f} GFLOP/s")
    if ceiling:
        peak = peaks.get(ceiling["peak_isa"])
        print(f"openaccel's {ceiling['isa']} GEMM, tile {ceiling['tile']}, 1 core (best of {a.repeats} runs):")
        for case, label in CEILING_CASES.items():
            g = ceiling["gflops"].get(case)
            if g is None:
                continue
            pct = f" = {100.0 * g / peak:.0f}% of the {ceiling['peak_isa']} FMA peak" if peak else ""
            print(f"  {label:40} kc {ceiling['kc'][case]:4} {g:8.1f} GFLOP/s{pct}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
