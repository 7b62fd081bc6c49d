"""Dynamically quantized linears (PT2E "8da8w": XNNPACKQuantizer with is_dynamic=True) run as one
linear_dq8 instruction: the activation's scale / zero point chosen per call exactly as PyTorch's
choose_qparams.tensor, int8 x int8 summed exactly, float32 out (docs/quantization.md, "Dynamic
quantization"; the rule: runtime_c/src/cpu/kernels/ref/quant_dynamic.c).

Tolerances:
- a linear whose input is the graph input quantizes to the same int8 values as PyTorch, so the
  file's output is the float64 model of the rule bit for bit, and differs from the eager
  convert_pt2e graph (float32 sums of the dequantized values) by at most the float32 summation
  error, bounded here by 2 K 2^-24 (|x_dq| @ |w_dq|^T + |b|) (K = in_features);
- in a model, a linear's input comes from earlier float32 ops that may differ from eager by an ulp,
  which may move the chosen scale by an ulp and (rarely) a quantized value by one step: the models
  are compared with atol = rtol = 1e-4 (outputs of magnitude ~1), which their bundled vectors use too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.exporter import quant, quant_checks

from helpers import CACHE, check_on_boards, randn

TOL = (1e-4, 1e-4)


def _qd() -> Any:
    quant.register_ops()
    return torch.ops.quantized_decomposed


def _dynamic(model: torch.nn.Module, ex: tuple[torch.Tensor, ...]) -> torch.nn.Module:
    """The convert_pt2e graph of `model`, linears quantized 8da8w (the eager reference)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    pm = prepare_pt2e(torch.export.export(model.eval(), ex).module(), q)
    pm(*ex)
    return convert_pt2e(pm)


def _export(cm: torch.nn.Module, ex: tuple[torch.Tensor, ...], name: str) -> tuple[oa.Program, Path]:
    prog = oa.export(torch.export.export(cm, ex), ex, tolerance=TOL)
    path = CACHE / "quant_dynamic" / f"{name}.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    prog.save(path)
    return prog, path


def _rule64(x: torch.Tensor, wq: torch.Tensor, sw: torch.Tensor, b: torch.Tensor | None, eps: float,
            per_token: bool = False) -> np.ndarray:
    """The float64 model of linear_dq8: PyTorch's own choose_qparams / quantize give the int8
    values, the sum is exact, then double(acc) * (double(s) * double(s_w)) + double(b) -> float32."""
    qd = _qd()
    if per_token:
        s, zp = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
        xq = qd.quantize_per_token(x, s, zp, -128, 127, torch.int8)
        s, zp = s.reshape(-1, 1).numpy(), zp.reshape(-1, 1).numpy()
    else:
        s, zp = qd.choose_qparams.tensor(x, -128, 127, eps, torch.int8)
        xq = qd.quantize_per_tensor.tensor(x, s, zp, -128, 127, torch.int8)
        s, zp = np.full((1, 1), float(s)), np.full((1, 1), int(zp))
    acc = (xq.to(torch.int64).reshape(-1, x.shape[-1]).numpy() - zp) @ wq.to(torch.int64).numpy().T
    scale = s.astype(np.float32).astype(np.float64) * sw.to(torch.float64).numpy()[None, :]
    y = acc.astype(np.float64) * scale
    if b is not None:
        y = y + b.to(torch.float64).numpy()[None, :]
    return y.astype(np.float32).reshape(*x.shape[:-1], wq.shape[0])


