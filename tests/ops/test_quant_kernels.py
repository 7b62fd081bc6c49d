"""The optimized int8 kernels (runtime_c/src/cpu/kernels/opt/quant.c on arch/*/quant.c) against
the reference kernels (ref/quant.c, itself checked against the written rule by test_quant.py):
bit-exact, since both are integer-only.

Each family (conv, depthwise, linear) is one hand-built program with many instructions, run with
the reference kernels only and with the optimized ones:
  - on the host with 1, 2 and 3 threads, and forced to each tile set the host has: portable, avx2,
    avx2 + AVX-VNNI ("avx_vnni"), avx512, avx512 + AVX512-VNNI ("avx512_vnni"), avx512 + AMX
    ("avx512_amx"); the VNNI and AMX tiles are options of their ISA (HostSession(isas=["avx512",
    "vnni"]), oa_run --isa avx512,amx), so the plain tiles stay tested on a CPU that has VNNI or
    AMX; tile sets the CPU (or OS) lacks are skipped with a message naming the feature;
  - under qemu-aarch64 (NEON int16 tiles), qemu-aarch64-v82 (the sdot tile: the CPU reports
    dotprod), qemu-armv7 (NEON 4x8) and qemu-riscv64 (portable), with `oa_run` and
    `oa_run --reference`; under qemu-aarch64-v86 (-cpu max: the CPU reports i8mm) the smmla tile
    ("neon_i8mm"), against the host's reference bytes.
Every run also asks `oa_run --profile` which kernel each instruction was prepared with: the
optimized kernel of the expected ISA, never "ref" (a silent decline would pass the byte check).

Shapes cover the tile edges (MR 4/6/8, NR 8/16/32: sizes 1..9, 13, 17, 31, 33), K odd and > 256
(and up to 2305; every K mod 4 for the VNNI groups; K 27, 65, 576, 577, 640 and 32-row blocks
for the AMX 32 x 32 tiles in K steps of 64), strides 1-3, padding larger than the kernel,
dilation, groups, depthwise 3x3 / 5x5
strides 1-2 (and a channel multiplier, which takes the GEMM path), 1x1, batch 2; per-tensor and
per-channel multipliers / shifts including shift 12 and 62, multiplier 0 and 2^31 - 1, 24-bit
(float path) and 31-bit (exact path) multipliers; zero points -128 and 127; act clamps; biases
with fractions of an output step, at the rule's bounds and at the float path's; random int8 data
including -128."""

from __future__ import annotations

import functools
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from craft import Builder

from openaccel import dtypes
from openaccel.exporter import quant
from openaccel.opset import encode_args
from openaccel.runtime.host import CPU_ISA_OPTIONS, CPU_ISAS, CpuDevice, HostSession
from openaccel.targets import get_target

from helpers import CACHE, QEMU_TARGETS, runner

pytestmark = pytest.mark.xdist_group("quant_kernels")

quant.register_ops()
I8, I32 = dtypes.code_of("int8"), dtypes.code_of("int32")


@dataclass
class Case:
    name: str
    op: str
    x: np.ndarray
    w: np.ndarray
    bias: np.ndarray | None
    mult: np.ndarray
    shift: np.ndarray
    out_shape: tuple[int, ...]
    args: dict[str, Any] = field(default_factory=dict)
    crafted: bool = False  # x and w are the case's own (not replaced by program()'s random data)


def _qparams(rng: np.random.Generator, n: int, k: int, per_channel: bool,
             extreme: bool | str) -> tuple[np.ndarray, ...]:
    """multipliers with 24 significant bits (the exporter's: exact in float32, the AVX-512 float
    path) or 31 (the exact path) and shifts that put typical sums near the int8 range; `extreme`
    mixes in shift 12 and 62 (the rule's bounds), multiplier 0 and 2^31 - 1; "ties": multiplier
    2^20 and a shift that divides by a power of two near the sums' spread, so that exact ties
    (round half to even) occur about once in 100 * sqrt(K) outputs"""
    c = n if per_channel else 1
    if extreme == "m4":  # real multiplier 4: sums near -3.5e6 give -1.4e7 before the clamp
        return np.full(c, 1 << 30, np.int32), np.full(c, 28, np.int8)
    if extreme == "edge":  # 2^-10 (sums move the outputs by a few steps): the biases put them at the clamp bounds
        return np.full(c, 1 << 30, np.int32), np.full(c, 40, np.int8)
    if extreme == "near":  # the ties of 2^-L for a multiplier 2^-L (1 + 2^-30), not a float32 (the exact path)
        return np.full(c, (1 << 30) + 1, np.int32), np.full(c, 30 + round(math.log2(92 * math.sqrt(k))), np.int8)
    if extreme == "ties":
        return np.full(c, 1 << 20, np.int32), np.full(c, 20 + round(math.log2(92 * math.sqrt(k))), np.int8)
    base = round(math.log2(6000.0 * math.sqrt(k))) + 24
    shift = rng.integers(base - 2, base + 3, c, dtype=np.int64)
    short = rng.integers(0, 2, c).astype(bool) if per_channel else np.full(c, bool(rng.integers(0, 2)))
    mult = np.where(short, rng.integers(1 << 23, 1 << 24, c, dtype=np.int64),
                    rng.integers(1 << 30, 1 << 31, c, dtype=np.int64))
    shift = np.where(short, shift - 7, shift)
    if extreme:
        for i in range(c):
            pick = i % 5 if per_channel else int(rng.integers(0, 5))
            if pick == 0:
                shift[i] = 12
            elif pick == 1:
                shift[i] = 62
            elif pick == 2:
                mult[i] = 0
            elif pick == 3:
                mult[i] = 2**31 - 1
    return mult.astype(np.int32), np.clip(shift, 12, 62).astype(np.int8)


def _suffix(extreme: bool | str) -> str:
    return "_x" if extreme is True else f"_{extreme}" if extreme else ""


def _int8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    a = rng.integers(-128, 128, shape, dtype=np.int8)
    if a.size:
        a.flat[0] = -128
    return a


