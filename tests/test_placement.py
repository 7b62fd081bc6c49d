"""Placement by capability: a model split between the vendor template device (vendor.sim) and the
CPU exports from a device profile, runs on the host with the vendor library, matches PyTorch
eager and the CPU-only export; inspect shows where each op runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa
from openaccel.conformance import build_vendor_example

pytestmark = pytest.mark.slow


class Net(torch.nn.Module):
    """conv/relu/linear/add (the sim has them) mixed with ops it lacks (max_pool, sigmoid, mean)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.c1(x))
        y = F.max_pool2d(y, 2)
        z = self.c2(y)
        y = torch.sigmoid(z) + y
        return self.fc(y.mean((2, 3)))


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, torch.nn.Module, torch.Tensor]:
    d = tmp_path_factory.mktemp("placement")
    lib = build_vendor_example()
    profile = d / "devices.json"
    profile.write_text(json.dumps(oa.devices("host", device_libs=[str(lib)])))
    torch.manual_seed(0)
    return lib, profile, Net().eval(), torch.randn(1, 3, 16, 16)


def test_split_model_runs_and_matches(setup: tuple[Path, Path, torch.nn.Module, torch.Tensor], tmp_path: Path) -> None:
    lib, profile, model, x = setup
    prog = oa.export(model, (x,), devices=profile, prefer=["vendor.sim", "cpu"])
    placed = {(p.op, p.device) for p in prog.instructions}
    assert ("conv2d", "vendor.sim") in placed and ("linear", "vendor.sim") in placed
    assert ("max_pool2d", "cpu") in placed and ("sigmoid", "cpu") in placed and ("mean", "cpu") in placed
    assert any(p.op == "transfer" for p in prog.instructions)
    assert prog.devices == ["cpu", "vendor.sim"]
    assert len([k for k in prog.memory_plan if k.startswith("pool")]) == 2

    mod = oa.load(prog, device_libs=[str(lib)])
    assert mod.run_bundled_tests().ok
    fresh = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    (got,) = mod(fresh)
    with torch.no_grad():
        want = model(fresh)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    (cpu_only,) = oa.load(oa.export(model, (x,)))(fresh)
    torch.testing.assert_close(got, cpu_only, atol=1e-5, rtol=1e-5)

    path = tmp_path / "split.oab"
    prog.save(path)
    r = subprocess.run([sys.executable, "-m", "openaccel", "inspect", str(path), "--json"], capture_output=True,
                       text=True, timeout=120)
    doc = json.loads(r.stdout)
    assert {i["device"] for i in doc["instructions"]} == {"cpu", "vendor.sim"}
    assert any(i["events"] for i in doc["instructions"])
    r = subprocess.run([sys.executable, "-m", "openaccel", "test", str(path), "--device", str(lib)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("1 passed, 0 failed"), r.stdout + r.stderr
    # without the vendor library the runtime says which device is missing
    r = subprocess.run([sys.executable, "-m", "openaccel", "test", str(path)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 2 and "'vendor.sim'" in r.stderr and "available: cpu" in r.stderr, r.stderr
    # the device library's own diagnostics reach the user: it refuses an unknown fault and says why
    r = subprocess.run([sys.executable, "-m", "openaccel", "test", str(path), "--device", str(lib)],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "OA_SIM_FAULT": "bogus"})
    assert r.returncode != 0 and "vendor.sim: OA_SIM_FAULT=bogus is not a fault this simulator knows" in r.stderr, \
        r.stdout + r.stderr


def test_prefer_cpu_keeps_everything_on_the_cpu(setup: tuple[Path, Path, torch.nn.Module, torch.Tensor]) -> None:
    _, profile, model, x = setup
    prog = oa.export(model, (x,), devices=profile, prefer=["cpu", "vendor.sim"])
    assert prog.devices == ["cpu"] and all(p.device == "cpu" for p in prog.instructions)


def test_unknown_preferred_device_is_an_error(setup: tuple[Path, Path, torch.nn.Module, torch.Tensor]) -> None:
    _, profile, model, x = setup
    with pytest.raises(oa.ExportError, match=r"'npu\.x' is not in the device profile"):
        oa.export(model, (x,), devices=profile, prefer=["npu.x", "cpu"])
