"""The optimized GEMM-family CPU kernels (runtime_c/src/cpu/kernels/opt/: matmul.c, conv.c,
winograd.c, mbconv.c, shape.c, on the ISA back-ends arch/x86/avx2, arch/arm/neon, arch/riscv/rvv,
arch/portable)
against the reference kernels.

Programs are built by hand (one instruction per case, many cases per program) so every argument
can be chosen, including the fused activation of conv2d / linear (act 0, 1, 2 in turn). Each
program runs with reference kernels only and with the optimized ones:
  - on the host (AVX2 variants here) with 1, 2 and 3 threads: the outputs must be bit-identical
    between thread counts (work is split by outputs, never along K); and forced to each ISA the
    host has (HostSession(isas=[...]), the CPU device option disable_isas), portable C included;
  - under qemu-aarch64 (NEON 8x8), qemu-armv7 (NEON 4x8) and qemu-riscv64 (portable C tiles), and
    qemu-riscv64-v (RVV 7x16, forced with --isa rvv, at VLEN 128, 256 and 512: bit-identical), and
    natively with the x86_64-linux target (a baseline -march=x86-64 static build that picks the
    AVX2 kernels at run time), with `oa_run` and `oa_run --reference`.
The reference output is also checked against PyTorch (sanity of the case itself).

Tolerances: the reference sums in double, the optimized kernels in float32 in blocks of up to 512
(products fused on AVX2 / aarch64): |fast - ref| <= ATOL + K_ATOL * K + RTOL * |ref| with RTOL 1e-4,
ATOL 1e-5, K_ATOL 2e-7 per element of the reduction (K = C_in/groups * kH * kW for convs), about
10x the float32 rounding error of a K-term sum of unit-size products. NaN must stay NaN.
Outputs with K >= 16 that the reference sums in double must also differ from it somewhere in the
last bits: that shows the optimized kernel ran (a declined call falls back to the reference and
would match exactly).
Shapes cover the tile edges of every micro-kernel (MR 4/6/7/8/12, NR 4/8/16/32: sizes 1..9, 13,
15..17, 31, 33, 48, 65), several K blocks (K > 256; 512 on AVX-512), A copied for aliasing row
strides (K = 1024), row blocks (M = 300), strides 1-3 and > 8 (im2col path), padding larger than
the kernel, dilation, groups, depthwise (with channel multiplier, 3x3/5x5, strides 1-3), 1x1 convs,
batch 2, and NaN inputs.
"""

from __future__ import annotations

import functools
import platform
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from openaccel.errors import OpenAccelError
from openaccel.exporter import layout, pack, winograd
from openaccel.exporter.memory_plan import plan_memory
from openaccel.exporter.serialize import serialize
from openaccel.ir import Graph, Instr, Value
from openaccel.runtime.host import CPU_ISAS, CpuDevice, HostSession
from openaccel.targets import get_target

from helpers import CACHE, QEMU_TARGETS, runner

RTOL, ATOL, K_ATOL = 1e-4, 1e-5, 2e-7
LO, HI = -1.0, 1.5  # act 2 (clamp) bounds


@dataclass
class Case:
    name: str
    op: str
    ins: list[tuple[str, torch.Tensor]]  # ("in" | "const" | "none" (absent optional input), tensor)
    ints: list[int]
    floats: list[float]
    want: torch.Tensor                   # PyTorch's result (sanity check of the reference)
    k: int                               # reduction length (tolerance)
    # the reference sums in double here, so the optimized kernel's float sums differ in some bit
    distinct: bool = True
    # NaN spreads to whole output tiles (Winograd): a superset of PyTorch's NaN outputs
    nan_tiles: bool = False
    # multiplies K_ATOL: Winograd F(4x4)'s transforms amplify float rounding (errors up to ~8x
    # a direct convolution's were measured on small C, see exporter/winograd.py)
    k_scale: float = 1.0


_seed = [100]


