"""oa.quantize and `openaccel export --quantize int8 --calibration DIR`: a float model to an int8
.oab in one step, compared with the same PT2E steps done by hand (the defined answer: the
convert_pt2e graph in eager, calibrated on the same sets); the calibration directory's layout and
its errors; and the quantized programs the exporter refuses before folding (quant_checks.py),
each naming the node and the model line."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.cli import main
from openaccel.exporter import quant, quant_checks
from openaccel.runtime.host import HostSession

# the module (`openaccel.quantize` the attribute is the function oa.quantize, as for oa.targets)
oq = importlib.import_module("openaccel.quantize")
pytestmark = pytest.mark.xdist_group("quantize")
THIS = "test_quantize.py:"


@pytest.fixture(autouse=True, scope="module")
def _reuse_quantizer_patterns() -> Any:
    """Test speed only: XNNPACKQuantizer traces its 12 conv-bn pattern graphs with torch.export on
    every prepare_pt2e (about 10 s on this machine, for any model); the graphs depend on nothing but
    the pattern, so the tests trace each once. Without the hook (another executorch), they are
    only slower."""
    import copy

    try:
        from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils
        real = utils._get_aten_graph_module_for_pattern
    except (ImportError, AttributeError):
        yield
        return
    cache: dict[Any, Any] = {}

    def cached(pattern: Any, example_inputs: tuple[Any, ...], is_cuda: bool = False, **kw: Any) -> Any:
        fn = getattr(pattern, "fn", None)
        try:
            cells = tuple(c.cell_contents for c in (fn.__closure__ or ())) if fn is not None else None
            key = (fn.__code__, cells, tuple(tuple(x.shape) for x in example_inputs), is_cuda,
                   tuple(sorted(kw.items()))) if fn is not None else None
            hash(key)
        except (AttributeError, TypeError, ValueError):
            key = None
        if key is None:
            return real(pattern, example_inputs, is_cuda, **kw)
        if key not in cache:
            cache[key] = real(pattern, example_inputs, is_cuda, **kw)
        return copy.deepcopy(cache[key])

    utils._get_aten_graph_module_for_pattern = cached
    yield
    utils._get_aten_graph_module_for_pattern = real


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)   # fused into c1 by prepare_pt2e
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 4 * 4, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.c1(x)))
        x = self.pool(torch.relu(self.c2(x)) + x)
        return self.fc(x.flatten(1))


class TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fa = torch.nn.Linear(16, 8)
        self.fb = torch.nn.Linear(12, 8)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fa(a) + self.fb(b))


def _sets(shape: Sequence[int], n: int, seed: int) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=g),) for _ in range(n)]


def pt2e_reference(model: torch.nn.Module | torch.export.ExportedProgram, example: tuple[torch.Tensor, ...],
                   sets: Sequence[tuple[torch.Tensor, ...]], per_channel: bool = True) -> Any:
    """The steps oa.quantize promises, by hand: the convert_pt2e model in eager."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gm = model.module() if isinstance(model, torch.export.ExportedProgram) else \
        torch.export.export(model.eval(), example).module()
    pm = prepare_pt2e(gm, oq.quantizer(per_channel))
    with torch.no_grad():
        for s in sets:
            pm(*s)
    return convert_pt2e(pm)


def quantized(model: torch.nn.Module, example: tuple[torch.Tensor, ...], n: int = 2) -> Any:
    """A PT2E-quantized program of `model` (XNNPACKQuantizer, per-channel)."""
    cm = pt2e_reference(model, example, _sets(example[0].shape, n, 7))
    return torch.export.export(cm, example)


def _output_scale(prog: oa.Program) -> float:
    last = [i for i in prog.instructions if i.op == "dequantize"][-1]
    return float(dict(last.args)["scale"])


