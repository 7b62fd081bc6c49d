"""What CPU this is: the model name and its vector extensions, and which ISA openaccel's kernels
use on it. Benchmark reports and `openaccel devices` print these so that figures from different
machines (an AVX2-only AMD EPYC, an AVX-512 Intel Xeon, an emulated Cortex-A72) are never compared
by accident."""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# The vector extensions that matter to kernels, in the order they are printed, by the names the
# Linux kernel gives them in /proc/cpuinfo ("flags" on x86, "Features" on Arm, "isa" on RISC-V).
X86_EXTENSIONS = ("sse4_1", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl",
                  "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
ARM_EXTENSIONS = ("neon", "asimd", "asimdhp", "fphp", "asimddp", "i8mm", "bf16", "sve", "sve2", "sme")


@dataclass(frozen=True)
class CpuInfo:
    model: str                          # lscpu's "Model name" (/proc/cpuinfo "model name")
    arch: str                           # platform.machine()
    vector_extensions: tuple[str, ...]  # of X86_EXTENSIONS / ARM_EXTENSIONS, or RISC-V's "v"

    def describe(self) -> str:
        ext = " ".join(self.vector_extensions) or "none"
        return f"{self.model} ({self.arch}; vector extensions: {ext})"


def _cpuinfo(text: str) -> tuple[str, set[str], str]:
    """(model name, feature words, RISC-V isa string) of a /proc/cpuinfo text."""
    model, feats, isa = "", set[str](), ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key in ("model name", "cpu model", "uarch") and not model:
            model = value
        elif key in ("flags", "features") and not feats:
            feats = set(value.split())
        elif key == "isa" and not isa:
            isa = value
        elif key == "cpu part" and not model:
            model = f"Arm CPU part {value}"
    return model, feats, isa


def parse_cpuinfo(text: str, arch: str) -> CpuInfo:
    model, feats, isa = _cpuinfo(text)
    if arch in ("x86_64", "amd64", "i686"):
        ext = tuple(e for e in X86_EXTENSIONS if e in feats)
    elif arch.startswith(("aarch64", "arm")):
        ext = tuple(e for e in ARM_EXTENSIONS if e in feats)
    elif arch.startswith("riscv"):
        base = isa.split("_")[0]
        ext = ("v",) if base.startswith("rv64") and "v" in base[4:] else ()
    else:
        ext = ()
    return CpuInfo(model or platform.processor() or arch, arch, ext)


def host_cpu() -> CpuInfo:
    """The CPU this process runs on."""
    text = ""
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    return parse_cpuinfo(text, platform.machine())


# The CPU features the AVX-512 kernels need (the x86_64-avx512 target's cpu_features) and whether
# this build has such kernels. Hook for issue 14: set AVX512_KERNELS (and RVV_KERNELS) to True in
# the change that adds the kernels, so reports say "avx512" / "rvv" only once those kernels run.
AVX512_FEATURES = ("avx512f", "avx512bw", "avx512dq", "avx512vl")
AVX512_KERNELS = False
RVV_KERNELS = True
CPU_ISA_RVV = 1 << 4  # OA_CPU_ISA_RVV (openaccel/cpu.h): in "cpu.isas" when the build has the RVV kernels


def kernel_isa(queries: Mapping[str, int]) -> str:
    """The instruction set openaccel's optimized kernels use on a CPU device, from the device's
    query answers (`openaccel devices --json`: "cpu.avx2", "cpu.neon", "cpu.avx512f", "cpu.v", ...)."""
    q = {k.removeprefix("cpu."): v for k, v in queries.items()}
    if AVX512_KERNELS and all(q.get(f) for f in AVX512_FEATURES):
        return "avx512"
    # a baseline rv64gc build (no RVV kernels) on a CPU with V: its "cpu.isas" lacks the RVV bit
    if RVV_KERNELS and q.get("v") and q.get("isas", CPU_ISA_RVV) & CPU_ISA_RVV:
        return "rvv"
    if q.get("avx2") and q.get("fma"):
        return "avx2+fma"
    if q.get("neon"):
        return "neon+dotprod" if q.get("dotprod") else "neon"
    return "portable C"


def machine_summary(target: str = "host") -> dict[str, object]:
    """The CPU and the ISA openaccel's kernels use on `target`, for benchmark reports: model,
    vector extensions, kernel ISA, emulated (builds the runtime for `target` if needed)."""
    from .runtime.module import devices

    for d in devices(target):
        if d.get("kind") == "cpu" and "cpu" in d:
            return dict(d["cpu"])
    host = host_cpu()
    return {"model": host.model, "vector_extensions": list(host.vector_extensions), "kernel_isa": "unknown",
            "emulated": False}


def summary_line(m: dict[str, object]) -> str:
    ext = m.get("vector_extensions") or []
    assert isinstance(ext, list)
    return (f"CPU: {m.get('model')}; vector extensions: {' '.join(str(e) for e in ext) or 'none'}; "
            f"openaccel kernels: {m.get('kernel_isa')}")
