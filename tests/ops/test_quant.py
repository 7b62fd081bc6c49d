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
               axis: int, bias: np.ndarray | None = None) -> np.ndarray:
    """conv2d_q8 / linear_q8: the bias (float32 output steps) is added after the multiply as its
    addend round_half_even(bias * 2^shift) (exact in float64: a float32 times a power of two)"""
    shape = [1] * acc.ndim
    shape[axis] = -1
    m = np.asarray(mult, dtype=np.int64).reshape(shape if np.size(mult) > 1 else [1] * acc.ndim)
    s = np.asarray(shift, dtype=np.int64).reshape(shape if np.size(shift) > 1 else [1] * acc.ndim)
    badd = np.zeros(1, np.int64)
    if bias is not None:
        t = np.asarray(bias, np.float64).reshape(shape) * np.exp2(s.astype(np.float64))
        badd = np.round(t).astype(np.int64)   # half to even; from 2^52 on t is whole
    acc = np.clip(acc, -(2**31), 2**31 - 1)
    r = np_round_shift(acc * m + badd, np.broadcast_to(s, acc.shape))
    return np.clip(r + zp, lo, hi).astype(np.int8)


def np_conv_acc(x: np.ndarray, w: np.ndarray, zp: int, stride: tuple[int, int], pad: tuple[int, int],
                dil: tuple[int, int], groups: int) -> np.ndarray:
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
    return acc


def qparams(rng: np.random.Generator, cout: int, s_in: float, s_out: float, per_channel: bool,
            w_scale: float = 0.02) -> tuple[np.ndarray, np.ndarray, list[float]]:
    ws = [w_scale * float(rng.uniform(0.5, 2.0)) for _ in range(cout if per_channel else 1)]
    m, s = quant.requant_multipliers(s_in, ws, s_out)
    return np.array(m, dtype=np.int32), np.array(s, dtype=np.int8), ws


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


@pytest.mark.parametrize("m", [1e-15, 3.7e-9, 1e-6, 0.0123, 0.5, 1.0, 0.999999999, 1.5, 1e3, 4095.9, 5e5])
def test_conv_multipliers(m: float) -> None:
    """conv2d_q8 / linear_q8 (format 1.4): 31 significant bits, shifts in [12, 50] (fewer bits where
    n hits 50); m >= 2^19 is refused"""
    (big,), (n,) = quant.requant_multipliers(m, [1.0], 1.0)
    assert 0 <= big < 2**31 and quant.MAC_SHIFT_MIN <= n <= quant.MAC_SHIFT_MAX
    assert abs(Fraction(big, 2**n) - Fraction(m)) <= Fraction(1, 2 ** (n + 1))
    if n < quant.MAC_SHIFT_MAX:
        assert 2**30 <= big
    with pytest.raises(quant.QuantParamError, match="too large"):
        quant.requant_multipliers(2.0**19, [1.0], 1.0)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_scale_refused(scale: float) -> None:
    with pytest.raises(quant.QuantParamError, match=r"scale .* is not a positive finite number"):
        quant.requant_multipliers(scale, [0.1], 0.1)
    assert issubclass(quant.QuantParamError, OpenAccelError)


