"""The SIMD kernels (AVX2+FMA, NEON, RVV, portable C; runtime_c/src/cpu/kernels/opt/simd_kernels.inc)
against the reference kernels and PyTorch.

1. runtime_c/tests/kernels/simd_check.c, built against each target's runtime and run on the host,
   natively as the static x86_64-linux build and under qemu-aarch64 / qemu-armv7 / qemu-riscv64:
   each op's optimized kernel forced to every ISA the CPU has (one at a time, as the device option
   disable_isas does) against the reference kernel on many shapes (sizes 1, 7, 8, 9, 1000, ..., broadcast
   patterns, pooling strides / padding / dilation / ceil_mode, causal / masked / GQA attention,
   NaN / inf / -0 inputs), bitwise equality with 3 threads and in place, never using a disabled
   ISA, and ulp sweeps of the vector exp / sigmoid / tanh / silu / erf / gelu; under
   qemu-riscv64-v (RVV) at VLEN 128, 256 and 512 with the same report at each.
2. One-op programs against PyTorch eager at the op tests' tolerances (atol 1e-6 / rtol 2e-6 for
   the transcendental functions), on the host (AVX2 variants) and, through the bundled test
   vectors, on every emulated board (NEON on aarch64 / armv7, portable C on riscv64).
3. The same .oab with the reference kernels only and with the optimized ones (host, and oa_run
   with and without --reference under qemu-aarch64 / qemu-armv7), and with 1 and 2 threads
   (bitwise)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from openaccel.runtime.build import build_runtime
from openaccel.runtime.host import HostSession
from openaccel.targets import get_target

from helpers import CACHE, QEMU_TARGETS, OpCase, case_path, randn, run_case, runner

CHECK_SRC = Path(__file__).resolve().parents[2] / "runtime_c" / "tests" / "kernels" / "simd_check.c"
ULP4: dict[str, Any] = {"atol": 1e-6, "rtol": 2e-6}
SOFTMAX: dict[str, Any] = {"atol": 1e-6, "rtol": 1e-5}
NORM: dict[str, Any] = {"atol": 1e-5, "rtol": 1e-4}
ATTN: dict[str, Any] = {"atol": 1e-5, "rtol": 1e-5}

NAN, INF = float("nan"), float("inf")
SPECIAL = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1e-30, -2.5, 2.5, 3.0, -3.0, 40.0, -40.0, 0.5, -0.5, 1.5,
                        100.0, -100.0, 9.0, -9.0, 0.62, -0.63, 0.92, -0.93, 4.6, -4.6, 88.0, -88.0, -104.0, 89.0])


# ---- 1. kernel-level checker ----------------------------------------------------------------------

def _check_binary(target: str) -> tuple[list[str], Path]:
    """Compile simd_check.c against `target`'s runtime; returns the command that runs it."""
    t = get_target(target)
    build = build_runtime(t)
    out = CACHE / "simd_check" / f"simd_check-{target}-{build.directory.name}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        cc = [t.compiler]
        if t.compiler == "clang" and t.triple:  # as the toolchain file (riscv64-linux-gnu-clang-rvv.cmake) calls it
            cc += [f"--target={t.triple}", "--gcc-toolchain=/usr"]
        inc = build.include_dir
        cmd = [*cc, "-std=c11", *t.c_flags.split(), "-Wall", "-Wextra", "-pedantic", "-Wshadow", "-Werror",
               f"-I{inc}", f"-I{inc.parent / 'src' / 'cpu'}", str(CHECK_SRC), str(build.static_lib), "-lm", "-lpthread",
               "-o", str(out)]
        if t.static:
            cmd.insert(1, "-static")
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"compiling simd_check.c for {target} failed:\n{r.stderr[-3000:]}"
    return [*t.run_prefix(), str(out)], out


def _ready(target: str) -> bool:
    return get_target(target).ready


CHECK_TARGETS = ["host", "x86_64-linux", *QEMU_TARGETS]


