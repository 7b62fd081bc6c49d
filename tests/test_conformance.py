"""The device conformance suite: the built-in CPU device passes on the host and under
qemu-aarch64, the vendor device example (vendor.sim) passes, and each fault the example can
inject fails exactly the check that exists to catch it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from openaccel import opset
from openaccel.conformance import build_vendor_example, conformance_tool, example_runner, run_conformance
from openaccel.errors import RuntimeFailure
from openaccel.fileformat import FORMAT_MAJOR, FORMAT_MINOR, SegmentWriter, pack
from openaccel.oab.DeviceSlot import DeviceSlotT
from openaccel.oab.Instruction import InstructionT
from openaccel.oab.MemoryPlan import MemoryPlanT
from openaccel.oab.MemoryPool import MemoryPoolT
from openaccel.oab.Method import MethodT
from openaccel.oab.Operator import OperatorT
from openaccel.oab.Program import ProgramT
from openaccel.oab.Tensor import TensorT
from openaccel.oab.TensorData import TensorDataT
from openaccel.oab.TestCase import TestCaseT
from openaccel.targets import get_target

pytestmark = pytest.mark.slow

INTERFACE_CHECKS = [
    "properties", "queries", "alloc.alignment", "alloc.stats", "alloc.limits", "copy.roundtrip", "copy.wrap",
    "stream.ordering", "event.record_query", "event.host_wait_timeout", "event.elapsed",
    "event.cross_stream_wait", "event.sticky_failure", "device.synchronize",
]


INT8_CHECKS = [
    "op.conv2d_q8.int8", "op.linear_q8.int8", "op.add_q8.int8", "op.mul_q8.int8", "op.mean_q8.int8",
    "op.quantize.float32", "op.dequantize.int8", "op.dequantize.uint8", "op.max_pool2d.int8", "op.max_pool2d.uint8",
]


@pytest.fixture(scope="module")
def sim_lib() -> Path:
    return build_vendor_example()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, **(env or {})})


def test_cpu_device_passes_on_host() -> None:
    rep = run_conformance()
    assert rep.failed == 0, str(rep)
    assert [c.name for c in rep.checks][: len(INTERFACE_CHECKS)] == INTERFACE_CHECKS
    assert rep.devices[0]["kind"] == "cpu"
    # the CPU device is synchronous: the time-out check does not apply
    assert rep.result("event.host_wait_timeout") == "SKIP"
    for name in ("event.sticky_failure", "stream.ordering", "op.relu.float32", "op.linear.float32", "op.relu.int64"):
        assert rep.result(name) == "PASS", str(rep)
    # the int8 ops (the optimized conv2d_q8 / linear_q8 kernels against the reference), bit for bit
    for name in INT8_CHECKS:
        assert rep.result(name) == "PASS", str(rep)
        assert "(atol 0, rtol 0" in next(c.detail for c in rep.checks if c.name == name)
    # ops the CPU claims without a generator in the suite are listed, never silently dropped
    assert rep.result("op.copy") == "SKIP"


def test_cpu_device_passes_with_each_isa_forced() -> None:
    """every ISA the host's CPU device may use, alone (the others disabled with --isa), passes the
    op checks against the reference kernels; with no ISA it runs the reference kernels"""
    from openaccel.runtime.host import CPU_ISA_OPTIONS, CPU_ISAS, CpuDevice

    have = CpuDevice().properties()["queries"]["cpu.isas"]
    isas = [name for name, bit in CPU_ISAS.items() if have & bit]
    assert "portable" in isas
    # the AMX int8 tile (an option of avx512) alone too, where this CPU and build have it
    amx = [["avx512", "amx"]] if "avx512" in isas and have & CPU_ISA_OPTIONS["amx"] else []
    for forced in [[isa] for isa in isas] + amx + [[]]:
        rep = run_conformance(isas=forced, filter="op.")
        assert rep.failed == 0, f"--isa {','.join(forced)}: {rep}"
        assert rep.result("op.linear.float32") == "PASS" and rep.result("op.relu.float32") == "PASS"


@pytest.mark.qemu
def test_cpu_device_passes_under_qemu_aarch64() -> None:
    target = get_target("qemu-aarch64")
    if not target.ready:
        pytest.skip(f"qemu-aarch64 needs {', '.join(target.missing())}")
    rep = run_conformance(target="qemu-aarch64")
    assert rep.emulated
    assert rep.failed == 0, str(rep)
    assert "aarch64" in rep.devices[0]["name"]
    assert rep.result("event.sticky_failure") == "PASS"
    assert rep.result("op.linear.float32") == "PASS"


def test_vendor_sim_passes(sim_lib: Path) -> None:
    rep = run_conformance(sim_lib)
    assert rep.failed == 0, str(rep)
    assert rep.devices[0]["kind"] == "vendor.sim"
    # an asynchronous device runs every interface check (nothing skipped for lack of a feature)
    for name in INTERFACE_CHECKS:
        assert rep.result(name) == "PASS", str(rep)
    assert rep.result("op.relu.float32") == "PASS"
    assert rep.result("op.linear.float32") == "PASS"
    # its int8 ops give the reference kernels' bytes
    assert rep.result("op.conv2d_q8.int8") == "PASS" and rep.result("op.linear_q8.int8") == "PASS", str(rep)
    # claimed ops are either checked or reported as skipped (conv2d and add light up with their
    # reference kernels)
    for op in ("add", "conv2d"):
        assert rep.result(f"op.{op}.float32") in ("PASS", "SKIP")


def test_vendor_sim_small_pool_and_two_devices(sim_lib: Path) -> None:
    rep = run_conformance(sim_lib, seed=5, env={"OA_SIM_MEMORY_BYTES": "8M", "OA_SIM_DEVICES": "2"})
    assert rep.failed == 0, str(rep)
    assert [d["index"] for d in rep.devices] == [0, 1]
    assert "8388608/8388608" in rep.checks[0].detail
    assert rep.result("event.host_wait_timeout", device=1) == "PASS"


@pytest.mark.parametrize("fault, expected", [
    ("misaligned", {"alloc.alignment"}),
    ("out_of_order", {"stream.ordering"}),
    ("wrong_result", {"op.relu.float32"}),
    ("q8_rounding", {"op.conv2d_q8.int8"}),
    ("no_sticky", {"event.sticky_failure"}),
])
def test_each_fault_fails_exactly_its_check(sim_lib: Path, fault: str, expected: set[str]) -> None:
    rep = run_conformance(sim_lib, env={"OA_SIM_FAULT": fault})
    assert set(rep.failures()) == expected, str(rep)
    assert rep.returncode == 1


def test_fault_messages_say_what_went_wrong(sim_lib: Path) -> None:
    details = {}
    for fault, check in [("misaligned", "alloc.alignment"), ("out_of_order", "stream.ordering"),
                         ("wrong_result", "op.relu.float32"), ("q8_rounding", "op.conv2d_q8.int8"),
                         ("no_sticky", "event.sticky_failure")]:
        rep = run_conformance(sim_lib, env={"OA_SIM_FAULT": fault}, filter=check)
        (c,) = [c for c in rep.checks if c.name == check]
        details[fault] = c.detail
    assert "16 bytes off a 256-byte boundary" in details["misaligned"]
    assert "out of order" in details["out_of_order"]
    assert "outside tolerance" in details["wrong_result"] and "reference" in details["wrong_result"]
    assert "case 'ties: multiplier 2^11, shift 12" in details["q8_rounding"], details["q8_rounding"]
    assert "returned OK" in details["no_sticky"] or "reports OK" in details["no_sticky"]


def test_skeleton_device_loads_and_the_suite_lists_what_is_missing() -> None:
    """examples/vendor_device/skeleton_device.c (every slot "unsupported"): the suite runs to the end
    on it, claims no op, and each failed check names an unsupported slot: a vendor's to-do list."""
    rep = run_conformance("skeleton")
    assert rep.returncode == 1, str(rep)
    assert rep.devices[0]["kind"] == "vendor.skeleton"
    assert [c.name for c in rep.checks] == INTERFACE_CHECKS  # no op.* rows at all
    assert rep.result("properties") == "PASS" and rep.result("queries") == "PASS", str(rep)
    assert "0 ops claimed" in next(c for c in rep.checks if c.name == "queries").detail
    failed = [c for c in rep.checks if c.result == "FAIL"]
    assert {c.name for c in failed} >= {"alloc.alignment", "copy.roundtrip", "stream.ordering"}, str(rep)
    assert all("UNSUPPORTED" in c.detail for c in failed), str(rep)
    assert all(rep.result(n) == "SKIP" for n in INTERFACE_CHECKS if n.startswith("event.")), str(rep)
    # the runtime's own loader sees the device, with no op to place on it
    lib = build_vendor_example().parent / "libopenaccel_vendor_skeleton.so"
    r = cli("devices", "--device", str(lib), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (skel,) = [d for d in json.loads(r.stdout) if d["kind"] == "vendor.skeleton"]
    assert skel["ops"] == {} and skel["queries"] == {} and skel["flags"] == 0


def test_cli_table_and_exit_codes(sim_lib: Path) -> None:
    r = cli("conformance")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1].endswith(" passed, 0 failed")
    assert any(line.startswith("event.sticky_failure") and "PASS" in line for line in lines)
    r = cli("conformance", "--device", str(sim_lib), env={"OA_SIM_FAULT": "no_sticky"})
    assert r.returncode == 1
    assert r.stdout.strip().splitlines()[-1].endswith(" passed, 1 failed")
    assert any(line.startswith("event.sticky_failure") and "FAIL" in line for line in r.stdout.splitlines())