def _bias(rng: np.random.Generator, n: int, kind: str, shift: np.ndarray, extreme: bool | str) -> np.ndarray | None:
    """the bias: float32 output steps (format 1.4: any float32 whose addend round(bias * 2^shift) is
    below 2^61; the AVX-512 float path takes |bias| < 2^12)"""
    if kind == "none":
        return None
    s = np.broadcast_to(shift.astype(np.int64), (n,))
    room = np.exp2(np.minimum(61 - s, 12).astype(np.float64))   # |bias| < room: below 2^61 after the shift
    below = np.nextafter(room.astype(np.float32), np.float32(0)).astype(np.float64)   # the largest float32 under it
    sign = rng.choice([-1, 1], n)
    if kind == "sat":  # the largest biases the rule takes
        b = np.where(np.arange(n) % 2 == 0, below, -below)
    elif kind == "big":  # at the AVX-512 float path's bound 2^12 steps: below it float, from it exact
        b = sign * (4096.0 + rng.integers(-3, 3, n) * 2.0**-11)
    elif kind == "edge":  # around the clamp bounds, with fractions of a step
        b = sign * rng.uniform(118, 138, n)
    else:  # a few output steps with any fraction (ties: whole steps, so the ties stay exact)
        b = rng.uniform(-8, 8, n)
        if extreme == "ties":
            b = np.round(b)
        elif n >= 4:  # addends that round: exact halves (to even: 0 and 2) and a quarter past one
            b[:4] = np.exp2(-s[:4] - 1.0) * np.array([1.0, 3.0, -1.0, -2.5])
    return np.clip(b, -below, below).astype(np.float32)   # the file's float32 output steps


