"""int8 quantization: the requantization rule's export half, and the pass that folds PT2E's q/dq
patterns into int8 instructions.

The rule (docs/quantization.md; its run-time half is runtime_c/src/cpu/kernels/ref/quant.c):
a real multiplier m > 0 (e.g. s_in * s_w[c] / s_out) is stored as an integer M and a right shift
n with m ~= M / 2^n, 0 <= M < 2^31, 0 <= n <= 62, M in [2^30, 2^31) unless n hit 62 (tiny m);
conv2d_q8 / linear_q8 multipliers have 31 significant bits too, n in [12, 50] (fewer bits only
for m < 2^-20, where n hits 50): format 1.4 (1.3 wrote 24, exact in float32, whose relative error
of 2^-25 put about one output in 10^5 on the other side of a rounding boundary).
M = round_half_even(m * 2^n) computed exactly (fractions, no float op in between), so every
machine that runs the exporter writes the same integers. At run time (conv2d_q8 / linear_q8)

    acc  = sat_int32(sum (x - zp_in) * w)                               (exact integer sum)
    A[c] = round_half_even(beta[c] * 2^n)                               (the bias's addend, exact)
    out  = clamp(round_half_even((acc * M + A[c]) / 2^n) + zp_out, act_min, act_max)

in 64-bit integers only, with the bias beta[c] = float32(b[c] / s_out) in output steps (the exact
quotient rounded once to float32, to nearest even; |beta| < 2048). Format 1.4: PT2E keeps the bias
in float32 and adds it before quantizing; beta is within 2^-24 of it relatively (format 1.3 kept a
multiple of 2^-12, up to 2^-13 of a step off: about one output in 10^4 fell on the other side of a
rounding boundary from PyTorch's reference, and in a transformer each such output moves the next
layers' sums; an int32 bias in accumulator steps, XNNPACK's convention, lost up to m / 2 of a
step). mean_q8 and mul_q8 requantize an
exact sum / product as clamp(round_half_even(acc * M / 2^n) + zp_out, ...); add_q8 shares one
shift between its two inputs:
    out = clamp(round_half_even(((a - zp_a) * M_a + (b - zp_b) * M_b) / 2^n) + zp_out, act_min, act_max).

The fold pass (`fold_quantized`, the first pass of the pipeline) runs on the edge graph before
constant folding, so the int8 weights are still int8 constants feeding dequantize_per_channel.
What it cannot fold stays float32 between explicit quantize / dequantize instructions and is
listed (op, reason, model line) in an ExportWarning and in the file's instruction list.

Dynamic quantization (XNNPACKQuantizer with is_dynamic=True, "8da8w"): `x -> choose_qparams.tensor
-> quantize_per_tensor.tensor -> dequantize_per_tensor.tensor -> linear` with a dequantized
symmetric int8 weight becomes one `linear_dq8` (float32 in and out; its rule: ref/quant_dynamic.c
and docs/quantization.md). A dynamic q/dq the fold cannot turn into linear_dq8 has no float32
fallback (its scale only exists at run time): an export error naming the node and its model line.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch

from ..errors import ExportError, ExportWarning
from ..ir import AtenNode, Graph, QuantParams, Source, Value

Q = "quantized_decomposed.quantize_per_tensor.default"
DQ = "quantized_decomposed.dequantize_per_tensor.default"
DQC = "quantized_decomposed.dequantize_per_channel.default"
QUANT_OPS = (Q, DQ, DQC)
# dynamic quantization (PT2E is_dynamic=True): parameters chosen at run time, per tensor
CQ = "quantized_decomposed.choose_qparams.tensor"
QT = "quantized_decomposed.quantize_per_tensor.tensor"
DQT = "quantized_decomposed.dequantize_per_tensor.tensor"
CQK = "quantized_decomposed.choose_qparams_per_token_asymmetric.default"
QTK = "quantized_decomposed.quantize_per_token.default"
DQTK = "quantized_decomposed.dequantize_per_token.default"
DYNAMIC_OPS = (CQ, QT, DQT, CQK, QTK, DQTK)
EPS_PER_TOKEN = float(torch.finfo(torch.float32).eps)   # choose_qparams_per_token_asymmetric's own

SHIFT_MAX = 62
MULT_BITS = 31
MULT_LIMIT = 1 << MULT_BITS
# conv2d_q8 / linear_q8 (format 1.4): 31-bit multipliers, shifts in [12, 50], the bias float32 in
# output steps below BIAS_LIMIT (|beta| * 2^n < 2^61: the rule's int64 sum cannot overflow; and the
# AVX-512 kernels' float path takes biases below 2^12 steps)
MAC_MULT_BITS = 31
MAC_SHIFT_MIN, MAC_SHIFT_MAX = 12, 50
BIAS_LIMIT = 2047.0
INT8_MIN, INT8_MAX = -128, 127


class QuantParamError(ExportError):
    """Quantization parameters the int8 kernels cannot represent (a scale of zero or NaN, a zero
    point outside the dtype, a multiplier too large)."""


def register_ops() -> None:
    """torch.ops.quantized_decomposed.* (torch defines them on import of this module only)."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401


def set_quant(v: Value, qp: QuantParams) -> None:
    """Label int8 / uint8 value `v` with its quantization parameters (the file's Tensor.quant);
    the first label stands."""
    if v.quant is None and v.dtype in (torch.int8, torch.uint8):
        v.quant = qp


# ---- the rule, export half ------------------------------------------------------------------------
def round_half_even(x: Fraction) -> int:
    """Nearest integer to x, ties to even (Python's round on a Fraction is exact)."""
    return round(x)


def check_scale(scale: float, what: str) -> None:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise QuantParamError(f"{what}: scale {scale!r} is not a positive finite number")


def check_zero_point(zp: int, what: str, lo: int = INT8_MIN, hi: int = INT8_MAX) -> None:
    if not lo <= int(zp) <= hi:
        raise QuantParamError(f"{what}: zero point {zp} is outside [{lo}, {hi}]")


