"""Memory planning: lifetimes, in-place reuse and greedy best-fit placement into one arena.

Every non-constant value lives in a *buffer*: the value itself, or the value it aliases (views
are zero-copy). A buffer is live from the instruction that first writes it to the last
instruction that reads any of its aliases (graph inputs for the whole run, graph outputs to
the end). Buffers are placed largest first at the lowest offset gap that fits best among buffers
whose lifetimes overlap (the TFLM / ExecuTorch "greedy by size" family).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Graph, Value, dtype_size
from ..opset import OPS

ALIGNMENT = 64


def root_of(v: Value) -> tuple[Value, int]:
    """The value whose bytes `v` views, and `v`'s byte offset inside it."""
    off = 0
    seen = 0
    while v.alias_of is not None:
        off += v.alias_offset
        v = v.alias_of
        seen += 1
        if seen > 10_000:
            raise AssertionError("alias cycle")
    return v, off


@dataclass
class MemoryPlan:
    pool_sizes: list[int]
    naive_bytes: int
    placement: dict[Value, tuple[int, int]] = field(default_factory=dict)  # value -> (pool, offset)
    inplace_reuses: int = 0

    @property
    def arena_bytes(self) -> int:
        return sum(self.pool_sizes)


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _last_uses(graph: Graph) -> dict[Value, int]:
    """Last instruction index reading each buffer root (len(instrs) for graph outputs)."""
    last: dict[Value, int] = {}
    end = len(graph.instrs)
    for i, ins in enumerate(graph.instrs):
        for v in ins.inputs:
            if v is not None:
                r, _ = root_of(v)
                last[r] = max(last.get(r, -1), i)
        for v in ins.outputs:
            r, _ = root_of(v)
            last[r] = max(last.get(r, -1), i)
    for v in graph.outputs:
        r, _ = root_of(v)
        last[r] = end
    for v in graph.inputs:
        # inputs stay intact for the whole run, so executing again (or reading them back) works
        r, _ = root_of(v)
        last[r] = end
    return last


def apply_inplace(graph: Graph) -> int:
    """Let an elementwise op write over an input that dies at that op (same shape and bytes)."""
    last = _last_uses(graph)
    protected = {root_of(v)[0] for v in graph.inputs}
    outputs = {root_of(v)[0] for v in graph.outputs}
    reused = 0
    for i, ins in enumerate(graph.instrs):
        if ins.kind != "op":
            continue
        k = OPS[ins.op].inplace
        if k is None or k >= len(ins.inputs) or len(ins.outputs) != 1:
            continue
        src, out = ins.inputs[k], ins.outputs[0]
        if src is None or out.alias_of is not None:
            continue
        root, off = root_of(src)
        if (root.is_const or root in protected or root in outputs or last.get(root) != i
                or src.shape != out.shape or src.nbytes != out.nbytes):
            continue
        # another input viewing a different part of the same buffer would be overwritten
        # before it is read; so would any other input of an op that is not elementwise (scatter's
        # src when it is self: the loader allows only elementwise ops to share that way)
        elementwise = OPS[ins.op].family in ("elementwise", "binary")
        if any(v is not None and (v is not src or (not elementwise and j != k)) and root_of(v)[0] is root
               and (not elementwise or root_of(v)[1] != off or v.shape != src.shape)
               for j, v in enumerate(ins.inputs)):
            continue
        out.alias_of = root
        out.alias_offset = off
        last[root] = max(last.get(out, i), i)
        if out in outputs:
            outputs.add(root)
        reused += 1
    return reused


def plan_memory(graph: Graph, inplace: bool = True, n_pools: int = 1) -> MemoryPlan:
    """Plan every device's pool. A buffer lives in the pool of the device that produces it
    (graph.homes from placement; everything on the CPU, pool 0, without it)."""
    reused = apply_inplace(graph) if inplace else 0
    last = _last_uses(graph)
    first: dict[Value, int] = {}
    for v in graph.inputs:
        first[root_of(v)[0]] = -1
    for i, ins in enumerate(graph.instrs):
        for v in ins.outputs:
            r, _ = root_of(v)
            first.setdefault(r, i)
    homes = graph.homes
    buffers = [r for r in first if not r.is_const]
    naive = sum(_align(b.nbytes) for b in buffers)
    offsets: dict[Value, int] = {}
    sizes = [0] * n_pools
    for pool in range(n_pools):
        mine = [b for b in buffers if homes.get(b, 0) == pool]
        sizes[pool] = _place(mine, first, last, offsets)
    plan = MemoryPlan(pool_sizes=sizes, naive_bytes=naive, inplace_reuses=reused)
    every = set(graph.inputs) | set(graph.outputs)
    for ins in graph.instrs:
        every.update(v for v in ins.inputs if v is not None)
        every.update(ins.outputs)
    for v in every:
        r, off = root_of(v)
        if not r.is_const:
            pool = homes.get(r, 0)
            plan.placement[v] = (pool, offsets[r] + off)
            if v.numel == 0:  # the format bounds an empty tensor's dims by its pool (docs/format.md)
                sizes[pool] = max(sizes[pool], _align(nominal_bytes(v)))
    return plan


def nominal_bytes(v: Value) -> int:
    """The bytes `v`'s shape describes with its zero dims counted as 1: the runtime requires a
    tensor's pool to hold that much even when it has no elements (its kernels still loop over the
    other dims), so an empty tensor grows its pool to it."""
    n = dtype_size(v.dtype)
    for d in v.shape:
        n *= d or 1
    return n


def _place(buffers: list[Value], first: dict[Value, int], last: dict[Value, int],
           offsets: dict[Value, int]) -> int:
    """Greedy by size, best fit among lifetime-overlapping buffers; returns the pool size."""
    order = sorted(buffers, key=lambda b: (-b.nbytes, first[b]))
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, first, last)
    for b in order:
        lo, hi = first[b], last.get(b, first[b])
        size = _align(max(b.nbytes, 1))
        busy = sorted((o, s) for (o, s, f, last_use) in placed if not (last_use < lo or f > hi))
        best: int | None = None
        best_gap: int | None = None
        cursor = 0
        for o, s in busy:
            gap = o - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, o + s)
        if best is None:
            best = cursor
        offsets[b] = best
        placed.append((best, size, lo, hi))
    return max((o + s for (o, s, _, _) in placed), default=0)