class Linear(torch.nn.Module):
    def __init__(self, k: int, n: int, bias: bool = True) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(k, n, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_is_the_rule_bit_for_bit(bias: bool) -> None:
    torch.manual_seed(0)
    k, n = 37, 5
    ex = (randn(3, 4, k, seed=1),)
    cm = _dynamic(Linear(k, n, bias), ex)
    prog, path = _export(cm, ex, f"linear_bias{int(bias)}")
    assert prog.ops == ["linear_dq8"], prog.ops
    m = oa.load(prog)
    wq, sw = _weights(cm)   # the converted graph's int8 weight and its scales
    b = _bias(cm)
    cases = {
        "example": ex[0],
        "all positive (zero point -128)": randn(3, 4, k, seed=2).abs() + 0.5,
        "all negative (zero point 127)": -(randn(3, 4, k, seed=3).abs() + 0.1),
        "zeros (scale = eps)": torch.zeros(3, 4, k),
        "tiny (scale = eps, values round to 0 or +-1)": randn(3, 4, k, seed=4) * 1e-4,
        "wide": randn(3, 4, k, seed=5) * 1e4,
        "ties (x / s on .5)": (torch.arange(3 * 4 * k, dtype=torch.float32).reshape(3, 4, k) % 11 - 5) / 2,
    }
    for what, x in cases.items():
        got = m(x)[0]
        want64 = torch.from_numpy(_rule64(x, wq, sw, b, 2.0 ** -12))
        assert torch.equal(got, want64), f"{what}: differs from the float64 model of the rule by " \
            f"{(got - want64).abs().max()}"
        eager = cm(x)
        qd = _qd()
        s, zp = qd.choose_qparams.tensor(x, -128, 127, 2.0 ** -12, torch.int8)
        xdq = qd.dequantize_per_tensor.tensor(qd.quantize_per_tensor.tensor(x, s, zp, -128, 127, torch.int8), s, zp,
                                              -128, 127, torch.int8)
        wdq = (wq.float() * sw[:, None]).abs()
        bound = 2 * k * 2.0 ** -24 * (xdq.abs() @ wdq.T + (b.abs() if b is not None else 0))
        assert bool(((got - eager).abs() <= bound + 1e-30).all()), f"{what}: beyond the float32 summation bound"
    for what, x in (("NaN", ex[0].clone().index_put_((torch.tensor(1),), torch.tensor(math.nan))),
                     ("inf", ex[0].clone().index_put_((torch.tensor(0),), torch.tensor(math.inf)))):
        assert bool(torch.isnan(m(x)[0]).all()), f"{what} in the input: every output is NaN"
    assert m.run_bundled_tests().ok
    check_on_boards(path, f"linear_bias{int(bias)}")


def _weights(cm: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    consts = {k: v for k, v in [*cm.named_buffers(), *cm.named_parameters()]}
    wq = next(v for v in consts.values() if v.dtype == torch.int8)
    sw = next(v for k, v in consts.items() if "scale" in k)
    return wq, sw.to(torch.float32)


def _bias(cm: torch.nn.Module) -> torch.Tensor | None:
    bs = [v for k, v in [*cm.named_parameters(), *cm.named_buffers()] if k.endswith("bias")]
    return bs[0].detach() if bs else None


def test_mlp_8da8w_on_host_and_boards() -> None:
    torch.manual_seed(0)
    ex = (randn(2, 784, seed=7),)
    cm = _dynamic(zoo.MLP(), ex)
    prog, path = _export(cm, ex, "mlp")
    assert prog.ops == ["linear_dq8", "relu"], prog.ops
    # int8 weights in the file: (784 + 512) * 512 + 512 * 10 bytes, not 4x that
    n_w = 784 * 512 + 512 * 512 + 512 * 10
    assert path.stat().st_size < 1.3 * n_w, f"{path.stat().st_size} bytes for {n_w} int8 weights"
    m = oa.load(prog)
    for seed in (7, 8):
        x = randn(2, 784, seed=seed)
        torch.testing.assert_close(m(x)[0], cm(x), atol=TOL[0], rtol=TOL[1])
    assert m.run_bundled_tests().ok
    check_on_boards(path, "mlp")


class Block(torch.nn.Module):
    """A 2-layer transformer-ish block: attention (q/k/v/o linears) and an MLP, layer norms, residuals."""

    def __init__(self, d: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.h = heads
        self.layers = torch.nn.ModuleList(torch.nn.ModuleDict(dict(
            ln1=torch.nn.LayerNorm(d), q=torch.nn.Linear(d, d), k=torch.nn.Linear(d, d), v=torch.nn.Linear(d, d),
            o=torch.nn.Linear(d, d), ln2=torch.nn.LayerNorm(d), up=torch.nn.Linear(d, 2 * d),
            down=torch.nn.Linear(2 * d, d))) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        for layer in self.layers:
            L: Any = layer
            y = L["ln1"](x)
            q, k, v = (L[n](y).reshape(b, t, self.h, d // self.h).transpose(1, 2) for n in ("q", "k", "v"))
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.h), dim=-1) @ v
            x = x + L["o"](a.transpose(1, 2).reshape(b, t, d))
            x = x + L["down"](torch.relu(L["up"](L["ln2"](x))))
        return x


def test_transformer_block_8da8w_on_host_and_boards() -> None:
    torch.manual_seed(0)
    ex = (randn(1, 6, 32, seed=9),)
    cm = _dynamic(Block(), ex)
    prog, path = _export(cm, ex, "block")
    float_linears = {"linear", "linear_packed", "addmm", "quantize", "dequantize"} & set(prog.ops)  # matmul: q @ k^T
    assert "linear_dq8" in prog.ops and not float_linears, prog.ops
    m = oa.load(prog)
    for seed in (9, 10):
        x = randn(1, 6, 32, seed=seed)
        torch.testing.assert_close(m(x)[0], cm(x), atol=TOL[0], rtol=TOL[1])
    assert m.run_bundled_tests().ok
    check_on_boards(path, "block")


# ---- a hostile file ------------------------------------------------------------------------------------
def _tampered(monkeypatch: Any, change: Any) -> oa.Program:
    from openaccel.exporter.lower import RULES, supported_edge_ops

    supported_edge_ops()
    base = RULES["openaccel.linear_dq8"]

    def patched(ctx: Any, node: Any) -> None:
        base(ctx, node)
        change(ctx.instrs[-1])

    monkeypatch.setitem(RULES, "openaccel.linear_dq8", patched)
    ex = (randn(2, 8, seed=11),)
    return oa.export(torch.export.export(_dynamic(Linear(8, 3), ex), ex), ex, bundle_tests=False)


def _with_input(i: int, data: torch.Tensor) -> Any:
    from openaccel.ir import Value

    def change(ins: Any) -> None:
        old = ins.inputs[i]
        ins.inputs[i] = Value(name=old.name + ".bad", dtype=data.dtype, shape=tuple(data.shape), data=data)
    return change


@pytest.mark.parametrize("change, match", [
    (lambda ins: ins.floats.__setitem__(0, 0.0), r"linear_dq8.*argument eps = 0"),
    (lambda ins: ins.ints.__setitem__(1, -128), r"linear_dq8.*qmin = -128, qmax = -128"),
    (_with_input(2, torch.tensor([0.01, -0.02, 0.01])), r"linear_dq8.*weight_scale.*element 1 = -0.02"),
    (_with_input(2, torch.tensor([0.01, math.nan, 0.01])), r"linear_dq8.*weight_scale.*element 1 = nan"),
    (_with_input(2, torch.full((2,), 0.01)),
     r"linear_dq8.*weight_scale.*expected shape \[3\] or \[1\], received \[2\]"),
    (_with_input(1, torch.zeros(3, 9, dtype=torch.int8)), r"linear_dq8.*last dim 8 does not match.*in_features 9"),
], ids=["eps", "range", "negative scale", "NaN scale", "scale shape", "weight shape"])
def test_tampered_file_is_refused(monkeypatch: Any, change: Any, match: str) -> None:
    prog = _tampered(monkeypatch, change)
    with pytest.raises(oa.RuntimeFailure, match=match):
        oa.load(prog)(randn(2, 8, seed=11))


def test_per_token_linear_is_the_rule_bit_for_bit() -> None:
    """choose_qparams_per_token_asymmetric -> quantize_per_token -> dequantize_per_token -> linear
    (written by hand: XNNPACKQuantizer chooses per tensor): per_token 1, one scale per row."""
    ex = (randn(2, 5, 8, seed=13),)
    model = Hand("per token")
    prog, path = _export(model, ex, "per_token")
    assert prog.ops == ["linear_dq8"], prog.ops
    m = oa.load(prog)
    x = randn(2, 5, 8, seed=14)
    x[0, 0] = 0.0                       # scale = eps
    x[0, 1] = x[0, 1].abs() + 0.5       # zero point from the min
    x[0, 2] = -(x[0, 2].abs() + 0.1)    # from the max
    x[1, 3, 2] = math.nan               # that row only is NaN
    x[1, 4, 5] = -math.inf
    got = m(x)[0]
    want = torch.from_numpy(_rule64(x, model.w, model.sw, None, 0.0, per_token=True))
    finite = torch.isfinite(x).all(-1)
    assert int(finite.sum()) == 8
    assert torch.equal(got[finite], want[finite]), "differs from the float64 model of the rule"
    assert bool(torch.isnan(got[~finite]).all()), "a row with NaN / inf: NaN"
    torch.testing.assert_close(got[finite], model(x)[finite], atol=1e-5, rtol=1e-5)
    check_on_boards(path, "per_token")


# ---- what the rule cannot express: export errors naming node and model line -----------------------------
class Hand(torch.nn.Module):
    """A dynamically quantized linear written out by hand with one variation."""

    def __init__(self, variant: str) -> None:
        super().__init__()
        self.variant = variant
        g = torch.Generator().manual_seed(0)
        self.register_buffer("w", torch.randint(-127, 128, (3, 8), generator=g, dtype=torch.int8))
        self.register_buffer("sw", torch.full((3,), 0.01))
        zw = torch.tensor([0, 3, 0]) if variant == "asymmetric" else torch.zeros(3, dtype=torch.int64)
        self.register_buffer("zw", zw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qd = _qd()
        if self.variant == "symmetric choose":
            s, z = qd.choose_qparams_symmetric.tensor(x, -128, 127, 2.0 ** -12, torch.int8)
            xdq = qd.dequantize_per_tensor.tensor(qd.quantize_per_tensor.tensor(x, s, z, -128, 127, torch.int8), s, z,
                                                  -128, 127, torch.int8)
        elif self.variant == "per token":
            s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
            xdq = qd.dequantize_per_token(qd.quantize_per_token(x, s, z, -128, 127, torch.int8), s, z, -128, 127,
                                          torch.int8, torch.float32)
        else:
            s, z = qd.choose_qparams.tensor(x, -128, 127, 2.0 ** -12, torch.int8)
            xdq = qd.dequantize_per_tensor.tensor(qd.quantize_per_tensor.tensor(x, s, z, -128, 127, torch.int8), s, z,
                                                  -128, 127, torch.int8)
        if self.variant == "not a linear":
            return torch.relu(xdq)
        w = qd.dequantize_per_channel(self.w, self.sw, self.zw, 0, -127, 127, torch.int8)
        return torch.nn.functional.linear(xdq, w)


@pytest.mark.parametrize("variant, match", [
    ("asymmetric", r"aten\.mm\.default at \S+:\d+.*: its input is dynamically quantized but weight zero points are "
                   r"not 0 \(asymmetric weights\)"),
    ("symmetric choose", r"in a way openaccel cannot run.*\n  quantized_decomposed\.choose_qparams_symmetric"
                         r"\.tensor at \S+:\d+"),
    ("not a linear", r"(?s)not part of a dynamically quantized linear.*\n  quantized_decomposed\.dequantize_per_tensor"
                     r"\.tensor at \S+:\d+.*: feeds aten\.relu\.default at \S+:\d+.*, which has no dynamically "
                     r"quantized kernel"),
])
def test_dynamic_variants_without_a_kernel_are_export_errors(variant: str, match: str) -> None:
    ex = (randn(2, 8, seed=12),)
    with pytest.raises(quant_checks.DynamicQuantizationError, match=match):
        oa.export(torch.export.export(Hand(variant), ex), ex)