def _shift_for(m: Fraction, what: str, bits: int = MULT_BITS, shift_max: int = SHIFT_MAX) -> int:
    if m <= 0:
        raise QuantParamError(f"{what}: multiplier {float(m)!r} is not positive")
    _, e = math.frexp(float(m))       # m = f * 2^e, f in [0.5, 1)
    n = min(bits - e, shift_max)
    if n < 0:
        raise QuantParamError(f"{what}: multiplier {float(m):.6g} is too large (at most 2^{bits}; check the scales)")
    return n


def quantize_multiplier(m: Fraction | float, what: str = "requantization", bits: int = MULT_BITS,
                        shift_max: int = SHIFT_MAX, shift_min: int = 0) -> tuple[int, int]:
    """(M, n) with M / 2^n = m rounded to `bits` significant bits (fewer when n hit shift_max),
    half to even (the rule above); n >= shift_min or QuantParamError."""
    m = Fraction(m)
    n = _shift_for(m, what, bits, shift_max)
    big = round_half_even(m * (1 << n))
    if big >= 1 << bits:     # f rounded up to 1.0 (n may reach -1 here: refused below)
        n -= 1
        big = round_half_even(m * Fraction(2) ** n)
    if n < shift_min:
        raise QuantParamError(f"{what}: multiplier {float(m):.6g} is too large (below 2^{bits - shift_min} "
                              "expected; check the scales)")
    return big, n


def quantize_multipliers_shared(ms: Sequence[Fraction | float], what: str = "add") -> tuple[list[int], int]:
    """Integer multipliers M_i with one shared shift n: M_i / 2^n = m_i (largest has 31 bits)."""
    fr = [Fraction(m) for m in ms]
    n = _shift_for(max(fr), what)
    big = [round_half_even(m * (1 << n)) for m in fr]
    if max(big) >= MULT_LIMIT:
        n -= 1
        if n < 0:
            raise QuantParamError(f"{what}: multiplier {float(max(fr)):.6g} is too large (at most 2^31)")
        big = [round_half_even(m * (1 << n)) for m in fr]
    return big, n


def requant_multipliers(in_scale: float, w_scales: Sequence[float], out_scale: float,
                        what: str = "conv") -> tuple[list[int], list[int]]:
    """Per-channel (M[c], n[c]) for real multiplier in_scale * w_scales[c] / out_scale."""
    check_scale(in_scale, f"{what}: input")
    check_scale(out_scale, f"{what}: output")
    mults, shifts = [], []
    for c, ws in enumerate(w_scales):
        check_scale(float(ws), f"{what}: weight channel {c}")
        m, n = quantize_multiplier(Fraction(in_scale) * Fraction(float(ws)) / Fraction(out_scale),
                                   f"{what} channel {c}", MAC_MULT_BITS, MAC_SHIFT_MAX, MAC_SHIFT_MIN)
        mults.append(m)
        shifts.append(n)
    return mults, shifts


def to_float32(x: Fraction) -> float:
    """x rounded once to float32, to nearest even (float(x) then float32 would round twice)."""
    if x == 0:
        return 0.0
    e = max(math.floor(math.log2(abs(x))) - 23, -149)   # a 24-bit significand; subnormals below 2^-126
    while abs(x) >= Fraction(2) ** (e + 24):            # log2 of a Fraction may be off by one
        e += 1
    while e > -149 and abs(x) < Fraction(2) ** (e + 23):
        e -= 1
    return float(round_half_even(x / Fraction(2) ** e) * Fraction(2) ** e)


def quantize_bias(bias: torch.Tensor | None, out_scale: float, n: int, reach: Sequence[float] = (),
                  what: str = "bias") -> list[float]:
    """The bias of conv2d_q8 / linear_q8 in output steps, float32 (format 1.4): b[c] / out_scale
    rounded once to float32. |beta| is at most BIAS_LIMIT (2047 output steps); a larger bias is
    clamped to it where that cannot change an output (the sum moves channel c by at most reach[c]
    output steps: the output saturates either way), else refused."""
    if bias is None:
        return [0.0] * n
    b = bias.detach().to(torch.float64).reshape(-1).tolist()
    out = []
    for c in range(n):
        if not math.isfinite(b[c]):
            raise QuantParamError(f"{what} channel {c} is {b[c]} (not finite)")
        q = to_float32(Fraction(b[c]) / Fraction(out_scale))
        if abs(q) > BIAS_LIMIT:
            r = reach[c] if c < len(reach) else math.inf
            if r + 258 > BIAS_LIMIT:
                raise QuantParamError(
                    f"{what} channel {c} is {b[c]:.6g} = {q:.6g} output steps (output scale {out_scale:.6g}); the "
                    f"int8 rule holds at most {BIAS_LIMIT:.0f} (check the output's calibration)")
            q = BIAS_LIMIT if q > 0 else -BIAS_LIMIT
        out.append(q)
    return out


def bias_addend(beta: float, shift: int) -> int:
    """The rule's integer addend of a bias beta (float32 output steps): round_half_even(beta * 2^shift)."""
    return round_half_even(Fraction(beta) * (1 << shift))


def quantize_value(v: float, scale: float, zp: int, qmin: int, qmax: int) -> int:
    """PyTorch's quantize_per_tensor of one float32 value (x * float32(1/scale), round half even)."""
    register_ops()
    t = torch.ops.quantized_decomposed.quantize_per_tensor(
        torch.tensor([v], dtype=torch.float32), scale, zp, qmin, qmax, torch.int8)
    return int(t[0])


# ---- the pass -------------------------------------------------------------------------------------
@dataclass
class Fallback:
    """An op left in float32 between dequantize / quantize."""

    op: str
    reason: str
    source: Source

    def describe(self) -> str:
        return f"{self.op}: {self.reason} (at {self.source.describe()})"


