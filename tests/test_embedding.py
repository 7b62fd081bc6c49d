"""Embedding journey: `cmake --install` gives a CMake package and a pkg-config file; the
examples/c_app firmware-style program builds against the installed package for qemu-aarch64,
runs a model from one static arena, and the runtime makes no heap allocation."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.paths import project_root
from openaccel.runtime.build import build_runtime
from openaccel.targets import get_target

pytestmark = [pytest.mark.slow, pytest.mark.qemu]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    t = get_target("qemu-aarch64")
    if t.missing():
        pytest.skip(f"needs {t.missing()}: {t.install_hint()}")
    d = tmp_path_factory.mktemp("embed")
    b = build_runtime(t)
    subprocess.run(["cmake", "--install", str(b.directory), "--prefix", str(d / "install")], check=True,
                   capture_output=True)
    torch.manual_seed(0)
    prog = oa.export(zoo.MLP((64, 32, 10)).eval(), (torch.randn(1, 64),))
    model = d / "model.oab"
    prog.save(model)
    return d, model


def test_install_layout(installed: tuple[Path, Path]) -> None:
    d, _ = installed
    inst = d / "install"
    assert (inst / "lib" / "libopenaccel.a").exists()
    assert (inst / "include" / "openaccel" / "openaccel.h").exists()
    assert (inst / "lib" / "cmake" / "openaccel" / "openaccelConfig.cmake").exists()
    pc = (inst / "lib" / "pkgconfig" / "openaccel.pc").read_text()
    assert "-lopenaccel" in pc and "prefix=${pcfiledir}/../.." in pc
    r = subprocess.run(["pkg-config", "--cflags", "--libs", str(inst / "lib" / "pkgconfig" / "openaccel.pc")],
                       capture_output=True, text=True)
    if r.returncode == 0:  # pkg-config itself is optional on the machine
        assert f"-I{inst}/lib/pkgconfig/../../include" in r.stdout and "-lopenaccel" in r.stdout


@pytest.mark.parametrize("embedded", [True, False], ids=["linked-in", "from-file"])
def test_c_app_builds_against_package_and_runs_without_heap(installed: tuple[Path, Path], embedded: bool) -> None:
    d, model = installed
    build = d / f"c_app-{embedded}"
    cmd = ["cmake", "-S", str(project_root() / "examples" / "c_app"), "-B", str(build),
           f"-DCMAKE_TOOLCHAIN_FILE={project_root() / 'toolchains' / 'aarch64-linux-gnu.cmake'}",
           f"-DCMAKE_PREFIX_PATH={d / 'install'}"]
    if shutil.which("ninja"):
        cmd += ["-G", "Ninja"]
    if embedded:
        cmd.append(f"-DOA_APP_MODEL={model}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    run = ["qemu-aarch64", "-cpu", "cortex-a72", str(build / "c_app")] + ([] if embedded else [str(model)])
    r = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bundled test: PASS" in r.stdout
    assert "heap allocations by the runtime: 0" in r.stdout
    assert ("linked in" if embedded else "from file") in r.stdout
    # the counter is real: the allocating convenience API is seen by it
    probe = subprocess.run(["qemu-aarch64", str(build / "c_app"), "--heap-probe", str(model)],
                           capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0 and "heap allocations by oa_method_create: " in probe.stdout
    assert "by oa_method_create: 0" not in probe.stdout
