"""Lowering rules: unary elementwise ops and activations, dtype conversion (cast) and the creation
ops (full, arange).

Type promotion: the kernels compute in one dtype (opset.py); the result dtype is the node's output
dtype (to_edge already applied PyTorch's promotion), so inputs are cast to the compute dtype and,
where the kernel cannot produce the output dtype directly, the result is cast back. 8/16-bit
integers compute in int32 and wrap back on the final cast, which is exact for these ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ...ir import AtenNode, Value, dtype_name
from ...opset import OPS
from . import LowerCtx, rule

_SMALL_INTS = (torch.uint8, torch.int8, torch.int16)
_CAST_DTYPES = (torch.float32, torch.float64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                torch.bool, torch.complex64)
_EXACT_INT = 2**53  # integers travel as float64 arguments: exact up to here


def compute_dtype(ctx: LowerCtx, op: str, want: torch.dtype) -> torch.dtype:
    """The dtype the `op` kernel computes in to produce a result of dtype `want`."""
    allowed = OPS[op].dtypes
    if dtype_name(want) in allowed:
        return want
    if want in _SMALL_INTS and "int32" in allowed:
        return torch.int32
    raise ctx.unsupported(f"dtype {dtype_name(want)} (the '{op}' kernel computes in "
                          f"{', '.join(sorted(allowed))})")


def operand(ctx: LowerCtx, a: Any, dtype: torch.dtype) -> Value:
    """A tensor operand (cast if needed) or a Python scalar made a 0-d constant of `dtype`."""
    if isinstance(a, Value):
        return ctx.cast(a, dtype)
    if isinstance(a, complex) and not dtype.is_complex:
        raise ctx.unsupported(f"complex operand {a!r} of a {dtype_name(dtype)} op")
    if isinstance(a, (bool, int, float, complex)):
        return ctx.scalar(a, dtype)
    raise ctx.unsupported(f"operand of type {type(a).__name__}")


def emit_as(ctx: LowerCtx, op: str, inputs: Sequence[Value | None], out: Value, result: torch.dtype,
            ints: Sequence[int] = (), floats: Sequence[float] = ()) -> None:
    """Emit `op` producing dtype `result`, then cast into `out` if its dtype differs."""
    if out.dtype == result:
        ctx.emit(op, inputs, [out], ints, floats)
        return
    if out.dtype not in _CAST_DTYPES:
        raise ctx.unsupported(f"output dtype {dtype_name(out.dtype)}")
    tmp = ctx.temp(result, out.shape, hint=op)
    ctx.emit(op, inputs, [tmp], ints, floats)
    ctx.emit("cast", [tmp], [out])


def output(node: AtenNode) -> Value:
    out = node.outputs[0]
    assert out is not None
    return out


def int_arg(ctx: LowerCtx, name: str, v: Any, dtype: torch.dtype) -> float:
    """A scalar argument used by an integer kernel: must be an integer exactly representable as float64."""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int):
        raise ctx.unsupported(f"{name} = {v!r} is not an integer but the op computes in {dtype_name(dtype)}")
    if abs(v) > _EXACT_INT:
        raise ctx.unsupported(f"{name} = {v} is beyond 2^53 (arguments are stored as float64)")
    return float(v)


# ---- unary ------------------------------------------------------------------------------------

_UNARY = {
    "neg": "neg", "abs": "abs", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu", "silu": "silu", "hardswish": "hardswish",
    "hardsigmoid": "hardsigmoid", "sin": "sin", "cos": "cos", "erf": "erf", "floor": "floor",
    "ceil": "ceil", "round": "round", "sign": "sign", "sgn": "sign", "reciprocal": "reciprocal",
    "log1p": "log1p", "expm1": "expm1",
}


@rule(*(f"aten.{name}.default" for name in _UNARY))
def unary(ctx: LowerCtx, node: AtenNode) -> None:
    op = _UNARY[node.op_name.split(".")[1]]
    x = ctx.bind(node)["self"]
    out = output(node)
    if not isinstance(x, Value):
        raise ctx.unsupported("a non-tensor input")
    if x.dtype.is_complex:
        if op != "abs" or x.dtype != torch.complex64 or out.dtype != torch.float32:
            raise ctx.unsupported(f"{op} of a {dtype_name(x.dtype)} tensor (complex64 has abs, add, sub, mul, div)")
        ctx.emit("abs", [x], [out])  # |z| as float32
        return
    if op in ("floor", "ceil", "round") and not out.dtype.is_floating_point and out.dtype == x.dtype:
        ctx.alias(out, x)  # integer rounding is the identity (PyTorch returns a copy)
        return
    dt = compute_dtype(ctx, op, out.dtype)
    emit_as(ctx, op, [ctx.cast(x, dt)], out, dt)


@rule("aten.gelu.default")
def gelu(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    out = output(node)
    approx = a["approximate"] or "none"
    if approx not in ("none", "tanh"):
        raise ctx.unsupported(f"approximate='{approx}' (expected 'none' or 'tanh')")
    dt = compute_dtype(ctx, "gelu", out.dtype)
    emit_as(ctx, "gelu", [ctx.cast(a["self"], dt)], out, dt, ints=[1 if approx == "tanh" else 0])


@rule("aten.leaky_relu.default")
def leaky_relu(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    out = output(node)
    dt = compute_dtype(ctx, "leaky_relu", out.dtype)
    emit_as(ctx, "leaky_relu", [ctx.cast(a["self"], dt)], out, dt, floats=[float(a["negative_slope"])])


@rule("aten.rrelu_with_noise_functional.default")
def rrelu(ctx: LowerCtx, node: AtenNode) -> None:
    """F.rrelu in eval mode: leaky_relu with the mean slope (lower + upper) / 2, as PyTorch; the noise
    output is the noise input, unchanged. In training mode the slopes are random: refused."""
    a = ctx.bind(node)
    if a["training"]:
        raise ctx.unsupported("rrelu in training mode draws a random slope per element: export the model in eval "
                              "mode (model.eval(), or F.rrelu(..., training=False))")
    out, noise_out = node.outputs
    assert out is not None
    dt = compute_dtype(ctx, "leaky_relu", out.dtype)
    slope = (float(a["lower"]) + float(a["upper"])) / 2
    emit_as(ctx, "leaky_relu", [ctx.cast(a["self"], dt)], out, dt, floats=[slope])
    if noise_out is not None and ctx.is_used(noise_out):
        ctx.alias(noise_out, ctx.tensor_arg(a, "noise"))


@rule("aten.elu.default")
def elu(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    out = output(node)
    dt = compute_dtype(ctx, "elu", out.dtype)
    emit_as(ctx, "elu", [ctx.cast(a["self"], dt)], out, dt,
            floats=[float(a["alpha"]), float(a["scale"]), float(a["input_scale"])])


def _bound(ctx: LowerCtx, name: str, v: Any, dt: torch.dtype) -> float:
    if dt.is_floating_point:
        return float(v)
    return int_arg(ctx, name, v, dt)


@rule("aten.hardtanh.default")
def hardtanh(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    out = output(node)
    dt = compute_dtype(ctx, "hardtanh", out.dtype)
    lo, hi = _bound(ctx, "min_val", a["min_val"], dt), _bound(ctx, "max_val", a["max_val"], dt)
    emit_as(ctx, "hardtanh", [ctx.cast(a["self"], dt)], out, dt, floats=[lo, hi])


@rule("aten.clamp.default")
def clamp(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    out = output(node)
    lo, hi = a["min"], a["max"]
    if lo is None and hi is None:
        raise ctx.unsupported("clamp needs at least one of min and max")
    dt = compute_dtype(ctx, "clamp", out.dtype)
    flo = 0.0 if lo is None else _bound(ctx, "min", lo, dt)
    fhi = 0.0 if hi is None else _bound(ctx, "max", hi, dt)
    emit_as(ctx, "clamp", [ctx.cast(a["self"], dt)], out, dt,
            ints=[int(lo is not None), int(hi is not None)], floats=[flo, fhi])


@rule("aten.clamp.Tensor")
def clamp_tensor(ctx: LowerCtx, node: AtenNode) -> None:
    """clamp(x, min, max) with tensor bounds = minimum(maximum(x, min), max), NaN-propagating as
    PyTorch's clamp."""
    a = ctx.bind(node)
    out = output(node)
    x, lo, hi = a["self"], a["min"], a["max"]
    if lo is None and hi is None:
        raise ctx.unsupported("clamp needs at least one of min and max")
    dt = compute_dtype(ctx, "maximum", out.dtype)
    cur = ctx.cast(x, dt)
    steps = [(op, b) for op, b in (("maximum", lo), ("minimum", hi)) if b is not None]
    for k, (op, b) in enumerate(steps):
        bv = operand(ctx, b, dt)
        if k == len(steps) - 1:
            emit_as(ctx, op, [cur, bv], out, dt)
        else:
            shape = tuple(torch.broadcast_shapes(cur.shape, bv.shape))
            nxt = ctx.temp(dt, shape, hint=op)
            ctx.emit(op, [cur, bv], [nxt])
            cur = nxt