@dataclass
class QuantReport:
    folded: dict[str, int] = field(default_factory=dict)
    fallbacks: list[Fallback] = field(default_factory=list)

    def note(self) -> str:
        if not self.fallbacks:
            return ""
        lines = [f"  {f.describe()}" for f in self.fallbacks]
        return (f"{len(self.fallbacks)} op(s) of this quantized model stay float32 between "
                "dequantize/quantize instructions:\n" + "\n".join(lines))


class QuantOp:
    """The target of a folded node: lower/quant.py's rule for `name` emits the instruction."""

    def __init__(self, name: str) -> None:
        self.__name__ = f"openaccel.{name}"
        self.op = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ExportError(f"{self.__name__} is not evaluated at export time")


_ACTS = ("aten.relu.default", "aten.hardtanh.default", "aten.clamp.default")
_MOVES = ("aten.view_copy.default", "aten.permute_copy.default", "aten.squeeze_copy.dims",
          "aten.unsqueeze_copy.default", "aten.clone.default", "aten.slice_copy.Tensor",
          "aten.cat.default", "aten.max_pool2d_with_indices.default", "aten.max_pool2d.default",
          "aten._unsafe_view.default", "aten.expand_copy.default", "aten.select_copy.int",
          "dim_order_ops._clone_dim_order.default")
_VIEWS = ("aten.view_copy.default", "aten._unsafe_view.default")
MEAN_COUNT_MAX = 1 << 23   # |sum (x - zp)| * M < 2^62 for M < 2^31 (docs/quantization.md, mean_q8)
_COMPUTE = ("aten.convolution.default", "aten.addmm.default", "aten.mm.default", "aten.add.Tensor")


class _Miss(Exception):
    """This node does not match an int8 pattern (the reason is the message)."""


