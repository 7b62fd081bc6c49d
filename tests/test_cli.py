"""The CLI journeys of contracts.md: export an archive, inspect, test, run, bench; exit codes and
closing lines; fast commands never import torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import openaccel as oa
from openaccel import zoo


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def mlp_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("cli")
    torch.manual_seed(0)
    model = zoo.MLP((32, 64, 10)).eval()
    ex = (torch.randn(1, 32),)
    archive = d / "mlp.pt2"
    torch.export.save(torch.export.export(model, ex), str(archive))
    r = cli("export", str(archive), "-o", str(d / "mlp.oab"))
    assert r.returncode == 0, r.stderr
    return archive, d / "mlp.oab"


def test_export_then_test_passes(mlp_files: tuple[Path, Path]) -> None:
    _, oab = mlp_files
    r = cli("test", str(oab))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "1 passed, 0 failed"
    assert "PASS example_inputs on host" in r.stdout


def test_export_prints_steps_and_summary(tmp_path: Path, mlp_files: tuple[Path, Path]) -> None:
    archive, _ = mlp_files
    r = cli("export", str(archive), "-o", str(tmp_path / "m.oab"))
    assert r.returncode == 0
    for step in ("to_edge", "fold constants", "lower to openaccel ops", "plan memory", "serialize"):
        assert step in r.stderr
    assert "memory plan: arena" in r.stdout and "wrote" in r.stdout


def test_inspect_text_and_json(mlp_files: tuple[Path, Path]) -> None:
    _, oab = mlp_files
    r = cli("inspect", str(oab))
    assert r.returncode == 0
    assert "linear" in r.stdout and "act=1" in r.stdout and "input  x: float32[1, 32]" in r.stdout
    j = json.loads(cli("inspect", str(oab), "--json").stdout)
    assert j["ops"] == ["linear"]  # the ReLU is fused into the first linear's epilogue
    assert j["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 32]}]
    assert [i["op"] for i in j["instructions"]] == ["linear", "linear"]
    assert [i["args"].get("act") for i in j["instructions"]] == [1, None]
    assert all(i["device"] == "cpu" for i in j["instructions"])
    assert j["memory_plan"]["pool0"] > 0


def test_run_with_npy_inputs_matches_torch(mlp_files: tuple[Path, Path], tmp_path: Path) -> None:
    archive, oab = mlp_files
    x = np.random.default_rng(1).standard_normal((1, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = cli("run", str(oab), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "output_0.npy")
    ep = torch.export.load(str(archive))
    want = ep.module()(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bench_reports_latency_and_memory(mlp_files: tuple[Path, Path]) -> None:
    _, oab = mlp_files
    r = cli("bench", str(oab), "--runs", "5", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["runs"] == 5 and j["median_ms"] > 0 and j["arena_bytes"] > 0 and j["emulated"] is False


def test_fast_commands_do_not_import_torch(mlp_files: tuple[Path, Path]) -> None:
    _, oab = mlp_files
    code = ("import sys, openaccel.cli as c; rc = c.main(['inspect', sys.argv[1]]); "
            "c.main(['targets']); print('TORCH' if 'torch' in sys.modules else 'NO-TORCH'); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, str(oab)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("NO-TORCH")


def test_targets_lists_every_target() -> None:
    r = cli("targets", "--json")
    assert r.returncode == 0
    names = {t["name"] for t in json.loads(r.stdout)}
    assert {"host", "x86_64-linux", "qemu-aarch64", "qemu-aarch64-v82", "qemu-armv7", "qemu-riscv64"} <= names


def test_devices_host_reports_real_isa_keys() -> None:
    r = cli("devices", "--json")
    assert r.returncode == 0, r.stderr
    (dev,) = json.loads(r.stdout)
    assert dev["kind"] == "cpu"
    flags = open("/proc/cpuinfo").read()
    assert dev["queries"]["cpu.avx2"] == int(" avx2 " in flags)
    assert dev["queries"]["cpu.cores"] >= 1


def test_missing_cross_compiler_says_what_to_install(tmp_path: Path) -> None:
    """With no cross compiler (or cmake) on PATH, targets and build-runtime name the packages to
    install instead of failing inside CMake."""
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path), "OPENACCEL_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "openaccel", "targets", "--json"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    rv = next(t for t in json.loads(r.stdout) if t["name"] == "qemu-riscv64")
    assert not rv["ready"] and "riscv64-linux-gnu-gcc" in rv["missing"]
    assert rv["install"] == "apt-get install -y gcc-riscv64-linux-gnu qemu-user cmake"
    r = subprocess.run([sys.executable, "-m", "openaccel", "build-runtime", "--target", "qemu-riscv64"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    text = " ".join(r.stderr.split())
    assert "riscv64-linux-gnu-gcc" in text and "install with: apt-get install -y gcc-riscv64-linux-gnu" in text


@pytest.mark.qemu
def test_devices_on_emulated_aarch64_report_neon() -> None:
    r = cli("devices", "--target", "qemu-aarch64", "--json")
    assert r.returncode == 0, r.stderr
    (dev,) = json.loads(r.stdout)
    assert dev["kind"] == "cpu"
    assert dev["queries"]["cpu.arch"] == 2  # OA_CPU_ARCH_AARCH64
    assert dev["queries"]["cpu.neon"] == 1 and dev["queries"]["cpu.avx2"] == 0
    assert "conv2d" in dev["ops"] and "float32" in dev["ops"]["conv2d"]


def test_export_no_winograd_keeps_convolutions_direct(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU()).eval()
    archive = tmp_path / "conv.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(1, 8, 16, 16),)), str(archive))
    ops = {}
    for flag in ((), ("--no-winograd",)):
        out = tmp_path / f"conv{len(flag)}.oab"
        assert cli("export", str(archive), "-o", str(out), *flag).returncode == 0
        ops[flag] = json.loads(cli("inspect", str(out), "--json").stdout)["ops"]
        assert cli("test", str(out)).stdout.strip().splitlines()[-1] == "1 passed, 0 failed"
    assert ops[()] == ["conv2d_winograd"]
    assert ops[("--no-winograd",)] == ["conv2d"]


def test_oa_run_profile_lists_ops_and_instructions(mlp_files: tuple[Path, Path]) -> None:
    from openaccel.runtime.runner import Runner

    _, oab = mlp_files
    res = Runner("host").run([str(oab), "--bench", "3", "--profile", "--json"])
    assert res.returncode == 0
    per_op = {e["op"]: e for e in res.of("profile")}
    assert set(per_op) == {"linear"} and per_op["linear"]["instructions"] == 2
    per_ins = res.of("profile_instruction")
    assert sorted(e["index"] for e in per_ins) == [0, 1]  # every instruction once, slowest first
    assert per_ins[0]["ms"] >= per_ins[1]["ms"]
    assert abs(sum(e["percent"] for e in per_ins) - 100.0) < 0.1
    # the kernel each instruction was prepared with: an optimized variant (its ISA), or "ref"
    from openaccel.runtime.host import CPU_ISAS

    assert all(e["kernel"] in CPU_ISAS for e in per_ins), per_ins
    ref = Runner("host").run([str(oab), "--bench", "1", "--profile", "--json", "--reference"])
    assert {e["kernel"] for e in ref.of("profile_instruction")} == {"ref"}
    runner = Runner("host")
    text = subprocess.run(runner.command([str(oab), "--bench", "3", "--profile"]), capture_output=True, text=True)
    assert text.returncode == 0 and "slowest instructions:" in text.stdout and "#0 " in text.stdout


def test_unknown_target_is_an_error_listing_the_known_ones(mlp_files: tuple[Path, Path], tmp_path: Path) -> None:
    archive, _ = mlp_files
    r = cli("export", str(archive), "--target", "qemu-foo", "-o", str(tmp_path / "m.oab"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    text = " ".join(r.stderr.split())
    assert "unknown target 'qemu-foo'; known targets:" in text
    assert all(t in text for t in ("host", "qemu-aarch64", "qemu-armv7", "qemu-riscv64", "x86_64-linux"))
    assert not (tmp_path / "m.oab").exists()
    with pytest.raises(oa.ToolchainError, match=r"unknown target 'qemu-foo'; known targets: .*qemu-armv7"):
        oa.export(zoo.MLP((8, 4)).eval(), (torch.randn(1, 8),), target="qemu-foo")


def test_targets_can_be_called_twice() -> None:
    code = ("import openaccel as oa; a = oa.targets(); b = oa.targets(); "
            "from openaccel.targets import get_target; import openaccel.runtime.runner; c = oa.targets(); "
            "print(len(a), len(b), len(c))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    n = r.stdout.split()
    assert n[0] == n[1] == n[2] and int(n[0]) >= 6


class _Gelu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)


def test_export_reference_float64_bundles_the_defined_answer(tmp_path: Path) -> None:
    """--reference float64: the bundled expected outputs come from a float64 copy of the model, so
    gelu(+inf) is +inf on every CPU (float32 eager gives NaN on some Intel CPUs, inf on AMD)."""
    x = torch.tensor([float("inf"), 1.0, -2.0, 3.4e38])
    archive = tmp_path / "gelu.pt2"
    torch.export.save(torch.export.export(_Gelu(), (x,)), str(archive))
    out = tmp_path / "gelu.oab"
    r = cli("export", str(archive), "-o", str(out), "--reference", "float64")
    assert r.returncode == 0, r.stderr
    ((_, _, (want,), _, _),) = oa.Program.load(out).tests()
    assert want[0] == float("inf") and want[3] == np.float32(3.4e38)
    r = cli("test", str(out))
    assert r.returncode == 0 and r.stdout.strip().endswith("1 passed, 0 failed"), r.stdout + r.stderr
    r = cli("export", str(archive), "-o", str(out), "--reference", "float16")
    assert r.returncode == 2 and "invalid choice: 'float16'" in r.stderr
