"""Placement by capability: a model split between the vendor template device (vendor.sim) and the
CPU exports from a device profile, runs on the host with the vendor library, matches PyTorch
eager and the CPU-only export; inspect shows where each op runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

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


def test_quantized_model_runs_its_int8_convs_on_the_sim(
        setup: tuple[Path, Path, torch.nn.Module, torch.Tensor]) -> None:
    """vendor.sim's profile has conv2d_q8 and linear_q8 (int8): a PT2E-quantized model preferred on
    it runs its int8 convolutions and linear there (the rest on the CPU) and gives the bytes of the
    CPU-only export; the sim reads the tensors' quantization parameters (it checks them against
    the arguments, so a file where they disagree is refused by the sim itself)."""
    import numpy as np
    from craft import segments_of
    from test_quant_model import _quantized

    from openaccel.fileformat import pack, unpack

    lib, profile, _, _ = setup
    devices = json.loads(profile.read_text())
    for d in devices:   # `openaccel devices --json`: int8 in the dtype sets
        assert d["ops"]["conv2d_q8"] == ["int8"] and d["ops"]["linear_q8"] == ["int8"], d["kind"]
    cpu_ops = next(d for d in devices if d["kind"] == "cpu")["ops"]
    assert cpu_ops["add_q8"] == cpu_ops["mean_q8"] == cpu_ops["mul_q8"] == ["int8"]
    assert "int8" in cpu_ops["max_pool2d"] and "int8" in cpu_ops["dequantize"]

    _, ep, ex = _quantized()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        split = oa.export(ep, ex, devices=profile, prefer=["vendor.sim", "cpu"])
        cpu = oa.export(ep, ex)
    placed = [(p.op, p.device) for p in split.instructions if p.op != "transfer"]
    assert [d for op, d in placed if op in ("conv2d_q8", "linear_q8")] == ["vendor.sim"] * 5, placed
    assert {d for op, d in placed if op in ("quantize", "add_q8", "max_pool2d", "dequantize")} == {"cpu"}, placed
    xs = [np.random.default_rng(s).standard_normal((1, 3, 16, 16)).astype(np.float32) for s in range(3)]
    on_sim, on_cpu = oa.load(split, device_libs=[str(lib)]), oa.load(cpu)
    assert on_sim.run_bundled_tests().ok
    for x in xs:
        np.testing.assert_array_equal(on_sim(x)[0].numpy(), on_cpu(x)[0].numpy())

    # a file whose conv input parameters disagree with the conv's input_zp: the sim refuses it
    fb, _ = unpack(split.buffer)
    m = fb.methods[0]
    conv = next(i for i in m.instructions if fb.operators[i.op].name == b"conv2d_q8")
    t = m.tensors[conv.inputs[0]]
    t.quant.zeroPoint = [int(t.quant.zeroPoint[0]) + 1]
    with pytest.raises(oa.OpenAccelError, match=r"quantization parameters .* disagree with argument input_zp"):
        oa.load(oa.Program(pack(fb, segments_of(split.buffer))), device_libs=[str(lib)])

    # the weights' zero points are not stored (all 0, format 1.2): the sim read `count` zeros above
    # (it checks each one, in the dry run and in prepare); one stored non-zero value is refused
    fb, _ = unpack(split.buffer)
    m = fb.methods[0]
    conv = next(i for i in m.instructions if fb.operators[i.op].name == b"conv2d_q8")
    w = m.tensors[conv.inputs[1]]
    assert w.quant.zeroPoint is None or len(w.quant.zeroPoint) == 0
    w.quant.zeroPoint = [0] * (len(w.quant.scale) - 1) + [1]
    with pytest.raises(oa.OpenAccelError, match=r"weight zero point \d+ is 1: expected 0 \(symmetric weights\)"):
        oa.load(oa.Program(pack(fb, segments_of(split.buffer))), device_libs=[str(lib)])


def test_wide_int8_layer_on_the_sim_reads_all_its_zero_points(
        setup: tuple[Path, Path, torch.nn.Module, torch.Tensor]) -> None:
    """a linear with 300 output channels (more than the 256 zeros the dry run has at hand: the zeros
    of its unstored weight zero points come from a temporary block there, from the method's memory
    in prepare); vendor.sim checks each of the 300 values and gives the CPU's bytes"""
    import numpy as np
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    lib, profile, _, _ = setup
    torch.manual_seed(0)
    ex = (torch.randn(4, 32),)
    pm = prepare_pt2e(torch.export.export(torch.nn.Linear(32, 300).eval(), ex).module(),
                      XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
    for _ in range(4):
        pm(torch.randn(4, 32))
    ep = torch.export.export(convert_pt2e(pm), ex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        split = oa.export(ep, ex, devices=profile, prefer=["vendor.sim", "cpu"])
        cpu = oa.export(ep, ex)
    assert [p.device for p in split.instructions if p.op == "linear_q8"] == ["vendor.sim"]
    (w,) = [q for q in split.quant_params() if q.axis == 0]
    assert len(w.scale) == 300 and not w.zero_point_stored
    x = np.random.default_rng(2).standard_normal((4, 32)).astype(np.float32)
    np.testing.assert_array_equal(oa.load(split, device_libs=[str(lib)])(x)[0].numpy(), oa.load(cpu)(x)[0].numpy())


def test_prefer_cpu_keeps_everything_on_the_cpu(setup: tuple[Path, Path, torch.nn.Module, torch.Tensor]) -> None:
    _, profile, model, x = setup
    prog = oa.export(model, (x,), devices=profile, prefer=["cpu", "vendor.sim"])
    assert prog.devices == ["cpu"] and all(p.device == "cpu" for p in prog.instructions)


def test_unknown_preferred_device_is_an_error(setup: tuple[Path, Path, torch.nn.Module, torch.Tensor]) -> None:
    _, profile, model, x = setup
    with pytest.raises(oa.ExportError, match=r"'npu\.x' is not in the device profile"):
        oa.export(model, (x,), devices=profile, prefer=["npu.x", "cpu"])


# ---- the CPU boundary: placement is decided before the CPU-only rewrites ------------------------
class ThreeConvs(torch.nn.Module):
    """3x3 stride-1 convolutions big enough for Winograd on the CPU"""

    def __init__(self) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(16, 16, 3, padding=1) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c in self.convs:
            x = c(x)
        return x


def _profile(path: Path, profile: Path, ops: set[str]) -> Path:
    """the vendor device's profile cut down to `ops` (the device still runs everything it has)"""
    devs = json.loads(profile.read_text())
    for d in devs:
        if d["kind"] == "vendor.sim":
            d["ops"] = {k: v for k, v in d["ops"].items() if k in ops}
    path.write_text(json.dumps(devs))
    return path


def _runs_like_eager(prog: oa.Program, lib: Path, model: torch.nn.Module, x: torch.Tensor) -> None:
    mod = oa.load(prog, device_libs=[str(lib)])
    assert mod.run_bundled_tests().ok
    (got,) = mod(x)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("options,on_cpu", [
    ({}, {"conv2d_winograd"}),
    ({"layout": "nhwc", "winograd_convs": False}, {"conv2d_nhwc", "permute"}),
])
def test_prefer_a_vendor_device_keeps_its_convolutions_there(
        setup: tuple[Path, Path, torch.nn.Module, torch.Tensor], options: dict[str, Any], on_cpu: set[str]) -> None:
    """the CPU would run these as conv2d_winograd (or conv2d_nhwc): preferred on vendor.sim, which
    has conv2d, they stay conv2d on vendor.sim, and nothing is reported as falling back"""
    lib, profile, _, _ = setup
    torch.manual_seed(1)
    model, x = ThreeConvs().eval(), torch.randn(1, 16, 16, 16)
    cpu_ops = {p.op for p in oa.export(model, (x,), bundle_tests=False, **options).instructions}
    assert cpu_ops == on_cpu, cpu_ops
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = oa.export(model, (x,), devices=profile, prefer=["vendor.sim", "cpu"], **options)
    assert not [w for w in caught if issubclass(w.category, oa.ExportWarning)]
    convs = [(p.op, p.device) for p in prog.instructions if p.op.startswith("conv")]
    assert convs == [("conv2d", "vendor.sim")] * 3, convs
    _runs_like_eager(prog, lib, model, x)


def test_ops_falling_back_to_the_cpu_are_counted_and_explained(
        setup: tuple[Path, Path, torch.nn.Module, torch.Tensor], tmp_path: Path) -> None:
    _, profile, model, x = setup
    want = (r"3 ops will run on the CPU although vendor.sim is preferred: its profile has no "
            r"max_pool2d \(float32\) x1, sigmoid \(float32\) x1, mean \(float32\) x1")
    with pytest.warns(oa.ExportWarning, match=want):
        oa.export(model, (x,), devices=profile, prefer=["vendor.sim", "cpu"])
    # `openaccel export` prints it among the passes
    pt2 = tmp_path / "net.pt2"
    torch.export.save(torch.export.export(model, (x,)), pt2)
    r = subprocess.run([sys.executable, "-m", "openaccel", "export", str(pt2), "--devices", str(profile),
                        "--prefer", "vendor.sim,cpu", "--no-bundle"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert re.search(r"  ! " + want + r"\n  ✓ assign devices", r.stderr), r.stderr


class Block(torch.nn.Module):
    """a stem, an inverted-residual block with its residual add, and a head"""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.expand = torch.nn.Conv2d(8, 16, 1)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.project = torch.nn.Conv2d(16, 8, 1)
        self.head = torch.nn.Linear(8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu6(self.stem(x))
        z = self.project(F.relu6(self.dw(F.relu6(self.expand(y)))))
        y = torch.relu(y + z)
        return self.head(y.flatten(2).transpose(1, 2).reshape(64, 8))   # 64 rows: a packed linear on the CPU


def test_cpu_rewrites_work_around_an_accelerators_ops(
        setup: tuple[Path, Path, torch.nn.Module, torch.Tensor], tmp_path: Path) -> None:
    """with only add and relu on vendor.sim, the CPU's part still goes channels-last with its
    block fused and its linear packed: permutes where the CPU's NHWC values meet the device's ops,
    every op the device was given stays there, and the answers are right"""
    lib, profile, _, _ = setup
    torch.manual_seed(2)
    model, x = Block().eval(), torch.randn(1, 3, 8, 8)
    small = _profile(tmp_path / "devices.json", profile, {"add", "relu"})
    with pytest.warns(oa.ExportWarning, match=r"will run on the CPU although vendor.sim is preferred"):
        prog = oa.export(model, (x,), devices=small, prefer=["vendor.sim", "cpu"], layout="nhwc")
    placed = [(p.op, p.device) for p in prog.instructions if p.op != "transfer"]
    assert [op for op, dev in placed if dev == "vendor.sim"] == ["add", "relu"], placed
    cpu = {op for op, dev in placed if dev == "cpu"}
    assert {"conv2d_nhwc", "mbconv_nhwc", "linear_packed", "permute"} <= cpu, placed
    _runs_like_eager(prog, lib, model, x)
