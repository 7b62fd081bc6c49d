"""Binary elementwise ops with broadcasting (arithmetic, comparisons, logical, bitwise, where)
against PyTorch eager: float32 and integer dtypes, type promotion (int/float, Python scalars,
0-d tensors), NaN handling, integer wrap-around, rounding modes, in-place reuse."""

from __future__ import annotations

import pytest
import torch

import openaccel as oa

from helpers import Fn, OpCase, randint, randn, run_case

NAN, INF = float("nan"), float("inf")

A = randn(2, 3, 4)                     # [2, 3, 4]
B = randn(3, 1, seed=1)                # broadcasts over dims 0 and 2
C = randn(4, seed=2)                   # broadcasts over the leading dims
SPECIAL = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -7.0, 1e-30])
SPECIAL2 = torch.tensor([1.0, NAN, 2.0, -0.0, 3.0, -INF, 0.0, -2.0, 2.0, -3.0, 3.0, INF])
I64 = randint(-20, 20, 3, 4)
I64B = randint(-20, 20, 4, seed=1)
NZ64 = torch.tensor([[3, -3, 7, -7], [1, -1, 2, -2], [5, 4, -6, 9]])     # nonzero divisors
I32 = randint(-20, 20, 2, 5, dtype=torch.int32)
BOOL = randint(0, 2, 3, 4, seed=3).bool()
BOOL_B = randint(0, 2, 4, seed=4).bool()

# pow is not correctly rounded in either libm (powf) or PyTorch's vectorized SLEEF pow (1 ulp):
# allow a few ulps.
ULP4 = dict(atol=1e-6, rtol=2e-6)