class _Folder:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.producer: dict[Value, AtenNode] = {}
        self.users: dict[Value, list[AtenNode]] = {}
        for n in graph.nodes:
            for o in n.outputs:
                if o is not None:
                    self.producer[o] = n
            for v in n.input_values():
                self.users.setdefault(v, []).append(n)
        self.outputs = set(graph.outputs)
        self.dead: set[int] = set()
        self.replace: dict[int, AtenNode] = {}
        self.made: dict[int, AtenNode] = {}   # id(int8 value) -> the folded node writing it
        self.misses: dict[int, tuple[AtenNode, str]] = {}
        self.report = QuantReport()

    # ---- helpers ----
    def sole_user(self, v: Value) -> AtenNode | None:
        us = self.users.get(v, [])
        if len(us) != 1 or v in self.outputs:
            return None
        return us[0]

    def dq_of(self, v: Any) -> tuple[Value, float, int, AtenNode]:
        """v = dequantize_per_tensor(xq int8, scale, zp): (xq, scale, zp, node)."""
        if not isinstance(v, Value):
            raise _Miss("an operand is not a tensor")
        n = self.producer.get(v)
        if n is None or n.op_name != DQ:
            raise _Miss("an input does not come from dequantize_per_tensor")
        xq, scale, zp, qmin, qmax, dt = n.args[:6]
        if dt != torch.int8 or not isinstance(xq, Value) or xq.dtype != torch.int8:
            raise _Miss(f"the input is {dt}, not int8")
        if (qmin, qmax) != (INT8_MIN, INT8_MAX):
            raise _Miss(f"activation range [{qmin}, {qmax}] is not [-128, 127]")
        what = f"dequantize at {n.source.describe()}"
        check_scale(float(scale), what)
        check_zero_point(int(zp), what)
        set_quant(xq, QuantParams.per_tensor(float(scale), int(zp)))
        return xq, float(scale), int(zp), n

    def weight_of(self, v: Any) -> tuple[torch.Tensor, list[float], AtenNode, QuantParams]:
        """v = dequantize_per_channel(W int8 constant, scales, zps (0), axis 0) (or per tensor)."""
        if not isinstance(v, Value):
            raise _Miss("the weight is not a tensor")
        n = self.producer.get(v)
        if n is None or n.op_name not in (DQC, DQ):
            raise _Miss("the weight is not dequantized from int8")
        w = n.args[0]
        if not isinstance(w, Value) or not w.is_const or w.dtype != torch.int8:
            raise _Miss("the weight is not an int8 constant")
        assert w.data is not None
        what = f"weight dequantize at {n.source.describe()}"
        if n.op_name == DQC:
            scales, zps, axis = n.args[1], n.args[2], int(n.args[3])
            if axis != 0:
                raise _Miss(f"per-channel weight axis {axis} (only 0)")
            if not (isinstance(scales, Value) and scales.is_const):
                raise _Miss("per-channel weight scales are not constants")
            assert scales.data is not None
            sc = [float(s) for s in scales.data.to(torch.float64).reshape(-1).tolist()]
            if isinstance(zps, Value) and zps.data is not None and bool((zps.data != 0).any()):
                raise _Miss("weight zero points are not 0 (asymmetric weights)")
            if len(sc) != w.shape[0]:
                raise QuantParamError(f"{what}: {len(sc)} scales for {w.shape[0]} output channels")
        else:
            scale, zp = float(n.args[1]), int(n.args[2])
            if zp != 0:
                raise _Miss("weight zero point is not 0 (asymmetric weights)")
            sc = [scale] * w.shape[0]
        for c, s in enumerate(sc):
            check_scale(s, f"{what}, channel {c}")
        qp = (QuantParams(tuple(sc), (0,) * len(sc), 0) if n.op_name == DQC else QuantParams.per_tensor(sc[0], 0))
        return w.data, sc, n, qp

    def q_after(self, v: Value, allow_act: bool = True) -> tuple[Value, float, int, int, int, list[AtenNode]]:
        """Follow v through an optional relu/hardtanh to quantize_per_tensor: (out int8, scale, zp,
        act_min, act_max, nodes)."""
        chain: list[AtenNode] = []
        act: AtenNode | None = None
        cur = v
        while True:
            u = self.sole_user(cur)
            if u is None:
                raise _Miss("the result is not only quantized (it has other users or is an output)")
            if u.op_name == Q:
                break
            if allow_act and act is None and u.op_name in _ACTS:
                act = u
                chain.append(u)
                out = u.outputs[0]
                assert out is not None
                cur = out
                continue
            raise _Miss(f"the result goes to {u.op_name}, not to quantize_per_tensor")
        qn = u
        _, scale, zp, qmin, qmax, dt = qn.args[:6]
        if dt != torch.int8 or (qmin, qmax) != (INT8_MIN, INT8_MAX):
            raise _Miss(f"output quantized to {dt} [{qmin}, {qmax}], not int8 [-128, 127]")
        what = f"quantize at {qn.source.describe()}"
        check_scale(float(scale), what)
        check_zero_point(int(zp), what)
        lo, hi = INT8_MIN, INT8_MAX
        if act is not None:
            lo, hi = self._act_bounds(act, float(scale), int(zp))
        out = qn.outputs[0]
        assert out is not None
        set_quant(out, QuantParams.per_tensor(float(scale), int(zp)))
        return out, float(scale), int(zp), lo, hi, [*chain, qn]

    def kill(self, *nodes: AtenNode) -> None:
        for n in nodes:
            self.dead.add(id(n))

    def const(self, data: torch.Tensor, name: str) -> Value:
        data = data.contiguous()
        return Value(name=name, dtype=data.dtype, shape=tuple(data.shape), data=data)

    # ---- patterns ----
    def fold_gemm(self, n: AtenNode) -> None:
        name = n.op_name
        if name == "aten.convolution.default":
            x, w, b, stride, pad, dil, transposed, _, groups = n.args[:9]
            if transposed:
                raise _Miss("transposed convolution has no int8 kernel yet")
            if len(stride) != 2:
                raise _Miss(f"{len(stride)}-D convolution (int8: 2-D only)")
        elif name == "aten.addmm.default":
            b, x, wt = n.args[:3]
            if n.kwargs.get("beta", 1) != 1 or n.kwargs.get("alpha", 1) != 1:
                raise _Miss("addmm with beta/alpha != 1")
        else:
            x, wt = n.args[:2]
            b = None
        if name != "aten.convolution.default":
            p = self.producer.get(wt) if isinstance(wt, Value) else None
            if p is None or p.op_name != "aten.permute_copy.default" or list(p.args[1]) != [1, 0]:
                raise _Miss("the weight is not a transposed dequantized constant")
            w = p.args[0]
        x, unview = self._flattened(x, n)
        xq, s_in, zp_in, _ = self.dq_of(x)
        wdata, w_scales, dqw, wqp = self.weight_of(w)
        if b is not None and not (isinstance(b, Value) and b.is_const and b.dtype == torch.float32):
            raise _Miss("the bias is not a float32 constant")
        if name != "aten.convolution.default" and (b is not None and b.numel != wdata.shape[0]):
            raise _Miss(f"bias of shape {list(b.shape)}")
        out = unview.outputs[0] if unview is not None else n.outputs[0]
        assert out is not None
        yq, s_out, zp_out, lo, hi, tail = self.q_after(out)
        if unview is not None:
            tail = [unview, *tail]
        cout = wdata.shape[0]
        op = "conv2d_q8" if name == "aten.convolution.default" else "linear_q8"
        mults, shifts = requant_multipliers(s_in, w_scales, s_out, f"{op} at {n.source.describe()}")
        k = int(wdata[0].numel())   # a sum moves channel c by at most K * 255 * 128 * m[c] output steps
        reach = [k * 255 * 128 * mu / float(1 << sh) for mu, sh in zip(mults, shifts)]
        bias = quantize_bias(b.data if isinstance(b, Value) else None, s_out, cout, reach,
                             f"{op} at {n.source.describe()}: bias")
        base = (w.name if isinstance(w, Value) else "w")
        wq = self.const(wdata, dqw.args[0].name if isinstance(dqw.args[0], Value) else base)
        wq.quant = wqp
        # float32 output steps (exact: quantize_bias rounds to float32): a runtime before format 1.3,
        # whose bias is int32 in accumulator steps, refuses the dtype instead of misreading the values
        bq = self.const(torch.tensor(bias, dtype=torch.float32),
                        (b.name if isinstance(b, Value) else "bias") + ".q")
        mq = self.const(torch.tensor(mults, dtype=torch.int32), f"{wq.name}.multiplier")
        # int8 (format 1.2); requant_multipliers keeps every shift in [MAC_SHIFT_MIN, MAC_SHIFT_MAX]
        if not all(MAC_SHIFT_MIN <= s <= MAC_SHIFT_MAX for s in shifts):
            raise QuantParamError(f"{op} at {n.source.describe()}: shifts {min(shifts)}..{max(shifts)} outside "
                                  f"[{MAC_SHIFT_MIN}, {MAC_SHIFT_MAX}]")
        sq = self.const(torch.tensor(shifts, dtype=torch.int8), f"{wq.name}.shift")
        kw: dict[str, Any] = dict(input_zp=zp_in, output_zp=zp_out, act_min=lo, act_max=hi,
                                  input_scale=s_in, output_scale=s_out)
        if op == "conv2d_q8":
            kw.update(stride_h=stride[0], stride_w=stride[1], pad_h=pad[0], pad_w=pad[1],
                      dilation_h=dil[0], dilation_w=dil[1], groups=int(groups))
        new = AtenNode(target=QuantOp(op), args=(xq, wq, bq, mq, sq), kwargs=kw, outputs=[yq], source=n.source)
        self.kill(*tail)  # the dequantize nodes go with remove_dead
        self.replace[id(n)] = new
        self.made[id(yq)] = new
        self.report.folded[op] = self.report.folded.get(op, 0) + 1

    def dynamic_input(self, n: AtenNode) -> bool:
        """Is the (possibly flattened) input of addmm / mm `n` a dynamically dequantized tensor?"""
        x = n.args[1] if n.op_name == "aten.addmm.default" else n.args[0]
        p = self.producer.get(x) if isinstance(x, Value) else None
        if p is not None and p.op_name in _VIEWS and isinstance(p.args[0], Value):
            p = self.producer.get(p.args[0])
        return p is not None and p.op_name in (DQT, DQTK)

    def fold_dynamic(self, n: AtenNode) -> None:
        """x -> choose_qparams.tensor -> quantize.tensor -> dequantize.tensor -> addmm / mm with a
        dequantized int8 symmetric weight: linear_dq8(x, W int8, weight scales, bias). Anything
        else on this path is a DynamicQuantizationError (no float32 fallback)."""
        from .quant_checks import DynamicQuantizationError

        where = f"{n.op_name} at {n.source.describe()}"

        def refuse(why: str) -> DynamicQuantizationError:
            return DynamicQuantizationError(
                f"{where}: its input is dynamically quantized but {why}; openaccel runs a dynamically "
                "quantized linear (linear_dq8) only with a choose_qparams.tensor -> quantize.tensor -> "
                "dequantize.tensor input (or the per-token choose_qparams_per_token_asymmetric -> quantize_per_token "
                "-> dequantize_per_token) and a symmetric int8 weight quantized per channel (axis 0) or per tensor, "
                "as XNNPACKQuantizer's get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True) "
                "writes it")

        if n.op_name == "aten.addmm.default":
            b, x, wt = n.args[:3]
            if n.kwargs.get("beta", 1) != 1 or n.kwargs.get("alpha", 1) != 1:
                raise refuse("it is an addmm with beta/alpha != 1")
        else:
            x, wt = n.args[:2]
            b = None
        p = self.producer.get(wt) if isinstance(wt, Value) else None
        if p is None or p.op_name != "aten.permute_copy.default" or list(p.args[1]) != [1, 0]:
            raise refuse("the weight is not a transposed dequantized constant")
        w = p.args[0]
        x0 = self.producer.get(x) if isinstance(x, Value) else None
        if x0 is not None and x0.op_name in _VIEWS and isinstance(x0.args[0], Value):
            x0 = self.producer.get(x0.args[0])
        per_token = x0 is not None and x0.op_name == DQTK
        x, unview = self._flattened(x, n, DQTK if per_token else DQT)
        dq = self.producer[x]
        xq, s, z, qmin, qmax, dt = dq.args[:6]
        q = self.producer.get(xq) if isinstance(xq, Value) else None
        if q is None or q.op_name != (QTK if per_token else QT):
            raise refuse(f"the {dq.op_name} does not read a {QTK if per_token else QT}")
        xf = q.args[0]
        c = self.producer.get(s) if isinstance(s, Value) else None
        if (c is None or c.op_name != (CQK if per_token else CQ) or self.producer.get(z) is not c
                or list(q.args[1:3]) != [s, z] or c.args[0] is not xf):
            raise refuse("its quantize / dequantize do not both use the scale and zero point that "
                         "choose_qparams computes from the quantized tensor itself")
        if per_token:
            cmin, cmax, eps, cdt = INT8_MIN, INT8_MAX, EPS_PER_TOKEN, c.args[1]
            if len(dq.args) > 6 and dq.args[6] not in (torch.float32, None):
                raise refuse(f"the per-token dequantize writes {dq.args[6]}, not float32")
        else:
            cmin, cmax, eps, cdt = c.args[1:5]
        if dt != torch.int8 or q.args[5] != dt or cdt != dt:
            raise refuse(f"the activation is quantized to {dt}, not int8")
        if (int(qmin), int(qmax)) != (int(cmin), int(cmax)) or tuple(q.args[3:5]) != (qmin, qmax):
            raise refuse(f"choose_qparams range [{cmin}, {cmax}] and quantize range [{qmin}, {qmax}] differ")
        if not INT8_MIN <= int(qmin) < int(qmax) <= INT8_MAX:
            raise refuse(f"the range [{qmin}, {qmax}] is not within int8 with qmin < qmax")
        if not (math.isfinite(float(eps)) and float(eps) > 0 and float(torch.tensor(float(eps))) > 0):
            raise refuse(f"choose_qparams eps {eps!r} is not a positive float32")
        if not (isinstance(xf, Value) and xf.dtype == torch.float32):
            raise refuse("the quantized activation is not float32")
        try:
            wdata, w_scales, dqw, _ = self.weight_of(w)
        except _Miss as m:
            raise refuse(str(m)) from None
        if b is not None and not (isinstance(b, Value) and b.is_const and b.dtype == torch.float32):
            raise refuse("the bias is not a float32 constant")
        if b is not None and b.numel != wdata.shape[0]:
            raise refuse(f"the bias has shape {list(b.shape)}")
        out = unview.outputs[0] if unview is not None else n.outputs[0]
        assert out is not None
        base = dqw.args[0].name if isinstance(dqw.args[0], Value) else "w"
        wq = self.const(wdata, base)
        wq.quant = QuantParams(tuple(w_scales), (0,) * len(w_scales), 0)
        f32 = torch.tensor(w_scales, dtype=torch.float32)
        if not bool(torch.isfinite(f32).all()) or bool((f32 <= 0).any()):
            raise QuantParamError(f"{where}: a weight scale is not a positive finite float32")
        sc = self.const(f32, f"{base}.scale")
        bias = self.const(b.data.to(torch.float32), b.name) if isinstance(b, Value) and b.data is not None else None
        new = AtenNode(target=QuantOp("linear_dq8"), args=(xf, wq, sc, bias),
                       kwargs=dict(qmin=int(qmin), qmax=int(qmax), per_token=int(per_token), eps=float(eps)),
                       outputs=[out], source=n.source)
        if unview is not None:
            self.kill(unview)
        self.replace[id(n)] = new
        self.report.folded["linear_dq8"] = self.report.folded.get("linear_dq8", 0) + 1

    def refuse_dynamic_left(self) -> None:
        """Dynamic q/dq nodes still in the graph after the fold: no kernel, no float32 fallback."""
        from .quant_checks import DynamicQuantizationError, listed

        left = [n for n in self.graph.nodes if n.op_name in DYNAMIC_OPS]
        if not left:
            return
        alive = {id(n) for n in self.graph.nodes}

        def why(n: AtenNode) -> str:
            if n.op_name not in (DQT, DQTK):
                return "part of a dynamic quantize / dequantize whose result is not only folded into linear_dq8"
            us = [u for o in n.outputs if o is not None for u in self.users.get(o, []) if id(u) in alive]
            if any(o in self.outputs for o in n.outputs):
                return "a graph output"
            names = ", ".join(sorted({f"{u.op_name} at {u.source.describe()}" for u in us}))
            return f"feeds {names}, which has no dynamically quantized kernel (only linear: linear_dq8)"

        raise DynamicQuantizationError(
            "these dynamic quantize / dequantize ops (scale and zero point computed at run time) are not part of a "
            "dynamically quantized linear openaccel can run (linear_dq8), and there is no float32 fallback for a "
            f"scale that only exists at run time:\n{listed(left, why)}\nQuantize dynamically only linears "
            "(XNNPACKQuantizer's is_dynamic=True does), or use static quantization.")

    def _flattened(self, x: Any, n: AtenNode, dq: str = DQ) -> tuple[Any, AtenNode | None]:
        """to_edge writes a linear of a [..., K] input as view_copy([R, K]) -> addmm / mm ->
        view_copy([..., N]): linear_q8 takes the [..., K] int8 tensor itself (same rows, same
        order), so both views go. Returns (the addmm's input to fold, the output view or None)."""
        p = self.producer.get(x) if isinstance(x, Value) else None
        if p is None or p.op_name not in _VIEWS or self.sole_user(x) is not n:
            return x, None
        src = p.args[0]
        sp = self.producer.get(src) if isinstance(src, Value) else None
        if sp is None or sp.op_name != dq:
            return x, None
        assert isinstance(src, Value)
        if len(x.shape) != 2 or len(src.shape) < 1 or src.shape[-1] != x.shape[1]:
            raise _Miss(f"the input view {list(src.shape)} -> {list(x.shape)} does not keep the last dim")
        out = n.outputs[0]
        assert out is not None
        u = self.sole_user(out)
        want = (*src.shape[:-1], out.shape[-1])
        if u is None or u.op_name not in _VIEWS or u.outputs[0] is None or tuple(u.outputs[0].shape) != want:
            raise _Miss(f"the flattened {list(src.shape)} input's result is not viewed back to {list(want)}")
        return src, u

    def fold_embedding(self, n: AtenNode) -> None:
        """embedding(W float32 constant, idx) -> q: a gather commutes with the elementwise
        quantize, so the table is quantized here (PyTorch's own quantize_per_tensor, the same
        bytes) and the lookup runs on int8."""
        w, idx = n.args[:2]
        if not (isinstance(w, Value) and w.is_const and w.dtype == torch.float32):
            raise _Miss("the table is not a float32 constant")
        out = n.outputs[0]
        assert out is not None and w.data is not None
        yq, s_out, zp_out, _, _, tail = self.q_after(out, allow_act=False)
        register_ops()
        wq = torch.ops.quantized_decomposed.quantize_per_tensor(w.data.to(torch.float32), s_out, zp_out,
                                                                 INT8_MIN, INT8_MAX, torch.int8)
        table = self.const(wq, f"{w.name}.q")
        table.quant = QuantParams.per_tensor(s_out, zp_out)
        new = AtenNode(target=n.target, args=(table, idx, *n.args[2:]), kwargs=dict(n.kwargs),
                       outputs=[yq], source=n.source)
        self.kill(*tail)
        self.replace[id(n)] = new
        self.made[id(yq)] = new
        self.report.folded["embedding"] = self.report.folded.get("embedding", 0) + 1

    def fold_mean(self, n: AtenNode) -> None:
        """dq -> mean over dims -> q: mean_q8 sums exactly and requantizes once, with the
        multiplier s_in / (s_out * count)."""
        x = n.args[0]
        xq, s_in, zp_in, _ = self.dq_of(x)
        if n.kwargs.get("dtype") not in (None, torch.float32):
            raise _Miss(f"mean with dtype {n.kwargs.get('dtype')}")
        nd = len(xq.shape)
        dims_arg = n.args[1] if len(n.args) > 1 else None
        keepdim = bool(n.args[2]) if len(n.args) > 2 else bool(n.kwargs.get("keepdim", False))
        dims = sorted({int(d) % max(nd, 1) for d in dims_arg}) if dims_arg else list(range(nd))
        count = math.prod(xq.shape[d] for d in dims)
        if count == 0:
            raise _Miss("mean over an empty dim")
        where = f"mean_q8 at {n.source.describe()}"
        if count > MEAN_COUNT_MAX:
            raise QuantParamError(f"{where}: mean over {count} elements (int8 mean: at most {MEAN_COUNT_MAX})")
        out = n.outputs[0]
        assert out is not None
        yq, s_out, zp_out, lo, hi, tail = self.q_after(out)
        mult, shift = quantize_multiplier(Fraction(s_in) / (Fraction(s_out) * count), where)
        kw: dict[str, Any] = dict(input_zp=zp_in, output_zp=zp_out, multiplier=mult, shift=shift, act_min=lo,
                                  act_max=hi, keepdim=int(keepdim), dims=dims, input_scale=s_in, output_scale=s_out)
        new = AtenNode(target=QuantOp("mean_q8"), args=(xq,), kwargs=kw, outputs=[yq], source=n.source)
        self.kill(*tail)
        self.replace[id(n)] = new
        self.made[id(yq)] = new
        self.report.folded["mean_q8"] = self.report.folded.get("mean_q8", 0) + 1

    def fold_mul(self, n: AtenNode) -> None:
        """dq(a) * dq(b) -> q: mul_q8, the exact product of the centred inputs requantized once
        with the multiplier s_a * s_b / s_out."""
        a, b = n.args[:2]
        aq, sa, za, _ = self.dq_of(a)
        bq, sb, zb, _ = self.dq_of(b)
        out = n.outputs[0]
        assert out is not None
        yq, so, zo, lo, hi, tail = self.q_after(out)
        mult, shift = quantize_multiplier(Fraction(sa) * Fraction(sb) / Fraction(so),
                                          f"mul_q8 at {n.source.describe()}")
        kw = dict(self_zp=za, other_zp=zb, output_zp=zo, multiplier=mult, shift=shift, act_min=lo, act_max=hi,
                  self_scale=sa, other_scale=sb, output_scale=so)
        new = AtenNode(target=QuantOp("mul_q8"), args=(aq, bq), kwargs=kw, outputs=[yq], source=n.source)
        self.kill(*tail)
        self.replace[id(n)] = new
        self.made[id(yq)] = new
        self.report.folded["mul_q8"] = self.report.folded.get("mul_q8", 0) + 1

    def fold_add(self, n: AtenNode) -> None:
        a, b = n.args[:2]
        if n.kwargs.get("alpha", 1) != 1:
            raise _Miss("add with alpha != 1")
        aq, sa, za, _ = self.dq_of(a)
        bq, sb, zb, _ = self.dq_of(b)
        out = n.outputs[0]
        assert out is not None
        yq, so, zo, lo, hi, tail = self.q_after(out)
        check_scale(sa, "add_q8: self")
        (ma, mb), shift = quantize_multipliers_shared([Fraction(sa) / Fraction(so), Fraction(sb) / Fraction(so)],
                                                      f"add_q8 at {n.source.describe()}")
        kw = dict(self_zp=za, other_zp=zb, output_zp=zo, self_multiplier=ma, other_multiplier=mb, shift=shift,
                  act_min=lo, act_max=hi, self_scale=sa, other_scale=sb, output_scale=so)
        new = AtenNode(target=QuantOp("add_q8"), args=(aq, bq), kwargs=kw, outputs=[yq], source=n.source)
        self.kill(*tail)
        self.replace[id(n)] = new
        self.made[id(yq)] = new
        self.report.folded["add_q8"] = self.report.folded.get("add_q8", 0) + 1

    def fold_move(self, n: AtenNode) -> None:
        """dq -> data movement / max pool -> q with the same qparams: the op itself on int8."""
        ins = [v for v in n.input_values() if v in self.producer and self.producer[v].op_name == DQ]
        if not ins:
            raise _Miss("no dequantized input")
        params = set()
        dqs = []
        for v in ins:
            xq, s, z, dq = self.dq_of(v)
            params.add((s, z))
            dqs.append((v, xq, dq))
        if len(params) != 1:
            raise _Miss("inputs with different quantization parameters")
        out = n.outputs[0]
        assert out is not None
        yq, s_out, zp_out, _, _, tail = self.q_after(out, allow_act=False)
        if (s_out, zp_out) not in params:
            raise _Miss("output quantization parameters differ from the input's")
        sub = {id(v): xq for v, xq, _ in dqs}

        def swap(a: Any) -> Any:
            if isinstance(a, Value):
                return sub.get(id(a), a)
            if isinstance(a, (list, tuple)):
                return type(a)(swap(x) for x in a)
            return a

        outs = list(n.outputs)
        outs[0] = yq
        extra = [o for o in outs[1:] if o is not None and (self.users.get(o) or o in self.outputs)]
        if extra:
            raise _Miss("a second output is used")
        outs = [yq] + [None] * (len(outs) - 1)
        new = AtenNode(target=n.target, args=swap(n.args), kwargs={k: swap(v) for k, v in n.kwargs.items()},
                       outputs=outs, source=n.source)
        self.kill(*tail)
        self.replace[id(n)] = new
        key = n.op_name.split(".")[1]
        self.report.folded[key] = self.report.folded.get(key, 0) + 1

    def fold_act(self, n: AtenNode) -> None:
        """q8 op -> dq -> relu / hardtanh / clamp -> q with the same qparams: tighten the q8 op's
        act_min / act_max (the clamp is exact in the quantized domain)."""
        xq, s_in, zp_in, _ = self.dq_of(n.args[0] if n.args else None)
        prod = self.made.get(id(xq))
        if prod is None or "act_min" not in prod.kwargs:
            raise _Miss("the input does not come from an int8 conv / linear / add it can be fused into")
        users = self.users.get(xq, [])
        if len(users) != 1 or xq in self.outputs:
            raise _Miss("the int8 result it would be fused into has other users")
        yq, s_out, zp_out, _, _, tail = self.q_after(n.outputs[0] if n.outputs[0] is not None else xq, False)
        if (s_out, zp_out) != (s_in, zp_in):
            raise _Miss("output quantization parameters differ from the input's")
        # the activation itself, evaluated in the output's quantized domain
        lo, hi = self._act_bounds(n, s_out, zp_out)
        prod.kwargs["act_min"] = max(int(prod.kwargs["act_min"]), lo)
        prod.kwargs["act_max"] = min(int(prod.kwargs["act_max"]), hi)
        if prod.kwargs["act_min"] > prod.kwargs["act_max"]:
            prod.kwargs["act_max"] = prod.kwargs["act_min"]
        prod.outputs = [yq]
        self.made[id(yq)] = prod
        self.kill(n, *tail)
        self.report.folded["activation"] = self.report.folded.get("activation", 0) + 1

    def _act_bounds(self, n: AtenNode, scale: float, zp: int) -> tuple[int, int]:
        """relu / hardtanh / clamp of n as int8 bounds: PyTorch's quantize of its float bounds."""
        lo, hi = INT8_MIN, INT8_MAX
        name, args = n.op_name, n.args
        if name == "aten.relu.default":
            lo = max(lo, zp)
        else:
            a_lo = args[1] if len(args) > 1 else (-1.0 if name.endswith("hardtanh.default") else None)
            a_hi = args[2] if len(args) > 2 else (1.0 if name.endswith("hardtanh.default") else None)
            if a_lo is not None:
                lo = max(lo, quantize_value(float(a_lo), scale, zp, INT8_MIN, INT8_MAX))
            if a_hi is not None:
                hi = min(hi, quantize_value(float(a_hi), scale, zp, INT8_MIN, INT8_MAX))
        return lo, hi

    def run(self) -> QuantReport:
        misses: dict[int, tuple[AtenNode, str]] = {}
        for n in self.graph.nodes:
            if id(n) in self.dead:
                continue
            name = n.op_name
            try:
                if name in ("aten.addmm.default", "aten.mm.default") and self.dynamic_input(n):
                    self.fold_dynamic(n)
                elif name in ("aten.convolution.default", "aten.addmm.default", "aten.mm.default"):
                    self.fold_gemm(n)
                elif name == "aten.add.Tensor":
                    self.fold_add(n)
                elif name == "aten.mul.Tensor":
                    self.fold_mul(n)
                elif name == "aten.mean.dim":
                    self.fold_mean(n)
                elif name == "aten.embedding.default":
                    self.fold_embedding(n)
                elif name in _MOVES:
                    self.fold_move(n)
                elif name in _ACTS:
                    self.fold_act(n)
                elif self._touches_quant(n):
                    raise _Miss("no int8 kernel for this op yet")
            except _Miss as m:
                if self._touches_quant(n):
                    misses[id(n)] = (n, str(m))
        self.graph.nodes = [self.replace.get(id(n), n) for n in self.graph.nodes if id(n) not in self.dead]
        self.misses = misses
        return self.report

    def note_fallbacks(self) -> None:
        """Fallbacks among the nodes still in the graph (after dead code removal)."""
        alive = {id(n) for n in self.graph.nodes}
        self.report.fallbacks = [Fallback(n.op_name, why, n.source) for k, (n, why) in self.misses.items()
                                 if k in alive]

    def _touches_quant(self, n: AtenNode) -> bool:
        if n.op_name in QUANT_OPS:
            return False
        fed = any(v in self.producer and self.producer[v].op_name in (DQ, DQC) for v in n.input_values())
        feeds = any(any(u.op_name == Q for u in self.users.get(o, [])) for o in n.outputs if o is not None)
        return fed or feeds