@rule("aten.trunc.default")
def trunc(ctx: LowerCtx, node: AtenNode) -> None:
    """trunc(x) = div(x, 1, rounding_mode='trunc'): truncf(x / 1) is exactly truncf(x), NaN, inf and -0
    included, so no separate op is needed."""
    x = ctx.bind(node)["self"]
    out = output(node)
    if not out.dtype.is_floating_point and out.dtype == x.dtype:
        ctx.alias(out, x)
        return
    dt = compute_dtype(ctx, "div", out.dtype)
    if not dt.is_floating_point:
        raise ctx.unsupported(f"dtype {dtype_name(out.dtype)}")
    emit_as(ctx, "div", [ctx.cast(x, dt), ctx.scalar(1.0, dt)], out, dt, ints=[1])


@rule("aten.isnan.default", "aten.isinf.default")
def isnan_isinf(ctx: LowerCtx, node: AtenNode) -> None:
    """isnan(x) = x != x; isinf(x) = |x| == inf (both exact); integers are never NaN or inf."""
    x = ctx.bind(node)["self"]
    out = output(node)
    if not x.dtype.is_floating_point:
        ctx.emit("full", [], [out], floats=[0.0])
        return
    if x.dtype != torch.float32:
        raise ctx.unsupported(f"dtype {dtype_name(x.dtype)}")
    if node.op_name == "aten.isnan.default":
        ctx.emit("ne", [x, x], [out])
        return
    mag = ctx.temp(torch.float32, x.shape, hint="abs")
    ctx.emit("abs", [x], [mag])
    ctx.emit("eq", [mag, ctx.scalar(float("inf"), torch.float32)], [out])


