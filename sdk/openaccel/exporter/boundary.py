"""The CPU boundary: the CPU-specific rewrites (Winograd, linear packing, channels-last layout,
block fusion) run on the CPU's part of the graph only, so none of them can turn an op an
accelerator was given into a CPU-only op, and none has to remember to skip one.

`cpu_part(graph)` yields a graph of the CPU's instructions alone (placement.assign has run): its
inputs are the method's inputs and the values other devices produce for it, its outputs the
method's outputs and every value another device reads, so a rewrite that keeps the graph's
outputs intact keeps what the other devices need. Afterwards the rewritten CPU instructions and
the other devices' instructions are merged back into one order: each chain keeps its own order,
every instruction comes after the instructions that write what it reads, and otherwise the
original order is kept (a new instruction goes as early as its inputs allow, after the CPU
instruction it followed). When the whole graph is on the CPU the rewrites get the graph itself.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import ExportError
from ..ir import Graph, Instr, Value
from .memory_plan import root_of

CPU_SLOT = 0


@contextmanager
def cpu_part(graph: Graph, pass_name: str = "") -> Iterator[Graph]:
    mine = [i for i in graph.instrs if i.device == CPU_SLOT]
    if len(mine) == len(graph.instrs):
        yield graph
        return
    others = [i for i in graph.instrs if i.device != CPU_SLOT]
    from_others: list[Value] = []
    for ins in others:
        from_others.extend(ins.outputs)
    to_others = [v for ins in others for v in ins.inputs if v is not None]
    sub = Graph(graph.name, inputs=_unique([*graph.inputs, *from_others]),
                outputs=_unique([*graph.outputs, *to_others]), instrs=mine)
    order = {id(i): k for k, i in enumerate(graph.instrs)}
    yield sub
    for ins in sub.instrs:
        if ins.device != CPU_SLOT:
            raise ExportError(f"internal error: the CPU pass '{pass_name}' put a {ins.op} instruction on "
                              f"device slot {ins.device}")
    graph.instrs = merge(sub.instrs, others, order, pass_name)


def _unique(values: list[Value]) -> list[Value]:
    seen: set[Value] = set()
    out = []
    for v in values:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def merge(cpu: list[Instr], others: list[Instr], order: dict[int, int], pass_name: str = "") -> list[Instr]:
    """One order for the CPU's instructions `cpu` (rewritten) and the other devices' `others`
    (untouched); `order` is each original instruction's index before the rewrite."""
    # priority: an original instruction keeps its index; one the pass added (or moved) goes right
    # after the CPU instruction before it, as soon as what it reads exists
    prio: dict[int, tuple[int, int]] = {}
    last, extra = -1, 0
    for ins in cpu:
        k = order.get(id(ins))
        if k is not None and k > last:
            last, extra = k, 0
            prio[id(ins)] = (k, 0)
        else:
            extra += 1
            prio[id(ins)] = (last, extra)
    for ins in others:
        prio[id(ins)] = (order[id(ins)], 0)
    every = [*cpu, *others]
    # edges: each chain in order; writers of a buffer before its readers
    after: dict[int, list[Instr]] = {id(i): [] for i in every}
    waiting: dict[int, int] = {id(i): 0 for i in every}

    def edge(a: Instr, b: Instr) -> None:
        after[id(a)].append(b)
        waiting[id(b)] += 1

    for chain in (cpu, others):
        for a, b in itertools.pairwise(chain):
            edge(a, b)
    writers: dict[Value, list[Instr]] = {}
    for ins in every:
        for o in ins.outputs:
            writers.setdefault(root_of(o)[0], []).append(ins)
    cpu_ids = {id(i) for i in cpu}
    for ins in every:
        for v in ins.inputs:
            if v is None:
                continue
            for w in writers.get(root_of(v)[0], []):
                if w is not ins and (id(w) in cpu_ids) != (id(ins) in cpu_ids):
                    edge(w, ins)
    ready = [(prio[id(i)], n, i) for n, i in enumerate(every) if waiting[id(i)] == 0]
    heapq.heapify(ready)
    index = {id(i): n for n, i in enumerate(every)}
    out: list[Instr] = []
    while ready:
        _, _, ins = heapq.heappop(ready)
        out.append(ins)
        for b in after[id(ins)]:
            waiting[id(b)] -= 1
            if waiting[id(b)] == 0:
                heapq.heappush(ready, (prio[id(b)], index[id(b)], b))
    if len(out) != len(every):
        stuck = [i.op for i in every if waiting[id(i)] > 0][:5]
        raise ExportError(f"internal error: after the CPU pass '{pass_name}' its instructions and the other "
                          f"devices' cannot be ordered (a dependency cycle through {', '.join(stuck)})")
    return out