def rnd(*shape: int, nan: bool = False) -> torch.Tensor:
    _seed[0] += 1
    t = torch.randn(shape, generator=torch.Generator().manual_seed(_seed[0]))
    if nan and t.numel():
        t.view(-1)[t.numel() // 2] = float("nan")
    return t


def act_fn(act: int) -> Callable[[torch.Tensor], torch.Tensor]:
    if act == 1:
        return torch.relu
    if act == 2:
        return lambda t: t.clamp(LO, HI)
    return lambda t: t


def act_args(act: int) -> tuple[list[int], list[float]]:
    return [act], ([LO, HI] if act == 2 else [])


def linear(m: int | tuple[int, ...], k: int, n: int, act: int, bias: bool = True, nan: bool = False) -> Case:
    lead = m if isinstance(m, tuple) else (m,)
    x, w = rnd(*lead, k, nan=nan), rnd(n, k)
    b = rnd(n) if bias else None
    ints, floats = act_args(act)
    ins = [("in", x), ("const", w)] + ([("const", b)] if b is not None else [])
    return Case(f"linear_{'x'.join(map(str, lead))}_{k}_{n}_act{act}{'' if bias else '_nobias'}", "linear", ins,
                ints, floats, act_fn(act)(F.linear(x, w, b)), k)


def linear_packed(m: int | tuple[int, ...], k: int, n: int, act: int, bias: bool = True, nan: bool = False) -> Case:
    """linear_packed: the linear case with W packed as the exporter packs it (exporter/pack.py)"""
    case = linear(m, k, n, act, bias, nan)
    case.ins[1] = ("const", pack.pack_linear_weight(case.ins[1][1]))
    case.ints = [case.ints[0], pack.BLOCK]
    case.op = "linear_packed"
    case.name = case.name.replace("linear_", "linear_packed_", 1)
    return case


def matmul(sa: tuple[int, ...], sb: tuple[int, ...]) -> Case:
    a, b = rnd(*sa), rnd(*sb)
    return Case(f"matmul_{'x'.join(map(str, sa))}_{'x'.join(map(str, sb))}", "matmul", [("in", a), ("in", b)], [],
                [], torch.matmul(a, b), sa[-1])


def addmm(m: int, k: int, n: int, bias_shape: tuple[int, ...], beta: float, alpha: float, nan: bool = False) -> Case:
    bias, a, b = rnd(*bias_shape, nan=nan), rnd(m, k), rnd(k, n)
    want = torch.addmm(bias, a, b, beta=beta, alpha=alpha) if beta else alpha * (a @ b)
    return Case(f"addmm_{m}_{k}_{n}_b{'x'.join(map(str, bias_shape))}_{beta}_{alpha}", "addmm",
                [("in", bias), ("in", a), ("in", b)], [], [beta, alpha], want, k)


def conv(n: int, c: int, h: int, w: int, o: int, kh: int, kw: int, stride: Any = 1, pad: Any = 0, dil: Any = 1,
         groups: int = 1, act: int = 0, bias: bool = True, nan: bool = False) -> Case:
    s, p, d = (t if isinstance(t, tuple) else (t, t) for t in (stride, pad, dil))
    x, wt = rnd(n, c, h, w, nan=nan), rnd(o, c // groups, kh, kw)
    b = rnd(o) if bias else None
    ints = [s[0], s[1], p[0], p[1], d[0], d[1], groups, act]
    floats = [LO, HI] if act == 2 else []
    want = act_fn(act)(F.conv2d(x, wt, b, s, p, d, groups))
    ins = [("in", x), ("const", wt)] + ([("const", b)] if b is not None else [])
    name = (f"conv_{n}x{c}x{h}x{w}_o{o}_k{kh}x{kw}_s{s[0]}{s[1]}_p{p[0]}{p[1]}_d{d[0]}{d[1]}_g{groups}_act{act}"
            f"{'' if bias else '_nobias'}{'_nan' if nan else ''}")
    # the reference conv sums the taps of up to 16 input channels in float (in the optimized
    # kernels' order), then those partial sums in double: identical results are possible below
    cg = c // groups
    return Case(name, "conv2d", ins, ints, floats, want, cg * kh * kw, distinct=cg > 16 or (cg == 1 and groups > 1))


def conv_nhwc(n: int, c: int, h: int, w: int, o: int, kh: int, kw: int, stride: Any = 1, pad: Any = 0,
              dil: Any = 1, groups: int = 1, act: int = 0, bias: bool = True, nan: bool = False,
              block: int | None = None, nchw_in: bool = False) -> Case:
    """conv2d_nhwc: the conv2d case with input, weights and output channels-last; weights packed
    in panels of `block` (default: 16 for groups = 1, as the exporter does; 0 = [kH, kW, C, O]);
    nchw_in: the input stays NCHW (input_nchw = 1)"""
    case = conv(n, c, h, w, o, kh, kw, stride, pad, dil, groups, act, bias, nan)
    (_, x), (_, wt) = case.ins[0], case.ins[1]
    block = (layout.BLOCK if groups == 1 else 0) if block is None else block
    case.ins[0] = ("in", x if nchw_in else x.permute(0, 2, 3, 1).contiguous())
    case.ins[1] = ("const", layout.pack_weights(wt, block) if block else wt.permute(2, 3, 1, 0).contiguous())
    case.ints = [*case.ints, block, *([1] if nchw_in else [])]
    case.name += f"_b{block}" + ("_nchw_in" if nchw_in else "")
    case.want = case.want.permute(0, 2, 3, 1).contiguous()
    case.name = case.name.replace("conv_", "nhwc_", 1)
    case.op = "conv2d_nhwc"
    # the reference sums every output in double: for K >= 16 the float sums differ somewhere
    case.distinct = not (groups > 1 and c // groups > 1)  # grouped: declined, the reference runs
    return case


def wino(n: int, c: int, h: int, w: int, k: int, tile: int, pad: Any = 1, act: int = 0, bias: bool = True,
         addend: bool = False, nan: bool = False) -> Case:
    p = pad if isinstance(pad, tuple) else (pad, pad)
    x, wt = rnd(n, c, h, w, nan=nan), rnd(k, c, 3, 3)
    b = rnd(k) if bias else None
    oh, ow = h + 2 * p[0] - 2, w + 2 * p[1] - 2
    add = rnd(n, k, oh, ow) if addend else None
    conv = F.conv2d(x, wt, b, 1, p)
    want = act_fn(act)(conv + add if add is not None else conv)
    ins = [("in", x), ("const", winograd.transform_weights(wt, tile))]
    ins += [("const", b) if b is not None else ("none", torch.zeros(0))]
    if add is not None:
        ins.append(("in", add))
    ints = [tile, p[0], p[1], act, winograd.BLOCK]
    name = (f"wino{tile}_{n}x{c}x{h}x{w}_o{k}_p{p[0]}{p[1]}_act{act}{'' if bias else '_nobias'}"
            f"{'_addend' if addend else ''}{'_nan' if nan else ''}")
    return Case(name, "conv2d_winograd", ins, ints, [LO, HI] if act == 2 else [], want, c * 9, nan_tiles=nan,
                k_scale=16.0 if tile == 4 else 2.0)


def _acts(cases: Sequence[Callable[[int], Case]]) -> list[Case]:
    """act 0, 1, 2 in turn over the cases"""
    return [f(act=i % 3) for i, f in enumerate(cases)]


def linear_cases() -> list[Case]:
    shapes = [  # (M, K, N): GEMV (M <= 32: K tails 0..15, N tails 1..3), then GEMM tiles (M > 32: tile
        # edges, K blocks, A copied for lda = 1024, row blocks)
        (1, 784, 50), (2, 33, 17), (3, 5, 9), (4, 1, 7), (1, 5, 1), (5, 64, 16), (6, 16, 16), (7, 17, 15),
        (8, 256, 33), (9, 257, 8), (13, 600, 31), (32, 23, 6), (6, 2, 1), ((2, 3), 20, 9), ((2, 2, 3), 7, 4),
        (33, 3, 100), (35, 40, 17), (37, 257, 15), (38, 600, 33), (40, 1024, 20), (64, 128, 64), (300, 300, 40),
        ((3, 12), 17, 9),
        # the 16-lane GEMV's K tails (16 + 15, 31) and the 12 x 32 AVX-512 tile's edges (rows 3 x 12 and
        # tails, columns 32 + 16 / 33 / 65: a 16-wide half alone, masked halves), K past its 512 block
        (3, 47, 5), (2, 31, 9), (42, 70, 30), (43, 70, 31), (57, 19, 47), (36, 40, 48), (37, 70, 65),
        (49, 513, 33), (25, 1030, 80),
    ]
    fs: list[Callable[[int], Case]] = [functools.partial(linear, m, k, n) for m, k, n in shapes]
    fs += [functools.partial(linear, 12, 40, 18, bias=False), functools.partial(linear, 7, 31, 17, nan=True),
           functools.partial(linear, 45, 40, 18, bias=False), functools.partial(linear, 41, 31, 17, nan=True)]
    # pre-packed weights (exporter/pack.py): N tails of a panel (17, 20, 33 features), M tails of a
    # tile, K odd and past a K block, few rows, 3-D input, no bias, NaN
    packed = [(128, 256, 40), (33, 3, 17), (7, 17, 20), (1, 5, 16), (40, 300, 33), ((2, 40), 31, 48), (6, 1, 1),
              (50, 600, 48), (37, 520, 80)]  # two 16-wide panels per AVX-512 tile, K past 512
    fs += [functools.partial(linear_packed, m, k, n) for m, k, n in packed]
    fs += [functools.partial(linear_packed, 45, 40, 18, bias=False),
           functools.partial(linear_packed, 41, 31, 17, nan=True)]
    return _acts(fs)


def matmul_cases() -> list[Case]:
    return [
        matmul((1, 1), (1, 1)), matmul((7, 5), (5, 9)), matmul((16, 17), (17, 15)), matmul((33, 64), (64, 31)),
        matmul((6, 300), (300, 17)), matmul((3, 9, 20), (3, 20, 11)), matmul((2, 1, 5, 8), (3, 8, 4)),
        matmul((2, 6, 10), (10, 7)), matmul((17, 1024), (1024, 9)),
        addmm(5, 7, 9, (9,), 1.0, 1.0), addmm(6, 20, 17, (6, 1), 0.5, 2.0), addmm(9, 33, 16, (9, 16), 1.0, 1.0),
        addmm(3, 4, 5, (), 2.0, -1.0), addmm(7, 8, 9, (9,), 0.0, 1.0, nan=True), addmm(4, 300, 20, (1, 20), 1.0, 0.5),
    ]


def conv_cases() -> list[Case]:
    fs: list[Callable[[int], Case]] = [functools.partial(conv, *a, **kw) for a, kw in [
        ((1, 3, 8, 8, 4, 3, 3), {"pad": 1}),
        ((2, 5, 9, 11, 7, 3, 3), {"pad": 1}),
        ((1, 16, 17, 19, 13, 3, 3), {"pad": 1}),
        ((1, 40, 6, 7, 9, 3, 3), {"pad": 1}),                       # K = 360: two K blocks (one on AVX-512)
        ((1, 64, 14, 14, 10, 3, 3), {"pad": 1}),                    # K = 576: three K blocks (two on AVX-512)
        ((1, 8, 12, 12, 16, 3, 3), {"stride": 2, "pad": 1}),
        ((1, 4, 13, 10, 6, 3, 3), {"stride": 3}),
        ((1, 3, 23, 23, 8, 7, 7), {"stride": 2, "pad": 3}),         # a stem
        # rows of >= 2 tiles' columns: the GEMM stores the real columns in place (conv.c
        # conv_direct_vrow), tiles across a row end through a buffer; K = 576: accumulated there
        ((1, 3, 9, 140, 20, 7, 7), {"stride": 2, "pad": 3}),
        ((1, 64, 5, 70, 14, 3, 3), {"pad": 1}),
        ((1, 6, 11, 11, 5, 3, 3), {"pad": 2, "dil": 2}),
        ((1, 2, 13, 12, 3, 3, 2), {"stride": (2, 1), "pad": (3, 1), "dil": (3, 2)}),
        ((1, 3, 9, 10, 2, 3, 5), {"stride": (2, 1), "pad": (1, 2)}),
        ((1, 2, 5, 5, 3, 5, 5), {}),                                # kernel = input
        ((1, 1, 4, 4, 2, 3, 3), {"pad": 3}),                        # pad larger than the kernel
        ((1, 24, 1, 1, 10, 1, 1), {}),
        ((2, 8, 5, 5, 4, 1, 1), {}),                                # 1x1: B is the input itself
        ((1, 8, 6, 6, 4, 1, 1), {"stride": 2}),
        ((1, 16, 7, 7, 9, 1, 1), {"pad": 1}),
        ((1, 33, 9, 9, 17, 1, 1), {"bias": False}),
        ((1, 4, 6, 6, 6, 3, 3), {"pad": 1, "groups": 2}),
        ((1, 8, 7, 9, 12, 3, 3), {"stride": 2, "pad": 1, "groups": 4}),
        ((1, 3, 20, 20, 4, 3, 3), {"stride": 9, "pad": 1}),         # stride > 8: im2col panels
        ((1, 2, 30, 30, 5, 2, 2), {"stride": (10, 9)}),
        ((1, 10, 1, 3, 7, 1, 3), {"pad": (0, 1)}),
        ((1, 5, 6, 6, 7, 3, 3), {"pad": 1, "nan": True}),
    ]]
    return _acts(fs)


def dw_cases() -> list[Case]:
    fs: list[Callable[[int], Case]] = [functools.partial(conv, *a, **kw) for a, kw in [
        ((1, 6, 8, 8, 6, 3, 3), {"stride": 2, "pad": 1, "groups": 6}),
        ((2, 4, 17, 19, 4, 3, 3), {"pad": 1, "groups": 4}),
        ((1, 3, 7, 7, 6, 3, 3), {"pad": 1, "groups": 3}),           # channel multiplier 2
        ((1, 5, 33, 40, 5, 3, 3), {"stride": 2, "pad": 1, "groups": 5}),
        ((1, 4, 12, 15, 4, 5, 5), {"pad": 2, "groups": 4}),
        ((1, 4, 23, 21, 8, 5, 5), {"stride": 3, "pad": 2, "dil": 2, "groups": 4}),
        ((1, 3, 3, 3, 3, 3, 3), {"pad": 1, "groups": 3}),
        ((1, 2, 9, 9, 2, 3, 3), {"dil": 3, "groups": 2}),
        ((1, 8, 1, 20, 8, 1, 3), {"pad": (0, 1), "groups": 8}),
        ((1, 4, 10, 10, 4, 3, 3), {"stride": (1, 2), "pad": (1, 0), "groups": 4}),
        ((1, 32, 28, 28, 32, 3, 3), {"pad": 1, "groups": 32, "bias": False}),
        ((1, 4, 9, 9, 4, 3, 3), {"pad": 1, "groups": 4, "nan": True}),
        # rows narrower than a vector: a row's last vector spills into the rows after it
        ((2, 4, 9, 3, 4, 3, 3), {"pad": 1, "groups": 4}),
        ((1, 3, 5, 1, 3, 3, 1), {"pad": (1, 0), "groups": 3}),
        ((1, 6, 7, 7, 6, 3, 3), {"pad": 1, "groups": 6}),
        # output rows around the AVX-512 vector (16 floats): one less, exactly one
        ((1, 2, 11, 31, 2, 3, 3), {"pad": 1, "groups": 2}),
        ((1, 2, 6, 16, 2, 3, 3), {"pad": 1, "groups": 2}),
    ]]
    return _acts(fs)


def nhwc_cases() -> list[Case]:
    """conv2d_nhwc: 1x1 (one GEMM over the pixels, A and B in place: output channels around NR,
    channels past 256 and 1024-float rows), strips (wide output rows), im2col blocks (a stem, strides, dilation, padding
    larger than the kernel, more pixels than one block), and depthwise (channels around the
    vector widths 4 / 8 / 16 with scalar tails, interior groups of four pixels and border pixels,
    strides 1-3, 5x5, dilation, 7 x 7 maps)."""
    fs: list[Callable[[int], Case]] = [functools.partial(conv_nhwc, *a, **kw) for a, kw in [
        ((1, 16, 12, 12, 96, 1, 1), {}),
        ((1, 16, 12, 12, 96, 1, 1), {"block": 0}),                  # B read in place
        ((2, 24, 7, 7, 17, 1, 1), {}),
        ((2, 24, 7, 7, 17, 1, 1), {"block": 0}),                    # ... with a cut panel
        ((1, 6, 5, 5, 20, 1, 1), {"block": 32}),
        ((1, 320, 7, 7, 40, 1, 1), {}),                             # K = 320: two K blocks
        ((1, 1024, 3, 5, 9, 1, 1), {"bias": False}),                # A rows 4 KB apart
        ((1, 5, 1, 1, 3, 1, 1), {}),
        ((1, 7, 5, 5, 33, 1, 1), {"nan": True}),
        ((1, 3, 23, 23, 32, 3, 3), {"stride": 2, "pad": 1}),        # MobileNet's stem
        ((1, 3, 23, 23, 24, 3, 3), {"stride": 2, "pad": 1, "block": 0}),
        ((2, 5, 9, 11, 7, 3, 3), {"pad": 1}),
        # strips (output rows of 24 pixels or more, kW > stride): a 3-channel stem with cut tiles,
        # weights in place, two images and a cut panel, a tall kernel with a row stride of 2 and
        # 12 channels, padding wider than the kernel
        ((1, 3, 50, 61, 32, 3, 3), {"stride": 2, "pad": 1}),
        ((1, 3, 49, 50, 24, 3, 3), {"stride": 2, "pad": 1, "block": 0}),
        ((2, 5, 7, 30, 20, 3, 3), {"pad": 1}),
        ((1, 12, 9, 50, 8, 5, 3), {"stride": (1, 2), "pad": (2, 1)}),
        ((1, 2, 4, 30, 3, 3, 3), {"pad": 3, "nan": True}),
        # an NCHW input (input_nchw): strips, im2col blocks (narrow rows), and 1x1 (declined: the
        # reference kernel runs)
        ((1, 3, 50, 61, 32, 3, 3), {"stride": 2, "pad": 1, "nchw_in": True}),
        ((2, 4, 9, 33, 20, 3, 3), {"pad": 1, "block": 0, "nchw_in": True}),
        ((2, 3, 23, 23, 24, 3, 3), {"stride": 2, "pad": 1, "nchw_in": True}),
        ((1, 2, 13, 12, 3, 3, 2), {"stride": (2, 1), "pad": (3, 1), "dil": (3, 2), "nchw_in": True}),
        ((1, 3, 5, 6, 8, 1, 1), {"nchw_in": True}),
        ((1, 16, 17, 19, 13, 3, 3), {"pad": 1}),                    # 323 pixels: two im2col blocks
        ((1, 40, 6, 7, 9, 3, 3), {"pad": 1}),                       # K = 360
        ((1, 8, 6, 6, 4, 1, 1), {"stride": 2}),
        ((1, 2, 13, 12, 3, 3, 2), {"stride": (2, 1), "pad": (3, 1), "dil": (3, 2)}),
        ((1, 1, 4, 4, 2, 3, 3), {"pad": 3}),
        ((1, 4, 13, 10, 6, 3, 3), {"stride": 3, "nan": True}),
        ((1, 6, 8, 8, 6, 3, 3), {"stride": 2, "pad": 1, "groups": 6}),
        ((2, 16, 17, 19, 16, 3, 3), {"pad": 1, "groups": 16}),
        ((1, 13, 7, 7, 13, 3, 3), {"pad": 1, "groups": 13}),        # vector + scalar channels
        ((1, 3, 9, 9, 3, 3, 3), {"pad": 1, "groups": 3}),           # narrower than a vector
        ((1, 24, 14, 14, 24, 3, 3), {"stride": 2, "pad": 1, "groups": 24}),
        ((1, 12, 12, 15, 12, 5, 5), {"pad": 2, "groups": 12}),
        ((1, 8, 23, 21, 8, 5, 5), {"stride": 3, "pad": 2, "dil": 2, "groups": 8}),
        ((1, 9, 3, 3, 9, 3, 3), {"pad": 1, "groups": 9}),
        ((1, 8, 1, 20, 8, 1, 3), {"pad": (0, 1), "groups": 8}),
        ((1, 20, 9, 9, 20, 3, 3), {"pad": 1, "groups": 20, "nan": True}),
        ((1, 47, 9, 9, 47, 3, 3), {"pad": 1, "groups": 47}),        # AVX-512: 2 vectors + 15 lanes
        ((1, 33, 7, 8, 33, 3, 3), {"stride": 2, "pad": 1, "groups": 33}),
        ((1, 4, 6, 6, 6, 3, 3), {"pad": 1, "groups": 2}),           # grouped: the reference kernel
    ]]
    return _acts(fs)


def mbconv(n: int, c: int, h: int, w: int, e: int | None, o: int, k: int = 3, stride: int = 1, pad: int = 1,
           dil: int = 1, act: int = 0, bias: bool = True, nan: bool = False) -> Case:
    """mbconv_nhwc: [1x1 expand to e channels (None: no expansion) ->] depthwise k x k -> 1x1
    project to o; acts (expand, dw) = act, project = (act + 1) % 3"""
    x = rnd(n, c, h, w, nan=nan)
    ch = e if e is not None else c
    we, wd, wp = rnd(ch, c, 1, 1), rnd(ch, 1, k, k), rnd(o, ch, 1, 1)
    be, bd, bp = (rnd(ch), rnd(ch), rnd(o)) if bias else (None, None, None)
    acts = (act, act, (act + 1) % 3)
    t = act_fn(acts[0])(F.conv2d(x, we, be)) if e is not None else x
    t = act_fn(acts[1])(F.conv2d(t, wd, bd, stride, pad, dil, ch))
    want = act_fn(acts[2])(F.conv2d(t, wp, bp)).permute(0, 2, 3, 1).contiguous()

    def opt(kind: str, v: torch.Tensor | None) -> tuple[str, torch.Tensor]:
        return (kind, v) if v is not None else ("none", torch.zeros(0))

    ins = [("in", x.permute(0, 2, 3, 1).contiguous())]
    expanded = e is not None
    ins += [opt("const", layout.pack_weights(we) if expanded else None), opt("const", be if expanded else None)]
    ins += [("const", wd.permute(2, 3, 1, 0).contiguous()), opt("const", bd)]
    ins += [("const", layout.pack_weights(wp)), opt("const", bp)]
    ints = [stride, stride, pad, pad, dil, dil, *acts, layout.BLOCK]
    name = (f"mbconv_{n}x{c}x{h}x{w}_e{e}_o{o}_k{k}_s{stride}_p{pad}_d{dil}_act{act}{'' if bias else '_nobias'}"
            f"{'_nan' if nan else ''}")
    return Case(name, "mbconv_nhwc", ins, ints, [LO, HI] * 3, want, c + k * k + ch, k_scale=4.0)


def mbconv_cases() -> list[Case]:
    """mbconv_nhwc: bands of one row (wide maps) to whole images (7x7), window rows kept between
    bands (stride 1) and skipped (stride 2), chunks of rows between threads (batch 1), expansion
    or none, channels around NR and the vector widths, 5x5 and dilated depthwise, NaN"""
    fs: list[Callable[[int], Case]] = [functools.partial(mbconv, *a, **kw) for a, kw in [
        ((1, 16, 24, 70, 96, 24), {}),                             # 70 pixels a row: bands of one row
        ((1, 24, 14, 14, 144, 24), {"stride": 2}),
        ((2, 8, 9, 9, 48, 17), {}),
        ((1, 32, 7, 7, 192, 32), {}),                              # one band: the whole image
        ((1, 32, 20, 21, None, 16), {}),                           # no expansion (MobileNetV2's first block)
        ((1, 12, 11, 13, 20, 9), {"k": 5, "pad": 2}),
        ((1, 6, 12, 12, 13, 5), {"pad": 2, "dil": 2, "bias": False}),
        ((1, 9, 10, 10, 27, 8), {"stride": 2, "pad": 0}),
        ((1, 300, 6, 6, 40, 20), {}),                              # K = 300: two K blocks
        ((1, 5, 8, 8, 16, 7), {"nan": True}),
    ]]
    return _acts(fs)


def permute_cases() -> list[Case]:
    """permute as a batched 2-D transpose (fast/transpose.c): tile edges (32), NCHW <-> NHWC,
    matrices, rotations of 3-D and 5-D tensors; the last case is not a transpose (declined)"""
    cases = []
    for shape, dims in [((2, 3, 5, 7), (0, 2, 3, 1)), ((2, 33, 4, 9), (0, 3, 1, 2)), ((65, 31), (1, 0)),
                        ((1, 3, 40, 41), (0, 2, 3, 1)), ((4, 5, 6), (2, 0, 1)), ((2, 3, 4, 5, 6), (0, 1, 4, 2, 3)),
                        ((1, 1, 1, 7), (0, 2, 3, 1)), ((3, 4, 5), (1, 0, 2))]:
        x = rnd(*shape, nan=len(cases) == 1)
        name = f"permute_{'x'.join(map(str, shape))}_{''.join(map(str, dims))}"
        cases.append(Case(name, "permute", [("in", x)], list(dims), [], x.permute(*dims).contiguous(), 0))
    return cases


def winograd_cases() -> list[Case]:
    """conv2d_winograd: channels around the vector widths (16 AVX-512, 8 AVX2, 4 NEON) and the 16-channel
    weight blocks, C > 256 (two K blocks), partial tiles, pads 0-2, batch 2, bias / addend
    present or not, NaN, F(2x2) and F(4x4); 320 channels at 44 x 44 take two bands."""
    fs: list[Callable[[int], Case]] = [functools.partial(wino, *a, **kw) for a, kw in [
        ((1, 8, 8, 8, 16, 4), {}),
        ((1, 3, 9, 7, 5, 4), {}),
        ((2, 9, 11, 13, 17, 4), {"addend": True}),
        ((1, 16, 6, 6, 33, 2), {"bias": False, "addend": True}),
        ((1, 17, 5, 9, 1, 2), {"pad": 0}),
        ((1, 5, 10, 10, 7, 4), {"pad": (2, 0)}),
        ((1, 1, 3, 3, 4, 4), {"pad": 2}),
        ((2, 12, 7, 7, 24, 2), {}),
        ((1, 300, 9, 6, 20, 4), {"addend": True}),
        ((1, 4, 15, 14, 9, 2), {"pad": (0, 1), "bias": False}),
        ((1, 7, 13, 12, 16, 4), {"nan": True}),
        ((1, 320, 44, 44, 20, 4), {}),
        ((1, 15, 7, 9, 31, 4), {}),
        ((1, 32, 6, 5, 15, 2), {"addend": True}),
    ]]
    return _acts(fs)


FAMILIES: dict[str, Callable[[], list[Case]]] = {
    "linear": linear_cases, "matmul": matmul_cases, "conv": conv_cases, "depthwise": dw_cases,
    "winograd": winograd_cases, "nhwc": nhwc_cases, "permute": permute_cases,
    "mbconv": mbconv_cases,
}


@functools.cache
def program(family: str) -> tuple[bytes, list[Case], list[torch.Tensor]]:
    """One program with every case of a family (graph inputs in case order), saved under the cache."""
    # each family draws from its own seeds, so its data does not depend on which families this
    # process built before (pytest-xdist hands tests to workers in varying orders)
    _seed[0] = 100_000 * (list(FAMILIES).index(family) + 1)
    cases = FAMILIES[family]()
    inputs: list[Value] = []
    feeds: list[torch.Tensor] = []
    outs: list[Value] = []
    instrs: list[Instr] = []
    for i, c in enumerate(cases):
        vals: list[Value | None] = []
        for j, (kind, t) in enumerate(c.ins):
            if kind == "none":  # an absent optional input
                vals.append(None)
                continue
            v = Value(name=f"c{i}_in{j}", dtype=torch.float32, shape=tuple(t.shape),
                      data=t.clone() if kind == "const" else None)
            if kind == "in":
                inputs.append(v)
                feeds.append(t)
            vals.append(v)
        out = Value(name=f"c{i}_out", dtype=torch.float32, shape=tuple(c.want.shape))
        outs.append(out)
        instrs.append(Instr(op=c.op, inputs=vals, outputs=[out], ints=list(c.ints), floats=list(c.floats)))
    g = Graph(name="forward", inputs=inputs, outputs=outs)
    g.instrs = instrs
    buf = serialize(g, plan_memory(g), [], target="host", required_features=[])
    path = CACHE / "ops" / f"fast_kernels_{family}.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf)
    return buf, cases, feeds


def check_close(name: str, got: np.ndarray, ref: np.ndarray, k: float, what: str, nan_superset: bool = False) -> None:
    """got within tolerance of ref, NaN at the same places (nan_superset: at least where ref has
    NaN; values compared where neither is NaN)"""
    assert got.shape == ref.shape, f"{name} ({what}): shape {got.shape}, reference {ref.shape}"
    nan_g, nan_r = np.isnan(got), np.isnan(ref)
    if nan_superset:
        assert (nan_g | ~nan_r).all(), f"{name} ({what}): not NaN where the reference is"
        nan_r = nan_r | nan_g
    else:
        assert (nan_g == nan_r).all(), f"{name} ({what}): NaN at different positions"
    g, r = got[~nan_r].astype(np.float64), ref[~nan_r].astype(np.float64)
    tol = ATOL + K_ATOL * k + RTOL * np.abs(r)
    bad = np.abs(g - r) > tol
    if bad.any():
        i = int(np.argmax(np.abs(g - r) - tol))
        raise AssertionError(f"{name} ({what}): {int(bad.sum())} of {r.size} outside tolerance; worst got "
                             f"{g[i]!r} reference {r[i]!r} (tolerance {tol[i]:.3g}, K = {k})")


def check_family(family: str, fast: list[np.ndarray], ref: list[np.ndarray], where: str) -> None:
    _, cases, _ = program(family)
    assert len(fast) == len(ref) == len(cases)
    for c, g, r in zip(cases, fast, ref):
        check_close(c.name, g, r, c.k * c.k_scale, f"optimized vs reference, {where}")
        finite = ~np.isnan(r)
        if c.distinct and c.k >= 16 and finite.sum() >= 16:
            assert not np.array_equal(g[finite], r[finite]), (
                f"{c.name} ({where}): bit-identical to the reference kernel: did the optimized kernel decline?")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_host(family: str) -> None:
    buf, cases, feeds = program(family)
    arrays = [t.numpy() for t in feeds]
    ref = HostSession(buf, reference_only=True).run(arrays)
    for c, r in zip(cases, ref):  # the cases themselves: reference kernel vs PyTorch
        check_close(c.name, r, c.want.numpy(), c.k * c.k_scale, "reference vs PyTorch", nan_superset=c.nan_tiles)
    runs = {t: HostSession(buf, threads=t).run(arrays) for t in (1, 2, 3)}
    check_family(family, runs[1], ref, "host")
    for t in (2, 3):
        for c, a, b in zip(cases, runs[1], runs[t]):
            assert np.array_equal(a, b, equal_nan=True), f"{c.name}: {t} threads differ from 1 thread"


def _host_isas() -> list[str]:
    q = CpuDevice().properties()["queries"]
    return [name for name, bit in CPU_ISAS.items() if q.get("cpu.isas", 0) & bit]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_host_each_isa(family: str) -> None:
    """every ISA the host has, forced alone (the others disabled), against the reference; the
    device reports the ISAs it may use"""
    buf, _, feeds = program(family)
    arrays = [t.numpy() for t in feeds]
    ref = HostSession(buf, reference_only=True).run(arrays)
    isas = _host_isas()
    assert "portable" in isas, isas
    for isa in isas:
        sess = HostSession(buf, isas=[isa])
        assert sess.device.properties()["queries"]["cpu.isas"] == CPU_ISAS[isa]
        check_family(family, sess.run(arrays), ref, f"host, {isa} only")
    none = HostSession(buf, isas=[]).run(arrays)  # no ISA: the reference kernels
    for a, b in zip(none, ref):
        assert np.array_equal(a, b, equal_nan=True)


def run_oa(target: str, buf: bytes, arrays: list[np.ndarray], *flags: str) -> list[np.ndarray]:
    r = runner(target)
    with tempfile.TemporaryDirectory(prefix="oa-fast-") as tmp:
        path = Path(tmp) / "p.oab"
        path.write_bytes(buf)
        args = [str(path)]
        for i, a in enumerate(arrays):
            f = Path(tmp) / f"in{i}.npy"
            np.save(f, a)
            args += ["--input", f"{i}={f}"]
        res = r.run([*args, "--output-dir", tmp, *flags])
        r.check(res, f"running {path.name} {' '.join(flags)}")
        return [np.load(Path(tmp) / f"output_{o['index']}.npy") for o in res.of("output")]


# the baseline x86-64 build runs natively only on x86-64 hosts
NATIVE = ["x86_64-linux"] if platform.machine() in ("x86_64", "AMD64") else []


@pytest.mark.slow
@pytest.mark.parametrize("target", [*QEMU_TARGETS, *NATIVE])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_targets(family: str, target: str) -> None:
    buf, _, feeds = program(family)
    arrays = [t.numpy() for t in feeds]
    ref = run_oa(target, buf, arrays, "--reference")
    fast = run_oa(target, buf, arrays)
    check_family(family, fast, ref, target)
    if target == "qemu-aarch64":
        two = run_oa(target, buf, arrays, "--threads", "2")
        for i, (a, b) in enumerate(zip(fast, two)):
            assert np.array_equal(a, b, equal_nan=True), f"output {i}: 2 threads differ from 1 thread on {target}"
        # the portable C kernels on an Arm board, forced with oa_run --isa
        check_family(family, run_oa(target, buf, arrays, "--isa", "portable"), ref, f"{target}, portable only")


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_rvv_every_vlen(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """the RVV kernels (forced with oa_run --isa rvv: a declined call falls back to the reference,
    which check_family catches) under qemu-riscv64-v at VLEN 128 against the reference kernels,
    and bit-identical at VLEN 256 and 512 (every kernel's vl is fixed or per-channel, so the sums
    do not depend on the vector length), and with 2 threads"""
    if not get_target("qemu-riscv64-v").ready:
        pytest.skip("qemu-riscv64-v: toolchain or emulator missing")
    buf, _, feeds = program(family)
    arrays = [t.numpy() for t in feeds]
    ref = run_oa("qemu-riscv64-v", buf, arrays, "--reference")
    runs = {}
    for vlen in (128, 256, 512):
        monkeypatch.setenv("OA_RVV_VLEN", str(vlen))
        runs[vlen] = run_oa("qemu-riscv64-v", buf, arrays, "--isa", "rvv")
    check_family(family, runs[128], ref, "qemu-riscv64-v, rvv, VLEN 128")
    runs[0] = run_oa("qemu-riscv64-v", buf, arrays, "--isa", "rvv", "--threads", "2")
    for vlen in (256, 512, 0):
        for i, (a, b) in enumerate(zip(runs[128], runs[vlen])):
            what = f"VLEN {vlen}" if vlen else "VLEN 512, 2 threads"
            assert np.array_equal(a, b, equal_nan=True), f"{family} output {i}: {what} differs from VLEN 128"


AVX512_FEATURES = ("avx512f", "avx512bw", "avx512dq", "avx512vl", "fma")


def test_avx512_kernels_run_where_the_cpu_has_them() -> None:
    """On a CPU with AVX-512 the device may use the AVX-512 kernels, picks them by default, and
    they are not the AVX2 ones (forced alone, every family matches the reference: test_host_each_isa;
    here the GEMM-family outputs differ in the last bits from the AVX2 kernels' somewhere). Skipped
    where the CPU lacks the features (QEMU cannot emulate AVX-512)."""
    q = CpuDevice().properties()["queries"]
    lacks = [f for f in AVX512_FEATURES if not q.get(f"cpu.{f}")]
    if lacks:
        pytest.skip(f"this CPU lacks {', '.join(lacks)}: the AVX-512 kernels are not run here")
    assert "avx512" in _host_isas() and q["cpu.isas"] & CPU_ISAS["avx512"], q.get("cpu.isas")
    differ = []
    for family in ("linear", "matmul", "conv", "winograd", "nhwc"):
        buf, _, feeds = program(family)
        arrays = [t.numpy() for t in feeds]
        by_default = HostSession(buf).run(arrays)
        avx512 = HostSession(buf, isas=["avx512"]).run(arrays)
        avx2 = HostSession(buf, isas=["avx2"]).run(arrays)
        for a, b in zip(by_default, avx512):
            assert np.array_equal(a, b, equal_nan=True), f"{family}: the default is not the AVX-512 kernels"
        if any(not np.array_equal(a, b, equal_nan=True) for a, b in zip(avx512, avx2)):
            differ.append(family)
    assert differ, "the AVX-512 and AVX2 kernels gave bit-identical results on every GEMM family"


def test_oa_run_isa_flag() -> None:
    """oa_run --isa LIST forces the optimized kernels' ISAs (and rejects unknown names)"""
    buf, _, feeds = program("linear")
    arrays = [t.numpy() for t in feeds]
    ref = run_oa("host", buf, arrays, "--reference")
    for isa in _host_isas():
        check_family("linear", run_oa("host", buf, arrays, "--isa", isa), ref, f"oa_run --isa {isa}")
    res = runner("host").run(["--devices", "--isa", "portable"])
    assert [d["queries"]["cpu.isas"] for d in res.of("device")][:1] == [CPU_ISAS["portable"]], res.events
    bad = runner("host").run(["x.oab", "--isa", "avx9"])
    assert bad.returncode == 2 and "--isa needs" in bad.stderr


def test_case_names_unique() -> None:
    names = [c.name for f in FAMILIES for c in program(f)[1]]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]


@pytest.mark.parametrize("input_nchw,shape,match", [
    (2, (1, 5, 6, 3), r"argument input_nchw = 2 is out of range \(expected 0 to 1\)"),
    # input_nchw = 1 reads [N, C, H, W]: this NHWC-shaped input has 5 "channels", the weights 3
    (1, (1, 5, 6, 3), r"conv2d_nhwc\): input 1 \(weight\).*expected 5 input channels per group"),
])
def test_conv_nhwc_bad_input_layout_rejected(input_nchw: int, shape: tuple[int, ...], match: str) -> None:
    """conv2d_nhwc's input_nchw argument is validated by every kernel (the reference prepare runs
    first), naming the argument and the shape it implies"""
    x = Value("x", torch.float32, shape)
    w = Value("w", torch.float32, (1, 3, 3, 3, 16), data=torch.zeros(1, 3, 3, 3, 16))
    y = Value("y", torch.float32, (1, 5, 6, 8))
    g = Graph(name="forward", inputs=[x], outputs=[y])
    g.instrs = [Instr(op="conv2d_nhwc", inputs=[x, w], outputs=[y], ints=[1, 1, 1, 1, 1, 1, 1, 0, 16, input_nchw])]
    buf = serialize(g, plan_memory(g), [], target="host", required_features=[])
    with pytest.raises(OpenAccelError, match=match):
        HostSession(buf).run([np.zeros(shape, np.float32)])