@rule("aten.angle.default")
def angle(ctx: LowerCtx, node: AtenNode) -> None:
    """angle of a real number: pi where x < 0, else 0 (NaN stays NaN; -0.0 gives 0): where(x != x, x,
    where(x < 0, pi, 0)), exact."""
    x = ctx.bind(node)["self"]
    out = output(node)
    if not isinstance(x, Value) or x.dtype.is_complex or out.dtype != torch.float32:
        raise ctx.unsupported(f"angle of {dtype_name(x.dtype) if isinstance(x, Value) else 'a number'} "
                              "(real inputs only, a float32 result)")
    xf = ctx.cast(x, torch.float32)
    neg = ctx.temp(torch.bool, x.shape, hint="neg")
    ctx.emit("lt", [xf, ctx.scalar(0.0, torch.float32)], [neg])
    t = ctx.temp(torch.float32, x.shape, hint="angle")
    ctx.emit("where", [neg, ctx.scalar(math.pi, torch.float32), ctx.scalar(0.0, torch.float32)], [t])
    nan = ctx.temp(torch.bool, x.shape, hint="isnan")
    ctx.emit("ne", [xf, xf], [nan])
    ctx.emit("where", [nan, xf, t], [out])


@rule("aten.logical_not.default")
def logical_not(ctx: LowerCtx, node: AtenNode) -> None:
    x = ctx.bind(node)["self"]
    out = output(node)
    if dtype_name(x.dtype) not in OPS["logical_not"].dtypes:
        x = ctx.cast(x, torch.bool)  # the nonzero test, exact for every dtype
    ctx.emit("logical_not", [x], [out])


