"""CPU features: targets declare them (toolchains/targets/*.toml `cpu_features`), the exporter
writes them into the file (Program.required_features), `openaccel inspect` shows them, and a
runtime on a CPU without them refuses the file with a message naming what is needed, the target
and what the CPU has. An unknown feature name in a file is an invalid program naming the string.

AVX-512 cannot be emulated by QEMU 7.2, so the x86_64-avx512 file runs natively where the CPU has
AVX-512 and is refused natively where it does not; the refusal is also checked on every machine by
running the baseline x86-64 runner under `qemu-x86_64 -cpu Haswell` (a CPU without AVX-512)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.errors import CpuFeatureError, ProgramError, ToolchainError
from openaccel.targets import KNOWN_CPU_FEATURES, _load, get_target

from helpers import runner

AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl")
C_FEATURES = Path(__file__).resolve().parents[1] / "runtime_c" / "src" / "cpu" / "required_features.c"


def _model() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return zoo.MLP((8, 16, 4)).eval(), (torch.randn(2, 8),)


def _export(target: str, tmp_path: Path) -> Path:
    model, example = _model()
    path = tmp_path / f"mlp_{target}.oab"
    oa.export(model, example, target=target).save(path)
    return path


def _host_queries() -> dict[str, int]:
    r = subprocess.run([sys.executable, "-m", "openaccel", "devices", "--json"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    queries: dict[str, int] = json.loads(r.stdout)[0]["queries"]
    return {k.removeprefix("cpu."): v for k, v in queries.items()}


def test_targets_declare_cpu_features() -> None:
    assert get_target("x86_64-avx512").cpu_features == AVX512
    assert get_target("x86_64-linux").cpu_features == ()
    assert get_target("qemu-riscv64-v").cpu_features == ("v",)
    assert get_target("qemu-riscv64").cpu_features == ()
    assert get_target("qemu-aarch64").cpu_features == ("neon",)
    assert get_target("qemu-aarch64-v86").cpu_features == ("neon", "fp16", "dotprod", "i8mm")
    # the same toolchain as x86_64-linux: only the file's requirement differs
    a, b = get_target("x86_64-avx512"), get_target("x86_64-linux")
    assert (a.c_flags, a.cmake_toolchain, a.static) == (b.c_flags, b.cmake_toolchain, b.static)


def test_python_and_c_know_the_same_feature_names() -> None:
    text = C_FEATURES.read_text()
    block = text[text.index("known_features[] = {"):text.index("};", text.index("known_features[] = {"))]
    import re

    assert tuple(re.findall(r'"(\w+)"', block)) == KNOWN_CPU_FEATURES


def test_an_unknown_cpu_feature_in_a_target_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text('name = "bad"\ncpu_features = ["avx1024"]\n')
    with pytest.raises(ToolchainError, match=r"bad.toml: cpu_features \['avx1024'\] are not CPU features"):
        _load(p)


def test_the_rvv_vector_length_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    t = get_target("qemu-riscv64-v")
    monkeypatch.delenv("OA_RVV_VLEN", raising=False)
    assert t.run_prefix() == ["qemu-riscv64", "-cpu", "rv64,v=true,vext_spec=v1.0,vlen=128"]
    monkeypatch.setenv("OA_RVV_VLEN", "512")
    assert t.run_prefix()[-1].endswith("vlen=512")
    monkeypatch.setenv("OA_RVV_VLEN", "96")
    with pytest.raises(ToolchainError, match=r"OA_RVV_VLEN='96' is not a valid vlen for target qemu-riscv64-v; "
                                             r"choose one of 128, 256, 512, 1024"):
        t.run_prefix()


def test_files_carry_the_targets_features_and_inspect_shows_them(tmp_path: Path) -> None:
    path = _export("x86_64-avx512", tmp_path)
    prog = oa.Program.load(path)
    assert prog.required_features == list(AVX512) and prog.target == "x86_64-avx512"
    assert "required CPU features: avx512f, avx512bw, avx512dq, avx512vl" in prog.summary()
    r = subprocess.run([sys.executable, "-m", "openaccel", "inspect", str(path), "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["required_features"] == list(AVX512)
    assert oa.Program.load(_export("host", tmp_path)).required_features == []


def test_an_avx512_file_runs_where_the_cpu_has_it_and_is_refused_where_not(tmp_path: Path) -> None:
    path = _export("x86_64-avx512", tmp_path)
    model, example = _model()
    q = _host_queries()
    if all(q.get(f) for f in AVX512):
        (got,) = oa.load(path)(*example)
        torch.testing.assert_close(got, model(*example).detach(), atol=1e-5, rtol=1e-5)
        res = runner("x86_64-avx512").test(path)
        assert [t["passed"] for t in res.of("test")] == [True]
        pytest.skip("this CPU has AVX-512: the file ran; the refusal is checked under qemu-x86_64 -cpu Haswell")
    lacks = ", ".join(f for f in AVX512 if not q.get(f))
    want = (r"this file needs CPU features avx512f, avx512bw, avx512dq, avx512vl \(exported for target "
            r"x86_64-avx512\); this CPU \(x86_64\) has .*avx2.*; it lacks " + lacks)
    with pytest.raises(CpuFeatureError, match=want):
        oa.load(path)(*example)
    with pytest.raises(CpuFeatureError, match=want):
        runner("x86_64-avx512").test(path)


@pytest.mark.qemu
def test_an_avx512_file_is_refused_on_an_emulated_cpu_without_it(tmp_path: Path) -> None:
    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-x86_64 is not installed (apt-get install -y qemu-user)")
    path = _export("x86_64-avx512", tmp_path)
    haswell = dataclasses.replace(get_target("x86_64-linux"), emulator="qemu-x86_64",
                                  emulator_args=("-cpu", "Haswell"), runs_natively_on="")
    from openaccel.runtime.runner import Runner

    with pytest.raises(CpuFeatureError, match=r"this file needs CPU features avx512f, avx512bw, avx512dq, avx512vl "
                                              r"\(exported for target x86_64-avx512\); this CPU \(x86_64\) has "
                                              r"sse4_1, avx, avx2, fma, f16c; it lacks avx512f, avx512bw"):
        Runner(haswell, build=runner("x86_64-linux").build).test(path)


@pytest.mark.qemu
def test_an_rvv_file_is_refused_on_a_riscv_cpu_without_v(tmp_path: Path) -> None:
    path = _export("qemu-riscv64-v", tmp_path)
    assert oa.Program.load(path).required_features == ["v"]
    want = (r"this file needs CPU features v \(exported for target qemu-riscv64-v\); this CPU \(riscv64\) has "
            r"no optional features; it lacks v")
    with pytest.raises(CpuFeatureError, match=want):
        runner("qemu-riscv64").test(path)          # the rv64gc board's runtime under -cpu rv64
    from openaccel.runtime.runner import Runner

    no_v = dataclasses.replace(get_target("qemu-riscv64-v"), emulator_args=("-cpu", "rv64"), emulator_options=())
    with pytest.raises(CpuFeatureError, match=want):  # the rv64gcv runtime itself on a CPU without V
        Runner(no_v, build=runner("qemu-riscv64-v").build).test(path)


@pytest.mark.qemu
@pytest.mark.parametrize("vlen", [128, 512])
def test_the_rvv_cpu_reports_v_and_its_vector_length(vlen: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OA_RVV_VLEN", str(vlen))
    (dev,) = runner("qemu-riscv64-v").devices()
    assert dev["queries"]["cpu.v"] == 1 and dev["queries"]["cpu.vlen"] == vlen, dev["queries"]
    assert dev["name"] == "cpu (riscv64, rvv)"
    (plain,) = runner("qemu-riscv64").devices()
    assert plain["queries"]["cpu.v"] == 0 and plain["queries"]["cpu.vlen"] == 0


def test_an_unknown_required_feature_is_an_invalid_program(tmp_path: Path) -> None:
    path = _export("x86_64-avx512", tmp_path)
    data = path.read_bytes()
    assert data.count(b"avx512bw") == 1
    bad = tmp_path / "bad.oab"
    bad.write_bytes(data.replace(b"avx512bw", b"avx1024x"))
    want = r"Program.required_features\[1\] is 'avx1024x', not a CPU feature this runtime knows"
    with pytest.raises(ProgramError, match=want):
        oa.load(bad)
    with pytest.raises(ProgramError, match=want):
        runner("x86_64-linux").test(bad)


def test_the_host_device_answers_the_new_feature_keys() -> None:
    q = _host_queries()
    for key in (*AVX512, "avx512_vnni", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "v", "vlen"):
        assert key in q, f"cpu.{key} missing from {sorted(q)}"
    assert q["v"] == 0 and q["vlen"] == 0  # an x86 CPU
    for sub in ("avx512bw", "avx512dq", "avx512vl", "avx512_vnni"):
        assert not q[sub] or q["avx512f"], f"{sub} without avx512f"