def test_bias_quantization() -> None:
    """float32 output steps (format 1.4): b / s_out rounded once to float32, from the exact quotient;
    a bias past 2047 output steps is clamped only where the sum cannot bring the output back
    (reach: the most a sum moves it), else refused"""
    third = float(torch.tensor(1.0 / 3.0))                     # the float32 bias PT2E keeps
    b = torch.tensor([0.5, -0.25, 1e12, 0.0, third])
    q = quant.quantize_bias(b, 0.5, 5, reach=[0.0, 0.0, 10.0, 0.0, 0.0])
    assert q[:4] == [1.0, -0.5, quant.BIAS_LIMIT, 0.0]
    assert q[4] == float(np.float32(2 * third)) and q[4] != round(2 * third * 4096) / 4096   # off the old grid
    # once, from the exact quotient: float(Fraction) then float32 would round twice
    x = Fraction(1) + Fraction(1, 2**24) + Fraction(1, 2**60)   # just past the float32 half-way point
    assert quant.to_float32(x) == 1.0 + 2.0**-23 and float(np.float32(float(x))) == 1.0
    assert quant.to_float32(Fraction(3, 2**26)) == 3 * 2.0**-26 and quant.to_float32(Fraction(-5, 7)) == float(
        np.float32(-5 / 7))
    assert quant.bias_addend(0.75, 1) == 2 and quant.bias_addend(0.25, 1) == 0 and quant.bias_addend(-0.75, 1) == -2
    with pytest.raises(quant.QuantParamError, match=r"channel 2 is 1e\+12 = .* output steps"):
        quant.quantize_bias(b, 0.5, 5, reach=[0.0, 0.0, 1900.0, 0.0, 0.0])
    with pytest.raises(quant.QuantParamError, match="not finite"):
        quant.quantize_bias(torch.tensor([float("nan")]), 0.5, 1)


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
    ("huge_ratio", (1, 3, 5, 5), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, True, 30.0, 1e-3, 2, -1, (-128, 127)),
    ("saturating", (1, 16, 6, 6), 3, (3, 3), (1, 1), (1, 1), (1, 1), 1, False, 1.0, 1e-3, -128, 127, (-128, 127)),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[0])
def test_conv2d_q8_bit_exact(case: tuple[Any, ...]) -> None:
    name, xs, cout, k, stride, pad, dil, groups, per_ch, s_in, s_out, zin, zout, (lo, hi) = case
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x = rng.integers(-128, 128, xs, dtype=np.int8)
    w = rng.integers(-127, 128, (cout, xs[1] // groups, *k), dtype=np.int8)
    mult, shift, _ = qparams(rng, cout, s_in, s_out, per_ch)
    bias = (np.array(quant.quantize_bias(torch.randn(cout) * s_out * 20, s_out, cout)) / 4096).astype(np.float32)
    acc = np_conv_acc(x, w, zin, stride, pad, dil, groups)
    want = np_requant(acc, mult, shift, zout, lo, hi, axis=1, bias=bias)
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
    want = np_requant(np_conv_acc(x, w, 7, (1, 1), (1, 1), (1, 1), 1), mult, shift, -3, -128, 127, 1)
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
    bias = (rng.integers(-50 * 4096, 50 * 4096, n) / 4096).astype(np.float32)   # +-50 output steps
    acc = (x.astype(np.int64) - zin) @ w.astype(np.int64).T
    want = np_requant(acc, mult, shift, zout, -100, 120, axis=acc.ndim - 1, bias=bias)
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
    ("shift_range", dict(_shift=63), r"input 4 \(shift\).*element 0 = 63: expected 12 to 62"),
    ("shift_neg", dict(_shift=-1), r"input 4 \(shift\).*element 0 = -1: expected 12 to 62"),
    ("shift_low", dict(_shift=11), r"input 4 \(shift\).*element 0 = 11: expected 12 to 62"),
    ("bias_range", dict(_shift=62, _bias=0.5), r"input 2 \(bias\).*element 0 = 0.5: expected a finite value below "
     r"2\^-1 output steps in magnitude with shift 62"),
    ("bias_range_31", dict(_bias=2.0**30), r"input 2 \(bias\).*element 0 = 1.07374182e\+09: expected a finite "
     r"value below 2\^30 output steps in magnitude with shift 31"),
    ("bias_nan", dict(_bias=float("nan")), r"input 2 \(bias\).*element 0 = nan: expected a finite value"),
    ("bias_inf", dict(_bias=float("-inf")), r"input 2 \(bias\).*element 0 = -inf: expected a finite value"),
    ("bias_int32", dict(_bias_dtype=np.int32), r"input 2 \(bias\).*dtype int32, expected float32 \(the bias is in "
     r"output steps since file format 1.3; a file from an older openaccel: export the model again\)"),
    ("mult_neg", dict(_mult=-1), r"input 3 \(multiplier\).*element 0 = -1: expected 0 to 2147483647"),
    ("bias_len", dict(_bias_len=2), r"input 2 \(bias\).*expected shape \[4\], received \[2\]"),
    ("groups", dict(groups=3), r"does not fit input .* with groups = 3"),
])
def test_conv2d_q8_refuses(what: str, change: dict[str, Any], match: str) -> None:
    x = np.zeros((1, 2, 4, 4), dtype=np.int8)
    w = np.zeros((4, 2, 3, 3), dtype=np.int8)
    ml = change.pop("_mult_len", 4)
    mult = np.full(ml, change.pop("_mult", 1 << 30), dtype=np.int32)
    shift = np.full(ml, change.pop("_shift", 31), dtype=np.int8)
    bias = np.full(change.pop("_bias_len", 4), change.pop("_bias", 0), dtype=change.pop("_bias_dtype", np.float32))
    buf = program("conv2d_q8", [x, w, bias, mult, shift], [False, True, True, True, True], (1, 4, 2, 2), np.int8,
                  **_conv_args(**change))
    with pytest.raises(RuntimeFailure, match=match) as e:
        HostSession(buf)
    status = "UNSUPPORTED" if what == "bias_int32" else "INVALID_PROGRAM"
    assert f"{status}: instruction 0 (conv2d_q8)" in str(e.value)