@rule("aten.bitwise_not.default")
def bitwise_not(ctx: LowerCtx, node: AtenNode) -> None:
    x = ctx.bind(node)["self"]
    out = output(node)
    dt = compute_dtype(ctx, "bitwise_not", out.dtype)
    emit_as(ctx, "bitwise_not", [ctx.cast(x, dt)], out, dt)


# ---- dtype conversion ---------------------------------------------------------------------------

@rule("dim_order_ops._to_dim_order_copy.default", "aten._to_copy.default")
def to_copy(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = a["self"]
    out = output(node)
    # dim_order / memory_format (x.to(memory_format=torch.channels_last)) change how PyTorch lays the
    # bytes out, not the logical values: openaccel tensors are dense row-major whatever they ask for,
    # as for clone (shape.reinterpret)
    if not isinstance(x, Value) or tuple(x.shape) != tuple(out.shape):
        raise ctx.unsupported("a conversion that changes the shape")
    if out.dtype == x.dtype:
        ctx.alias(out, x)
        return
    for dt in (x.dtype, out.dtype):
        if dt not in _CAST_DTYPES:
            raise ctx.unsupported(f"conversion from {dtype_name(x.dtype)} to {dtype_name(out.dtype)} "
                                  f"({dtype_name(dt)} is not supported by the cast kernel)")
    ctx.emit("cast", [x], [out])


@rule("aten.copy.default", "aten.fill.Tensor")
def copy(ctx: LowerCtx, node: AtenNode) -> None:
    """copy(self, src) (Tensor.copy_ functionalized) and fill(self, value_tensor): src broadcast to
    self's shape and converted to self's dtype (the cast kernel's rules, as PyTorch's copy_). Converted
    at src's size, then expanded; same dtype and shape is an alias."""
    a = ctx.bind(node)
    src = ctx.tensor_arg(a, "src" if node.op_name == "aten.copy.default" else "value")
    out = output(node)
    try:
        fits = tuple(torch.broadcast_shapes(src.shape, out.shape)) == tuple(out.shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ctx.unsupported(f"src of shape {list(src.shape)} does not broadcast to {list(out.shape)}")
    if src.dtype != out.dtype:
        for dt in (src.dtype, out.dtype):
            if dt not in _CAST_DTYPES:
                raise ctx.unsupported(f"conversion from {dtype_name(src.dtype)} to {dtype_name(out.dtype)}")
    if tuple(src.shape) == tuple(out.shape):
        if src.dtype == out.dtype:
            ctx.alias(out, src)
        else:
            ctx.emit("cast", [src], [out])
        return
    if dtype_name(out.dtype) not in OPS["expand"].dtypes:
        raise ctx.unsupported(f"broadcasting copy into a {dtype_name(out.dtype)} tensor")
    ctx.emit("expand", [ctx.cast(src, out.dtype)], [out])


# ---- creation -----------------------------------------------------------------------------------

def _fill(ctx: LowerCtx, out: Value, value: Any) -> None:
    dt = compute_dtype(ctx, "full", out.dtype)
    if isinstance(value, Value):
        raise ctx.unsupported("a tensor fill value")
    if dt == torch.bool:
        v = float(bool(value))
    elif dt.is_floating_point:
        v = float(value)
    else:
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ctx.unsupported(f"fill value {value} for an integer tensor")
            value = int(value)  # PyTorch truncates
        if dt != out.dtype:  # 8/16-bit: the final cast wraps like PyTorch's conversion
            value = int(torch.tensor(value).to(out.dtype))
        v = int_arg(ctx, "fill_value", value, dt)
    emit_as(ctx, "full", [], out, dt, floats=[v])


# the edge dialect names scalar_tensor without its namespace
@rule("aten.full.default", "aten.full_like.default", "aten.scalar_tensor.default", "scalar_tensor.default")
def full(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    value = a["s"] if node.op_name.endswith("scalar_tensor.default") else a["fill_value"]
    _fill(ctx, output(node), value)


@rule("aten.zeros.default", "aten.zeros_like.default")
def zeros(ctx: LowerCtx, node: AtenNode) -> None:
    _fill(ctx, output(node), 0)


@rule("aten.ones.default", "aten.ones_like.default")
def ones(ctx: LowerCtx, node: AtenNode) -> None:
    _fill(ctx, output(node), 1)


@rule("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def arange(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    out = output(node)
    start = a.get("start", 0) if node.op_name != "aten.arange.default" else 0
    step = a.get("step", 1) if node.op_name == "aten.arange.start_step" else 1
    for name, v in (("start", start), ("step", step)):
        if not isinstance(v, (bool, int, float)):
            raise ctx.unsupported(f"{name} of type {type(v).__name__}")
    dt = compute_dtype(ctx, "arange", out.dtype)
    if dt.is_floating_point:
        floats = [float(start), float(step)]
    else:
        floats = [int_arg(ctx, "start", start, dt), int_arg(ctx, "step", step, dt)]
        last = floats[0] + floats[1] * max(out.numel - 1, 0)
        if abs(last) > _EXACT_INT:
            raise ctx.unsupported(f"values up to {last:g} are beyond 2^53")
    emit_as(ctx, "arange", [], out, dt, floats=floats)


@rule("aten.fill.Scalar")
def fill_scalar(ctx: LowerCtx, node: AtenNode) -> None:
    """fill(self, value): self's shape and dtype, every element value (to_edge usually writes it as
    full_like already)."""
    _fill(ctx, output(node), ctx.bind(node)["value"])


@rule("aten.empty.memory_format", "aten.empty_strided.default", "aten.empty_permuted.default",
      "dim_order_ops._empty_dim_order.default")
def empty(ctx: LowerCtx, node: AtenNode) -> None:
    """An uninitialized tensor in PyTorch (torch.empty, new_empty, empty_like, empty_strided): any
    contents are valid, and these are zeros, so a program that reads it before writing it gives the
    same answer on every board. Strides, memory format and dim order only say how eager would lay it
    out; openaccel's tensors are contiguous."""
    _fill(ctx, output(node), 0)


@rule("aten.native_dropout.default")
def native_dropout(ctx: LowerCtx, node: AtenNode) -> None:
    """Dropout outside training (train=False), or with p = 0, is the identity, and its mask is all
    True; in training with p > 0 it draws a random mask, which a deployed model cannot do (refused)."""
    a = ctx.bind(node)
    x = ctx.tensor_arg(a, "input")
    p, train = float(a["p"]), a["train"]
    if (train is None or train) and p != 0.0:
        raise ctx.unsupported(f"dropout in training mode (p = {p:g}) draws a random mask: export the model in "
                              "eval mode (model.eval(), or F.dropout(..., training=False))")
    out, mask = node.outputs[0], node.outputs[1]
    assert out is not None
    ctx.alias(out, x)
    if mask is not None and ctx.is_used(mask):
        _fill(ctx, mask, 1)


@rule("aten.round.decimals")
def round_decimals(ctx: LowerCtx, node: AtenNode) -> None:
    """round(x, decimals=d) as ATen computes it in float32: round_half_even(x * 10^d) / 10^d, or for
    d < 0 round_half_even(x / 10^-d) * 10^-d, with 10^|d| rounded to float32 once: the same float
    operations as eager, so the result is exact."""
    a = ctx.bind(node)
    x = ctx.tensor_arg(a, "self")
    out = output(node)
    d = int(a["decimals"])
    if x.dtype != torch.float32 or out.dtype != torch.float32:
        raise ctx.unsupported(f"dtype {dtype_name(x.dtype)} (round with decimals takes float32; PyTorch has no "
                              "integer round)")
    if d == 0:
        ctx.emit("round", [x], [out])
        return
    power = 10.0 ** abs(d) if abs(d) <= 308 else math.inf  # as std::pow(10, d): inf beyond double's range
    scale = ctx.scalar(float(torch.tensor(power, dtype=torch.float64).to(torch.float32)), torch.float32)
    first, second = ("mul", "div") if d > 0 else ("div", "mul")
    t = ctx.temp(torch.float32, x.shape, hint="round_scaled")
    ctx.emit(first, [x, scale], [t])
    r = ctx.temp(torch.float32, x.shape, hint="round")
    ctx.emit("round", [t], [r])
    ctx.emit(second, [r, scale], [out])

