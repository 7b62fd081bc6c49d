"""Fusion on openaccel instructions: an activation that only consumes a convolution's or a
linear layer's output moves into that op's epilogue (`act` argument), saving a pass over the
tensor. relu -> act 1; hardtanh / clamp with both bounds (relu6) -> act 2 with [min, max]."""

from __future__ import annotations

from ..ir import Graph, Instr, Value
from .memory_plan import root_of

_FUSABLE = {"conv2d": (7, 0), "linear": (0, 0)}  # op -> (index of `act` in ints, index of act_min in floats)


def _activation(ins: Instr) -> tuple[int, float, float] | None:
    if ins.op == "relu":
        return 1, 0.0, 0.0
    if ins.op == "hardtanh" and len(ins.floats) >= 2:
        return 2, ins.floats[0], ins.floats[1]
    if ins.op == "clamp" and len(ins.ints) >= 2 and ins.ints[0] and ins.ints[1] and len(ins.floats) >= 2:
        return 2, ins.floats[0], ins.floats[1]
    return None


def fuse_activations(graph: Graph) -> int:
    """Returns how many activations were fused."""
    uses: dict[Value, int] = {}
    for ins in graph.instrs:
        for v in ins.inputs:
            if v is not None:
                r = root_of(v)[0]
                uses[r] = uses.get(r, 0) + 1
    outputs = {root_of(v)[0] for v in graph.outputs}
    producer: dict[Value, Instr] = {}
    for ins in graph.instrs:
        for o in ins.outputs:
            producer[o] = ins
    removed: set[int] = set()
    fused = 0
    for ins in graph.instrs:
        act = _activation(ins)
        if act is None or ins.inputs[0] is None:
            continue
        src = ins.inputs[0]
        prod = producer.get(src)
        if prod is None or prod.op not in _FUSABLE or src.alias_of is not None:
            continue
        if uses.get(src, 0) != 1 or src in outputs or prod.device != ins.device:
            continue
        if src.dtype != ins.outputs[0].dtype or src.shape != ins.outputs[0].shape:
            continue
        act_i, _ = _FUSABLE[prod.op]
        ints = list(prod.ints) + [0] * max(0, act_i + 1 - len(prod.ints))
        if ints[act_i] != 0:
            continue
        ints[act_i] = act[0]
        prod.ints = ints
        prod.floats = [act[1], act[2]] if act[0] == 2 else list(prod.floats)
        prod.outputs = [ins.outputs[0]]
        removed.add(id(ins))
        fused += 1
    graph.instrs = [i for i in graph.instrs if id(i) not in removed]
    return fused