def assert_matches_reference(prog: oa.Program, ref: Any, inputs: Sequence[tuple[torch.Tensor, ...]]) -> None:
    """Within 1 output step of the convert_pt2e graph (the rule rounds where eager's float ops round
    differently; docs/quantization.md measures 100% within 1 LSB on a bigger net)."""
    s = HostSession(prog.buffer, threads=1)
    got = np.concatenate([s.run([x.numpy() for x in xs])[0].ravel() for xs in inputs]).astype(np.float64)
    with torch.no_grad():
        want = np.concatenate([ref(*xs).numpy().ravel() for xs in inputs]).astype(np.float64)
    lsb = np.abs(got - want) / _output_scale(prog)
    assert lsb.max() <= 1 + 1e-3, f"max {lsb.max():.2f} output steps from the PT2E reference"
    assert float((lsb < 1e-3).mean()) >= 0.9, f"only {100 * float((lsb < 1e-3).mean()):.1f}% exact"


def int8_only(prog: oa.Program) -> None:
    ops = set(prog.ops)
    assert not {"conv2d", "conv2d_nhwc", "conv2d_winograd", "linear", "linear_packed", "addmm"} & ops, prog.ops


# ---- oa.quantize ---------------------------------------------------------------------------------
def test_quantize_conv_net_with_a_calibration_list(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = ConvNet().eval()
    ex = (torch.randn(1, 3, 8, 8),)
    cal = _sets((1, 3, 8, 8), 6, 1)
    steps: list[str] = []
    monkeypatch.setattr(oq, "PROGRESS_EVERY_S", 0.0)  # report every set (normally every 2 s)
    with warnings.catch_warnings():
        warnings.simplefilter("error", oq.CalibrationWarning)  # calibrated: no warning
        prog = oa.quantize(model, ex, cal, progress=lambda step, s: steps.append(step))
    assert {"conv2d_q8", "add_q8", "linear_q8"} <= set(prog.ops), prog.ops
    int8_only(prog)
    assert "calibrate: 3/6 sets" in steps and "calibrate (6 sets)" in steps, steps
    assert steps.index("convert_pt2e") < steps.index("fold int8 patterns"), steps
    assert all(r.passed for r in HostSession(prog.buffer).run_tests())
    assert_matches_reference(prog, pt2e_reference(model, ex, cal), _sets((1, 3, 8, 8), 8, 99))


def test_quantize_mlp_with_a_calibration_dir(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = zoo.MLP((32, 64, 10)).eval()
    ex = (torch.randn(1, 32),)
    cal = _sets((1, 32), 5, 2)
    for k, (x,) in enumerate(cal):
        np.save(tmp_path / f"{k:03d}.npy", x.numpy())
    prog = oa.quantize(model, ex, tmp_path, per_channel=False)
    assert prog.ops.count("linear_q8") == 1 and [i.op for i in prog.instructions].count("linear_q8") == 2
    int8_only(prog)
    assert_matches_reference(prog, pt2e_reference(model, ex, cal, per_channel=False), _sets((1, 32), 8, 98))


def test_quantize_two_inputs_with_one_folder_per_set(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TwoInputs().eval()
    ex = (torch.randn(1, 16), torch.randn(1, 12))
    g = torch.Generator().manual_seed(3)
    cal = [(torch.randn(1, 16, generator=g), torch.randn(1, 12, generator=g)) for _ in range(4)]
    for k, (a, b) in enumerate(cal):
        (tmp_path / f"set{k}").mkdir()
        np.save(tmp_path / f"set{k}" / "a.npy", a.numpy())
        np.save(tmp_path / f"set{k}" / "b.npy", b.numpy())
    prog = oa.quantize(model, ex, tmp_path)
    assert {"linear_q8", "add_q8"} <= set(prog.ops), prog.ops
    assert_matches_reference(prog, pt2e_reference(model, ex, cal), cal)


def test_without_calibration_warns() -> None:
    torch.manual_seed(0)
    with pytest.warns(oq.CalibrationWarning, match="no calibration data: the activation ranges come from the "
                      "example inputs alone") as w:
        prog = oa.quantize(zoo.MLP((8, 4)).eval(), (torch.randn(1, 8),))
    assert issubclass(oq.CalibrationWarning, oa.ExportWarning)
    assert any(Path(r.filename).name == "test_quantize.py" for r in w.list)   # points at the user's call
    assert "linear_q8" in prog.ops


def test_already_quantized_is_refused() -> None:
    torch.manual_seed(0)
    ex = (torch.randn(1, 8),)
    ep = quantized(zoo.MLP((8, 4)).eval(), ex)
    with pytest.raises(oq.AlreadyQuantizedError, match=r"already quantized.*\n  quantized_decomposed\."):
        oa.quantize(ep, ex, [ex])
    assert issubclass(oq.AlreadyQuantizedError, oa.ExportError)


# ---- the calibration directory's layout ----------------------------------------------------------
SPEC_X = [oq.InputSpec("x", (1, 4), np.dtype(np.float32))]
SPEC_AB = [oq.InputSpec("a", (1, 4), np.dtype(np.float32)), oq.InputSpec("b", (2,), np.dtype(np.int64))]


def _read_all(d: Path, specs: Sequence[oq.InputSpec]) -> list[oq.CalibrationSet]:
    return [oq.read_set(e, specs) for e in oq.calibration_dir_sets(d, specs)]


def test_calibration_dir_layouts(tmp_path: Path) -> None:
    flat = tmp_path / "flat"
    flat.mkdir()
    for k in (2, 0, 1):
        np.save(flat / f"{k:03d}.npy", np.full((1, 4), k, np.float32))
    (flat / ".hidden").write_text("skipped")
    sets = _read_all(flat, SPEC_X)
    assert [float(s.values[0][0, 0]) for s in sets] == [0.0, 1.0, 2.0]   # sorted name order
    nested = tmp_path / "nested"
    (nested / "s0").mkdir(parents=True)
    np.save(nested / "s0" / "a.npy", np.zeros((1, 4), np.float32))
    np.save(nested / "s0" / "b.npy", np.arange(2))
    (s,) = _read_all(nested, SPEC_AB)
    assert [v.dtype for v in s.values] == [np.float32, np.int64]


@pytest.mark.parametrize("case, match", [
    ("shape", r"001\.npy: input 'x' is float32\[1, 5\], the model takes float32\[1, 4\]"),
    ("dtype", r"001\.npy: input 'x' is float64\[1, 4\], the model takes float32\[1, 4\] \(save it as float32"),
    ("not npy", r"notes\.txt: not a \.npy file or a folder"),
    ("garbage", r"001\.npy: not a readable \.npy array"),
    ("mixed", r"holds both \.npy files \(000\.npy\) and folders \(sub\)"),
    ("empty", r"no calibration sets"),
    ("missing", r"nope: no such directory"),
])
def test_calibration_dir_errors(tmp_path: Path, case: str, match: str) -> None:
    d = tmp_path / "cal"
    d.mkdir()
    np.save(d / "000.npy", np.zeros((1, 4), np.float32))
    if case == "shape":
        np.save(d / "001.npy", np.zeros((1, 5), np.float32))
    elif case == "dtype":
        np.save(d / "001.npy", np.zeros((1, 4)))
    elif case == "not npy":
        (d / "notes.txt").write_text("x")
    elif case == "garbage":
        (d / "001.npy").write_bytes(b"\x93NUMPY garbage")
    elif case == "mixed":
        (d / "sub").mkdir()
    elif case == "empty":
        (d / "000.npy").unlink()
    elif case == "missing":
        d = tmp_path / "nope"
    with pytest.raises(oq.CalibrationError, match=match):
        _read_all(d, SPEC_X)


def test_calibration_folder_errors(tmp_path: Path) -> None:
    np.save(tmp_path / "000.npy", np.zeros((1, 4), np.float32))
    with pytest.raises(oq.CalibrationError, match=r"one-input models only; this model takes 2 inputs \(a, b\): "
                       r"put each set in a folder holding a\.npy, b\.npy"):
        _read_all(tmp_path, SPEC_AB)
    (tmp_path / "000.npy").unlink()
    (tmp_path / "s0").mkdir()
    np.save(tmp_path / "s0" / "a.npy", np.zeros((1, 4), np.float32))
    with pytest.raises(oq.CalibrationError, match=r"s0/b\.npy: missing \(the model takes b: int64\[2\]\)"):
        _read_all(tmp_path, SPEC_AB)
    np.save(tmp_path / "s0" / "b.npy", np.zeros(2, np.int64))
    np.save(tmp_path / "s0" / "c.npy", np.zeros(2, np.int64))
    with pytest.raises(oq.CalibrationError, match=r"s0/c\.npy: not an input of the model \(expected a\.npy, b\.npy\)"):
        _read_all(tmp_path, SPEC_AB)


def test_calibration_list_errors() -> None:
    ex = (torch.randn(1, 8),)
    model = zoo.MLP((8, 4)).eval()
    with pytest.raises(oq.CalibrationError, match=r"calibration set 1: input 'x' is float32\[2, 8\], the model takes "
                       r"float32\[1, 8\]"):
        oa.quantize(model, ex, [ex, (torch.randn(2, 8),)])
    with pytest.raises(oq.CalibrationError, match=r"calibration set 0: 2 input\(s\), the model takes 1"):
        oa.quantize(model, ex, [(ex[0], ex[0])])
    with pytest.raises(oq.CalibrationError, match="no input sets"):
        oa.quantize(model, ex, [])


# ---- the CLI ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def conv_archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, ConvNet]:
    d = tmp_path_factory.mktemp("qcli")
    torch.manual_seed(0)
    model = ConvNet().eval()
    ex = (torch.randn(1, 3, 8, 8),)
    archive = d / "conv.pt2"
    torch.export.save(torch.export.export(model, ex), str(archive))
    cal = d / "cal"
    cal.mkdir()
    for k, (x,) in enumerate(_sets((1, 3, 8, 8), 12, 5)):
        np.save(cal / f"{k:03d}.npy", x.numpy())
    return archive, cal, model


def test_cli_quantize_end_to_end(conv_archive: tuple[Path, Path, ConvNet], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    archive, cal, _ = conv_archive
    out = tmp_path / "conv_q8.oab"
    assert main(["export", str(archive), "--quantize", "int8", "--calibration", str(cal), "-o", str(out)]) == 0
    cap = capsys.readouterr()
    assert "calibrate (12 sets)" in cap.err and "prepare_pt2e" in cap.err and "no calibration data" not in cap.err
    prog = oa.Program.load(out)
    assert {"conv2d_q8", "add_q8", "linear_q8"} <= set(prog.ops), prog.ops
    int8_only(prog)
    assert main(["test", str(out)]) == 0
    loaded = torch.export.load(str(archive))
    sets = [(torch.from_numpy(np.load(f)),) for f in sorted(cal.glob("*.npy"))]
    ref = pt2e_reference(loaded, (sets[0][0],), sets)
    assert_matches_reference(prog, ref, _sets((1, 3, 8, 8), 8, 97))


def test_cli_quantize_errors(conv_archive: tuple[Path, Path, ConvNet], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    archive, cal, _ = conv_archive
    assert main(["export", str(archive), "--calibration", str(cal)]) == 2
    assert "--calibration applies with --quantize int8 only" in capsys.readouterr().err
    assert main(["export", str(archive), "--quantize", "int8", "--calibration", str(tmp_path / "none")]) == 2
    assert "none: no such directory" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    np.save(bad / "000.npy", np.zeros((1, 3, 8, 9), np.float32))
    assert main(["export", str(archive), "--quantize", "int8", "--calibration", str(bad)]) == 2
    assert "000.npy: input 'x' is float32[1, 3, 8, 9], the model takes float32[1, 3, 8, 8]" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["export", str(archive), "--quantize", "int4"])
    assert e.value.code == 2


def test_cli_quantize_without_calibration_warns_and_requantizing_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(0)
    ex = (torch.randn(1, 8),)
    archive = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(zoo.MLP((8, 4)).eval(), ex), str(archive))
    out = tmp_path / "mlp_q8.oab"
    assert main(["export", str(archive), "--quantize", "int8", "-o", str(out)]) == 0
    assert "! no calibration data" in capsys.readouterr().err
    assert "linear_q8" in oa.Program.load(out).ops
    q = tmp_path / "q.pt2"
    torch.export.save(quantized(zoo.MLP((8, 4)).eval(), ex), str(q))
    assert main(["export", str(q), "--quantize", "int8"]) == 2
    assert "already quantized" in capsys.readouterr().err
    assert main(["export", str(q), "-o", str(tmp_path / "q.oab")]) == 0   # without --quantize: folded as it is


# ---- bad inputs: what quant_checks.py refuses (and padding="same", which works) -------------------------
@pytest.mark.parametrize("kernel, dilation", [(3, 1), (4, 1), (2, 2)])
def test_padding_same_stays_int8(kernel: int, dilation: int) -> None:
    """torch.export writes padding="same" as the convolution's own padding when it is symmetric
    (odd kernels, or dilation making the total even) and as constant_pad_nd(0) -> convolution
    otherwise; the latter is padded in int8 by the zero point (exact), so both are conv2d_q8."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, kernel, padding="same", dilation=dilation), torch.nn.ReLU(),
                                torch.nn.Conv2d(4, 4, kernel, padding="same", dilation=dilation)).eval()
    ex = (torch.randn(1, 3, 7, 8),)
    cal = _sets((1, 3, 7, 8), 3, 4)
    prog = oa.quantize(model, ex, cal)
    assert prog.ops.count("conv2d_q8") == 1, prog.ops
    int8_only(prog)
    assert ("pad" in prog.ops) == ((kernel - 1) * dilation % 2 == 1)
    assert_matches_reference(prog, pt2e_reference(model, ex, cal), _sets((1, 3, 7, 8), 4, 96))


def test_dynamic_shapes_with_quantization(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(0)
    model = zoo.MLP((8, 4)).eval()
    ex = (torch.randn(2, 8),)
    batch = torch.export.Dim("batch", min=1, max=8)
    with pytest.raises(oa.ExportError, match="dynamic_shapes cannot be combined with quantization"):
        oa.quantize(model, ex, [ex], dynamic_shapes={"x": {0: batch}})
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    pm = prepare_pt2e(torch.export.export(model, ex, dynamic_shapes={"x": {0: batch}}).module(), oq.quantizer())
    pm(*ex)
    ep = torch.export.export(convert_pt2e(pm), ex, dynamic_shapes={"x": {0: batch}})
    with pytest.raises(oa.ExportError, match=r"dimension 0 of input 'x' is dynamic \(torch.export.Dim 'batch'"):
        oa.export(ep, ex)
    f = tmp_path / "dyn_q.pt2"
    torch.export.save(ep, str(f))
    assert main(["export", str(f)]) == 2
    assert "dimension 0 of input 'x' is dynamic" in capsys.readouterr().err


def test_x86_inductor_quantizer_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    torch.manual_seed(0)
    ex = (torch.randn(1, 3, 8, 8),)
    quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
    pm = prepare_pt2e(torch.export.export(ConvNet().eval(), ex).module(), quantizer)
    pm(*ex)
    ep = torch.export.export(convert_pt2e(pm), ex)
    with pytest.raises(quant_checks.ForeignQuantizationError,
                       match=r"(?s)uint8 activations.*X86InductorQuantizer.*\n  quantized_decomposed\.dequantize_per_"
                             rf"tensor\.default at \S*{THIS}\d+.*uint8 \[0, 255\], zero point \d+.*oa\.quantize"):
        oa.export(ep, ex)
    f = tmp_path / "x86.pt2"
    torch.export.save(ep, str(f))
    assert main(["export", str(f)]) == 2
    assert "X86InductorQuantizer" in capsys.readouterr().err


def test_torchao_affine_ops_are_refused() -> None:
    from torchao.quantization import IntxWeightOnlyConfig, quantize_

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8)).eval()
    quantize_(model, IntxWeightOnlyConfig())
    ex = (torch.randn(2, 16),)
    with pytest.raises(quant_checks.ForeignQuantizationError,
                       match=r"torchao's quantize_.*\n  torchao\.dequantize_affine\.default at \S+:\d+ in module '0'"):
        oa.export(torch.export.export(model, ex), ex)


def test_dynamic_quantization_runs_as_linear_dq8() -> None:
    """8da8w (is_dynamic=True) linears fold into linear_dq8 (tests/test_quant_dynamic.py has the
    numerics and the dynamic variants that stay refused)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    ex = (torch.randn(1, 8),)
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    pm = prepare_pt2e(torch.export.export(zoo.MLP((8, 4)).eval(), ex).module(), q)
    pm(*ex)
    assert oa.export(torch.export.export(convert_pt2e(pm), ex), ex).ops == ["linear_dq8"]


def _qd() -> Any:
    quant.register_ops()
    return torch.ops.quantized_decomposed


class PerChannelActivations(torch.nn.Module):
    """Activations quantized per channel: the runtime has no such quantize, and no float32 path."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("s", torch.full((3,), 0.05))
        self.register_buffer("z", torch.zeros(3, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = _qd().quantize_per_channel(x, self.s, self.z, 1, -128, 127, torch.int8)
        return _qd().dequantize_per_channel(q, self.s, self.z, 1, -128, 127, torch.int8) * 2


def test_quantized_op_without_fallback_is_refused() -> None:
    ex = (torch.randn(1, 3, 4, 4),)
    with pytest.raises(oa.UnsupportedOpError, match=r"no int8 kernel and no float32 fallback.*\n  quantized_decomposed"
                       rf"\.quantize_per_channel\.default at \S*{THIS}\d+: `q = _qd\(\)\.quantize_per_channel"):
        oa.export(torch.export.export(PerChannelActivations(), ex), ex)


class DequantizesFloat(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _qd().dequantize_per_tensor(x, 0.05, 0, -128, 127, torch.int8) * 2


class DequantizesInt32(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = _qd().quantize_per_tensor(x, 0.05, 0, -128, 127, torch.int8)
        return _qd().dequantize_per_tensor(q.to(torch.int32), 0.05, 0, -128, 127, torch.int8) * 2


@pytest.mark.parametrize("model, match", [
    (DequantizesFloat, rf"dequantize_per_tensor\.default at \S*{THIS}\d+: `return _qd\(\)\.dequantize_per_tensor"
                       r".*: dequantizes a floating-point tensor \('x', float32\) but names int8"),
    (DequantizesInt32, rf"dequantize_per_tensor\.default at \S*{THIS}\d+: .*dequantizes an integer tensor "
                       r"\('\w+', int32\) but names int8"),
])
def test_dequantize_of_a_tensor_that_is_not_int8(model: type[torch.nn.Module], match: str) -> None:
    ex = (torch.randn(1, 3, 4, 4),)
    with pytest.raises(quant.QuantParamError, match=match):
        oa.export(torch.export.export(model(), ex), ex)


def test_mismatched_quantize_dequantize_pair() -> None:
    """A dequantize reading a quantize's output with another scale: the fold would follow the
    dequantize (as eager does), but no quantizer writes such a pair; it is a damaged graph."""
    torch.manual_seed(0)
    ex = (torch.randn(1, 3, 8, 8),)
    cm = pt2e_reference(ConvNet(), ex, _sets((1, 3, 8, 8), 2, 6))
    for node in cm.graph.nodes:
        if node.op == "call_function" and "dequantize_per_tensor" in str(node.target) \
                and "quantize_per_tensor" in str(node.args[0].target):
            node.args = (node.args[0], node.args[1] * 2, *node.args[2:])
            break
    cm.recompile()
    with pytest.raises(quant_checks.InconsistentQuantError,
                       match=r"dequantize_per_tensor\.default at \S+:\d+.* reads '\w+' with scale [\d.e-]+, zero "
                             r"point -?\d+, range \[-128, 127\], int8, but quantized_decomposed\.quantize_per_tensor\."
                             r"default at .* wrote it with scale [\d.e-]+.*must use the same parameters"):
        oa.export(torch.export.export(cm, ex), ex)