@pytest.mark.parametrize("target", CHECK_TARGETS)
def test_kernels_against_reference(target: str) -> None:
    if target != "host" and not _ready(target):
        pytest.skip(f"{target}: toolchain or emulator missing")
    if target == "x86_64-linux" and not get_target(target).runs_here_natively:
        pytest.skip("x86_64-linux runs natively on x86-64 only")
    cmd, _ = _check_binary(target)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    tail = "\n".join(line for line in r.stdout.splitlines() if line.startswith(("FAIL", "sweep", "cpu")))
    assert r.returncode == 0 and "OK: 0 failure(s)" in r.stdout, f"{target}:\n{tail}\n{r.stderr[-2000:]}"
    kernels = [line.split() for line in r.stdout.splitlines() if line.startswith("kernel ")]
    variants = {k[2] for k in kernels}
    arch = get_target(target).arch
    if arch in ("aarch64", "arm"):
        assert "neon" in variants, f"{target}: no NEON variant was checked ({variants})"
    if "avx2=1 fma=1" in r.stdout and arch in ("native", "x86_64"):
        assert "avx2" in variants, f"{target}: no AVX2 variant was checked ({variants})"
    if "v" in get_target(target).cpu_features:
        assert "rvv" in variants, f"{target}: no RVV variant was checked ({variants})"
    assert "portable" in variants, f"{target}: no portable variant was checked ({variants})"
    # every checked variant ran (accepted) some cases
    for k in kernels:
        assert int(k[6]) > 0 or (k[1] == "div" and arch == "arm"), f"{target}: {' '.join(k)}"


def test_rvv_kernels_every_vlen(monkeypatch: pytest.MonkeyPatch) -> None:
    """simd_check under qemu-riscv64-v at VLEN 128, 256 and 512: every SIMD-family op has an "rvv"
    variant that accepted cases and passed, and the report (per-kernel max errors, ulp sweeps) is
    the same at the three lengths: the RVV backend's vl is 8 at every VLEN, so the results are
    bit-identical"""
    if not _ready("qemu-riscv64-v"):
        pytest.skip("qemu-riscv64-v: toolchain or emulator missing")
    reports = {}
    for vlen in (128, 256, 512):
        monkeypatch.setenv("OA_RVV_VLEN", str(vlen))
        cmd, _ = _check_binary("qemu-riscv64-v")
        assert f"vlen={vlen}" in " ".join(cmd)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        fails = "\n".join(line for line in r.stdout.splitlines() if line.startswith("FAIL"))
        assert r.returncode == 0 and "OK: 0 failure(s)" in r.stdout, f"VLEN {vlen}:\n{fails}\n{r.stderr[-2000:]}"
        reports[vlen] = [line for line in r.stdout.splitlines() if line.startswith(("kernel ", "sweep "))]
    rvv = [line.split() for line in reports[128] if line.startswith("kernel ") and line.split()[2] == "rvv"]
    ops = {k[1] for k in rvv}
    assert {"relu", "exp", "gelu", "add", "softmax", "layer_norm", "max_pool2d", "sdpa"} <= ops, ops
    assert all(int(k[6]) > 0 for k in rvv), rvv
    for vlen in (256, 512):
        assert reports[vlen] == reports[128], f"VLEN {vlen}: the kernel report differs from VLEN 128"


# ---- 2. against PyTorch ---------------------------------------------------------------------------

def _each(*fns: Any) -> Any:
    return lambda *xs: tuple(f(*xs) for f in fns)


def _with_special(x: torch.Tensor) -> torch.Tensor:
    flat = x.clone().reshape(-1)
    n = min(len(SPECIAL), flat.numel())
    flat[:n] = SPECIAL[:n]
    return flat.reshape(x.shape)


def _masked(x: torch.Tensor, every: int = 5) -> torch.Tensor:
    x = x.clone()
    x.view(-1)[::every] = -INF
    return x


X = randn(7, 129, seed=1) * 4                       # 903 elements: vector bodies and tails
XS = _with_special(randn(3, 67, seed=2) * 3)

