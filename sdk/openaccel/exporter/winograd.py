"""Winograd convolution prepared at export time: 3x3 stride-1 convolutions with constant weights
become `conv2d_winograd` instructions whose weight input is already transformed (U = G g G^T, in
the blocked layout the kernels read), so the runtime never transforms weights (transforming them
on every run measured slower than the direct convolution).

F(m x m, 3 x 3) computes an m x m output tile from an (m + 2) x (m + 2) input tile d as
    Y = A^T [ (G g G^T) * (B^T d B) ] A        (* elementwise)
with the matrices of Lavin & Gray (2015) below: interpolation points 0, 1, -1 (m = 2) and
0, 1, -1, 2, -2 (m = 4), plus the point at infinity. The C kernels (runtime_c/src/kernels/ref/
winograd.c and fast/winograd_tmpl.inc) hard-code the same B^T and A^T.

Numerics (fp32): F(4x4) multiplies 2.25 x fewer terms per output than F(2x2) and 4 x fewer than
the direct convolution, but its transforms scale values by up to 5 (input) and 8 (output), so
rounding errors grow: measured on ResNet-18 (random weights) a relative error per layer of about
3e-6 of the layer's largest output (2e-6 for F(2x2)), and 2.4e-7 absolute on the logits, far
inside the models' 1e-4 tolerance.

Weight layout: [(m + 2)^2, ceil(K / block), C, block]: for transform position xi = i (m + 2) + j,
a block of `block` output channels is a C x block row-major panel, which is exactly the packed
B panel of the GEMM micro-kernels (NR = 16 on AVX2; NEON's NR = 8 and the portable kernels' 4 or 8
read the same panels through row offsets). Output channels past K are zero.
"""

from __future__ import annotations

import torch

from ..ir import Graph, Instr, Value
from ..opset import CPU_PANEL_BLOCK

BLOCK = CPU_PANEL_BLOCK

_BT = {
    2: [[1, 0, -1, 0],
        [0, 1, 1, 0],
        [0, -1, 1, 0],
        [0, 1, 0, -1]],
    4: [[4, 0, -5, 0, 1, 0],
        [0, -4, -4, 1, 1, 0],
        [0, 4, -4, -1, 1, 0],
        [0, -2, -1, 2, 1, 0],
        [0, 2, -1, -2, 1, 0],
        [0, 4, 0, -5, 0, 1]],
}
_G = {
    2: [[1, 0, 0],
        [1 / 2, 1 / 2, 1 / 2],
        [1 / 2, -1 / 2, 1 / 2],
        [0, 0, 1]],
    4: [[1 / 4, 0, 0],
        [-1 / 6, -1 / 6, -1 / 6],
        [-1 / 6, 1 / 6, -1 / 6],
        [1 / 24, 1 / 12, 1 / 6],
        [1 / 24, -1 / 12, 1 / 6],
        [0, 0, 1]],
}
_AT = {
    2: [[1, 1, 1, 0],
        [0, 1, -1, -1]],
    4: [[1, 1, 1, 1, 1, 0],
        [0, 1, -1, 2, -2, 0],
        [0, 1, 1, 4, 4, 0],
        [0, 1, -1, 8, -8, 1]],
}
TILES = tuple(_G)


