"""The math family (ref/math.c: inverse and hyperbolic trigonometry, log2 / log10 / exp2, the
error-function, gamma and Bessel families) and the float binary functions (atan2, copysign, hypot,
nextafter) against PyTorch eager, with the torch.special functions to_edge decomposes into them, and
round(x, decimals).

Reference: these functions are not correctly rounded in float32 eager (SLEEF, libm float functions,
ATen's float polynomials: an ulp or two that differs between the project's AMD and Intel CPUs, and
Cephes' float32 I0(0) is 0.99999994), so the cases compare with eager in float64, cast back; the
kernels compute in double and round once, and agree with that within a few ulps (ULP4; in practice
bit for bit). Special values cover every domain edge: acosh(x < 1), atanh(+-1), log2(0), erfinv(+-1),
the poles of digamma / polygamma, the overflow of sinh / cosh / exp2 / i0, and NaN / inf / -0."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import openaccel as oa

from helpers import FLOAT32_DEFINED, Fn, OpCase, check_rejected, randint, randn, run_case

NAN, INF = float("nan"), float("inf")
ULP4 = dict(atol=1e-6, rtol=2e-6)

_GEN = torch.Generator().manual_seed(7)
X = randn(3, 4, 5) * 3   # general input (transposed inside the models: non-contiguous)
# pairs of special values; the last three columns hold subnormals
SPECIAL2 = torch.tensor([[NAN, INF, -INF, 0.0, -0.0, 0.0, 1.0, -1.0, 3e38, -3e38, INF, 5.0, -2.0, 0.0, 1.0,
                          1.4e-45, -1.4e-45, 1.1754942e-38],
                         [1.0, INF, INF, -0.0, 0.0, NAN, -INF, 0.0, 3e38, -1.0, NAN, -5.0, NAN, -1.0, 1.0,
                          0.0, 1.0, 0.0]])
SPECIAL = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1e-30, -1e-30, 1.4e-45, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5,
                        2.0, -2.5, 10.0, -10.0, 88.5, -88.5, 90.0, -90.0, 128.0, -150.0, 1e30, -1e30])


def _each(*fns: Any) -> Any:
    """One program computing several ops (one export covers many kernels)."""
    return lambda *xs: tuple(f(*xs) for f in fns)


def _t(f: Any) -> Any:
    """f of the input transposed (a non-contiguous view inside the model)."""
    return lambda x: f(x.transpose(0, 2))


_UNARY = (torch.acos, torch.asin, torch.atan, torch.tan, torch.sinh, torch.cosh, torch.asinh, torch.acosh,
          torch.atanh, torch.log2, torch.log10, torch.exp2)
_UNARY_OPS = ("acos", "asin", "atan", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2")

CASES = [
    # float64 reference throughout (see the module docstring)
    OpCase("math_elementary_special", _each(*_UNARY), (SPECIAL,), ops=_UNARY_OPS, reference="float64", **ULP4),
    OpCase("math_elementary", _each(*(_t(f) for f in _UNARY)), (X / 3,), ops=_UNARY_OPS, reference="float64",
           **ULP4),
    # the error-function family; ndtr and log_ndtr decompose into erf / erfc / erfcx
    OpCase("math_erf_family",
           lambda x, u: (torch.erfc(x), torch.special.erfcx(x), torch.special.ndtr(x), torch.special.log_ndtr(x),
                         torch.erfinv(u * 2 - 1), torch.special.ndtri(u)),
           (torch.cat([SPECIAL, X.reshape(-1), torch.linspace(-30, 30, 61)]), torch.rand(3, 40, generator=_GEN)),
           ops=("erfc", "erfcx", "erf", "erfinv", "ndtri"), reference="float64", **ULP4),
    OpCase("math_erfinv_ndtri_edges",
           _each(torch.erfinv, torch.special.ndtri),
           (torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 1.5, -1.01, 0.5, -0.5, 1e-30, 0.9999999,
                          -0.99999994, 1e-45, 1e-20, 0.4999999, 0.5000001, 0.99999994, 5.9604645e-08, 0.75]),),
           ops=("erfinv", "ndtri"), reference="float64", **ULP4),
    # gamma family: lgamma's poles, digamma's (+0 -> -inf, -0 -> +inf, negative integers NaN), polygamma
    # n = 0 .. 4 (the negative integers only for even n: PyTorch's trigamma gives a large finite number there)
    OpCase("math_gamma_family",
           _each(torch.lgamma, torch.digamma, torch.special.psi, lambda x: torch.polygamma(1, x),
                 lambda x: torch.polygamma(2, x), lambda x: torch.special.polygamma(3, x),
                 lambda x: torch.polygamma(4, x), lambda x: torch.polygamma(0, x), torch.special.gammaln),
           (torch.cat([torch.tensor([NAN, INF, 0.0, -0.0, 1.0, 2.0, 1.4616321, 1e-30, -0.5, -2.5, -1e-3, 3e30]),
                       torch.linspace(-9.75, 40.25, 51), X.reshape(-1).abs() + 0.01]),),
           ops=("lgamma", "digamma", "polygamma"), reference="float64", **ULP4),
    OpCase("math_gamma_poles",
           _each(torch.lgamma, torch.digamma, lambda x: torch.polygamma(2, x), lambda x: torch.polygamma(3, x)),
           (torch.tensor([-1.0, -2.0, -7.0, -INF, -1e30]),),
           ops=("lgamma", "digamma", "polygamma"), reference="float64", **ULP4),
    # modified Bessel functions: the power series (|x| <= 30) and the asymptotic series, overflow, +-inf
    OpCase("math_bessel",
           _each(torch.i0, torch.special.i0, torch.special.i0e, torch.special.i1, torch.special.i1e),
           (torch.cat([SPECIAL, torch.linspace(-100, 100, 81), torch.tensor([29.99, 30.01, -30.5, 700.0, 1e4])]),),
           ops=("i0", "i0e", "i1", "i1e"), reference="float64", **ULP4),
    # integer and bool inputs are converted to float32 first; empty tensors
    OpCase("math_int_inputs",
           lambda i, b, e: (torch.acos(i // 4), torch.log2(i), torch.exp2(i), torch.lgamma(b), torch.i0(i),
                            torch.digamma(i), torch.special.ndtri(b), torch.erfc(e), torch.polygamma(1, i.abs() + 1)),
           (randint(-8, 8, 3, 5), randint(0, 2, 4).bool(), torch.zeros(0, 3)),
           ops=("cast", "acos", "log2", "exp2", "lgamma", "i0", "digamma", "ndtri", "erfc", "polygamma"),
           reference="float64", **ULP4),
    # binary: broadcasting, scalars, special values; logaddexp(2), xlogy, xlog1py decompose into these ops and
    # others (mul), whose NEON kernels flush subnormals to zero on armv7 (as NEON does there): not given those
    OpCase("math_binary_special",
           lambda x, y: (torch.atan2(x, y), torch.copysign(x, y), torch.hypot(x, y), torch.logaddexp(x[:15], y[:15]),
                         torch.logaddexp2(x[:15], y[:15]), torch.xlogy(x[:15], y[:15]),
                         torch.special.xlog1py(x[:15], y[:15])),
           (SPECIAL2[0], SPECIAL2[1]), ops=("atan2", "copysign", "hypot", "exp2", "log1p"), reference="float64",
           **ULP4),
    # nextafter is a float32 operation (exact): its float64 result cast back would not be the float32 neighbour
    OpCase("math_nextafter", lambda x, y: (torch.nextafter(x, y), torch.nextafter(y, x), torch.nextafter(x, x)),
           (SPECIAL2[0], SPECIAL2[1]), ops=("nextafter",), atol=0, rtol=0, tags=(FLOAT32_DEFINED,)),
    # signbit: the sign bit of -0.0 and of a negative NaN too (copysign(1, x) < 0); integers x < 0, bool False
    OpCase("math_signbit", lambda x, i, b: (torch.signbit(x), torch.signbit(i), torch.signbit(b)),
           (torch.cat([SPECIAL, -SPECIAL]), randint(-5, 5, 4, 5), randint(0, 2, 4).bool()),
           ops=("copysign", "lt", "full"), atol=0, rtol=0, tags=(FLOAT32_DEFINED,)),
    OpCase("math_binary_broadcast",
           lambda x, y, i: (torch.atan2(x.transpose(0, 2), y), torch.copysign(x, -0.0), torch.copysign(x, y[0, 0]),
                            torch.hypot(y, torch.tensor(3.0)), torch.nextafter(x, y.t()[:, :1, None]),
                            torch.atan2(i, i.flip(0)), torch.copysign(i, x[0]), torch.atan2(x, torch.tensor(1.0)),
                            torch.atan2(y, y.flip(0), out=torch.empty(4, 3))),  # functionalized: atan2.default
           (X, randn(4, 3, seed=1), randint(-5, 5, 4, 5)),
           ops=("atan2", "copysign", "hypot", "nextafter", "cast"), reference="float64", **ULP4),
    # copysign takes the sign bit of NaN too (-NaN from the negation inside the model)
    OpCase("math_copysign_nan_sign", lambda x: (torch.copysign(x, -x), torch.copysign(x.abs(), -x) + 0),
           (torch.tensor([NAN, 1.0, -0.0, INF]),), ops=("copysign", "neg")),
    # round(x, decimals): the same float32 operations as eager (exact); ties, -0, huge values, 10^40 = inf
    OpCase("math_round_decimals",
           lambda x: (torch.round(x, decimals=2), torch.round(x, decimals=-1), torch.round(x, decimals=0),
                      torch.round(x, decimals=3), torch.round(x, decimals=-2), torch.round(x, decimals=40)),
           (torch.cat([SPECIAL, torch.tensor([0.125, 0.135, 2.675, 15.0, 25.0, -35.0, 1.005, 0.0049999, 3.4e38]),
                       X.reshape(-1) * 100]),),
           ops=("mul", "round", "div"), atol=0, rtol=0, tags=(FLOAT32_DEFINED,)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_polygamma_negative_n_is_refused_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.polygamma.default", lambda x: torch.polygamma(2, x), randn(4),
                   r"polygamma.*argument n = -1: expected n >= 0", ints={0: -1})


def test_float_binary_of_other_dtypes_is_refused_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose atan2 takes int64 tensors (the exporter converts them to float32 first)."""
    from openaccel.exporter.lower import RULES, LowerCtx, supported_edge_ops
    from openaccel.ir import AtenNode

    supported_edge_ops()

    def int_atan2(ctx: LowerCtx, node: AtenNode) -> None:
        a = ctx.bind(node)
        out = ctx.output(node)
        ctx.emit("atan2", [a["self"], a["other"]], [out])

    monkeypatch.setitem(RULES, "aten.atan2.default", int_atan2)
    i = randint(-5, 5, 4)
    prog = oa.export(Fn(lambda a: torch.atan2(a, a)), (i,), bundle_tests=False)
    with pytest.raises(oa.RuntimeFailure, match=r"atan2.*input 0 \(self\).*int64"):
        oa.load(prog)(i)


def test_round_decimals_of_integers_is_unsupported() -> None:
    """PyTorch has no integer round (eager raises too); the export error names the op."""
    with pytest.raises(oa.UnsupportedOpError, match=r"aten\.round\.decimals.*int64"):
        oa.export(Fn(lambda x: torch.round(x.float(), decimals=1).long().round(decimals=1)), (randint(0, 9, 3),))