CASES = [
    OpCase("simd_clamps", _each(F.relu, F.relu6, lambda x: F.hardtanh(x, -0.5, 2.0),
                                lambda x: torch.clamp(x, min=-1.0), lambda x: torch.clamp(x, max=0.25)),
           (XS,), ops=("relu", "hardtanh", "clamp")),
    OpCase("simd_transcendental", _each(torch.exp, torch.sigmoid, torch.tanh, torch.erf), (X,),
           ops=("exp", "sigmoid", "tanh", "erf"), **ULP4),
    OpCase("simd_transcendental_special", _each(torch.exp, torch.sigmoid, torch.tanh, torch.erf), (XS,),
           ops=("exp", "sigmoid", "tanh", "erf"), **ULP4),
    OpCase("simd_gelu", _each(F.gelu, lambda x: F.gelu(x, approximate="tanh")), (X,), ops=("gelu",), **ULP4),
    # float64 reference: float32 eager gelu(+inf) is NaN on Intel CPUs with AVX-512 (inf on AMD Zen 3)
    OpCase("simd_gelu_special", _each(F.gelu, lambda x: F.gelu(x, approximate="tanh")), (XS,), ops=("gelu",),
           reference="float64", **ULP4),
    OpCase("simd_binary_same_shape", lambda a, b: (a + b, a - 2 * b, a * b, a / b, torch.add(a, b, alpha=0.5)),
           (randn(2, 3, 17, 9, seed=3), randn(2, 3, 17, 9, seed=4)), ops=("add", "sub", "mul", "div")),
    OpCase("simd_binary_broadcast", lambda a, c, r: (a + c, a * c, a - r, r / (a + 3.0)),
           (randn(1, 24, 10, 11, seed=5),), consts=(randn(1, 24, 1, 1, seed=6), randn(11, seed=7)),
           ops=("add", "mul", "sub", "div")),
    OpCase("simd_softmax", _each(lambda x: torch.softmax(x, -1), lambda x: torch.log_softmax(x, -1)),
           (_masked(randn(4, 3, 37, seed=8) * 5),), ops=("softmax", "log_softmax"), **SOFTMAX),
    OpCase("simd_softmax_wide", _each(lambda x: torch.softmax(x, -1), lambda x: torch.log_softmax(x, -1)),
           (randn(2, 1003, seed=9) * 8,), ops=("softmax", "log_softmax"), **SOFTMAX),
    OpCase("simd_layer_norm", lambda x, w, b: (F.layer_norm(x, (129,), w, b), F.layer_norm(x, (129,))),
           (randn(3, 5, 129, seed=10) * 2 + 0.5,), consts=(randn(129, seed=11), randn(129, seed=12)),
           ops=("layer_norm",), **NORM),
    OpCase("simd_layer_norm_2d", lambda x, w: F.layer_norm(x, (6, 33), w), (randn(4, 6, 33, seed=13) * 3,),
           consts=(randn(6, 33, seed=14),), ops=("layer_norm",), **NORM),
    OpCase("simd_global_pool", _each(lambda x: F.adaptive_avg_pool2d(x, 1), lambda x: x.mean((2, 3)),
                                     lambda x: x.sum((-1,))),
           (randn(2, 40, 7, 9, seed=15),), ops=("mean", "sum")),
    OpCase("simd_max_pool", _each(lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: F.max_pool2d(x, 2),
                                  lambda x: F.max_pool2d(x, 3, 1, 1, dilation=2, ceil_mode=True)),
           (_with_special(randn(1, 6, 33, 35, seed=16)),), ops=("max_pool2d",)),
    OpCase("simd_avg_pool", _each(lambda x: F.avg_pool2d(x, 3, 2, 1), lambda x: F.avg_pool2d(x, 2),
                                  lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                                  lambda x: F.avg_pool2d(x, (3, 2), (2, 3), (1, 1), divisor_override=4)),
           (randn(1, 6, 33, 35, seed=17),), ops=("avg_pool2d",)),
    OpCase("simd_adaptive_pool", lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (randn(1, 6, 19, 13, seed=18),),
           ops=("adaptive_avg_pool2d",)),
    OpCase("simd_sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
           (randn(1, 4, 37, 16, seed=19), randn(1, 4, 37, 16, seed=20), randn(1, 4, 37, 16, seed=21)),
           ops=("sdpa",), **ATTN),
    OpCase("simd_sdpa_long", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.2),
           (randn(2, 9, 12, seed=22), randn(2, 150, 12, seed=23), randn(2, 150, 20, seed=24)),
           ops=("sdpa",), **ATTN),
    OpCase("simd_sdpa_masks", lambda q, k, v, bm, fm: (F.scaled_dot_product_attention(q, k, v, attn_mask=bm),
                                                       F.scaled_dot_product_attention(q, k, v, attn_mask=fm)),
           (randn(2, 2, 9, 8, seed=25), randn(2, 2, 70, 8, seed=26), randn(2, 2, 70, 8, seed=27)),
           consts=(randn(9, 70, seed=28) > -0.8, _masked(randn(2, 1, 9, 70, seed=29), 7)),
           ops=("sdpa",), **ATTN),
    OpCase("simd_sdpa_gqa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
           (randn(1, 8, 21, 16, seed=30), randn(1, 2, 21, 16, seed=31), randn(1, 2, 21, 16, seed=32)),
           ops=("sdpa",), **ATTN),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_against_torch(case: OpCase) -> None:
    run_case(case)


