"""Run the benchmark as if on an AVX2-only x86 CPU (Zen 2 / 3, Haswell to Comet Lake) on a machine
with AVX-512: `run.py --peers-isa avx2`.

Every engine is held to AVX2 + FMA, in one process, so the table compares the same arithmetic:
- openaccel: its kernels restricted (HostSession(isas=["avx2", "portable"]), `oa_run --isa avx2`);
- ExecuTorch + XNNPACK: XNNPACK picks its kernels from cpuinfo's `cpuinfo_isa` flags, read once when
  XNNPACK initializes; ExecuTorch exports that struct from libexecutorch_threadpool.so, so the
  AVX-512, AVX-VNNI, AMX and AVX10 flags are cleared there first. The struct is not a stable API:
  its layout (pytorch/cpuinfo include/cpuinfo.h, x86-64) is checked against /proc/cpuinfo before
  anything is written, and a mismatch stops the run;
- PyTorch eager: ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2, ONEDNN_MAX_CPU_ISA=AVX2
  (read when torch loads: run.py re-executes itself with them set);
- ONNX Runtime has no such switch and is refused.
A stand-in, not the real CPU: caches, clocks and the ports behind each instruction are this
machine's. Measure on an AVX2-only machine where one is available.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from openaccel.errors import OpenAccelError

ENV = "OA_BENCH_PEERS_ISA"
ISAS = ("avx2",)
TORCH_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
UNRESTRICTABLE = ("ort", "ort_int8")

# byte offsets in struct cpuinfo_x86_isa (x86-64 build): the ones checked against /proc/cpuinfo
# (vector features only: TSX's hle / rtm can differ between CPUID and the kernel's view), and the
# range cleared (avx512f .. avx_ne_convert: AVX-512, AVX10, AMX, AVX-VNNI-INT8/16)
_CHECK = {16: "pni", 17: "ssse3", 18: "sse4_1", 19: "sse4_2", 22: "avx", 23: "avx_vnni", 24: "fma", 27: "f16c",
          28: "avx2", 29: "avx512f", 32: "avx512cd", 33: "avx512dq", 34: "avx512bw", 35: "avx512vl",
          41: "avx512_vnni", 42: "avx512_bf16", 49: "amx_bf16", 50: "amx_tile", 51: "amx_int8"}
_AVXVNNI, _CLEAR = 23, range(29, 56)


class PeerIsaError(OpenAccelError):
    """--peers-isa cannot hold an engine to the ISA asked for."""


def requested() -> str | None:
    """The ISA this process is held to (run.py sets it before re-executing), or None."""
    return os.environ.get(ENV) or None


def check_engines(engines: list[str]) -> None:
    bad = [e for e in engines if e in UNRESTRICTABLE]
    if bad:
        raise PeerIsaError(f"--peers-isa: {', '.join(bad)} cannot be held to one ISA (ONNX Runtime has no "
                           "switch for its kernels); leave it out of --engines")


def environment(isa: str) -> dict[str, str]:
    """The variables to re-execute with: the marker and PyTorch's ISA limits."""
    if isa not in ISAS:
        raise PeerIsaError(f"--peers-isa {isa!r}: supported: {', '.join(ISAS)}")
    return {ENV: isa, **TORCH_ENV}


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError as e:
        raise PeerIsaError(f"--peers-isa needs /proc/cpuinfo: {e}") from e
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    raise PeerIsaError("--peers-isa: no 'flags' line in /proc/cpuinfo")


def layout_errors(isa: list[int], flags: set[str]) -> list[str]:
    """The checked bytes of a cpuinfo_isa copy that disagree with the CPU's flags (empty: the
    layout is the one this module writes to)."""
    return [f"{name} (byte {off}: {isa[off]}, /proc/cpuinfo: {int(name in flags)})"
            for off, name in _CHECK.items() if isa[off] != int(name in flags)]


def cpuinfo_offsets() -> dict[str, int]:
    """flag name -> byte offset, for the checked fields"""
    return {name: off for off, name in _CHECK.items()}


def restrict_executorch() -> list[str]:
    """Clear cpuinfo's AVX-512 / AVX-VNNI / AMX flags in ExecuTorch's copy of cpuinfo, before XNNPACK
    reads them. Returns the flags that were set and are now cleared."""
    import importlib.util

    spec = importlib.util.find_spec("executorch")
    places = list(spec.submodule_search_locations or []) if spec else []
    if not places:
        raise PeerIsaError("--peers-isa: ExecuTorch is not installed")
    lib_path = Path(places[0]) / "lib" / "libexecutorch_threadpool.so"
    if not lib_path.is_file():
        raise PeerIsaError(f"--peers-isa: {lib_path} not found (this ExecuTorch build keeps cpuinfo elsewhere)")
    lib = ctypes.CDLL(str(lib_path), mode=ctypes.RTLD_GLOBAL)
    if not lib.cpuinfo_initialize():
        raise PeerIsaError("--peers-isa: cpuinfo_initialize failed")
    isa = (ctypes.c_uint8 * 64).from_address(ctypes.addressof(ctypes.c_uint8.in_dll(lib, "cpuinfo_isa")))
    wrong = layout_errors(list(isa), cpu_flags())
    if wrong:
        raise PeerIsaError("--peers-isa: ExecuTorch's cpuinfo_isa does not have the layout this tool knows "
                           f"({', '.join(wrong)}); not touching it")
    if not isa[28]:
        raise PeerIsaError("--peers-isa avx2: this CPU has no AVX2")
    cleared = sorted(n for n, off in cpuinfo_offsets().items() if (off in _CLEAR or off == _AVXVNNI) and isa[off])
    isa[_AVXVNNI] = 0
    for off in _CLEAR:
        isa[off] = 0
    return cleared


def openaccel_isas() -> list[str] | None:
    """The ISA list openaccel's engines run with in this process (None: all the CPU has)."""
    isa = requested()
    return [isa, "portable"] if isa else None