def conv(n: int, c: int, h: int, w: int, o: int, kh: int, kw: int, stride: Any = 1, pad: Any = 0, dil: Any = 1,
         groups: int = 1, per_channel: bool = True, zin: int | None = None, zout: int | None = None,
         act: tuple[int, int] = (-128, 127), bias: str = "rand", extreme: bool | str = False, seed: int = 0) -> Case:
    s, p, d = (t if isinstance(t, tuple) else (t, t) for t in (stride, pad, dil))
    rng = np.random.default_rng(seed)
    x = _int8(rng, (n, c, h, w))
    wt = _int8(rng, (o, c // groups, kh, kw))
    k = c // groups * kh * kw
    mult, shift = _qparams(rng, o, k, per_channel, extreme)
    zi = int(rng.integers(-128, 128)) if zin is None else zin
    zo = int(rng.integers(-20, 20)) if zout is None else zout
    oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    name = (f"conv_{n}x{c}x{h}x{w}_o{o}_k{kh}x{kw}_s{s[0]}{s[1]}_p{p[0]}{p[1]}_d{d[0]}{d[1]}_g{groups}"
            f"_{'pc' if per_channel else 'pt'}_z{zi}_{zo}_a{act[0]}_{act[1]}_{bias}{_suffix(extreme)}")
    args = dict(stride_h=s[0], stride_w=s[1], pad_h=p[0], pad_w=p[1], dilation_h=d[0], dilation_w=d[1],
                groups=groups, input_zp=zi, output_zp=zo, act_min=act[0], act_max=act[1])
    return Case(name, "conv2d_q8", x, wt, _bias(rng, o, bias, shift, extreme), mult, shift, (n, o, oh, ow), args)


def linear(lead: tuple[int, ...], k: int, nout: int, per_channel: bool = True, zin: int | None = None,
           zout: int | None = None, act: tuple[int, int] = (-128, 127), bias: str = "rand", extreme: bool | str = False,
           seed: int = 0) -> Case:
    rng = np.random.default_rng(seed)
    x = _int8(rng, (*lead, k))
    w = _int8(rng, (nout, k))
    mult, shift = _qparams(rng, nout, k, per_channel, extreme)
    zi = int(rng.integers(-128, 128)) if zin is None else zin
    zo = int(rng.integers(-20, 20)) if zout is None else zout
    name = (f"linear_{'x'.join(map(str, lead))}_k{k}_n{nout}_{'pc' if per_channel else 'pt'}_z{zi}_{zo}"
            f"_a{act[0]}_{act[1]}_{bias}{_suffix(extreme)}")
    args = dict(input_zp=zi, output_zp=zo, act_min=act[0], act_max=act[1])
    return Case(name, "linear_q8", x, w, _bias(rng, nout, bias, shift, extreme), mult, shift, (*lead, nout),
                args)


def bigsum_conv(seed: int = 0) -> Case:
    """A 1x1 conv whose sums lie on both sides of +-2^23 (K = 360, inputs and weights near the int8
    ends): the AVX-512 float path's range check (a float32 sum of 2^23 or more is not exact to
    the half step) sends those vectors to the exact path; per-channel biases centre the outputs
    on the int8 range (m = 2^-12: +-2^23 is 2048 steps); 24- and 31-bit multipliers."""
    rng = np.random.default_rng(seed)
    k, o = 360, 20
    x = rng.integers(62, 128, (1, k, 7, 9), dtype=np.int64)
    sign = np.where(np.arange(o) % 2 == 0, 1, -1)
    w = sign[:, None] * rng.integers(80, 128, (o, k))
    sums = np.einsum("kp,ok->op", x.reshape(k, -1) + 128, w)              # zin = -128
    mult = np.where(np.arange(o) % 4 < 2, 1 << 23, 1 << 30).astype(np.int32)
    shift = np.where(np.arange(o) % 4 < 2, 35, 42).astype(np.int8)       # m = 2^-12 either way
    bias = (-np.round(sums.mean(1)) / 4096).astype(np.float32)           # -mean(sum) * m output steps
    assert (np.abs(sums) >= 2**23).any() and (np.abs(sums) < 2**23).any()
    args = dict(stride_h=1, stride_w=1, pad_h=0, pad_w=0, dilation_h=1, dilation_w=1, groups=1, input_zp=-128,
                output_zp=3, act_min=-128, act_max=127)
    return Case(f"conv_bigsum_k{k}_o{o}", "conv2d_q8", x.astype(np.int8), w.reshape(o, k, 1, 1).astype(np.int8),
                bias, mult, shift, (1, o, 7, 9), args, crafted=True)


def cancel_conv(seed: int = 1) -> Case:
    """A 1x1 conv whose large sums (about 2^17) a large bias cancels to a few output steps, with a
    multiplier of 31 significant bits (real 1.2345678, its low 7 bits 63): a requantization that
    kept only the multiplier's float32 part (24 bits) would round 19 of these 3600 outputs the
    wrong way (checked by simulation, and with such a kernel); 12 rows make it a GEMM."""
    rng = np.random.default_rng(seed)
    k, o, h, w_ = 8, 12, 15, 20
    x = np.full((1, k, h, w_), 127, np.int64)
    x[0, k - 1] = rng.integers(-60, 61, (h, w_))
    w = np.zeros((o, k), np.int64)
    w[:, : k - 1] = np.arange(127, 127 - o, -1)[:, None]
    w[:, k - 1] = 1
    base = (k - 1) * 127 * w[:, 0]                                       # the sums less x[k - 1]
    mult = np.full(o, 1325631807, np.int32)
    shift = np.full(o, 30, np.int8)
    bias = (-base * (1325631807 / 2**30)).astype(np.float32)             # cancels the base: outputs near x[k - 1]
    args = dict(stride_h=1, stride_w=1, pad_h=0, pad_w=0, dilation_h=1, dilation_w=1, groups=1, input_zp=0,
                output_zp=0, act_min=-128, act_max=127)
    return Case(f"conv_cancel_k{k}_o{o}", "conv2d_q8", x.astype(np.int8), w.reshape(o, k, 1, 1).astype(np.int8),
                bias, mult, shift, (1, o, h, w_), args, crafted=True)


def conv_cases() -> list[Case]:
    cs = [
        conv(1, 3, 9, 11, 5, 3, 3, pad=1),
        conv(2, 4, 10, 13, 7, 3, 3, stride=2, pad=1),                      # batch 2
        conv(1, 8, 7, 9, 13, 1, 1),                                        # 1x1: rows copied
        conv(1, 16, 6, 6, 17, 1, 1, stride=2),
        conv(1, 33, 5, 7, 9, 3, 3, pad=1),                                 # K = 297: odd, > 256
        conv(1, 31, 6, 5, 31, 3, 3, stride=3, pad=2),
        conv(1, 2, 12, 12, 3, 3, 2, stride=(2, 1), pad=(3, 1), dil=(2, 2)),
        conv(1, 1, 4, 4, 2, 3, 3, pad=4),                                  # padding > kernel
        conv(1, 6, 8, 7, 4, 3, 3, pad=1, groups=2),
        conv(1, 8, 6, 6, 16, 3, 3, pad=1, groups=4),
        conv(1, 4, 7, 6, 8, 3, 3, pad=1, groups=4),                        # channel multiplier 2
        conv(1, 64, 5, 5, 9, 3, 3, pad=1),                                 # K = 576
        conv(1, 113, 3, 4, 6, 3, 3, pad=1),                                # K = 1017
        conv(1, 1, 5, 5, 3, 1, 1),                                         # K = 1
        conv(1, 5, 6, 7, 33, 3, 3, pad=1, zin=-128, zout=127),
        conv(1, 7, 5, 6, 17, 3, 3, zin=127, zout=-128, act=(-100, 90)),
        conv(1, 9, 7, 7, 6, 3, 3, pad=1, per_channel=False),
        conv(1, 4, 9, 9, 10, 3, 3, pad=1, extreme=True),
        conv(1, 4, 9, 9, 3, 3, 3, pad=1, per_channel=False, extreme=True),
        conv(1, 6, 8, 8, 8, 3, 3, pad=1, bias="sat"),
        conv(2, 3, 6, 6, 5, 3, 3, pad=1, bias="none", act=(0, 127)),
        conv(1, 12, 20, 23, 24, 3, 3, pad=1),                              # several column blocks
        conv(2, 5, 16, 17, 11, 3, 3, pad=1),                               # 544 columns: W packed per run
        conv(1, 3, 24, 30, 7, 1, 1),                                       # (below 512: W read in place)
        conv(1, 257, 3, 3, 10, 3, 3, pad=1, zin=-128),                     # K = 2313
        conv(1, 29, 5, 5, 1100, 3, 3, pad=1),                              # K = 261, W > 2^18: in place, K tail
        conv(1, 258, 4, 5, 9, 1, 1, stride=(1, 2)),                        # K = 258: K mod 4 = 2
        conv(1, 6, 9, 40, 10, 3, 3, stride=2, pad=1),                      # stride-2 runs across rows
        conv(1, 5, 6, 70, 9, 3, 3, pad=1),                                 # rows wider than the tiles
        conv(2, 7, 11, 9, 19, 5, 5, stride=2, pad=3, zin=127),             # 5x5 / 2, padding > stride
        # grid columns (VNNI: phase planes for stride 2, outputs at least 12 wide)
        conv(2, 6, 11, 30, 8, 3, 3, stride=(2, 1), pad=(2, 1), dil=(1, 2), groups=2),
        conv(1, 4, 9, 33, 5, 2, 3, stride=(1, 2), pad=(0, 3)),
        conv(1, 3, 13, 27, 6, 5, 5, stride=2, pad=5, dil=2, zin=-128),
        conv(1, 3, 20, 23, 12, 3, 3, pad=1, extreme="ties"),              # exact ties of the rounding
        conv(1, 16, 14, 14, 24, 1, 1, extreme="ties", per_channel=False),
        conv(1, 8, 15, 16, 9, 3, 3, stride=2, pad=1, extreme="ties"),
        # AMX (32 x 32 blocks, K steps of 64): whole 32-row blocks read W in place, K tails and
        # row remainders through the zero-padded copy
        conv(1, 64, 6, 5, 64, 3, 3, pad=1),                                # K = 576: in place only
        conv(1, 577, 3, 5, 64, 1, 1, zin=-128, zout=127),                  # K = 577: 9 steps + 1
        conv(1, 3, 16, 18, 32, 3, 3, stride=2, pad=1),                     # K = 27 (the stem's tail)
        conv(1, 65, 7, 13, 40, 1, 1, per_channel=False, zin=127, extreme=True),  # K = 65, 32 + 8 rows
        conv(2, 64, 14, 14, 96, 3, 3, pad=1, groups=2),                    # groups: 48 rows, K = 288
        # large real multipliers and sums (the float requantization's limits)
        conv(1, 8, 6, 7, 12, 1, 1, extreme="m4", bias="big"),
        conv(1, 6, 9, 13, 10, 1, 1, extreme="edge", bias="edge", zout=0),
        conv(1, 5, 8, 9, 7, 3, 3, pad=1, extreme="m4", bias="big", per_channel=False),
        # 1x1 GEMM blocks requantized a tile block at a time (AVX-512 requant_rows): 7x7 planes
        # (column tails), clamps inside int8 on one or both sides, extreme zero points, ties
        conv(1, 24, 7, 7, 40, 1, 1, zout=-128, act=(-128, 100)),
        conv(1, 160, 7, 7, 33, 1, 1, per_channel=False, zin=-128, zout=127, act=(-50, 127)),
        conv(1, 16, 14, 15, 20, 1, 1, zin=127, zout=-128, extreme="ties"),
        conv(2, 96, 9, 9, 17, 1, 1, extreme=True, act=(-20, 30)),
        conv(1, 960, 3, 5, 24, 1, 1, zin=-128, act=(-128, 126)),  # K = 960: the 2^23 check on
        # full 64-column steps (135 and 128 pixels) with a clamp inside int8 (applied to the packed
        # bytes) and unsettled vectors (near ties, sums past 2^23: found again within their step)
        conv(1, 24, 9, 15, 12, 1, 1, extreme="near", per_channel=False, act=(-90, 100)),
        conv(1, 6, 8, 16, 24, 1, 1, extreme="edge", bias="edge", zout=0, act=(-124, 125)),
    ]
    # every cout and pixel count around the tiles (1..9, 13, 17, 31, 33)
    for i, (o, hw) in enumerate([(1, 1), (2, 2), (3, 3), (4, 5), (5, 7), (6, 9), (7, 13), (8, 17), (9, 31),
                                 (13, 33), (17, 4), (31, 6), (33, 8)]):
        cs.append(conv(1, 3, 1, hw, o, 1, 3, pad=(0, 1), seed=100 + i))
    cs.append(bigsum_conv())
    cs.append(cancel_conv())
    return cs


def dw_cases() -> list[Case]:
    c = functools.partial(conv, bias="rand")
    return [
        c(1, 8, 9, 9, 8, 3, 3, pad=1, groups=8),
        c(2, 13, 10, 11, 13, 3, 3, stride=2, pad=1, groups=13),
        c(1, 6, 12, 15, 6, 5, 5, pad=2, groups=6),
        c(1, 5, 13, 12, 5, 5, 5, stride=2, pad=2, groups=5, zin=-128, zout=127),
        c(1, 4, 14, 13, 4, 3, 3, pad=2, dil=2, groups=4, zin=127, zout=-128, act=(-50, 60)),
        c(1, 3, 7, 33, 3, 3, 3, stride=(1, 3), pad=(1, 4), groups=3, per_channel=False),
        c(1, 9, 3, 3, 9, 3, 3, pad=1, groups=9, extreme=True),
        c(1, 7, 6, 6, 7, 3, 3, groups=7, bias="none"),
        c(1, 4, 5, 5, 4, 3, 3, pad=1, groups=4, bias="sat"),
        c(1, 17, 1, 20, 17, 1, 3, pad=(0, 1), groups=17),
        # rows of 8+ outputs (the vector rows) with a remainder: stride 2 with and without dilation
        c(1, 3, 9, 37, 3, 3, 3, stride=2, pad=1, groups=3),
        c(1, 3, 9, 41, 3, 3, 3, stride=2, pad=2, dil=2, groups=3),
        c(1, 2, 7, 30, 2, 5, 5, stride=2, pad=2, groups=2),
        c(1, 2, 7, 27, 2, 5, 5, pad=2, groups=2),
        c(1, 2, 6, 29, 2, 3, 4, pad=(1, 3), dil=(1, 3), groups=2),
        c(1, 6, 20, 20, 6, 3, 3, pad=1, groups=6, extreme="ties"),       # exact ties of the rounding
        c(1, 5, 21, 22, 5, 3, 3, stride=2, pad=1, groups=5, extreme="ties"),
        c(1, 6, 9, 10, 6, 3, 3, pad=1, groups=6, extreme="m4", bias="big"),
        c(1, 8, 11, 19, 8, 3, 3, stride=2, pad=1, groups=8, extreme="edge", bias="edge", zout=0),
        c(1, 4, 10, 9, 4, 5, 5, pad=2, groups=4, extreme="edge", bias="edge", zout=0, per_channel=False),
        # AVX-512: channel blocks below 64 outputs a row, the plane kernel from 64 on
        c(1, 3, 6, 70, 3, 3, 3, pad=1, groups=3, extreme=True),
        c(1, 2, 5, 66, 2, 3, 3, pad=1, groups=2, zin=127, extreme="ties"),
        c(1, 6, 7, 68, 6, 5, 5, pad=2, groups=6, extreme="edge", bias="edge", zout=0),
        c(1, 2, 4, 66, 2, 3, 3, pad=1, groups=2, extreme="m4", bias="big"),
        c(1, 4, 6, 16, 4, 3, 3, pad=1, groups=4),
        c(2, 3, 5, 17, 3, 3, 3, pad=1, groups=3, extreme="m4", bias="big"),
        c(1, 3, 5, 35, 3, 3, 3, groups=3, zin=-128),
        c(1, 5, 9, 64, 5, 3, 3, stride=2, pad=1, groups=5, extreme=True),
        c(1, 4, 12, 62, 4, 3, 3, stride=2, pad=1, groups=4, extreme="ties"),
        c(1, 4, 7, 36, 4, 3, 3, pad=2, dil=2, groups=4, zin=127, act=(-30, 40)),
        c(1, 6, 8, 40, 6, 3, 3, pad=1, groups=6, extreme="edge", bias="edge", zout=0, per_channel=False),
        c(1, 3, 6, 33, 3, 3, 3, stride=(1, 2), pad=1, groups=3, bias="none", act=(0, 127)),
        # stride 2, rows of 64+ input bytes split 64 at a time, odd and even left padding
        c(1, 3, 5, 130, 3, 3, 3, stride=2, pad=1, groups=3),
        c(1, 2, 6, 70, 2, 5, 5, stride=2, pad=3, groups=2, zin=-128),
        c(1, 2, 5, 129, 2, 3, 3, stride=2, pad=2, groups=2),
        # channel blocks in bands of rows (the padded plane above 64 KB at 16 channels)
        c(1, 17, 40, 40, 17, 3, 3, pad=1, groups=17, zin=-128),
        c(1, 3, 50, 61, 3, 3, 3, stride=2, pad=1, groups=3, extreme="ties"),
        c(1, 2, 37, 50, 2, 5, 5, pad=4, dil=2, groups=2, act=(-60, 70)),
        c(1, 2, 45, 47, 2, 3, 3, stride=(2, 1), pad=(0, 1), groups=2),
        # AVX-512 VNNI: the row kernel (outputs 28+ wide): tap groups of 4 (kw up to 13), row phases
        # (stride_h 2, 3), dropped grid columns, bands of rows, the last 64 columns partial, the
        # exact requantization path (m4, big sums)
        c(1, 3, 6, 48, 3, 3, 3, pad=1, groups=3, per_channel=False, act=(-10, 100)),
        c(1, 4, 9, 64, 4, 3, 3, pad=1, groups=4, extreme="near", act=(-40, 45)),
        # channel blocks (outputs < 28 wide): near ties (the vectors the float path cannot settle), a clamp
        c(1, 20, 14, 13, 20, 3, 3, pad=1, groups=20, extreme="near", act=(-60, 70)),
        c(1, 3, 9, 113, 3, 3, 3, stride=2, pad=1, groups=3, zin=-128, act=(-128, 90)),
        c(1, 2, 5, 60, 2, 1, 7, pad=(0, 3), groups=2, extreme="ties"),
        c(1, 2, 4, 50, 2, 2, 13, pad=(1, 6), groups=2),
        c(1, 3, 13, 49, 3, 5, 2, stride=(3, 1), pad=(2, 0), groups=3, zin=127),
        c(1, 3, 11, 57, 3, 3, 3, stride=2, pad=2, dil=(2, 1), groups=3, zout=0),
        c(1, 2, 6, 64, 2, 4, 4, stride=2, pad=1, dil=(1, 3), groups=2),
        c(1, 2, 23, 130, 2, 3, 3, pad=1, groups=2, act=(-40, 127)),            # two bands
        c(1, 2, 40, 70, 2, 3, 1, pad=(1, 0), groups=2),                        # no dropped columns
        c(2, 3, 7, 60, 3, 3, 3, stride=2, pad=(0, 1), groups=3, extreme="m4", bias="big"),
        # small planes (MobileNetV2's 7x7, and 1x1)
        c(1, 16, 7, 7, 16, 3, 3, pad=1, groups=16),
        c(1, 5, 1, 1, 5, 3, 3, pad=1, groups=5),
    ]


def linear_cases() -> list[Case]:
    cs = [
        linear((1,), 17, 5),                      # GEMV (M <= 4)
        linear((2,), 33, 9, zin=-128, zout=127),
        linear((3,), 300, 70, per_channel=False),  # 64-output blocks + 6
        linear((4,), 1025, 13),
        linear((1,), 1, 3),
        linear((2, 2), 64, 10, zin=127, zout=-128, act=(-100, 120)),
        linear((1,), 31, 9, extreme=True),
        linear((5,), 33, 17),                     # GEMM (M > 4)
        linear((7,), 31, 9, zin=-128),
        linear((17,), 300, 33, per_channel=False),
        linear((33,), 16, 13, extreme=True),
        linear((2, 3), 65, 8),
        linear((9,), 1025, 6, bias="sat"),
        linear((13,), 7, 31, bias="none", act=(0, 127)),
        linear((64,), 128, 40),
        linear((520,), 33, 7),                    # 520 rows: W packed per run
        linear((6,), 18, 12),                     # K mod 4 = 2 (the VNNI groups of 4)
        linear((1,), 130, 5, zin=-128),           # GEMV: 64-k vectors + 2
        linear((3,), 2306, 9),
        linear((40,), 2305, 20, zin=127),
        linear((9,), 1025, 300),                  # K mod 4 = 1, W > 2^18: VNNI reads W in place, K tail
        linear((1,), 64, 200, extreme="ties"),    # exact ties of the rounding
        linear((64,), 48, 40, extreme="ties"),
        linear((37,), 65, 96, zin=-128),          # AMX: 3 x 32 rows, K = 65
        linear((5,), 27, 33, per_channel=False),  # K = 27, 32 + 1 rows
        linear((70,), 640, 64, extreme=True),     # K = 640: 10 steps in place, 3 column panels
        linear((20,), 24, 18, extreme="m4", bias="big"),
        linear((30,), 40, 19, extreme="edge", bias="edge", zout=0),
    ]
    return cs


FAMILIES = {"conv": conv_cases, "depthwise": dw_cases, "linear": linear_cases}


@functools.cache
def program(family: str) -> tuple[bytes, list[Case]]:
    cases = FAMILIES[family]()
    for i, c in enumerate(cases):  # distinct data per case, independent of the order of families
        rng = np.random.default_rng(1000 * (list(FAMILIES).index(family) + 1) + i)
        if not c.crafted:
            c.x = _int8(rng, c.x.shape)
            c.w = _int8(rng, c.w.shape)
    pool = sum((c.x.nbytes + 63) // 64 * 64 + (int(np.prod(c.out_shape)) + 63) // 64 * 64 for c in cases)
    b = Builder(pool=pool)
    off = 0
    outs = []
    for i, c in enumerate(cases):
        xi = b.tensor(f"c{i}_x", c.x.shape, I8, offset=off)
        off += (c.x.nbytes + 63) // 64 * 64
        b.inputs.append(xi)
        wi = b.tensor(f"c{i}_w", c.w.shape, I8, data=c.w)
        bi = b.tensor(f"c{i}_b", c.bias.shape, F32, data=c.bias) if c.bias is not None else -1
        mi = b.tensor(f"c{i}_m", c.mult.shape, I32, data=c.mult)
        si = b.tensor(f"c{i}_s", c.shift.shape, I8, data=c.shift)
        o = b.tensor(f"c{i}_y", c.out_shape, I8, offset=off)
        off += (int(np.prod(c.out_shape)) + 63) // 64 * 64
        outs.append(o)
        ints, floats = encode_args(c.op, **c.args)
        b.instr(c.op, [xi, wi, bi, mi, si], [o], ints, floats)
    b.outputs.extend(outs)
    buf = b.build()
    path = CACHE / "ops" / f"quant_kernels_{family}.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf)
    return buf, cases


def feeds(family: str) -> list[np.ndarray]:
    return [c.x for c in program(family)[1]]


def check_same(family: str, got: list[np.ndarray], ref: list[np.ndarray], where: str) -> None:
    cases = program(family)[1]
    assert len(got) == len(ref) == len(cases)
    for c, g, r in zip(cases, got, ref):
        assert g.shape == r.shape and g.dtype == np.int8, (c.name, g.shape, g.dtype)
        if not np.array_equal(g, r):
            bad = np.argwhere(g != r)
            i = tuple(bad[0])
            raise AssertionError(f"{c.name} ({where}): {len(bad)} of {r.size} bytes differ from the reference "
                                 f"kernel; first at {i}: {g[i]} vs {r[i]}")


@functools.cache
def reference(family: str) -> list[np.ndarray]:
    buf, _ = program(family)
    return HostSession(buf, reference_only=True).run(feeds(family))


def test_cases_are_not_trivial() -> None:
    """the reference outputs use the int8 range (the checks below would be weak on constant outputs)"""
    for family in FAMILIES:
        for c, r in zip(program(family)[1], reference(family)):
            if r.size >= 32 and "sat" not in c.name and "_x" not in c.name and "_m4" not in c.name:
                assert len(np.unique(r)) > 8, (c.name, np.unique(r))


def _host_isas() -> list[str]:
    q = CpuDevice().properties()["queries"]
    return [name for name, bit in CPU_ISAS.items() if q.get("cpu.isas", 0) & bit]


# the tile sets: (the ISAs to allow, the plan's kernel name, the CPU features it needs)
TILE_SETS = [
    (["portable"], "portable", ()),
    (["avx2"], "avx2", ("avx2", "fma")),
    (["avx2", "vnni"], "avx_vnni", ("avx2", "fma", "avx_vnni")),
    (["avx512"], "avx512", ("avx512f", "avx512bw", "avx512dq", "avx512vl", "fma")),
    (["avx512", "vnni"], "avx512_vnni", ("avx512f", "avx512bw", "avx512dq", "avx512vl", "fma", "avx512_vnni")),
    (["avx512", "amx"], "avx512_amx",
     ("avx512f", "avx512bw", "avx512dq", "avx512vl", "fma", "avx512_vnni", "amx_tile", "amx_int8")),
    (["neon"], "neon", ("neon",)),
]


def _host_tile_sets() -> list[tuple[list[str], str]]:
    """the tile sets this host's CPU (and runtime build) can run"""
    q = CpuDevice().properties()["queries"]
    have = _host_isas()
    have += [opt for opt, bit in CPU_ISA_OPTIONS.items() if q.get("cpu.isas", 0) & bit]
    return [(isas, name) for isas, name, feats in TILE_SETS
            if all(i in have for i in isas) and all(q.get(f"cpu.{f}") for f in feats)]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_host_threads(family: str) -> None:
    buf, _ = program(family)
    for t in (1, 2, 3):
        check_same(family, HostSession(buf, threads=t).run(feeds(family)), reference(family), f"host, {t} threads")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_host_each_isa(family: str) -> None:
    buf, _ = program(family)
    sets = _host_tile_sets()
    assert (["portable"], "portable") in sets
    for isas, name in sets:
        for t in (1, 3) if "vnni" in isas or "amx" in isas else (1, 2):
            check_same(family, HostSession(buf, isas=isas, threads=t).run(feeds(family)), reference(family),
                       f"host, {name} tiles ({'+'.join(isas)}), {t} threads")


def run_oa(target: str, buf: bytes, arrays: list[np.ndarray], *flags: str) -> tuple[list[np.ndarray], list[str]]:
    """outputs of one run, and the kernel of each instruction (oa_run --profile)"""
    r = runner(target)
    with tempfile.TemporaryDirectory(prefix="oa-q8-") as tmp:
        path = Path(tmp) / "p.oab"
        path.write_bytes(buf)
        args = [str(path)]
        for i, a in enumerate(arrays):
            f = Path(tmp) / f"in{i}.npy"
            np.save(f, a)
            args += ["--input", f"{i}={f}"]
        res = r.run([*args, "--output-dir", tmp, *flags])
        r.check(res, f"running {path.name} {' '.join(flags)}")
        outs = [np.load(Path(tmp) / f"output_{o['index']}.npy") for o in res.of("output")]
        prof = r.run([*args, "--bench", "1", "--warmup", "0", "--profile", "--json", *flags])
        r.check(prof, f"profiling {path.name}")
        per = sorted(prof.of("profile_instruction"), key=lambda e: int(e["index"]))
        return outs, [str(e["kernel"]) for e in per]


def check_kernels(family: str, kernels: list[str], want: str, where: str) -> None:
    cases = program(family)[1]
    assert len(kernels) == len(cases), kernels
    wrong = [(c.name, k) for c, k in zip(cases, kernels) if k != want]
    assert not wrong, f"{where}: instructions not run by the {want} kernel: {wrong}"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_host_oa_run_kernels(family: str) -> None:
    """oa_run on the host: the optimized kernel ran for every instruction, for each forced tile set
    (the VNNI tiles' plans carry their own names: a silent fall-back to the plain tile would fail)"""
    buf, _ = program(family)
    for isas, name in _host_tile_sets():
        outs, kernels = run_oa("host", buf, feeds(family), "--isa", ",".join(isas))
        check_kernels(family, kernels, name, f"host --isa {','.join(isas)}")
        check_same(family, outs, reference(family), f"oa_run --isa {','.join(isas)}")
    _, ref_kernels = run_oa("host", buf, feeds(family), "--reference")
    assert set(ref_kernels) == {"ref"}


def test_amx_tiles_where_the_cpu_has_them() -> None:
    """a CPU with AMX (amx_tile + amx_int8, the OS granting the tile state) runs the AMX tile by
    default where it pays (GEMMs of K >= 64), the VNNI one elsewhere; every call with "avx512,amx";
    the VNNI one with "avx512,vnni", the plain one with "avx512"; skipped where the CPU, the OS or
    this build lacks it"""
    q = CpuDevice().properties()["queries"]
    if not (q.get("cpu.amx_int8") and q.get("cpu.amx_tile") and q.get("cpu.avx512_vnni")):
        pytest.skip("this CPU (or its OS: no arch_prctl tile permission) lacks AMX int8: the avx512_amx tile is "
                    "not run here")
    if not q["cpu.isas"] & CPU_ISA_OPTIONS["amx"]:
        pytest.skip("this runtime was built without the AMX tile (the compiler lacks -mamx-int8)")
    buf, cases = program("linear")
    # with VNNI allowed too, the calls that would not run the AMX tile, or run it on K < 64 (the
    # GEMV: M <= 4), take the VNNI one (opt/quant.c, amx_or_vnni)
    mixed = ["avx512_amx" if c.x.size // c.w.shape[1] > 4 and c.w.shape[1] >= 64 else "avx512_vnni" for c in cases]
    assert "avx512_amx" in mixed and "avx512_vnni" in mixed
    for flags, want in (([], mixed), (["--isa", "avx512,amx,vnni"], mixed),
                        (["--isa", "avx512,amx"], ["avx512_amx"] * len(cases)),
                        (["--isa", "avx512,vnni"], ["avx512_vnni"] * len(cases)),
                        (["--isa", "avx512"], ["avx512"] * len(cases))):
        _, kernels = run_oa("host", buf, feeds("linear"), *flags)
        assert kernels == want, f"host {' '.join(flags)}: {list(zip([c.name for c in cases], kernels))}"


@pytest.mark.parametrize("feature, isa, name", [("avx512_vnni", "avx512", "avx512_vnni"),
                                                ("avx_vnni", "avx2", "avx_vnni")])
def test_vnni_tiles_where_the_cpu_has_them(feature: str, isa: str, name: str) -> None:
    """a CPU with the VNNI feature runs the VNNI tile by default (avx512_vnni: where the CPU has
    AVX-512; avx_vnni: the AVX2 variant, i.e. a CPU without AVX-512 or with it disabled), and
    without "vnni" in the allowed set the plain one; skipped where the CPU lacks the feature"""
    q = CpuDevice().properties()["queries"]
    if not q.get(f"cpu.{feature}"):
        pytest.skip(f"this CPU lacks {feature}: the {name} tile is not run here")
    assert q["cpu.isas"] & CPU_ISA_OPTIONS["vnni"], q["cpu.isas"]  # built into this runtime
    buf, _ = program("linear")
    if isa == "avx2" and "avx512" in _host_isas():
        default = ["--isa", "avx2,vnni,portable"]
    elif isa == "avx512" and q["cpu.isas"] & CPU_ISA_OPTIONS["amx"]:  # AMX comes first where it runs
        default = ["--isa", "avx512,vnni,avx2,portable"]
    else:
        default = []
    _, kernels = run_oa("host", buf, feeds("linear"), *default)
    check_kernels("linear", kernels, name, f"host {' '.join(default)}")
    _, kernels = run_oa("host", buf, feeds("linear"), "--isa", isa)
    check_kernels("linear", kernels, isa, f"host --isa {isa}")


BOARD_ISA = {"qemu-aarch64": "neon", "qemu-aarch64-v82": "neon", "qemu-armv7": "neon", "qemu-riscv64": "portable",
             "qemu-riscv64-v": "portable", "qemu-aarch64-v86": "neon"}
# the conv / linear plans' names where a board's CPU has a tile with a name of its own
BOARD_TILE = {**BOARD_ISA, "qemu-aarch64-v86": "neon_i8mm"}


# ---- elementwise: add_q8, quantize, dequantize; int8 max_pool2d --------------------------------------
# Same-shape add_q8 (a broadcast one stays on the reference kernel), quantize to int8 and uint8 with
# NaN, infinities, -0.0, exact ties and huge values, dequantize from both; lengths around the vector
# widths and past the threads' blocks (32768); shifts 0, 41 / 42 (the AVX2 offset's edge) and 62,
# multipliers 0 and 2^31 - 1. int8 max_pool2d (the pooling family's int8 rows): strides 1-3,
# padding, dilation, ceil_mode (windows past the input), rows wider than its 1024-column tiles.

U8, F32 = dtypes.code_of("uint8"), dtypes.code_of("float32")


@dataclass
class EwCase:
    name: str
    op: str
    inputs: list[np.ndarray]
    out_dtype: np.dtype
    args: dict[str, Any]
    optimized: bool = True  # False: the optimized kernel declines (the reference kernel runs)
    out_shape: tuple[int, ...] | None = None  # None: the inputs' broadcast shape


def _floats(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    x = (rng.standard_normal(n) * 60 * scale).astype(np.float32)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.5 * scale, 1.5 * scale, -2.5 * scale, 3e38, -3e38,
                        1e12, 127.5 * scale, -128.5 * scale], dtype=np.float32)
    x[: min(n, len(special))] = special[: min(n, len(special))]
    return x


def ew_cases() -> list[EwCase]:
    rng = np.random.default_rng(7)
    cs = []
    for i, n in enumerate([1, 7, 15, 16, 17, 33, 100, 1000, 70001]):
        shift = [30, 0, 41, 42, 62, 31, 30, 29, 31][i]
        ma = [2**30 + 5, 3, 2**31 - 1, 2**31 - 1, 2**31 - 1, 0, 2**30, 1 << 29, 2**31 - 1][i]
        mb = [2**30 + 77, 7, 2**30, 2**31 - 1, 2**31 - 1, 2**30 + 1, 0, 1 << 30, 1 << 28][i]
        a, b = _int8(rng, (n,)), _int8(rng, (n,))
        za, zb, zo = (int(v) for v in rng.integers(-128, 128, 3))
        act = (-128, 127) if i % 3 else (int(rng.integers(-128, 0)), int(rng.integers(0, 128)))
        cs.append(EwCase(f"add_q8_{n}_s{shift}", "add_q8", [a, b], np.dtype(np.int8),
                         dict(self_zp=za, other_zp=zb, output_zp=zo, self_multiplier=ma, other_multiplier=mb,
                              shift=shift, act_min=act[0], act_max=act[1], self_scale=0.1, other_scale=0.1,
                              output_scale=0.1)))
    cs.append(EwCase("add_q8_4x5_bcast", "add_q8", [_int8(rng, (4, 5)), _int8(rng, (5,))], np.dtype(np.int8),
                     dict(self_zp=3, other_zp=-4, output_zp=1, self_multiplier=2**30, other_multiplier=2**30 + 3,
                          shift=38, act_min=-128, act_max=127, self_scale=0.1, other_scale=0.1, output_scale=0.1),
                     optimized=False))
    cs.append(EwCase("add_q8_2x3x40", "add_q8", [_int8(rng, (2, 3, 40)), _int8(rng, (2, 3, 40))], np.dtype(np.int8),
                     dict(self_zp=-128, other_zp=127, output_zp=-128, self_multiplier=2**31 - 1,
                          other_multiplier=2**31 - 1, shift=33, act_min=-128, act_max=127, self_scale=0.1,
                          other_scale=0.1, output_scale=0.1)))
    for n, scale, zp, q, dt in [(1, 0.02, 0, (-128, 127), np.int8), (31, 1e-6, -5, (-128, 127), np.int8),
                                (100, 3.0, 127, (-100, 90), np.int8), (1000, 0.05, 128, (0, 255), np.uint8),
                                (17, 0.5, 255, (10, 200), np.uint8), (70001, 0.013, -128, (-128, 127), np.int8)]:
        cs.append(EwCase(f"quantize_{n}_{np.dtype(dt).name}_s{scale}", "quantize", [_floats(rng, n, scale)],
                         np.dtype(dt), dict(scale=scale, zero_point=zp, qmin=q[0], qmax=q[1])))
    for shape, k, st, pad, dil, ceil in [((1, 4, 112, 112), 3, 2, 1, 1, 0), ((2, 3, 9, 11), 2, 2, 0, 1, 1),
                                         ((1, 2, 7, 30), 3, 1, 1, 1, 0), ((1, 3, 13, 17), 3, 2, 1, 2, 1),
                                         ((3, 10, 9), 3, 3, 1, 1, 1), ((1, 1, 3, 2100), 3, 2, 1, 1, 0),
                                         ((1, 2, 5, 1500), 2, 1, 0, 3, 0)]:
        x = _int8(rng, shape)
        out = torch.nn.functional.max_pool2d(torch.zeros(shape), k, st, pad, dil, ceil_mode=bool(ceil)).shape
        cs.append(EwCase(f"max_pool2d_{'x'.join(map(str, shape))}_k{k}_s{st}_p{pad}_d{dil}_c{ceil}", "max_pool2d", [x],
                         np.dtype(np.int8), dict(kernel_h=k, kernel_w=k, stride_h=st, stride_w=st, pad_h=pad, pad_w=pad,
                                                 dilation_h=dil, dilation_w=dil, ceil_mode=ceil), out_shape=tuple(out)))
    for i, (n, zp, dt) in enumerate([(1, 0, np.int8), (33, -128, np.int8), (1000, 127, np.int8), (9, 0, np.uint8),
                                     (70001, 255, np.uint8)]):
        x = _int8(rng, (n,)) if dt == np.int8 else rng.integers(0, 256, n, dtype=np.uint8)
        cs.append(EwCase(f"dequantize_{n}_{np.dtype(dt).name}", "dequantize", [x], np.dtype(np.float32),
                         dict(scale=[0.0123, 1e-30, 3.5][i % 3], zero_point=zp)))
    return cs


def _ew_shape(c: EwCase) -> tuple[int, ...]:
    return c.out_shape or tuple(np.broadcast_shapes(*[x.shape for x in c.inputs]))


@functools.cache
def ew_program() -> tuple[bytes, list[EwCase]]:
    cases = ew_cases()
    code = {np.dtype(np.int8): I8, np.dtype(np.uint8): U8, np.dtype(np.float32): F32}
    pool = sum((x.nbytes + 63) // 64 * 64 for c in cases for x in c.inputs)
    pool += sum((int(np.prod(_ew_shape(c))) * c.out_dtype.itemsize + 63) // 64 * 64 for c in cases)
    b = Builder(pool=pool)
    off = 0
    outs = []
    for i, c in enumerate(cases):
        ins = []
        for j, x in enumerate(c.inputs):
            t = b.tensor(f"c{i}_in{j}", x.shape, code[x.dtype], offset=off)
            off += (x.nbytes + 63) // 64 * 64
            b.inputs.append(t)
            ins.append(t)
        shape = _ew_shape(c)
        o = b.tensor(f"c{i}_y", shape, code[c.out_dtype], offset=off)
        off += (int(np.prod(shape)) * c.out_dtype.itemsize + 63) // 64 * 64
        outs.append(o)
        ints, floats = encode_args(c.op, **c.args)
        b.instr(c.op, ins, [o], ints, floats)
    b.outputs.extend(outs)
    buf = b.build()
    path = CACHE / "ops" / "quant_kernels_elementwise.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf)
    return buf, cases


def ew_feeds() -> list[np.ndarray]:
    return [x for c in ew_program()[1] for x in c.inputs]


@functools.cache
def ew_reference() -> list[np.ndarray]:
    return HostSession(ew_program()[0], reference_only=True).run(ew_feeds())


def ew_check(got: list[np.ndarray], ref: list[np.ndarray], where: str) -> None:
    cases = ew_program()[1]
    assert len(got) == len(ref) == len(cases)
    for c, g, r in zip(cases, got, ref):
        assert g.dtype == r.dtype == c.out_dtype and g.shape == r.shape, (c.name, g.dtype, g.shape)
        gb, rb = g.view(np.uint8), r.view(np.uint8)  # bit for bit (NaN payloads, -0.0)
        if not np.array_equal(gb, rb):
            bad = np.argwhere(g.view(np.uint8).reshape(-1) != r.view(np.uint8).reshape(-1))
            raise AssertionError(f"{c.name} ({where}): {len(bad)} bytes differ from the reference kernel; "
                                 f"first at byte {int(bad[0][0])}")


def test_elementwise_cases_are_not_trivial() -> None:
    ref = ew_reference()
    for c, r in zip(ew_program()[1], ref):
        if r.size >= 100 and c.op != "dequantize":
            assert len(np.unique(r)) > 8, (c.name, np.unique(r))


def test_elementwise_host() -> None:
    """every tile set the host has (the VNNI option changes nothing here: these ops are named after
    the plain ISA), 1 and 3 threads, oa_run --profile naming the kernel of every instruction"""
    buf, cases = ew_program()
    ref = ew_reference()
    for isas, _ in _host_tile_sets():
        for t in (1, 3):
            ew_check(HostSession(buf, isas=isas, threads=t).run(ew_feeds()), ref, f"{'+'.join(isas)}, {t} threads")
        if "vnni" in isas:
            continue
        outs, kernels = run_oa("host", buf, ew_feeds(), "--isa", ",".join(isas))
        want = [isas[0] if c.optimized else "ref" for c in cases]
        assert kernels == want, f"--isa {','.join(isas)}: {list(zip([c.name for c in cases], kernels))}"
        ew_check(outs, ref, f"oa_run --isa {','.join(isas)}")


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(QEMU_TARGETS))
def test_elementwise_targets(target: str) -> None:
    if not get_target(target).ready:
        pytest.skip(f"{target}: toolchain or emulator missing")
    buf, cases = ew_program()
    ref, _ = run_oa(target, buf, ew_feeds(), "--reference")
    ew_check(ref, ew_reference(), f"{target} reference vs host reference")
    fast, kernels = run_oa(target, buf, ew_feeds())
    assert kernels == [BOARD_ISA.get(target, "portable") if c.optimized else "ref" for c in cases], kernels
    ew_check(fast, ref, target)


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted({*QEMU_TARGETS, "qemu-aarch64-v82"}))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_targets(family: str, target: str) -> None:
    if not get_target(target).ready:
        pytest.skip(f"{target}: toolchain or emulator missing")
    buf, _ = program(family)
    arrays = feeds(family)
    ref, ref_kernels = run_oa(target, buf, arrays, "--reference")
    assert set(ref_kernels) == {"ref"}
    check_same(family, ref, reference(family), f"{target} reference vs host reference")
    fast, kernels = run_oa(target, buf, arrays)
    check_kernels(family, kernels, BOARD_TILE.get(target, "portable"), target)
    check_same(family, fast, ref, target)
    two, _ = run_oa(target, buf, arrays, "--threads", "2")
    check_same(family, two, ref, f"{target}, 2 threads")
    if BOARD_ISA.get(target) == "neon":
        port, kernels = run_oa(target, buf, arrays, "--isa", "portable")
        check_kernels(family, kernels, "portable", f"{target} --isa portable")
        check_same(family, port, ref, f"{target}, portable only")


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_i8mm_board(family: str) -> None:
    """the smmla tile (arch/arm/neon/quant_i8mm.c) under qemu-aarch64 -cpu max, which reports
    i8mm: every conv / linear instruction runs it (depthwise and GEMV calls use the table's NEON
    kernels, under the same plan name), with 1 and 2 threads, bytes identical to the host's
    reference. (The v8.2 board's build has the tile too, but its Cortex-A76 has no i8mm:
    test_targets checks that its plans stay "neon".)"""
    target = "qemu-aarch64-v86"
    if not get_target(target).ready:
        pytest.skip(f"{target}: toolchain or emulator missing")
    buf, _ = program(family)
    fast, kernels = run_oa(target, buf, feeds(family))
    check_kernels(family, kernels, "neon_i8mm", target)
    check_same(family, fast, reference(family), f"{target} vs host reference")
    two, _ = run_oa(target, buf, feeds(family), "--threads", "2")
    check_same(family, two, reference(family), f"{target}, 2 threads")


@pytest.mark.slow
def test_v82_board_reports_dotprod() -> None:
    """the sdot tile is chosen inside the NEON variant when the CPU reports dotprod: the v8.2
    board does (so test_targets above ran it there), the plain aarch64 one does not; the smmla
    tile when it reports i8mm: only the v8.6 board (-cpu max) does"""
    for target, dot, i8mm in (("qemu-aarch64-v82", 1, 0), ("qemu-aarch64", 0, 0), ("qemu-aarch64-v86", 1, 1)):
        if not get_target(target).ready:
            pytest.skip(f"{target}: toolchain or emulator missing")
        res = runner(target).run(["--devices", "--json"])
        runner(target).check(res, "--devices")
        q = res.of("device")[0]["queries"]
        assert int(q.get("cpu.dotprod", 0)) == dot, q
        assert int(q.get("cpu.i8mm", 0)) == i8mm, q