# ---- 3. optimized vs reference kernels, 1 vs 2 threads -------------------------------------------

def _inputs(case: OpCase) -> list[np.ndarray]:
    return [x.numpy() for x in case.inputs]


def _program(case: OpCase) -> bytes:
    path = case_path(case)
    if not path.exists():
        run_case(case)
    return path.read_bytes()


def _compare(got: list[np.ndarray], want: list[np.ndarray], case: OpCase, what: str) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(torch.from_numpy(g), torch.from_numpy(w), atol=case.atol, rtol=case.rtol,
                                   equal_nan=True, msg=lambda m, i=i: f"{case.name} output {i} {what}: {m}")


SAME_FILE = [c for c in CASES if c.name in ("simd_transcendental", "simd_softmax", "simd_layer_norm", "simd_avg_pool",
                                             "simd_sdpa_causal", "simd_sdpa_masks", "simd_gelu")]


@pytest.mark.parametrize("case", SAME_FILE, ids=lambda c: c.name)
def test_optimized_vs_reference_host(case: OpCase) -> None:
    buf = _program(case)
    ref = HostSession(buf, reference_only=True).run(_inputs(case))
    one = HostSession(buf, threads=1).run(_inputs(case))
    two = HostSession(buf, threads=2).run(_inputs(case))
    _compare(one, ref, case, "optimized vs reference kernels")
    for i, (a, b) in enumerate(zip(one, two)):
        assert np.array_equal(a, b, equal_nan=True), f"{case.name} output {i}: 2 threads differ from 1"
    if case.name == "simd_transcendental":
        # the optimized kernels really ran: their rounding differs from libm's somewhere
        assert any(not np.array_equal(a, b) for a, b in zip(one, ref)), "optimized output is the reference's"


def _oa_run_outputs(target: str, path: Path, inputs: list[np.ndarray], reference: bool, tmp: Path) -> list[np.ndarray]:
    r = runner(target)
    args = [str(path)]
    for i, a in enumerate(inputs):
        f = tmp / f"input_{i}.npy"
        np.save(f, np.require(a, requirements="C"))
        args += ["--input", f"{i}={f}"]
    out = tmp / ("ref" if reference else "opt")
    out.mkdir(exist_ok=True)
    args += ["--output-dir", str(out)] + (["--reference"] if reference else [])
    res = r.run(args)
    r.check(res, "running the program")
    return [np.load(out / f"output_{o['index']}.npy") for o in res.of("output")]


@pytest.mark.parametrize("target", ["qemu-aarch64", "qemu-armv7"])
@pytest.mark.parametrize("case", SAME_FILE, ids=lambda c: c.name)
def test_optimized_vs_reference_neon(case: OpCase, target: str, tmp_path: Path) -> None:
    if target not in QEMU_TARGETS or not _ready(target):
        pytest.skip(f"{target} not available")
    _program(case)
    inputs = _inputs(case)
    ref = _oa_run_outputs(target, case_path(case), inputs, True, tmp_path)
    opt = _oa_run_outputs(target, case_path(case), inputs, False, tmp_path)
    _compare(opt, ref, case, f"NEON vs reference kernels ({target})")