CASES = [
    # add / sub: broadcasting, alpha, Python scalars, rsub
    OpCase("bin_add_sub_f32",
           lambda a, b, c: (a + b, a - c, torch.add(a, b, alpha=2), torch.sub(a, c, alpha=0.5), 1 - a, a + 2.5,
                            b + c, torch.rsub(a, 3.0, alpha=2)),
           (A, B, C), ops=("add", "sub")),
    # integer arithmetic wraps around like PyTorch (no signed overflow in C: unsigned math)
    OpCase("bin_arith_int",
           lambda a, b, w, i: (a + b, a - b, a * b, torch.add(a, b, alpha=3), torch.sub(a, b, alpha=-2), a * 7,
                               w * 4, w + w, w - (-w), i * i, i + 3),
           (I64, I64B, torch.tensor([2**62, -(2**63), 2**63 - 1, 5]), I32), ops=("add", "sub", "mul")),
    # promotion: int tensor with float tensor / float scalar -> float; bool + int -> int; uint8 wraps
    OpCase("bin_promotion",
           lambda i, f, b, u, j: (i + 1.5, i * f, f - i, b + i, u + u, u * 3, j + torch.tensor(2**40),
                                  i * torch.tensor(0.5), f * torch.tensor(3)),
           (randint(-9, 9, 3, 4), randn(3, 4), BOOL, torch.tensor([200, 100, 7], dtype=torch.uint8),
            randint(-9, 9, 5, dtype=torch.int32)),
           ops=("add", "mul", "sub", "cast")),
    # mul / div (true, trunc, floor) with signs, zeros, NaN and inf
    OpCase("bin_mul_div_f32",
           lambda x, y, a, c: (x * y, x / y, torch.div(x, y, rounding_mode="trunc"),
                               torch.div(x, y, rounding_mode="floor"), a / c, a // 0.7,
                               torch.div(a, -0.3, rounding_mode="trunc"), a * 0.5, x / 0.0),
           (SPECIAL, SPECIAL2, A, C), ops=("mul", "div")),
    OpCase("bin_div_int",
           lambda a, d, i, m: (a / d, torch.div(a, d, rounding_mode="trunc"), torch.div(a, d, rounding_mode="floor"),
                               a // 3, a // -4, torch.div(a, -3, rounding_mode="trunc"), i // 2, i / 4,
                               m // -1, torch.div(m, -1, rounding_mode="trunc"), m % -1, torch.fmod(m, -1)),
           (I64, NZ64, I32, torch.tensor([-(2**63) + 1, 5, -7, 0])), ops=("div", "remainder", "fmod")),
    # pow: tensor ** tensor, tensor ** scalar, scalar ** tensor, integers (negative exponents -> 0 unless |base| = 1)
    OpCase("bin_pow_f32",
           lambda x, e, a: (x ** e, a.abs() ** 3.5, a ** 3, 2 ** a, a ** 0.5, a ** -1, a ** -0.5, a ** 2,
                            (-x) ** torch.tensor([2.0, 3.0, -1.0, 0.0] * 3), a ** 0, a ** 1),
           (SPECIAL.abs() + 0.5, SPECIAL2.clamp(-3, 3).nan_to_num(0.5), A),
           ops=("pow", "sqrt", "rsqrt", "reciprocal", "mul"), **ULP4),
    OpCase("bin_pow_int",
           lambda b, e, i: (b ** e, b ** 3, 2 ** e.abs(), i ** 2, b ** 2.5, torch.tensor([2, -3, 7]) ** 45),
           (torch.tensor([[2, -2, 1, -1, 0, 3], [5, -1, -1, 1, 2, 0]]),
            torch.tensor([[3, 2, -5, -3, 4, -1], [0, 4, 7, -2, -1, 0]]), I32),
           ops=("pow",), **ULP4),
    # minimum / maximum propagate NaN
    OpCase("bin_min_max",
           lambda x, y, a, c, i, f: (torch.minimum(x, y), torch.maximum(x, y), torch.maximum(a, c),
                                     torch.minimum(i, I64B), torch.maximum(i, f)),
           (SPECIAL, SPECIAL2, A, C, I64, randn(3, 4) * 10), ops=("minimum", "maximum", "cast")),
    # fmax / fmin: a NaN loses to a number (NaN only when both are); integers, bool, broadcasting; and
    # angle of reals (pi below zero, NaN kept), all composed of where / ne / maximum / minimum
    OpCase("bin_fmax_fmin_angle",
           lambda x, y, a, c, i, b: (torch.fmax(x, y), torch.fmin(x, y), torch.fmax(x, x.flip(0)),
                                     torch.fmin(a, c), torch.fmax(i, I64B), torch.fmin(i, torch.tensor(2)),
                                     torch.fmax(b, BOOL_B), torch.angle(x), torch.angle(i)),
           (SPECIAL, SPECIAL2, A, C, I64, BOOL), ops=("minimum", "maximum", "where", "ne", "lt")),
    # remainder (divisor's sign) and fmod (dividend's sign)
    OpCase("bin_rem_fmod",
           lambda x, y, a, d: (torch.remainder(x, y), torch.fmod(x, y), a % d, torch.fmod(a, d), a % -3,
                               torch.fmod(a, 4), x % 2.5, torch.fmod(x, -2.5), a % 2.5),
           (SPECIAL, SPECIAL2, I64, NZ64), ops=("remainder", "fmod")),
    # comparisons: broadcasting, NaN, Scalar overloads, mixed int/float and bool
    OpCase("bin_compare",
           lambda x, y, a, c, i, f, b: (x == y, x != y, x < y, x <= y, x > y, x >= y, a < c, a >= 0.5, c == C[0],
                                        i < f, i == 2.5, i != 2, i >= 3.0, b == BOOL_B, b > BOOL_B),
           (SPECIAL, SPECIAL2, A, C, I64, randn(3, 4) * 10, BOOL), ops=("eq", "ne", "lt", "le", "gt", "ge")),
    # logical: same dtype and mixed (nonzero tests)
    OpCase("bin_logical",
           lambda x, y, i, b, u: (torch.logical_and(x, y), torch.logical_or(x, y), torch.logical_xor(x, y),
                                  torch.logical_and(i, x), torch.logical_or(b, BOOL_B), torch.logical_xor(i, b),
                                  torch.logical_and(u, u), torch.logical_or(i, I64B)),
           (SPECIAL.reshape(3, 4), SPECIAL2.reshape(3, 4), I64 // 5, BOOL,
            torch.tensor([0, 1, 255], dtype=torch.uint8)),
           ops=("logical_and", "logical_or", "logical_xor")),
    OpCase("bin_bitwise",
           lambda a, b, i, t: (a & b, a | b, a ^ b, a & 6, a | -8, i ^ 5, t & BOOL_B, t | BOOL_B, t ^ BOOL_B),
           (I64, I64B, I32, BOOL), ops=("bitwise_and", "bitwise_or", "bitwise_xor")),
    # where: 3-way broadcasting, scalar operands, integers, promotion of mixed values
    OpCase("bin_where",
           lambda c, x, y, i, f: (torch.where(c, x, y), torch.where(c, x, 0.0), torch.where(x > 0, i, -1),
                                  torch.where(c, i, f), torch.where(c, c, ~c)),
           (randint(0, 2, 3, 1).bool(), randn(1, 4), randn(2, 1, 1, seed=5), randint(-9, 9, 3, 4),
            randn(3, 4, seed=6)),
           ops=("where",)),
    # shapes: size-1 dims everywhere, high rank, single elements, empty
    OpCase("bin_shapes",
           lambda p, q, r, s, e: (p + q, p * r, q - r, s + s, e * 2, r + s),
           (randn(1, 5, 1, 3), randn(2, 1, 4, 1, seed=1), randn(1, 1, 1, 1, seed=2), randn(1, seed=3),
            torch.zeros(2, 0, 3)),
           ops=("add", "mul", "sub")),
    OpCase("bin_rank6", lambda x, y: x * y, (randn(2, 1, 3, 1, 2, 3), randn(1, 2, 1, 4, 2, 1, seed=1)), ops=("mul",)),
    # chains: outputs reuse input buffers in place (same shape) while the other operand broadcasts
    OpCase("bin_inplace_chain", lambda x, y: ((x * 2 - y) / 3 + x) * (x - y),
           (A, B), ops=("mul", "sub", "div", "add")),
    # bool arithmetic: mul is and, add / maximum are or, minimum is and
    OpCase("bin_bool_arith", lambda a, b: (a * b, a + b, torch.maximum(a, b), torch.minimum(a, b)),
           (BOOL, BOOL_B), ops=("mul", "logical_or", "logical_and")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_zero_dim_inputs() -> None:
    """0-d graph inputs promote weakly (float32 tensor * int64 0-d -> float32). Checked through
    the bundled test vectors: the host binding cannot pass 0-d arrays yet."""
    prog = oa.export(Fn(lambda x, s, i: (x * s, x + i, s - i, torch.where(x > 0, s, x), i * 2)),
                     (randn(3, 4), torch.tensor(1.5), torch.tensor(3)))
    assert {"mul", "add", "sub", "where", "cast"} <= set(prog.ops)
    report = oa.load(prog).run_bundled_tests()
    assert report.ok, str(report)


@pytest.mark.parametrize("fn", [lambda a, b: a // b, lambda a, b: a % b, lambda a, b: torch.fmod(a, b),
                                lambda a, b: torch.div(a, b, rounding_mode="trunc")],
                         ids=["floor_divide", "remainder", "fmod", "trunc"])
def test_integer_division_by_zero_fails_at_run_time(fn) -> None:  # type: ignore[no-untyped-def]
    a, b = randint(-9, 9, 2, 3), torch.tensor([[1, 2, 3], [4, 5, 6]])
    mod = oa.load(oa.export(Fn(fn), (a, b)))
    b[1, 2] = 0
    with pytest.raises(oa.RuntimeFailure, match=r"division by zero.*element 5 \(index \[1, 2\]\)"):
        mod(a, b)


def test_int_min_divided_by_minus_one_wraps() -> None:
    """INT64_MIN // -1 traps in eager PyTorch (SIGFPE on x86); the kernels wrap to INT64_MIN (and
    the remainder is 0) instead of executing the undefined division."""
    m, d = torch.tensor([-9, 5]), torch.tensor([-1, -1])
    mod = oa.load(oa.export(Fn(lambda a, b: (a // b, torch.div(a, b, rounding_mode="trunc"), a % b,
                                              torch.fmod(a, b))), (m, d)))
    m[0] = -(2**63)
    outs = mod(m, d)
    assert [o.tolist() for o in outs] == [[-(2**63), -5], [-(2**63), -5], [0, 0], [0, 0]]


def test_float64_arithmetic_is_unsupported() -> None:
    with pytest.raises(oa.UnsupportedOpError, match=r"aten\.add\.Tensor.*float64"):
        oa.export(Fn(lambda x, y: x + y), (torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)))
