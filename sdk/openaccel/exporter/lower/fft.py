"""Lowering rules: the FFT family (opset.py fft_r2c / fft_c2c / fft_c2r, ref/fft.c) and the
complex64 views.

torch.fft functions reach the edge dialect as ATen's three transforms: rfft / rfftn / fft of a real
input as _fft_r2c (onesided or not), fft / ifft / fftn of a complex one as _fft_c2c, irfft / irfftn
as _fft_c2r (after a slice or pad of the input to n / 2 + 1 bins); `n=` pads or slices the input
before. complex64 tensors are interleaved float32 pairs, so view_as_real / view_as_complex are
zero-copy views ([..., 2] float32 <-> complex64) and Tensor.real / .imag are selects on the
former. Elementwise arithmetic on complex64 (add, sub, mul, div, abs) runs on the binary and unary
kernels (binary.py, elementwise.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ...ir import AtenNode, Value, dtype_name
from . import LowerCtx, rule
from .elementwise import output

_NORM = (0, 1, 2)  # ATen's fft_norm_mode: none, 1/sqrt(n), 1/n


def _dims(ctx: LowerCtx, dims: Sequence[int], ndim: int) -> list[int]:
    out = []
    for d in dims:
        if not -ndim <= int(d) < ndim:
            raise ctx.unsupported(f"dim {d} is out of range for a {ndim}-dim tensor")
        out.append(int(d) % ndim)
    if not out or len(set(out)) != len(out):
        raise ctx.unsupported(f"dims {list(dims)} (expected distinct dims, at least one)")
    return out


def _norm(ctx: LowerCtx, mode: Any) -> int:
    if mode not in _NORM:
        raise ctx.unsupported(f"normalization = {mode!r} (expected 0, 1 or 2)")
    return int(mode)


def _need(ctx: LowerCtx, v: Value, dtype: torch.dtype, what: str) -> None:
    if v.dtype != dtype:
        raise ctx.unsupported(f"{what} of dtype {dtype_name(v.dtype)} (the transform takes {dtype_name(dtype)})")


@rule("aten._fft_r2c.default")
def fft_r2c(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a, "self"), output(node)
    _need(ctx, x, torch.float32, "input")
    _need(ctx, out, torch.complex64, "output")
    dims = _dims(ctx, a["dim"], len(x.shape))
    ctx.emit("fft_r2c", [x], [out], ints=[_norm(ctx, a["normalization"]), int(bool(a["onesided"])), *dims])


@rule("aten._fft_c2c.default")
def fft_c2c(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a, "self"), output(node)
    _need(ctx, x, torch.complex64, "input")
    dims = _dims(ctx, a["dim"], len(x.shape))
    ctx.emit("fft_c2c", [x], [out], ints=[_norm(ctx, a["normalization"]), int(bool(a["forward"])), *dims])


@rule("aten._fft_c2r.default")
def fft_c2r(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a, "self"), output(node)
    _need(ctx, x, torch.complex64, "input")
    _need(ctx, out, torch.float32, "output")
    dims = _dims(ctx, a["dim"], len(x.shape))
    n = int(a["last_dim_size"])
    if out.shape[dims[-1]] != n or x.shape[dims[-1]] != n // 2 + 1:
        raise ctx.unsupported(f"last_dim_size {n} for an input of shape {list(x.shape)} and an output of shape "
                              f"{list(out.shape)} (expected {n // 2 + 1} bins in, {n} values out on dim {dims[-1]})")
    ctx.emit("fft_c2r", [x], [out], ints=[_norm(ctx, a["normalization"]), *dims])


@rule("aten.view_as_real_copy.default", "aten.view_as_real.default")
def view_as_real(ctx: LowerCtx, node: AtenNode) -> None:
    x, out = ctx.tensor_arg(ctx.bind(node), "self"), output(node)
    _need(ctx, x, torch.complex64, "input")
    ctx.alias(out, x)  # the same bytes: [..., 2] float32 pairs


@rule("aten.view_as_complex_copy.default", "aten.view_as_complex.default")
def view_as_complex(ctx: LowerCtx, node: AtenNode) -> None:
    x, out = ctx.tensor_arg(ctx.bind(node), "self"), output(node)
    _need(ctx, x, torch.float32, "input")
    if not x.shape or x.shape[-1] != 2:
        raise ctx.unsupported(f"input of shape {list(x.shape)} (view_as_complex needs a last dim of 2)")
    ctx.alias(out, x)


@rule("aten._conj_copy.default", "aten._conj.default", "aten.conj_physical.default")
def conj(ctx: LowerCtx, node: AtenNode) -> None:
    """conj(z) = (re, -im): the float32 view [..., 2] times (1, -1) (exact, the sign of a zero and NaN
    included), viewed back as complex64. Real tensors are their own conjugate."""
    x, out = ctx.tensor_arg(ctx.bind(node), "self"), output(node)
    if not x.dtype.is_complex:
        ctx.alias(out, x)
        return
    _need(ctx, x, torch.complex64, "input")
    pairs = ctx.temp(torch.float32, (*x.shape, 2), hint="conj_in")
    ctx.alias(pairs, x)
    flipped = ctx.temp(torch.float32, (*x.shape, 2), hint="conj")
    ctx.emit("mul", [pairs, ctx.const(torch.tensor([1.0, -1.0]), hint="conj_sign")], [flipped])
    ctx.alias(out, flipped)
