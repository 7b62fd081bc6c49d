"""Which machine a figure comes from: the CPU model, its vector extensions and the ISA openaccel's
kernels use, as `openaccel devices` and the benchmark reports print them (the project's machines
are of several kinds: an AVX2-only AMD EPYC, an AVX-512 Intel Xeon, emulated Arm boards)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from openaccel.hostinfo import host_cpu, kernel_isa, parse_cpuinfo

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse4_1 sse4_2 avx f16c fma avx2 bmi2 sha_ni
"""
XEON = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse4_1 avx fma avx2 f16c avx512f avx512dq avx512bw avx512vl avx512_vnni avx_vnni amx_tile amx_int8
"""
A72 = """processor\t: 0
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU part\t: 0xd08
"""
U74 = """processor\t: 0
isa\t\t: rv64imafdc_zicsr_zifencei
uarch\t\t: sifive,u74-mc
"""
RVV = "processor\t: 0\nisa\t\t: rv64imafdcv_zicsr\n"


def test_parse_cpuinfo_of_each_kind() -> None:
    amd = parse_cpuinfo(EPYC, "x86_64")
    assert amd.model == "AMD EPYC 7B13"
    assert amd.vector_extensions == ("sse4_1", "avx", "avx2", "fma", "f16c")
    intel = parse_cpuinfo(XEON, "x86_64")
    assert "avx512f" in intel.vector_extensions and "amx_int8" in intel.vector_extensions
    assert intel.describe().startswith("Intel(R) Xeon(R) Processor (x86_64; vector extensions: sse4_1 avx")
    arm = parse_cpuinfo(A72, "aarch64")
    assert arm.model == "Arm CPU part 0xd08" and arm.vector_extensions == ("asimd",)
    assert parse_cpuinfo(U74, "riscv64").vector_extensions == ()
    assert parse_cpuinfo(U74, "riscv64").model == "sifive,u74-mc"
    assert parse_cpuinfo(RVV, "riscv64").vector_extensions == ("v",)


def test_kernel_isa_follows_the_device_queries() -> None:
    assert kernel_isa({"cpu.avx2": 1, "cpu.fma": 1}) == "avx2+fma"
    assert kernel_isa({"cpu.avx2": 1, "cpu.fma": 0}) == "portable C"  # the AVX2 kernels need FMA too
    assert kernel_isa({"cpu.neon": 1, "cpu.dotprod": 0}) == "neon"
    assert kernel_isa({"cpu.neon": 0}) == "portable C"
    assert kernel_isa({"cpu.v": 1, "cpu.isas": 0x11}) == "rvv"
    assert kernel_isa({"cpu.v": 1, "cpu.isas": 0x01}) == "portable C"  # an rv64gc build on a V CPU


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True, timeout=300)


def test_devices_names_the_kind_the_cpu_and_the_kernel_isa() -> None:
    r = _cli("devices")
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("device 0: cpu (") and "[cpu], vendor openaccel" in first, first
    cpu = host_cpu()
    (dev,) = json.loads(_cli("devices", "--json").stdout)
    isa = kernel_isa(dev["queries"])
    assert dev["cpu"] == {"model": cpu.model, "vector_extensions": list(cpu.vector_extensions),
                          "kernel_isa": isa, "emulated": False}
    assert f"  CPU: {cpu.model}; vector extensions: {' '.join(cpu.vector_extensions) or 'none'}; " \
           f"openaccel kernels: {isa}" in r.stdout


@pytest.mark.qemu
def test_devices_on_an_emulated_board_say_so() -> None:
    r = _cli("devices", "--target", "qemu-aarch64", "--json")
    assert r.returncode == 0, r.stderr
    (dev,) = json.loads(r.stdout)
    assert dev["cpu"]["emulated"] is True and dev["cpu"]["kernel_isa"] == "neon"
    (rvv,) = json.loads(_cli("devices", "--target", "qemu-riscv64-v", "--json").stdout)
    assert rvv["cpu"]["emulated"] is True and rvv["cpu"]["kernel_isa"] == "rvv", rvv["cpu"]
    assert dev["cpu"]["model"] == f"cortex-a72 emulated by qemu-aarch64 on {host_cpu().model}"
