"""Lowering rules: F.embedding_bag / nn.EmbeddingBag (aten._embedding_bag_forward_only, or
aten._embedding_bag when the weight is a trainable parameter).

Models read the first output (the bags); the other three (offset2bag, bag_size, max_indices) are
PyTorch's bookkeeping for the backward pass and are refused when something reads them. A 2-D input
[B, N] arrives flattened, with offsets from arange(0, B * N, N).
"""

from __future__ import annotations

import torch

from ...ir import AtenNode
from ...opset import encode_args
from . import LowerCtx, rule

_MODES = {0: "sum", 1: "mean", 2: "max"}


@rule("aten._embedding_bag_forward_only.default", "aten._embedding_bag.default")
def embedding_bag(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    weight, indices, offsets = (ctx.tensor_arg(a, k) for k in ("weight", "indices", "offsets"))
    out = ctx.output(node)
    read = [name for name, v in zip(("offset2bag", "bag_size", "max_indices"), node.outputs[1:]) if ctx.is_used(v)]
    if read:
        raise ctx.unsupported(f"output(s) {', '.join(read)} are read (only the bags, output 0, are supported)")
    if weight.dtype != torch.float32:
        raise ctx.unsupported(f"weight dtype {weight.dtype} (supported: float32)")
    for name, t in (("indices", indices), ("offsets", offsets)):
        if t.dtype not in (torch.int32, torch.int64):
            raise ctx.unsupported(f"{name} dtype {t.dtype} (supported: int32, int64)")
    if len(indices.shape) != 1 or len(offsets.shape) != 1:
        raise ctx.unsupported(f"indices {list(indices.shape)} / offsets {list(offsets.shape)} (expected 1-D)")
    mode = int(a["mode"])
    if mode not in _MODES:
        raise ctx.unsupported(f"mode {mode}")
    psw = a["per_sample_weights"]
    if psw is not None:
        psw = ctx.tensor_arg(a, "per_sample_weights")
        if mode != 0:
            raise ctx.unsupported(f"per_sample_weights with mode {_MODES[mode]} (only sum)")
        psw = ctx.cast(psw, torch.float32)
    padding_idx = a["padding_idx"]
    padding_idx = -1 if padding_idx is None else int(padding_idx)
    if padding_idx < -1:  # F.embedding_bag passes it normalized; a direct call may count from the end
        padding_idx += weight.shape[0]
    ints, _ = encode_args("embedding_bag", mode=mode, include_last_offset=int(bool(a["include_last_offset"])),
                          padding_idx=padding_idx)
    ctx.emit("embedding_bag", [weight, indices, offsets, psw] if psw is not None else [weight, indices, offsets],
             [out], ints=ints)
