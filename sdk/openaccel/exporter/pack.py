"""Linear weights packed at export: `linear` -> `linear_packed` where the CPU's GEMM pays for it.

The fast `linear` kernel packs W^T into panels of 16 output features on every run (the GEMM's B
side). With many rows that is one transposing copy of the whole weight per call: on the GPT
benchmark's 128-token linears the packing took 15% of the model's time. Packed here once, into
the panels the AVX2 micro-kernel reads ([ceil(N / 16), K, 16], zero past N; NEON and the portable
kernels read the same panels through row offsets), the kernel reads them in place, as conv2d_nhwc
does with its weights.

Only linears with more than GEMV_MAX_ROWS rows are packed: below that the GEMV kernel reads W in
place and packing gains nothing. Only the CPU's linears are packed (the pipeline gives this pass the
CPU's part of the graph, exporter/boundary.py): accelerators implement `linear` on the [N, K] weight.
"""

from __future__ import annotations

import torch

from ..ir import Graph, Value
from ..opset import CPU_GEMV_MAX_ROWS
from .layout import BLOCK, pack_weights

GEMV_MAX_ROWS = CPU_GEMV_MAX_ROWS  # the runtime's GEMV threshold (opset.py)


def pack_linear_weight(w: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """[N, K] -> [ceil(N / block), K, block]: panel q holds output features q * block + j in
    column j, zero past N (conv2d_nhwc's panels of a 1x1 convolution with K input channels)."""
    n, k = w.shape
    return pack_weights(w.reshape(n, k, 1, 1), block).reshape(-(-n // block), k, block)


def rewrite(graph: Graph) -> int:
    """Turn eligible `linear` instructions into `linear_packed`; returns how many."""
    packed: dict[int, Value] = {}
    count = 0
    for ins in graph.instrs:
        if ins.op != "linear" or ins.kind != "op" or len(ins.inputs) < 2:
            continue
        x, w = ins.inputs[0], ins.inputs[1]
        if x is None or w is None or w.data is None or w.alias_of is not None or len(w.shape) != 2:
            continue
        if w.dtype != torch.float32 or x.dtype != torch.float32:
            continue
        n, k = w.shape
        if k == 0 or n == 0 or x.numel // k <= GEMV_MAX_ROWS:
            continue
        if id(w) not in packed:
            data = pack_linear_weight(w.data)
            packed[id(w)] = Value(name=f"{w.name}.packed", dtype=w.dtype, shape=tuple(data.shape), data=data)
        ins.become("linear_packed", block=BLOCK)  # act and its bounds kept
        ins.inputs = [x, packed[id(w)], *ins.inputs[2:]]
        count += 1
    return count