def test_cli_json_with_the_example(sim_lib: Path) -> None:
    r = cli("conformance", "--device", "sim", "--json", "--filter", "event.")
    assert r.returncode == 0, r.stdout + r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    checks = [e for e in events if e["event"] == "check"]
    assert {c["name"] for c in checks} == {n for n in INTERFACE_CHECKS if n.startswith("event.")}
    assert events[-1]["event"] == "summary" and events[-1]["failed"] == 0 and events[-1]["passed"] == 5


def test_suite_knows_every_op_of_the_op_set() -> None:
    out = subprocess.run([str(conformance_tool()), "--list-ops"], capture_output=True, text=True, check=True).stdout
    names = {line.split()[0] for line in out.splitlines()}
    gens = {line.split()[0] for line in out.splitlines() if line.endswith(" generator")}
    assert names == set(opset.OPS)
    assert {"relu", "add", "mul", "sigmoid", "conv2d", "linear", "matmul", "softmax", "max_pool2d", "avg_pool2d",
            "layer_norm", "conv2d_q8", "linear_q8", "add_q8", "mul_q8", "mean_q8", "quantize", "dequantize"} <= gens


def test_library_errors_are_clear(tmp_path: Path, sim_lib: Path) -> None:
    with pytest.raises(RuntimeFailure, match="cannot load"):
        run_conformance(tmp_path / "missing.so")
    with pytest.raises(RuntimeFailure, match="does not export oa_device_factory"):
        run_conformance(_a_library_without_factory(tmp_path))
    with pytest.raises(RuntimeFailure, match="could not create device 0: INVALID_ARGUMENT"):
        run_conformance(sim_lib, env={"OA_SIM_FAULT": "no_such_fault"})