@pytest.mark.parametrize("op", ["conv2d_q8", "linear_q8"])
def test_int32_shifts_of_older_files_are_refused(op: str) -> None:
    """format 1.2 made the per-channel shift int8: a file from before, whose shift is int32, is
    refused with a message that says to export again (not read as bytes of the wrong width)"""
    x = np.zeros((1, 2, 4, 4) if op == "conv2d_q8" else (3, 8), dtype=np.int8)
    w = np.zeros((4, 2, 3, 3) if op == "conv2d_q8" else (4, 8), dtype=np.int8)
    mult, shift = np.full(4, 1 << 30, dtype=np.int32), np.full(4, 31, dtype=np.int32)
    args = _conv_args() if op == "conv2d_q8" else dict(input_zp=0, output_zp=0, act_min=-128, act_max=127,
                                                        input_scale=0.1, output_scale=0.1)
    buf = program(op, [x, w, np.zeros(4, np.float32), mult, shift], [False, True, True, True, True],
                  (1, 4, 2, 2) if op == "conv2d_q8" else (3, 4), np.int8, **args)
    with pytest.raises(RuntimeFailure, match=rf"{op}: input 4 \(shift\) \('.*'\): dtype int32, expected int8 "
                       r"\(shifts are int8 since file format 1\.2; a file from an older openaccel: export the model "
                       r"again\)"):
        HostSession(buf)


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


# ---- mean_q8 --------------------------------------------------------------------------------------
def np_mean_q8(x: np.ndarray, dims: Sequence[int], keepdim: bool, zin: int, zout: int, m: int, n: int,
               lo: int = -128, hi: int = 127) -> np.ndarray:
    """The written rule: the exact sum of (x - zin) over dims, times m, one rounding, + zout, clamp."""
    s = (x.astype(np.int64) - zin).sum(axis=tuple(dims), keepdims=keepdim)
    s = np.asarray(s, dtype=np.int64)
    return np.clip(np_round_shift(s * m, np.full(s.shape, n)) + zout, lo, hi).astype(np.int8)