def fold_quantized(graph: Graph, stacklevel: int = 2) -> QuantReport:
    """Fold PT2E q/dq patterns into int8 instructions (see the module docstring); warn about the
    ops left in float32."""
    if not any(n.op_name in QUANT_OPS + DYNAMIC_OPS for n in graph.nodes):
        return QuantReport()
    from .fold import remove_dead

    folder = _Folder(graph)
    report = folder.run()
    remove_dead(graph)
    folder.refuse_dynamic_left()
    folder.note_fallbacks()
    for f in report.fallbacks:
        if f.source != Source():
            graph.float32_reasons[f.source] = f.reason
    note = report.note()
    if note:
        warnings.warn(note, ExportWarning, stacklevel=stacklevel)
    return report


# Bundled test vectors compare with the quantized model run in eager (float q/dq around float
# ops), which the integer rule matches to within an output step or so; a few steps of slack keep
# a file's own test from failing on an honest 1-2 LSB difference.
BUNDLED_LSB = 3


def bundled_atol(graph: Graph) -> float:
    """The absolute tolerance a bundled test of `graph` needs: BUNDLED_LSB steps of the largest
    scale of a dequantize writing a graph output (0 when no output is dequantized)."""
    outs = set(map(id, graph.outputs))
    scales = [i.farg("scale") for i in graph.instrs if i.op == "dequantize" and id(i.outputs[0]) in outs]
    return BUNDLED_LSB * max(scales, default=0.0)


