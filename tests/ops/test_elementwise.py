"""Unary elementwise ops, activations, cast and the creation ops (full, arange) against PyTorch
eager: float32 and integer inputs, NaN/inf and tie values, 0-d and size-1 shapes, int -> float
promotion, in-place reuse."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import Fn, OpCase, randint, randn, run_case

NAN, INF = float("nan"), float("inf")

X = randn(2, 3, 4) * 3                      # general float input
POS = randn(3, 5).abs() + 0.05              # for log / sqrt / rsqrt
SPECIAL = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1e-30, -2.5, 2.5, 3.0, -3.0, 40.0, -40.0, 0.5, -0.5, 1.5, 100.0])
TIES = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5, 0.49999997, 2.6, -2.6, 0.0])
I64 = randint(-50, 50, 4, 5)
I32 = randint(-50, 50, 3, 7, dtype=torch.int32)
BOOL = randint(0, 2, 3, 4, seed=3).bool()

# float32 functions that are not correctly rounded (exp, tanh, erf, ...): the C library and
# PyTorch's vectorized implementations (SLEEF, ATen's own erf polynomial) each err by up to ~1-2
# ulps, so allow a few ulps (rtol 2e-6 ~ 16 ulp at worst, 4 at best) and a small atol near zero.
ULP4 = dict(atol=1e-6, rtol=2e-6)


I8 = torch.tensor([-128, 127, 0, 3, -7], dtype=torch.int8)
U8 = torch.tensor([0, 1, 255, 128, 7], dtype=torch.uint8)
I32_EXT = torch.tensor([-2**31, 2**31 - 1, 0, -5], dtype=torch.int32)
I64_EXT = torch.tensor([-2**63, 2**63 - 1, -7, 0])


def _each(*fns):  # type: ignore[no-untyped-def]
    """One program computing several ops (one export covers many kernels: to_edge is slow)."""
    return lambda *xs: tuple(f(*xs) for f in fns)


CASES = [
    # sign and magnitude (exact), float with NaN/inf/-0 and integers at their extremes
    OpCase("ew_sign_magnitude_f32", _each(torch.neg, torch.abs, torch.sign, torch.relu), (SPECIAL,),
           ops=("neg", "abs", "sign", "relu")),
    OpCase("ew_sign_magnitude_int",
           lambda a, b, c: (torch.neg(a), torch.abs(a), torch.sign(a), torch.relu(a), torch.neg(b), torch.abs(b),
                            torch.sign(c), torch.relu(c), torch.abs(c)),
           (I64_EXT, I32_EXT, I32), ops=("neg", "abs", "sign", "relu")),
    # 8-bit integers compute in int32 and wrap back on the final cast
    OpCase("ew_small_ints", lambda a, b: (torch.neg(a), torch.abs(a), torch.neg(b), torch.bitwise_not(b)),
           (I8, U8), ops=("neg", "abs", "bitwise_not", "cast")),
    # correctly rounded functions: exact
    OpCase("ew_exact_math", _each(torch.sqrt, torch.rsqrt, torch.reciprocal, torch.floor, torch.ceil, torch.round),
           (SPECIAL,), ops=("sqrt", "rsqrt", "reciprocal", "floor", "ceil", "round")),
    OpCase("ew_round_half_even", torch.round, (TIES,), ops=("round",)),
    # trunc (as div with rounding_mode trunc), isnan / isinf (as ne / abs + eq), nan_to_num / frac on top
    OpCase("ew_trunc_isnan_isinf",
           lambda x, i: (torch.trunc(x), torch.frac(x), torch.isnan(x), torch.isinf(x), torch.nan_to_num(x),
                         torch.isnan(i), torch.isinf(i), torch.trunc(i)),
           (SPECIAL, I64), ops=("div", "ne", "eq", "abs", "where", "full")),
    OpCase("ew_exact_math_pos", _each(torch.sqrt, torch.rsqrt), (POS,), ops=("sqrt", "rsqrt")),
    # libm vs PyTorch's vectorized functions: a few ulps
    OpCase("ew_transcendental",
           _each(torch.exp, torch.sigmoid, torch.tanh, torch.sin, torch.cos, torch.erf, torch.expm1), (X,),
           ops=("exp", "sigmoid", "tanh", "sin", "cos", "erf", "expm1"), **ULP4),
    OpCase("ew_transcendental_special",
           _each(torch.exp, torch.log, torch.sigmoid, torch.tanh, torch.erf, torch.expm1, torch.log1p), (SPECIAL,),
           ops=("exp", "log", "sigmoid", "tanh", "erf", "expm1", "log1p"), **ULP4),
    OpCase("ew_log", _each(torch.log, lambda x: torch.log1p(x - 0.04)), (POS,), ops=("log", "log1p"), **ULP4),
    # activations
    OpCase("ew_activations",
           _each(F.silu, F.gelu, lambda x: F.gelu(x, approximate="tanh"), F.leaky_relu,
                 lambda x: F.leaky_relu(x, 0.2), F.elu, lambda x: F.elu(x, alpha=0.7), F.selu, F.relu6,
                 lambda x: F.hardtanh(x, -0.5, 2.0), lambda x: F.rrelu(x, training=False),
                 lambda x: F.rrelu(x, 0.1, 0.6)),  # eval rrelu: the mean slope
           (X,), ops=("sigmoid", "mul", "gelu", "leaky_relu", "elu", "hardtanh"), **ULP4),
    # float64 reference: float32 eager gelu(+inf) is NaN on Intel CPUs with AVX-512 whenever the tensor
    # has more than one element (inf on AMD Zen 3, in float64 and for a one-element tensor)
    OpCase("ew_activations_special",
           _each(F.gelu, lambda x: F.gelu(x, approximate="tanh"), lambda x: F.leaky_relu(x, 0.2), F.elu, F.relu6),
           (SPECIAL,), ops=("gelu", "leaky_relu", "elu", "hardtanh"), reference="float64", **ULP4),
    # near FLT_MAX: float32 eager gelu(3.4e38) is inf on those Intel CPUs; the defined answer is x.
    # (Not hardswish: to_edge decomposes it into x * clamp(x + 3, 0, 6) / 6, whose product overflows.)
    OpCase("ew_activations_near_flt_max",
           _each(F.gelu, lambda x: F.gelu(x, approximate="tanh"), F.silu, F.elu, F.leaky_relu, torch.sigmoid,
                 torch.tanh, F.softplus, F.mish),
           (torch.tensor([3.4e38, -3.4e38, 1e38, -1e38, 3e37, 1.7e38, -1.7e38, 1e30]),),
           ops=("gelu", "sigmoid", "elu", "leaky_relu", "tanh"), reference="float64", **ULP4),
    # hardswish / hardsigmoid decompose to add, clamp, mul, div in to_edge
    OpCase("ew_hard_activations", _each(F.hardswish, F.hardsigmoid), (torch.linspace(-5, 5, 41),),
           ops=("clamp", "div")),
    # clamp
    OpCase("ew_clamp_f32",
           _each(lambda x: x.clamp(-1.0, 1.5), lambda x: x.clamp(min=0.25), lambda x: x.clamp(max=-0.25),
                 lambda x: x.clamp(2.0, -1.0)), (SPECIAL,), ops=("clamp",)),
    OpCase("ew_clamp_int",
           lambda a, b: (a.clamp(-10, 20), b.clamp(min=0), b.clamp(max=-3), a.clamp(-1.5, 2.5)),
           (I64, I32), ops=("clamp", "cast")),
    OpCase("ew_clamp_tensor", lambda x, lo, hi: torch.clamp(x, lo, hi),
           (X, randn(3, 1, seed=1) - 1, randn(4, seed=2) + 1), ops=("maximum", "minimum")),
    OpCase("ew_clamp_tensor_min", lambda x, lo: torch.clamp(x, min=lo), (SPECIAL, randn(16, seed=1)),
           ops=("maximum",)),
    # logical / bitwise not
    OpCase("ew_not", lambda f, i, b, u, j: (torch.logical_not(f), torch.logical_not(i), torch.logical_not(b),
                                            torch.logical_not(u), torch.bitwise_not(i), torch.bitwise_not(j),
                                            torch.bitwise_not(b)),
           (SPECIAL, I64 // 10, BOOL, U8, I32), ops=("logical_not", "bitwise_not")),
    # cast (float -> int32/int64 out of range is undefined in PyTorch: only in-range values here)
    OpCase("ew_cast_from_f32",
           lambda x, y: (x.to(torch.int32), x.long(), x.to(torch.uint8), x.to(torch.int8), x.bool(), y.bool()),
           (torch.tensor([1.9, -1.9, 0.5, -0.5, 1e6, -7.0, 200.0, -1.0, 300.7, -3.9, 127.0, -128.5]), SPECIAL),
           ops=("cast",)),
    OpCase("ew_cast_from_int",
           lambda a, b, c, d, u, f: (a.float(), a.int(), b.long(), b.float(), c.float(), c.long(), c.int(),
                                     d.bool(), u.float(), f.float()),
           (torch.tensor([2**53 + 1, 2**40 + 3, -(2**62), 5, 2**31, -(2**31) - 1]), I32, BOOL, I64 // 10, U8,
            torch.tensor([1.0 + 1e-12, 1e300, -3.25], dtype=torch.float64)),
           ops=("cast",)),
    # a memory format (dim order) changes PyTorch's strides, not the values: a cast or an alias here
    OpCase("ew_cast_memory_format",
           lambda x: (x.to(memory_format=torch.channels_last) * 2, x.to(torch.int32, memory_format=torch.channels_last),
                      x.contiguous(memory_format=torch.channels_last)),
           (randn(2, 3, 4, 5) * 10,), ops=("cast", "mul")),
    # int inputs of float ops are promoted; int rounding is the identity (an alias)
    OpCase("ew_int_promotion", lambda x: (torch.exp(x), torch.sigmoid(x), torch.floor(x) + 1, x.to(torch.int64)),
           (randint(-5, 5, 2, 6),), ops=("cast", "exp", "sigmoid", "add"), **ULP4),
    # chains (the planner writes in place), size-1 and empty shapes
    OpCase("ew_chain_inplace", lambda x: torch.tanh(torch.exp(-x.abs())).neg().relu(), (X,),
           ops=("abs", "neg", "exp", "tanh", "relu"), **ULP4),
    OpCase("ew_size1_empty", lambda x, e: (torch.sigmoid(x), torch.exp(e)), (randn(1, 1, 5), torch.zeros(0, 3)),
           ops=("sigmoid", "exp"), **ULP4),
    # creation: big enough (> 1 KiB) not to be folded into constants
    OpCase("ew_full", lambda x, i, b: (x + torch.full((16, 32), 2.5), i * torch.full((4, 64), -3, dtype=torch.int64),
                                       b & torch.full((40, 32), True),
                                       torch.zeros(16, 32) + torch.ones(16, 32) * x),
           (randn(16, 32), randint(-9, 9, 4, 64), randint(0, 2, 40, 32).bool()), ops=("full", "add", "mul")),
    OpCase("ew_full_like", lambda x, i, b: (torch.full_like(x, 7.0) - x, torch.ones_like(i) + i,
                                            torch.zeros_like(b) | b, torch.full_like(i, -2)),
           (randn(3, 5), randint(0, 9, 2, 3, dtype=torch.int32), BOOL), ops=("full", "sub", "add")),
    OpCase("ew_arange",
           lambda i, f, j: (i + torch.arange(300), i * torch.arange(-50, 550, 2), f + torch.arange(0.1, 90.0, 0.3),
                            f + torch.arange(5, -295, -1, dtype=torch.float32),
                            j + torch.arange(3, 603, 2, dtype=torch.int32)),
           (randint(-5, 5, 300), randn(300), randint(-5, 5, 300, dtype=torch.int32)), ops=("arange",)),
    # a program without inputs: to_edge leaves linspace's constants on the module (get_attr nodes)
    # instead of lifting them (OpInfo's linspace was refused at import); they fold at export
    OpCase("ew_linspace_no_inputs", lambda: (torch.linspace(-2.0, -3, 50), torch.logspace(0, 2, 7)), ()),
    # Tensor.fill_ with a number or a 0-d tensor (to_edge: full_like, copy), Tensor.copy_ (copy: broadcast to
    # self's shape and converted to its dtype, float -> int truncating), eval-mode dropout (identity, mask all
    # True); creation ops kept as kernels (no folding)
    OpCase("ew_fill_copy_dropout",
           lambda x, i, s: (x.clone().fill_(2.5), i.clone().fill_(x[0, 1]), x.t().clone().fill_(s), torch.fill(i, 7),
                            torch.zeros(2, 3, 4, dtype=torch.int32).copy_(x * 3), torch.zeros(3, 4).copy_(i),
                            torch.empty(5, 3, 4, dtype=torch.bool).copy_(x > 0), torch.ones(3, 4).copy_(x[:, 1:2]),
                            torch.zeros(4, 3, dtype=torch.uint8).copy_(i.t() * 20), torch.zeros(0, 4).copy_(x[:0]),
                            *torch.ops.aten.native_dropout(x, 0.5, False), torch.ops.aten.native_dropout(i.float(), 0.0,
                                                                                                      True)[1],
                            torch.nn.functional.dropout(x, 0.3, training=False) + 1),
           (randn(3, 4) * 4, randint(-9, 9, 3, 4), torch.tensor(-1.5)), ops=("full", "cast", "expand"),
           export_kwargs={"fold_limit_bytes": 0}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_zero_dim_inputs() -> None:
    """0-d graph inputs, checked through the bundled test vectors (run in C on the file's own
    inputs): the host binding cannot pass 0-d arrays yet (np.ascontiguousarray makes them 1-d)."""
    prog = oa.export(Fn(lambda x, i: (torch.relu(x), torch.exp(x), torch.neg(i), x.to(torch.int32))),
                     (torch.tensor(-1.5), torch.tensor(3)))
    assert {"relu", "exp", "neg", "cast"} <= set(prog.ops)
    report = oa.load(prog).run_bundled_tests()
    assert report.ok, str(report)


def test_small_creation_ops_unfolded() -> None:
    """Small creation ops are normally folded into constants; with folding off they run as
    kernels (scalar_tensor, full, zeros_like, arange of every kind)."""
    fn = Fn(lambda x, i: (torch.where(x > 0, x, 0.0), x + torch.full((4,), -1.5), torch.zeros_like(i) + 1,
                          torch.arange(4) * i, torch.arange(0.5, 2.5, 0.5) + x, torch.arange(5, 1, -1) + i,
                          torch.tensor(3) + i))
    inputs = (randn(4), randint(-5, 5, 4))
    prog = oa.export(fn, inputs, fold_limit_bytes=0)
    assert {"full", "arange", "where"} <= set(prog.ops)
    got = oa.load(prog)(*inputs)
    for g, w in zip(got, fn(*inputs), strict=True):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, equal_nan=True)


def test_empty_is_zeros() -> None:
    """torch.empty and its kin are uninitialized in PyTorch (any contents are valid; eager gives whatever
    memory held, so there is no eager answer to compare with): openaccel fills them with zeros."""
    fn = Fn(lambda x: (torch.empty(2, 3), x.new_empty(4, dtype=torch.int32), torch.empty_like(x),
                       torch.empty_strided((2, 3), (1, 2)), torch.empty(3, dtype=torch.bool), x + 1))
    x = randn(5)
    prog = oa.export(fn, (x,), bundle_tests=False, fold_limit_bytes=0)
    assert "full" in prog.ops
    got = oa.load(prog)(x)
    want = [torch.zeros(2, 3), torch.zeros(4, dtype=torch.int32), torch.zeros(5), torch.zeros(2, 3),
            torch.zeros(3, dtype=torch.bool), x + 1]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and torch.equal(g, w), (g, w)


class _TrainingDropout(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x, 0.5, training=True)


def test_training_dropout_is_refused() -> None:
    with pytest.raises(oa.UnsupportedOpError, match=r"aten\.native_dropout\.default.*training mode.*random mask.*"
                                                     r"eval mode.*dropout\(x, 0\.5, training=True\)"):
        oa.export(_TrainingDropout(), (randn(4),))


def test_training_rrelu_is_refused() -> None:
    with pytest.raises(oa.UnsupportedOpError, match=r"rrelu_with_noise_functional.*training mode.*random slope"):
        oa.export(Fn(lambda x: F.rrelu(x, training=True)), (randn(4),))


class _Item(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x.sum().item()


def test_item_is_refused_with_its_reason() -> None:
    with pytest.raises(oa.UnsupportedOpError) as e:
        oa.export(_Item(), (randn(4),))
    msg = str(e.value)
    assert "aten.item.default" in msg and "x * x.sum().item()" in msg, msg
    assert "refused, Tensor.item()" in msg and "keep the value a tensor" in msg, msg


# ---- exporter errors ---------------------------------------------------------------------------

def test_float64_math_is_unsupported() -> None:
    with pytest.raises(oa.UnsupportedOpError, match=r"aten\.exp\.default.*float64"):
        oa.export(Fn(torch.exp), (torch.randn(3, dtype=torch.float64),))


def test_int_clamp_beyond_2_53_is_unsupported() -> None:
    with pytest.raises(oa.UnsupportedOpError, match=r"aten\.clamp\.default.*2\^53"):
        oa.export(Fn(lambda x: x.clamp(min=2**60)), (torch.arange(4),))