MEAN_CASES = [
    # name, shape, dims, keepdim, s_in, s_out, zin, zout, act
    ("gap_hw", (2, 7, 5, 3), (2, 3), True, 0.02, 0.02, 3, -2, (-128, 127)),
    ("gap_49", (1, 16, 7, 7), (2, 3), True, 0.05, 0.03, -128, 5, (-128, 127)),
    ("gap_no_keepdim", (3, 5, 4, 4), (2, 3), False, 0.1, 0.05, 0, 0, (-128, 127)),
    ("last_dim", (4, 3, 33), (2,), False, 0.02, 0.01, 60, 127, (-128, 127)),
    ("first_dim", (5, 3, 2), (0,), True, 0.02, 0.02, 5, 5, (-50, 60)),
    ("non_adjacent", (3, 4, 5, 6), (1, 3), False, 0.03, 0.02, -7, 9, (-128, 127)),
    ("all_dims", (3, 4, 5), (0, 1, 2), False, 0.02, 0.004, 1, 0, (-128, 127)),
    ("one_element", (2, 1, 3), (1,), True, 0.02, 0.02, 4, -4, (-128, 127)),
    ("tiny_mult", (1, 3, 4, 4), (2, 3), True, 1e-6, 1e3, 0, 0, (-128, 127)),
    ("saturating", (1, 3, 4, 4), (2, 3), True, 1e3, 1e-3, -128, 127, (-128, 127)),
    ("relu", (2, 6, 3, 3), (2, 3), True, 0.02, 0.01, 0, -20, (-20, 127)),
    ("gap_wide", (2, 9, 23, 41), (2, 3), False, 0.04, 0.01, -100, 3, (-128, 127)),   # the optimized kernel's runs
    ("trailing_3", (3, 2, 5, 67), (1, 2, 3), True, 0.03, 0.02, 127, -1, (-128, 127)),
]