# Ops whose int8 output holds values of their int8 inputs (rearranged, a subset, or the max): the
# output has its inputs' parameters (fold_move folds exactly these patterns).
_KEEPS_QUANT = frozenset({"copy", "permute", "expand", "slice", "select", "cat", "split", "max_pool2d",
                          "adaptive_max_pool2d", "flip", "repeat", "index_select", "gather"})


def attach_quant_params(graph: Graph) -> int:
    """Label the int8 / uint8 tensors of a quantized program that the fold and the lowering did not
    (views, copies and transfers of labelled ones) with their source's parameters, so every such
    tensor of the file carries its QuantParams. Runs before memory planning, whose in-place reuse
    makes tensors alias unrelated ones. Returns the number of labelled tensors."""
    def labelled(v: Value | None) -> bool:
        return v is not None and v.quant is not None

    quantized = (torch.int8, torch.uint8)
    if not any(labelled(v) for ins in graph.instrs for v in (*ins.inputs, *ins.outputs)):
        return 0
    values: dict[int, Value] = {}
    for ins in graph.instrs:
        for v in (*ins.inputs, *ins.outputs):
            while v is not None and id(v) not in values:
                values[id(v)] = v
                v = v.alias_of
    changed = True
    while changed:
        changed = False
        for v in values.values():   # a view and the tensor it views (per-tensor, or the same shape)
            r = v.alias_of
            if r is None or r.dtype != v.dtype or v.dtype not in quantized:
                continue
            for src, dst in ((r, v), (v, r)):
                q = src.quant
                if q is not None and dst.quant is None and (q.axis < 0 or dst.shape == src.shape):
                    dst.quant = q
                    changed = True
        for ins in graph.instrs:
            if ins.kind != "transfer" and ins.op not in _KEEPS_QUANT:
                continue
            srcs = {(v.quant, v.dtype) for v in ins.inputs
                    if v is not None and v.quant is not None and v.dtype in quantized}
            if len(srcs) != 1:
                continue
            (q_or_none, dt), = srcs
            assert q_or_none is not None
            q = q_or_none
            if q.axis >= 0 and not (ins.kind == "transfer" or ins.op == "copy"):
                continue   # a rearranged per-channel tensor's axis may have moved
            for o in ins.outputs:
                if o.quant is None and o.dtype == dt:
                    o.quant = q
                    changed = True
    return sum(1 for v in values.values() if v.quant is not None)