def _a_library_without_factory(tmp_path: Path) -> Path:
    src = tmp_path / "empty.c"
    src.write_text("int openaccel_test_symbol(void) { return 1; }\n")
    lib = tmp_path / "libempty.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


# ---- the executor with an asynchronous device whose memory the host cannot address -------------------

def _sim_program(path: Path) -> None:
    """A program placed on two device slots, built by hand (the exporter places every op on the CPU
    today): CPU relu -> transfer to vendor.sim -> linear (+ fused relu, wrapped constants) and add on
    the sim's stream -> transfer back, signalling event 0 -> CPU relu waiting for that event."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = (rng.standard_normal((5, 8)) / np.sqrt(8)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    want = np.maximum(np.maximum(x, 0) @ w.T + b, 0) * np.float32(1.5)
    seg = SegmentWriter()
    tensors: list[TensorT] = []

    def tensor(name: str, shape: tuple[int, ...], pool: int = 0, off: int = 0, data: np.ndarray | None = None) -> int:
        t = TensorT()
        t.name, t.dtype, t.shape, t.nbytes = name, 6, list(shape), int(np.prod(shape)) * 4
        if data is not None:
            t.storage, t.segment, t.offset = 1, seg.add(data.tobytes()), 0
        else:
            t.storage, t.pool, t.offset = 0, pool, off
        tensors.append(t)
        return len(tensors) - 1

    ops = ["relu", "linear", "add"]

    def ins(op: str, inputs: list[int], outputs: list[int], device: int, kind: int = 0, ints: tuple[int, ...] = (),
            floats: tuple[float, ...] = (), waits: tuple[int, ...] = (), signal: int = -1) -> InstructionT:
        i = InstructionT()
        i.op, i.inputs, i.outputs, i.device, i.kind = ops.index(op), inputs, outputs, device, kind
        i.ints, i.floats, i.waitEvents, i.signalEvent = list(ints), list(floats), list(waits), signal
        return i

    X, X2 = tensor("x", (4, 8), 0, 0), tensor("x_relu", (4, 8), 0, 128)
    W, B = tensor("w", (5, 8), data=w), tensor("b", (5,), data=b)
    XD, YD, ZD = tensor("x_dev", (4, 8), 1, 0), tensor("y_dev", (4, 5), 1, 256), tensor("z_dev", (4, 5), 1, 512)
    Y, OUT = tensor("z_host", (4, 5), 0, 256), tensor("out", (4, 5), 0, 384)
    m = MethodT()
    m.name, m.inputs, m.outputs, m.tensors, m.numEvents, m.debug = "forward", [X], [OUT], tensors, 1, []
    m.instructions = [
        ins("relu", [X], [X2], 0),
        ins("relu", [X2], [XD], 1, kind=1),  # TRANSFER host -> vendor.sim
        ins("linear", [XD, W, B], [YD], 1, ints=(1,)),
        ins("add", [YD, YD], [ZD], 1, floats=(0.5,)),
        ins("relu", [ZD], [Y], 1, kind=1, signal=0),  # TRANSFER vendor.sim -> host
        ins("relu", [Y], [OUT], 0, waits=(0,)),
    ]
    m.devices = []
    for kind in ("cpu", "vendor.sim"):
        slot = DeviceSlotT()
        slot.kind, slot.index = kind, 0
        m.devices.append(slot)
    plan = MemoryPlanT()
    plan.pools, plan.naiveBytes = [], 2048
    for dev in (0, 1):
        pool = MemoryPoolT()
        pool.device, pool.size, pool.alignment = dev, 1024, 64
        plan.pools.append(pool)
    m.memoryPlan = plan

    def data(a: np.ndarray) -> TensorDataT:
        d = TensorDataT()
        d.dtype, d.shape, d.segment, d.offset, d.nbytes = 6, list(a.shape), seg.add(a.tobytes()), 0, a.nbytes
        return d

    tc = TestCaseT()
    tc.name, tc.inputs, tc.outputs, tc.atol, tc.rtol = "sim_program", [data(x)], [data(want)], 1e-5, 1e-4
    m.tests = [tc]
    p = ProgramT()
    p.formatMajor, p.formatMinor = FORMAT_MAJOR, FORMAT_MINOR
    p.producer, p.target, p.requiredFeatures = "test", "host", []
    p.operators = []
    for name in ops:
        o = OperatorT()
        o.name, o.version = name, 1
        p.operators.append(o)
    p.methods = [m]
    path.write_bytes(pack(p, seg))


def test_executor_runs_a_program_on_the_sim(tmp_path: Path, sim_lib: Path) -> None:
    prog = tmp_path / "sim_program.oab"
    _sim_program(prog)
    runner = example_runner()
    r = subprocess.run([str(runner), str(prog), str(sim_lib)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[vendor.sim]" in r.stdout and r.stdout.strip().splitlines()[-1] == "2 passed, 0 failed"
    # without the device library the file's vendor.sim slot cannot bind
    r = subprocess.run([str(runner), str(prog), str(_a_library_without_factory(tmp_path))], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "oa_device_factory" in r.stderr
    # a device that reorders its stream computes garbage: the bundled test notices
    r = subprocess.run([str(runner), str(prog), str(sim_lib)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OA_SIM_FAULT": "out_of_order"})
    assert r.returncode == 1 and "FAIL sim_program" in r.stdout
