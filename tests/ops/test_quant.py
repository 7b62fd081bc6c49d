"""int8 reference kernels (ref/quant.c) against an independent numpy implementation of the written
requantization rule (docs/quantization.md): bit-exact, on shapes with remainders, strides,
padding, groups / depthwise, per-tensor and per-channel multipliers, extreme scales and zero
points; the exporter's multiplier / shift / bias quantization (exporter/quant.py); bad qparams
refused with messages naming the argument."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import torch
from craft import Builder

from openaccel import dtypes
from openaccel.errors import OpenAccelError, RuntimeFailure
from openaccel.exporter import quant
from openaccel.opset import encode_args
from openaccel.runtime.host import HostSession

quant.register_ops()
I8, I32, F32 = dtypes.code_of("int8"), dtypes.code_of("int32"), dtypes.code_of("float32")
CODE = {np.dtype(np.int8): I8, np.dtype(np.int32): I32, np.dtype(np.float32): F32, np.dtype(np.uint8): 0}


def program(op: str, ins: Sequence[np.ndarray | None], const: Sequence[bool], out_shape: Sequence[int],
            out_dtype: Any, **args: Any) -> bytes:
    """One `op` instruction: runtime inputs (const False) in call order, constants in the file."""
    b = Builder(pool=1 << 22)
    off = 0
    idx: list[int] = []
    for k, (a, c) in enumerate(zip(ins, const)):
        if a is None:
            idx.append(-1)
            continue
        if c:
            idx.append(b.tensor(f"c{k}", a.shape, CODE[a.dtype], data=a))
        else:
            idx.append(b.tensor(f"in{k}", a.shape, CODE[a.dtype], offset=off))
            b.inputs.append(idx[-1])
            off += (a.nbytes + 63) // 64 * 64
    o = b.tensor("out", out_shape, CODE[np.dtype(out_dtype)], offset=off)
    b.outputs.append(o)
    ints, floats = encode_args(op, **args)
    b.instr(op, idx, [o], ints, floats)
    return b.build()


def run(op: str, ins: Sequence[np.ndarray | None], const: Sequence[bool], out_shape: Sequence[int],
        out_dtype: Any, threads: int = 1, **args: Any) -> np.ndarray:
    s = HostSession(program(op, ins, const, out_shape, out_dtype, **args), threads=threads)
    return s.run([a for a, c in zip(ins, const) if a is not None and not c])[0]


# ---- the rule in numpy (an independent implementation) --------------------------------------------
def np_round_shift(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """round_half_even(p / 2^n), elementwise, int64 (|p| < 2^62)."""
    p = p.astype(np.int64)
    n = np.broadcast_to(np.asarray(n, dtype=np.int64), p.shape)
    mag = np.abs(p)
    div = np.left_shift(np.int64(1), n)
    q, rem = np.divmod(mag, div)
    half = np.where(n > 0, div // 2, 1)
    up = (n > 0) & ((rem > half) | ((rem == half) & (q % 2 == 1)))
    q = q + up
    return np.where(p < 0, -q, q)


def np_requant(acc: np.ndarray, mult: np.ndarray, shift: np.ndarray, zp: int, lo: int, hi: int,
               axis: int) -> np.ndarray:
    shape = [1] * acc.ndim
    shape[axis] = -1
    m = np.asarray(mult, dtype=np.int64).reshape(shape if np.size(mult) > 1 else [1] * acc.ndim)
    s = np.asarray(shift, dtype=np.int64).reshape(shape if np.size(shift) > 1 else [1] * acc.ndim)
    acc = np.clip(acc, -(2**31), 2**31 - 1)
    r = np_round_shift(acc * m, np.broadcast_to(s, acc.shape))
    return np.clip(r + zp, lo, hi).astype(np.int8)


def np_conv_acc(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, zp: int, stride: tuple[int, int],
                pad: tuple[int, int], dil: tuple[int, int], groups: int) -> np.ndarray:
    n, _, h, wd = x.shape
    cout, cig, kh, kw = w.shape
    xs = np.pad(x.astype(np.int64) - zp, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    acc = np.zeros((n, cout, oh, ow), dtype=np.int64)
    cog = cout // groups
    for g in range(groups):
        xg = xs[:, g * cig:(g + 1) * cig]
        wg = w[g * cog:(g + 1) * cog].astype(np.int64)
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dil[0]: i * dil[0] + (oh - 1) * stride[0] + 1: stride[0],
                           j * dil[1]: j * dil[1] + (ow - 1) * stride[1] + 1: stride[1]]
                acc[:, g * cog:(g + 1) * cog] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if bias is not None:
        acc += bias.astype(np.int64).reshape(1, -1, 1, 1)
    return acc


def qparams(rng: np.random.Generator, cout: int, s_in: float, s_out: float, per_channel: bool,
            w_scale: float = 0.02) -> tuple[np.ndarray, np.ndarray, list[float]]:
    ws = [w_scale * float(rng.uniform(0.5, 2.0)) for _ in range(cout if per_channel else 1)]
    m, s = quant.requant_multipliers(s_in, ws, s_out)
    return np.array(m, dtype=np.int32), np.array(s, dtype=np.int32), ws


# ---- the exporter half -------------------------------------------------------------------------------
@pytest.mark.parametrize("m", [1e-15, 3.7e-9, 1e-6, 0.0123, 0.5, 1.0, 0.999999999, 1.5, 1e3, 2.0**30 * 1.99])
def test_quantize_multiplier_is_exact_rounding(m: float) -> None:
    big, n = quant.quantize_multiplier(m)
    assert 0 <= big < 2**31 and 0 <= n <= 62
    if n < 62:
        assert 2**30 <= big, (big, n)
        assert abs(Fraction(big, 2**n) - Fraction(m)) <= Fraction(1, 2 ** (n + 1))
    else:
        assert big == round(Fraction(m) * 2**62)


def test_quantize_multiplier_refuses_too_large() -> None:
    with pytest.raises(quant.QuantParamError, match="too large"):
        quant.quantize_multiplier(2.0**31)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_scale_refused(scale: float) -> None:
    with pytest.raises(quant.QuantParamError, match=r"scale .* is not a positive finite number"):
        quant.requant_multipliers(scale, [0.1], 0.1)
    assert issubclass(quant.QuantParamError, OpenAccelError)


def test_bias_quantization() -> None:
    b = torch.tensor([0.5, -0.25, 1e12, 0.0])
    q = quant.quantize_bias(b, 0.5, [0.5, 0.5, 1.0, 1.0], 4)
    assert q == [2, -1, 2**31 - 1, 0]   # 0.5/0.25 = 2, -0.25/0.25 = -1, saturated, 0


# ---- quantize / dequantize ------------------------------------------------------------------------
@pytest.mark.parametrize("scale,zp", [(0.02, 3), (1e-6, -128), (1e3, 127), (0.1, 0), (0.0078125, -5)])
def test_quantize_matches_pytorch(scale: float, zp: int) -> None:
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 37)) * scale * 60).astype(np.float32)
    x[0, :5] = [np.nan, np.inf, -np.inf, 0.5 * scale, 2.5 * scale]   # NaN, saturation, ties
    got = run("quantize", [x], [False], x.shape, np.int8, scale=scale, zero_point=zp, qmin=-128, qmax=127)
    want = torch.ops.quantized_decomposed.quantize_per_tensor(
        torch.from_numpy(x), scale, zp, -128, 127, torch.int8).numpy()
    assert got[0, 0] == zp   # NaN -> the zero point (documented)
    np.testing.assert_array_equal(got[:, 1:], want[:, 1:])
    np.testing.assert_array_equal(got[1:], want[1:])


@pytest.mark.parametrize("scale,zp", [(0.02, 3), (1e-6, -128), (1e3, 127)])
def test_dequantize_matches_pytorch(scale: float, zp: int) -> None:
    q = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)
    got = run("dequantize", [q], [False], q.shape, np.float32, scale=scale, zero_point=zp)
    want = torch.ops.quantized_decomposed.dequantize_per_tensor(
        torch.from_numpy(q), scale, zp, -128, 127, torch.int8).numpy()
    np.testing.assert_array_equal(got, want)


# ---- conv2d_q8 ------------------------------------------------------------------------------------
CONV_CASES = [
    # name, x shape, cout, k, stride, pad, dil, groups, per_channel, s_in, s_out, zp_in, zp_out, act
    ("c1x1", (1, 5, 7, 9), 6, (1, 1), (1, 1), (0, 0), (1, 1), 1, True, 0.02, 0.05, 3, -7, (-128, 127)),
    ("c3x3_pad", (2, 3, 9, 11), 7, (3, 3), (1, 1), (1, 1), (1, 1), 1, True, 0.03, 0.1, -128, 127, (-128, 127)),
    ("c3x3_s2_relu", (1, 4, 10, 13), 5, (3, 3), (2, 2), (1, 1), (1, 1), 1, True, 0.01, 0.02, 10, -128, (-128, 127)),
    ("c5x3_s2x1_pad2", (1, 3, 11, 8), 4, (5, 3), (2, 1), (2, 1), (1, 1), 1, False, 0.05, 0.3, -5, 0, (-20, 90)),
    ("dilated", (1, 2, 12, 12), 3, (3, 3), (1, 2), (2, 2), (2, 2), 1, True, 0.02, 0.04, 0, 5, (-128, 127)),
    ("groups2", (1, 6, 8, 7), 4, (3, 3), (1, 1), (1, 1), (1, 1), 2, True, 0.02, 0.05, 1, 2, (-128, 127)),
    ("depthwise", (2, 8, 9, 9), 8, (3, 3), (2, 2), (1, 1), (1, 1), 8, True, 0.02, 0.01, -3, 4, (-128, 127)),
    ("depthwise_mult2", (1, 4, 7, 6), 8, (3, 3), (1, 1), (1, 1), (1, 1), 4, True, 0.02, 0.01, 127, -128, (-128, 127)),
    ("tiny_scale", (1, 3, 5, 5), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, True, 1e-6, 1e3, 0, 0, (-128, 127)),
    ("huge_ratio", (1, 3, 5, 5), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, True, 1e3, 1e-3, 2, -1, (-128, 127)),
    ("saturating", (1, 16, 6, 6), 3, (3, 3), (1, 1), (1, 1), (1, 1), 1, False, 1.0, 1e-3, -128, 127, (-128, 127)),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[0])
def test_conv2d_q8_bit_exact(case: tuple[Any, ...]) -> None:
    name, xs, cout, k, stride, pad, dil, groups, per_ch, s_in, s_out, zin, zout, (lo, hi) = case
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x = rng.integers(-128, 128, xs, dtype=np.int8)
    w = rng.integers(-127, 128, (cout, xs[1] // groups, *k), dtype=np.int8)
    mult, shift, ws = qparams(rng, cout, s_in, s_out, per_ch)
    bias = np.array(quant.quantize_bias(torch.randn(cout), s_in, ws * (cout if not per_ch else 1), cout),
                    dtype=np.int32)
    acc = np_conv_acc(x, w, bias, zin, stride, pad, dil, groups)
    want = np_requant(acc, mult, shift, zout, lo, hi, axis=1)
    got = run("conv2d_q8", [x, w, bias, mult, shift], [False, True, True, True, True], want.shape, np.int8,
              stride_h=stride[0], stride_w=stride[1], pad_h=pad[0], pad_w=pad[1], dilation_h=dil[0],
              dilation_w=dil[1], groups=groups, input_zp=zin, output_zp=zout, act_min=lo, act_max=hi,
              input_scale=s_in, output_scale=s_out)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 1 or name in ("tiny_scale", "saturating")


def test_conv2d_q8_no_bias_two_threads() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (1, 4, 9, 9), dtype=np.int8)
    w = rng.integers(-127, 128, (6, 4, 3, 3), dtype=np.int8)
    mult, shift, _ = qparams(rng, 6, 0.02, 0.05, True)
    want = np_requant(np_conv_acc(x, w, None, 7, (1, 1), (1, 1), (1, 1), 1), mult, shift, -3, -128, 127, 1)
    for threads in (1, 2):
        got = run("conv2d_q8", [x, w, None, mult, shift], [False, True, True, True, True], want.shape, np.int8,
                  threads=threads, stride_h=1, stride_w=1, pad_h=1, pad_w=1, dilation_h=1, dilation_w=1, groups=1,
                  input_zp=7, output_zp=-3, act_min=-128, act_max=127)
        np.testing.assert_array_equal(got, want)


# ---- linear_q8 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,n,per_ch,zin,zout", [((1, 17), 5, True, 3, -2), ((7, 33), 9, False, -128, 127),
                                                      ((2, 3, 64), 10, True, 127, -128), ((4, 1), 3, True, 0, 0)])
def test_linear_q8_bit_exact(shape: tuple[int, ...], n: int, per_ch: bool, zin: int, zout: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    w = rng.integers(-127, 128, (n, shape[-1]), dtype=np.int8)
    mult, shift, _ = qparams(rng, n, 0.02, 0.1, per_ch)
    bias = rng.integers(-5000, 5000, n).astype(np.int32)
    acc = (x.astype(np.int64) - zin) @ w.astype(np.int64).T + bias
    want = np_requant(acc, mult, shift, zout, -100, 120, axis=acc.ndim - 1)
    got = run("linear_q8", [x, w, bias, mult, shift], [False, True, True, True, True], want.shape, np.int8,
              input_zp=zin, output_zp=zout, act_min=-100, act_max=120)
    np.testing.assert_array_equal(got, want)


# ---- add_q8 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb,so,za,zb,zo", [(0.02, 0.03, 0.04, 3, -5, 1), (1e-6, 1e3, 1.0, -128, 127, 0),
                                               (0.1, 0.1, 0.1, 0, 0, -128), (0.5, 1e-4, 1e-3, 127, -128, 127)])
def test_add_q8_bit_exact(sa: float, sb: float, so: float, za: int, zb: int, zo: int) -> None:
    rng = np.random.default_rng(int(sa * 1000))
    a = rng.integers(-128, 128, (2, 3, 5, 7), dtype=np.int8)
    b = rng.integers(-128, 128, (3, 1, 7), dtype=np.int8)   # broadcast
    (ma, mb), n = quant.quantize_multipliers_shared([Fraction(sa) / Fraction(so), Fraction(sb) / Fraction(so)])
    p = (a.astype(np.int64) - za) * ma + (b.astype(np.int64) - zb) * mb
    want = np.clip(np_round_shift(p, np.full(p.shape, n)) + zo, -128, 127).astype(np.int8)
    got = run("add_q8", [a, b], [False, False], want.shape, np.int8, self_zp=za, other_zp=zb, output_zp=zo,
              self_multiplier=ma, other_multiplier=mb, shift=n, act_min=-128, act_max=127)
    np.testing.assert_array_equal(got, want)
    # and the integer rule is within half an LSB (plus the multipliers' rounding) of the real sum
    real = ((a.astype(np.float64) - za) * sa + (b.astype(np.float64) - zb) * sb) / so + zo
    inside = (real > -127) & (real < 126)
    if inside.any():
        assert np.abs(got[inside] - real[inside]).max() <= 0.5 + 1e-6


def test_max_pool2d_int8() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (1, 3, 7, 7), dtype=np.int8)
    got = run("max_pool2d", [x], [False], (1, 3, 4, 4), np.int8, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2,
              pad_h=1, pad_w=1, dilation_h=1, dilation_w=1)
    want = torch.nn.functional.max_pool2d(torch.from_numpy(x).float(), 3, 2, 1).to(torch.int8).numpy()
    np.testing.assert_array_equal(got, want)


# ---- bad input ------------------------------------------------------------------------------------
def _conv_args(**over: Any) -> dict[str, Any]:
    a = dict(stride_h=1, stride_w=1, pad_h=0, pad_w=0, dilation_h=1, dilation_w=1, groups=1, input_zp=0,
             output_zp=0, act_min=-128, act_max=127)
    a.update(over)
    return a


@pytest.mark.parametrize("what,change,match", [
    ("zp", dict(input_zp=128), r"input_zp = 128 is out of range \(expected -128 to 127\)"),
    ("out_zp", dict(output_zp=-129), r"output_zp = -129 is out of range"),
    ("act", dict(act_min=10, act_max=5), r"act_max = 5 is out of range \(expected 10 to 127\)"),
    ("scale", dict(input_scale=float("nan")), r"input_scale = nan: expected a positive finite float32 scale"),
    ("mult_len", dict(_mult_len=3), r"input 3 \(multiplier\).*expected shape \[4\] or \[1\], received \[3\]"),
    ("shift_range", dict(_shift=63), r"input 4 \(shift\).*element 0 = 63: expected 0 to 62"),
    ("mult_neg", dict(_mult=-1), r"input 3 \(multiplier\).*element 0 = -1: expected 0 to 2147483647"),
    ("bias_len", dict(_bias_len=2), r"input 2 \(bias\).*expected shape \[4\], received \[2\]"),
    ("groups", dict(groups=3), r"does not fit input .* with groups = 3"),
])
def test_conv2d_q8_refuses(what: str, change: dict[str, Any], match: str) -> None:
    x = np.zeros((1, 2, 4, 4), dtype=np.int8)
    w = np.zeros((4, 2, 3, 3), dtype=np.int8)
    ml = change.pop("_mult_len", 4)
    mult = np.full(ml, change.pop("_mult", 1 << 30), dtype=np.int32)
    shift = np.full(ml, change.pop("_shift", 31), dtype=np.int32)
    bias = np.zeros(change.pop("_bias_len", 4), dtype=np.int32)
    buf = program("conv2d_q8", [x, w, bias, mult, shift], [False, True, True, True, True], (1, 4, 2, 2), np.int8,
                  **_conv_args(**change))
    with pytest.raises(RuntimeFailure, match=match) as e:
        HostSession(buf)
    assert "INVALID_PROGRAM: instruction 0 (conv2d_q8)" in str(e.value)


def test_quantize_refuses_bad_scale_and_zero_point() -> None:
    x = np.zeros((4,), dtype=np.float32)
    for kw, match in [(dict(scale=0.0, zero_point=0), r"scale = 0: expected a positive finite"),
                      (dict(scale=0.1, zero_point=200), r"zero_point = 200 is out of range"),
                      (dict(scale=math.inf, zero_point=0), r"scale = inf")]:
        buf = program("quantize", [x], [False], (4,), np.int8, qmin=-128, qmax=127, **kw)
        with pytest.raises(RuntimeFailure, match=match):
            HostSession(buf)


def test_add_q8_refuses_shift() -> None:
    a = np.zeros((4,), dtype=np.int8)
    buf = program("add_q8", [a, a], [False, False], (4,), np.int8, self_multiplier=1, other_multiplier=1, shift=70,
                  act_min=-128, act_max=127)
    with pytest.raises(RuntimeFailure, match=r"shift = 70 is out of range \(expected 0 to 62\)"):
        HostSession(buf)