@pytest.mark.parametrize("case", MEAN_CASES, ids=lambda c: c[0])
def test_mean_q8_bit_exact(case: tuple[Any, ...]) -> None:
    name, shape, dims, keepdim, s_in, s_out, zin, zout, (lo, hi) = case
    rng = np.random.default_rng(len(name) * 7 + len(shape))
    off = rng.integers(-90, 90, [1 if d in dims else n for d, n in enumerate(shape)])   # outputs that differ
    x = np.clip(rng.integers(-128, 128, shape) // 4 + off, -128, 127).astype(np.int8)
    count = math.prod(shape[d] for d in dims)
    m, n = quant.quantize_multiplier(Fraction(s_in) / (Fraction(s_out) * count))
    want = np_mean_q8(x, dims, keepdim, zin, zout, m, n, lo, hi)
    for threads in (1, 2):
        got = run("mean_q8", [x], [False], want.shape, np.int8, threads=threads, input_zp=zin, output_zp=zout,
                  multiplier=m, shift=n, act_min=lo, act_max=hi, keepdim=int(keepdim), dims=list(dims),
                  input_scale=s_in, output_scale=s_out)
        np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 1 or name in ("tiny_mult", "saturating", "all_dims")
    # one rounding: within half an output step (plus the multiplier's 2^-31) of the real mean
    real = (x.astype(np.float64) - zin).sum(axis=tuple(dims), keepdims=keepdim) * s_in / (count * s_out) + zout
    inside = (real > lo + 1) & (real < hi - 1)
    if inside.any():
        assert np.abs(got[inside] - real[inside]).max() <= 0.5 + 1e-6


def test_mean_q8_ties_go_to_even() -> None:
    """Sums exactly half-way between two output steps round to the even one (as torch.round)."""
    x = np.array([[1, 0], [3, 0], [5, 0], [-1, 0], [-3, 0], [2, 1]], dtype=np.int8)   # sums 1, 3, 5, -1, -3, 3
    m, n = quant.quantize_multiplier(Fraction(1, 2))       # mean of 2 at equal scales: sum / 2
    got = run("mean_q8", [x], [False], (6,), np.int8, input_zp=0, output_zp=0, multiplier=m, shift=n,
              act_min=-128, act_max=127, keepdim=0, dims=[1])
    np.testing.assert_array_equal(got, [0, 2, 2, 0, -2, 2])


def test_mean_q8_all_dims_when_none_listed() -> None:
    x = np.arange(-8, 8, dtype=np.int8).reshape(2, 2, 4)
    m, n = quant.quantize_multiplier(Fraction(1, 16))   # exact: the tie below is a real tie
    got = run("mean_q8", [x], [False], (), np.int8, input_zp=-2, output_zp=0, multiplier=m, shift=n,
              act_min=-128, act_max=127, keepdim=0)
    assert int(got) == 2   # sum(x + 2) / 16 = 24 / 16 = 1.5: half to even


@pytest.mark.parametrize("change,out_shape,match", [
    (dict(dims=[1, 1]), (2,), r"argument dims\[1\] = 1 appears more than once"),
    (dict(dims=[3]), (2, 3), r"argument dims\[0\] = 3: expected 0 <= dim < 3"),
    (dict(shift=63), (2, 3), r"shift = 63 is out of range \(expected 0 to 62\)"),
    (dict(multiplier=-1), (2, 3), r"multiplier = -1 is out of range \(expected 0 to 2147483647\)"),
    (dict(input_zp=200), (2, 3), r"input_zp = 200 is out of range"),
    (dict(act_min=5, act_max=4), (2, 3), r"act_max = 4 is out of range \(expected 5 to 127\)"),
    (dict(keepdim=2), (2, 3), r"keepdim = 2 is out of range \(expected 0 to 1\)"),
    (dict(), (2, 4), r"output 0.*expected shape \[2, 3\]"),
    (dict(input_scale=-1.0), (2, 3), r"input_scale = -1: expected a positive finite float32 scale"),
])
def test_mean_q8_refuses(change: dict[str, Any], out_shape: tuple[int, ...], match: str) -> None:
    x = np.zeros((2, 3, 4), dtype=np.int8)
    args: dict[str, Any] = dict(input_zp=0, output_zp=0, multiplier=1 << 30, shift=32, act_min=-128, act_max=127,
                                keepdim=0, dims=[2])
    args.update(change)
    buf = program("mean_q8", [x], [False], out_shape, np.int8, **args)
    with pytest.raises(RuntimeFailure, match=match) as e:
        HostSession(buf)
    assert "instruction 0 (mean_q8)" in str(e.value)


def test_mean_q8_refuses_too_many_elements() -> None:
    b = Builder(pool=1 << 25)          # 2^24 elements per output: |p| could reach 2^63
    x = b.tensor("x", (1, 1 << 12, 1 << 12), I8, offset=0)
    y = b.tensor("y", (1,), I8, offset=1 << 24)
    b.inputs.append(x)
    b.outputs.append(y)
    b.instr("mean_q8", [x], [y], *encode_args("mean_q8", input_zp=0, output_zp=0, multiplier=1, shift=0,
                                              act_min=-128, act_max=127, keepdim=0, dims=[1, 2]))
    buf = b.build()
    with pytest.raises(RuntimeFailure, match=r"reduces too many elements per output \(expected 1 to 8388608\)"):
        HostSession(buf)


# ---- the fold pass on small PT2E graphs ------------------------------------------------------------
def _pt2e(model: torch.nn.Module, ex: tuple[torch.Tensor, ...], calib: Sequence[torch.Tensor]) -> Any:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gm = torch.export.export(model.eval(), ex).module()
    pm = prepare_pt2e(gm, XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
    for c in calib:
        pm(c)
    return convert_pt2e(pm)


def _export_q(cm: Any, ex: tuple[torch.Tensor, ...]) -> tuple[Any, list[str]]:
    import warnings

    import openaccel as oa
    from openaccel.errors import ExportWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = oa.export(torch.export.export(cm, ex), ex)
    return prog, [str(w.message) for w in caught if issubclass(w.category, ExportWarning)]


def _lsb_close(prog: Any, cm: Any, xs: Sequence[torch.Tensor], lsb: float = 1.0) -> None:
    s = HostSession(prog.buffer)
    scale = float(dict([i for i in prog.instructions if i.op == "dequantize"][-1].args)["scale"])
    for x in xs:
        with torch.no_grad():
            want = cm(x).numpy()
        got = s.run([x.numpy()])[0]
        assert got.shape == want.shape
        assert np.abs(got.astype(np.float64) - want).max() <= lsb * scale * (1 + 1e-4)


class _Seq(torch.nn.Module):
    """Linears on a [B, T, K] input (to_edge: view_copy -> addmm / mm -> view_copy), one without bias."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(24, 40)
        self.b = torch.nn.Linear(40, 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@pytest.mark.parametrize("shape", [(2, 5, 24), (1, 3, 4, 24)])
def test_fold_linear_of_a_3d_input(shape: tuple[int, ...]) -> None:
    g = torch.Generator().manual_seed(3)
    torch.manual_seed(0)
    ex = (torch.randn(shape, generator=g),)
    cm = _pt2e(_Seq(), ex, [torch.randn(shape, generator=g) for _ in range(4)])
    prog, notes = _export_q(cm, ex)
    assert not notes, notes
    assert prog.ops.count("linear_q8") == 1 and [i.op for i in prog.instructions].count("linear_q8") == 2, prog.ops
    assert not {"addmm", "linear", "linear_packed", "matmul"} & set(prog.ops), prog.ops
    assert prog.float32_in_quantized() == []
    _lsb_close(prog, cm, [torch.randn(shape, generator=g) for _ in range(3)])


class _Pool(torch.nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c(x))
        if self.how == "adaptive":
            y = torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        elif self.how == "mean_keepdim":
            y = y.mean(dim=(-1, -2), keepdim=True).flatten(1)
        else:
            y = y.mean(dim=(2, 3))
        return self.fc(y)


@pytest.mark.parametrize("how,side", [("adaptive", 7), ("mean_keepdim", 6), ("mean", 5)])
def test_fold_mean(how: str, side: int) -> None:
    g = torch.Generator().manual_seed(4)
    torch.manual_seed(1)
    ex = (torch.randn(1, 3, side, side, generator=g),)
    cm = _pt2e(_Pool(how), ex, [torch.randn(1, 3, side, side, generator=g) for _ in range(4)])
    prog, notes = _export_q(cm, ex)
    assert not notes, notes
    assert "mean_q8" in prog.ops and "mean" not in prog.ops, prog.ops
    assert [i.op for i in prog.instructions].count("quantize") == 1
    _lsb_close(prog, cm, [torch.randn(1, 3, side, side, generator=g) for _ in range(3)])


class _Emb(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(50, 16)
        self.pos = torch.nn.Embedding(8, 16)
        self.fc = torch.nn.Linear(16, 6)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.fc(self.tok(idx) + self.pos(torch.arange(idx.shape[1])))


def test_fold_embedding_is_exact() -> None:
    """An embedding feeding a quantize looks up a table quantized at export: the same int8 rows."""
    g = torch.Generator().manual_seed(5)
    torch.manual_seed(2)
    ex = (torch.randint(0, 50, (2, 8), generator=g),)
    cm = _pt2e(_Emb(), ex, [torch.randint(0, 50, (2, 8), generator=g) for _ in range(4)])
    prog, notes = _export_q(cm, ex)
    assert not notes, notes
    assert "embedding" in prog.ops and prog.float32_in_quantized() == [], prog.ops   # embedding writes int8
    assert "quantize" not in prog.ops, prog.ops      # the graph input is the index tensor
    _lsb_close(prog, cm, [torch.randint(0, 50, (2, 8), generator=g) for _ in range(3)])


def test_fold_mean_refuses_a_huge_reduction() -> None:
    from openaccel.ir import AtenNode, Graph, Value
    with pytest.raises(quant.QuantParamError, match=r"mean over 16777216 elements \(int8 mean: at most 8388608\)"):
        x = Value(name="x", dtype=torch.int8, shape=(1, 4096, 4096))
        f = quant._Folder(Graph(name="g", inputs=[x], outputs=[]))
        dq_out = Value(name="xd", dtype=torch.float32, shape=x.shape)
        dq = AtenNode(target=torch.ops.quantized_decomposed.dequantize_per_tensor.default,
                      args=(x, 0.1, 0, -128, 127, torch.int8), kwargs={}, outputs=[dq_out])
        f.producer[dq_out] = dq
        n = AtenNode(target=torch.ops.aten.mean.dim, args=(dq_out, [1, 2], False), kwargs={},
                     outputs=[Value(name="m", dtype=torch.float32, shape=(1,))])
        f.fold_mean(n)


# ---- mul_q8 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb,so,za,zb,zo", [(0.02, 0.03, 0.01, 3, -5, 1), (1e-3, 1e-3, 1e-6, -128, 127, 0),
                                               (0.1, 0.1, 0.5, 0, 0, -128), (1e-4, 2e-4, 1e3, 127, -128, 127),
                                               (1.0, 2.0, 1e-3, 10, -10, 5)])
def test_mul_q8_bit_exact(sa: float, sb: float, so: float, za: int, zb: int, zo: int) -> None:
    rng = np.random.default_rng(abs(int(sa * 1e4) + za))
    a = rng.integers(-128, 128, (2, 3, 5, 7), dtype=np.int8)
    b = rng.integers(-128, 128, (3, 1, 7), dtype=np.int8)   # broadcast
    m, n = quant.quantize_multiplier(Fraction(sa) * Fraction(sb) / Fraction(so))
    p = (a.astype(np.int64) - za) * (b.astype(np.int64) - zb) * m
    want = np.clip(np_round_shift(p, np.full(p.shape, n)) + zo, -100, 120).astype(np.int8)
    for threads in (1, 2):
        got = run("mul_q8", [a, b], [False, False], want.shape, np.int8, threads=threads, self_zp=za, other_zp=zb,
                  output_zp=zo, multiplier=m, shift=n, act_min=-100, act_max=120, self_scale=sa, other_scale=sb,
                  output_scale=so)
        np.testing.assert_array_equal(got, want)
    real = (a.astype(np.float64) - za) * sa * (b.astype(np.float64) - zb) * sb / so + zo
    inside = (real > -99) & (real < 119)
    if inside.any():
        assert np.abs(got[inside] - real[inside]).max() <= 0.5 + 1e-6


@pytest.mark.parametrize("change,match", [
    (dict(shift=63), r"shift = 63 is out of range \(expected 0 to 62\)"),
    (dict(multiplier=1 << 31), r"multiplier = 2147483648 is out of range"),
    (dict(other_zp=-129), r"other_zp = -129 is out of range"),
    (dict(output_scale=float("inf")), r"output_scale = inf: expected a positive finite float32 scale"),
])
def test_mul_q8_refuses(change: dict[str, Any], match: str) -> None:
    a = np.zeros((4,), dtype=np.int8)
    args: dict[str, Any] = dict(self_zp=0, other_zp=0, output_zp=0, multiplier=1 << 30, shift=40, act_min=-128,
                                act_max=127)
    args.update(change)
    buf = program("mul_q8", [a, a], [False, False], (4,), np.int8, **args)
    with pytest.raises(RuntimeFailure, match=match) as e:
        HostSession(buf)
    assert "instruction 0 (mul_q8)" in str(e.value)


class _Mul(torch.nn.Module):
    """Two int8 branches multiplied (gating, as in squeeze-excite or SwiGLU), one broadcast."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.b = torch.nn.Conv2d(3, 6, 1)
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x)) * self.b(x)
        g = torch.nn.functional.adaptive_avg_pool2d(y, 1)
        return self.fc((y * g).mean(dim=(2, 3)))


def test_fold_mul() -> None:
    g = torch.Generator().manual_seed(6)
    torch.manual_seed(3)
    ex = (torch.randn(1, 3, 6, 6, generator=g),)
    cm = _pt2e(_Mul(), ex, [torch.randn(1, 3, 6, 6, generator=g) for _ in range(4)])
    prog, notes = _export_q(cm, ex)
    assert not notes, notes
    assert [i.op for i in prog.instructions].count("mul_q8") == 2 and "mul" not in prog.ops, prog.ops
    assert prog.float32_in_quantized() == []
    _lsb_close(prog, cm, [torch.randn(1, 3, 6, 6, generator=g) for _ in range(3)])