def matrices(tile: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B^T, G, A^T) of F(tile x tile, 3 x 3) in float64."""
    f = torch.float64
    return torch.tensor(_BT[tile], dtype=f), torch.tensor(_G[tile], dtype=f), torch.tensor(_AT[tile], dtype=f)


def transform_weights(w: torch.Tensor, tile: int, block: int = BLOCK) -> torch.Tensor:
    """[K, C, 3, 3] weights -> the float32 [(tile+2)^2, ceil(K/block), C, block] weight input of
    conv2d_winograd (transformed in float64, rounded once)."""
    k, c = int(w.shape[0]), int(w.shape[1])
    a = tile + 2
    _, g, _ = matrices(tile)
    u = torch.einsum("ij,kcjl,ml->imkc", g, w.detach().to(torch.float64), g).reshape(a * a, k, c)
    kb = -(-k // block)
    padded = torch.zeros(a * a, kb * block, c, dtype=torch.float64)
    padded[:, :k] = u
    return padded.reshape(a * a, kb, block, c).permute(0, 1, 3, 2).contiguous().to(torch.float32)


def reference(x: torch.Tensor, u: torch.Tensor, tile: int, pad: tuple[int, int], k: int) -> torch.Tensor:
    """conv2d_winograd without bias / addend / act, in float64 (for tests): x [N, C, H, W] and
    u from transform_weights."""
    bt, _, at = matrices(tile)
    a = tile + 2
    n, c, h, w = x.shape
    oh, ow = h + 2 * pad[0] - 2, w + 2 * pad[1] - 2
    th, tw = -(-oh // tile), -(-ow // tile)
    xp = torch.nn.functional.pad(x.to(torch.float64),
                                 (pad[1], tw * tile + 2 - w - pad[1], pad[0], th * tile + 2 - h - pad[0]))
    d = xp.unfold(2, a, tile).unfold(3, a, tile)                         # n c th tw a a
    v = torch.einsum("ij,nctsjl,ml->nctsim", bt, d, bt)
    uu = u.to(torch.float64).permute(0, 1, 3, 2).reshape(a, a, -1, c)[:, :, :k]  # i m k c
    mm = torch.einsum("imkc,nctsim->nktsim", uu, v)
    y = torch.einsum("ij,nktsjl,ml->nktsim", at, mm, at)
    return y.permute(0, 1, 2, 4, 3, 5).reshape(n, k, th * tile, tw * tile)[:, :, :oh, :ow]


# F(4x4) needs at least this many output tiles, else F(2x2) is used
F4_MIN_TILES = 20


def choose_tile(c: int, k: int, oh: int, ow: int) -> int:
    """Tile size for a 3x3 stride-1 convolution with c input and k output channels and an oh x ow
    output, or 0 to keep the direct convolution.

    Each of the (m+2)^2 GEMMs reads a C x K slice of the transformed weights once for all the
    image's tiles, so with few tiles the GEMMs are bound by reading weights, and F(4x4) reads
    36/16 times F(2x2)'s. Measured (x86_64 AVX2+FMA, 1 thread, C = K, relu, ms direct / F(2x2) /
    F(4x4)): 64 at 56x56 4.40 / 3.08 / 2.09; 128 at 28x28 3.68 / 2.37 / 1.63; 128 at 20x20 (25
    F(4x4) tiles) 2.48 / 1.55 / 1.17; 64 at 14x14 (16 tiles) 0.32 / 0.18 / 0.20; 256 at 14x14
    3.81 / 2.29 / 2.45; 512 at 7x7 (4 tiles) 5.83 / 4.66 / 5.38. So F(4x4) from 20 of its tiles,
    F(2x2) below (also 2.25x fewer weight bytes than F(4x4) on the small, deep layers whose
    weights are the largest)."""
    if c < 8 or k < 8 or oh < 4 or ow < 4:
        return 0
    return 4 if -(-oh // 4) * -(-ow // 4) >= F4_MIN_TILES else 2


def rewrite(graph: Graph, enabled: bool = True) -> int:
    """Turn eligible conv2d instructions into conv2d_winograd; returns how many."""
    if not enabled:
        return 0
    done: dict[tuple[int, int], Value] = {}
    count = 0
    for ins in graph.instrs:
        if ins.op != "conv2d" or ins.kind != "op" or len(ins.inputs) < 2:
            continue
        tile = _eligible(ins)
        if not tile:
            continue
        w = ins.inputs[1]
        assert w is not None and w.data is not None
        key = (id(w), tile)
        if key not in done:
            u = transform_weights(w.data, tile)
            done[key] = Value(name=f"{w.name}.winograd{tile}", dtype=torch.float32, shape=tuple(u.shape), data=u)
        bias = ins.inputs[2] if len(ins.inputs) > 2 else None
        ins.become("conv2d_winograd", tile=tile, block=BLOCK)  # pad_h, pad_w, act and its bounds kept
        ins.inputs = [ins.inputs[0], done[key], bias]
        count += 1
    return count


def _eligible(ins: Instr) -> int:
    x, w = ins.inputs[0], ins.inputs[1]
    out = ins.outputs[0]
    if x is None or w is None or w.data is None or w.alias_of is not None:
        return 0
    if any(v is not None and v.dtype != torch.float32 for v in (x, w, out, *ins.inputs[2:])):
        return 0
    if len(w.shape) != 4 or len(x.shape) != 4 or tuple(w.shape[2:]) != (3, 3):
        return 0
    ph, pw = ins.arg("pad_h"), ins.arg("pad_w")
    if any(ins.arg(a) != 1 for a in ("stride_h", "stride_w", "dilation_h", "dilation_w", "groups")) or ph > 2 or pw > 2:
        return 0
    n, c, h, wd = x.shape
    k = w.shape[0]
    if out.shape != (n, k, h + 2 * ph - 2, wd + 2 * pw - 2) or w.shape[1] != c:
        return 0
    return choose_tile(c, k, out.shape[2], out.shape[3])
