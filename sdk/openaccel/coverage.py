"""Core ATen coverage: for every overload PyTorch tags `core` (torch.Tag.core), what openaccel does
with it: the openaccel op(s) its lowering rule emits and the input dtypes it accepts, or the reason
it is refused on purpose (lower.REFUSED), or "missing". docs/ops.md's coverage table is rendered
from here (opset.render_markdown); tests/test_coverage.py checks it is complete and up to date.

How the emitted ops are found, without torch.export: each overload has a small sample call below
(_samples()). The generator runs the sample in eager for each dtype the runtime has (float32, int32,
int64, bool, uint8, int8; index tensors stay int64), builds the edge-dialect node to_edge would
produce from it (view ops become their `_copy` forms: torch's ReplaceViewOpsWithViewCopyOpsPass; the
memory-format ops become ExecuTorch's dim-order ops; out= and in-place forms are functionalized; an
op in to_edge's decomposition table becomes the calls its decomposition makes, recorded by a
dispatch mode) and calls the lowering rule of each on it directly. The dtypes column lists the dtypes whose
sample the rule lowers (eager must accept the dtype too); the op column lists the ops it emits
(the `cast`s the rules insert around a kernel that computes in another dtype are left out unless
the rule emits nothing else). That takes a few seconds for every op and dtype, where exporting a
model per op would take minutes; scripts/opinfo_sweep.py checks the real path (torch.export,
to_edge, the runtime) against eager.

Everything here imports torch inside functions: importing opset.py stays torch-free.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# dtypes the runtime computes in, in table order
DTYPES = ("float32", "int32", "int64", "bool", "uint8", "int8")
# core overloads left out of the table: gradients (training), random numbers (lower/refused.py), and
# the symbolic-size queries (every openaccel shape is static, so they never reach lowering)
EXCLUDED_KINDS = ("backward ops", "random ops", "sym_* size queries")
SWEEP_SUMMARY = Path(__file__).resolve().parents[2] / "docs" / "opinfo_sweep.json"


class D:
    """A sample's data-tensor factory in the dtype under test (index tensors are made with `idx`)."""

    def __init__(self, dtype: Any) -> None:
        import torch

        self.dtype = dtype
        self.gen = torch.Generator().manual_seed(0)

    def __call__(self, *shape: int, positive: bool = False, unit: bool = False) -> Any:
        """A tensor of `shape`: float32 values in N(0, 1) (`positive`: |.| + 0.5, `unit`: in (-0.9,
        0.9)), integers in [-3, 3] ([1, 3] when positive), booleans."""
        import torch

        if self.dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=self.gen).bool()
        if self.dtype.is_floating_point:
            x = torch.randn(shape, generator=self.gen)
            if positive:
                x = x.abs() + 0.5
            if unit:
                x = torch.tanh(x) * 0.9
            return x.to(self.dtype)
        lo = 1 if positive or self.dtype == torch.uint8 else -3
        return torch.randint(lo, 4, shape, generator=self.gen).to(self.dtype)


def idx(hi: int, *shape: int) -> Any:
    import torch

    return torch.arange(int(torch.tensor(shape).prod()) if shape else 1).reshape(shape) % hi


def mask(*shape: int) -> Any:
    import torch

    return (torch.arange(int(torch.tensor(shape).prod())) % 3 == 0).reshape(shape)


Sample = Callable[[D], tuple[tuple[Any, ...], dict[str, Any]]]


def _samples() -> dict[str, Sample]:
    """Overload name -> d -> (args, kwargs): one typical call of each core overload."""
    import torch

    def unary(d: D) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (d(2, 3),), {}

    def unit(d: D) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (d(2, 3, unit=True),), {}

    def positive(d: D) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (d(2, 3, positive=True),), {}

    def binary(d: D) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (d(2, 3), d(3)), {}

    def divisor(d: D) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (d(2, 3), d(3, positive=True)), {}

    def scalar(d: D) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (d(2, 3), 2), {}

    def bn_args(d: D) -> list[Any]:
        return [d(2, 3, 4), d(3), d(3), d(3), d(3, positive=True)]

    s: dict[str, Sample] = {
        "aten._adaptive_avg_pool2d.default": lambda d: ((d(1, 2, 4, 4), [2, 2]), {}),
        "aten._adaptive_avg_pool3d.default": lambda d: ((d(1, 2, 4, 4, 4), [2, 2, 2]), {}),
        "aten._cdist_forward.default": lambda d: ((d(2, 3, 4), d(2, 5, 4), 2.0, None), {}),
        "aten._embedding_bag.default": lambda d: ((d(10, 3), idx(10, 8), torch.tensor([0, 3, 5])), {"mode": 1}),
        "aten._fft_c2r.default": lambda d: ((torch.randn(2, 5, dtype=torch.complex64), [1], 0, 8), {}),
        "aten._fft_r2c.default": lambda d: ((d(2, 8), [1], 0, True), {}),
        "aten._local_scalar_dense.default": lambda d: ((d(),), {}),
        "aten._log_softmax.default": lambda d: ((d(2, 3), 1, False), {}),
        "aten._native_batch_norm_legit.default": lambda d: ((*bn_args(d), True, 0.1, 1e-5), {}),
        "aten._native_batch_norm_legit.no_stats": lambda d: ((d(2, 3, 4), d(3), d(3), True, 0.1, 1e-5), {}),
        "aten._native_batch_norm_legit_no_training.default": lambda d: ((*bn_args(d), 0.1, 1e-5), {}),
        "aten._pdist_forward.default": lambda d: ((d(4, 3), 2.0), {}),
        "aten._softmax.default": lambda d: ((d(2, 3), 1, False), {}),
        "aten._to_copy.default": lambda d: ((d(2, 3),), {"dtype": torch.int32 if d.dtype.is_floating_point
                                                         else torch.float32}),
        "aten.add.Tensor": binary, "aten.add.Scalar": scalar,
        "aten.addmm.default": lambda d: ((d(3), d(2, 4), d(4, 3)), {}),
        "aten.alias.default": unary,
        "aten.amax.default": lambda d: ((d(2, 3), [1]), {}), "aten.amin.default": lambda d: ((d(2, 3), [1]), {}),
        "aten.any.default": unary, "aten.any.dim": lambda d: ((d(2, 3), 1), {}),
        "aten.any.dims": lambda d: ((d(2, 3), [0, 1]), {}),
        "aten.arange.start_step": lambda d: ((0, 5, 1), {"dtype": d.dtype}),
        "aten.argmax.default": lambda d: ((d(2, 3), 1), {}), "aten.argmin.default": lambda d: ((d(2, 3), 1), {}),
        "aten.as_strided.default": lambda d: ((d(2, 3), [3, 2], [1, 3]), {}),
        "aten.atan2.default": binary, "aten.atan2.out": lambda d: ((d(2, 3), d(2, 3)), {"out": d(2, 3)}),
        "aten.avg_pool2d.default": lambda d: ((d(1, 2, 4, 4), [2, 2]), {}),
        "aten.avg_pool3d.default": lambda d: ((d(1, 2, 4, 4, 4), [2, 2, 2]), {}),
        "aten.avg_pool1d.default": lambda d: ((d(1, 2, 6), [2]), {}),
        "aten.adaptive_avg_pool1d.default": lambda d: ((d(1, 2, 6), [3]), {}),
        "aten.resize_.default": lambda d: ((d(2, 3), [6]), {}),
        "aten.bmm.default": lambda d: ((d(2, 3, 4), d(2, 4, 5)), {}),
        "aten.cat.default": lambda d: (([d(2, 3), d(1, 3)], 0), {}),
        "aten.clamp.default": lambda d: ((d(2, 3), -1, 1), {}),
        "aten.clamp.Tensor": lambda d: ((d(2, 3), d(3), d(2, 1)), {}),
        "aten.clone.default": unary,
        "aten.col2im.default": lambda d: ((d(1, 12, 12), [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]), {}),
        "aten.constant_pad_nd.default": lambda d: ((d(2, 3), [1, 1], 0), {}),
        "aten.convolution.default": lambda d: ((d(1, 2, 5, 5), d(3, 2, 3, 3), d(3), [1, 1], [0, 0], [1, 1],
                                                False, [0, 0], 1), {}),
        "aten.copy.default": lambda d: ((d(2, 3), d(2, 3)), {}),
        "aten.cumsum.default": lambda d: ((d(2, 3), 1), {}),
        "aten.diagonal.default": lambda d: ((d(3, 3),), {}),
        "aten.div.Tensor": divisor, "aten.div.Scalar": scalar,
        "aten.div.Tensor_mode": lambda d: ((d(2, 3), d(3, positive=True)), {"rounding_mode": "floor"}),
        "aten.div.Scalar_mode": lambda d: ((d(2, 3), 2), {"rounding_mode": "trunc"}),
        "aten.elu.default": unary,
        "aten.embedding.default": lambda d: ((d(10, 3), idx(10, 4)), {}),
        "aten.empty.memory_format": lambda d: (([2, 3],), {"dtype": d.dtype}),
        "aten.empty_strided.default": lambda d: (([2, 3], [3, 1]), {"dtype": d.dtype}),
        "aten.expand.default": lambda d: ((d(3, 1), [3, 4]), {}),
        "aten.fill.Scalar": scalar,
        "aten.flip.default": lambda d: ((d(2, 3), [0]), {}),
        "aten.fmod.Tensor": divisor, "aten.fmod.Scalar": scalar,
        "aten.full.default": lambda d: (([2, 3], 1), {"dtype": d.dtype}),
        "aten.full_like.default": scalar,
        "aten.gather.default": lambda d: ((d(2, 3), 1, idx(3, 2, 2)), {}),
        "aten.gelu.default": unary,
        "aten.grid_sampler_2d.default": lambda d: ((d(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1, 0, 0, False), {}),
        "aten.hardtanh.default": unary,
        "aten.index.Tensor": lambda d: ((d(4, 3), [idx(4, 2)]), {}),
        "aten.index_put.default": lambda d: ((d(4, 3), [idx(4, 2)], d(2, 3)), {}),
        "aten.index_select.default": lambda d: ((d(4, 3), 0, idx(4, 2)), {}),
        "aten.leaky_relu.default": unary,
        "aten.masked_scatter.default": lambda d: ((d(2, 3), mask(2, 3), d(2, 3)), {}),
        "aten.max.dim": lambda d: ((d(2, 3), 1), {}), "aten.min.dim": lambda d: ((d(2, 3), 1), {}),
        "aten.max_pool2d_with_indices.default": lambda d: ((d(1, 2, 4, 4), [2, 2]), {}),
        "aten.max_pool3d_with_indices.default": lambda d: ((d(1, 2, 4, 4, 4), [2, 2, 2]), {}),
        "aten.maximum.default": binary, "aten.minimum.default": binary,
        "aten.mean.default": unary, "aten.mean.dim": lambda d: ((d(2, 3), [1]), {}),
        "aten.mm.default": lambda d: ((d(2, 3), d(3, 4)), {}),
        "aten.mul.Tensor": binary, "aten.mul.Scalar": scalar,
        "aten.native_dropout.default": lambda d: ((d(2, 3), 0.5, False), {}),
        "aten.native_group_norm.default": lambda d: ((d(2, 4, 3), d(4), d(4), 2, 4, 3, 2, 1e-5), {}),
        "aten.native_layer_norm.default": lambda d: ((d(2, 3), [3], d(3), d(3), 1e-5), {}),
        "aten.nonzero.default": unary,
        "aten.permute.default": lambda d: ((d(2, 3, 4), [2, 0, 1]), {}),
        "aten.pow.Tensor_Tensor": lambda d: ((d(2, 3, positive=True), d(3, positive=True)), {}),
        "aten.pow.Tensor_Scalar": lambda d: ((d(2, 3), 3), {}),
        "aten.pow.Scalar": lambda d: ((2, d(2, 3, positive=True)), {}),
        "aten.prod.default": unary, "aten.prod.dim_int": lambda d: ((d(2, 3), 1), {}),
        "aten.reflection_pad1d.default": lambda d: ((d(1, 2, 5), [1, 1]), {}),
        "aten.reflection_pad2d.default": lambda d: ((d(1, 2, 4, 4), [1, 1, 1, 1]), {}),
        "aten.reflection_pad3d.default": lambda d: ((d(1, 1, 3, 3, 3), [1] * 6), {}),
        "aten.remainder.Tensor": divisor, "aten.remainder.Scalar": scalar,
        "aten.repeat.default": lambda d: ((d(2, 3), [2, 1]), {}),
        "aten.replication_pad2d.default": lambda d: ((d(1, 2, 4, 4), [1, 1, 1, 1]), {}),
        "aten.replication_pad3d.default": lambda d: ((d(1, 1, 3, 3, 3), [1] * 6), {}),
        "aten.scalar_tensor.default": lambda d: ((1,), {"dtype": d.dtype}),
        "aten.scatter.value": lambda d: ((d(3, 4), 1, idx(4, 3, 2), 1), {}),
        "aten.scatter.src": lambda d: ((d(3, 4), 1, idx(4, 3, 2), d(3, 2)), {}),
        "aten.scatter_add.default": lambda d: ((d(3, 4), 1, idx(4, 3, 2), d(3, 2)), {}),
        "aten.scatter_reduce.two": lambda d: ((d(3, 4), 1, idx(4, 3, 2), d(3, 2), "sum"), {}),
        "aten.select.int": lambda d: ((d(2, 3), 1, 1), {}),  # not dim 0: that is an alias
        "aten.select_scatter.default": lambda d: ((d(2, 3), d(3), 0, 1), {}),
        "aten.slice.Tensor": lambda d: ((d(3, 4), 1, 1, 3), {}),
        "aten.slice_scatter.default": lambda d: ((d(4, 3), d(2, 3), 0, 1, 3), {}),
        "aten.sort.default": unary,
        "aten.split_with_sizes.default": lambda d: ((d(3, 4), [1, 3], 1), {}),
        "aten.squeeze.dim": lambda d: ((d(2, 1, 3), 1), {}),
        "aten.squeeze.dims": lambda d: ((d(2, 1, 3), [1]), {}),
        "aten.sub.Tensor": binary, "aten.sub.Scalar": scalar,
        "aten.sum.dim_IntList": lambda d: ((d(2, 3), [1]), {}),
        "aten.topk.default": lambda d: ((d(2, 5), 2), {}),
        "aten.unsqueeze.default": lambda d: ((d(2, 3), 1), {}),
        "aten.upsample_bilinear2d.vec": lambda d: ((d(1, 2, 4, 4), [8, 8], False, None), {}),
        "aten.upsample_nearest2d.vec": lambda d: ((d(1, 2, 4, 4), [8, 8], None), {}),
        "aten.var.dim": lambda d: ((d(2, 3), [1]), {}),
        "aten.var.correction": lambda d: ((d(2, 3), [1]), {"correction": 1}),
        "aten.view.default": lambda d: ((d(2, 3), [3, 2]), {}),
        "aten.where.self": lambda d: ((mask(2, 3), d(2, 3), d(3)), {}),
    }
    for name in ("abs", "ceil", "cos", "cosh", "erf", "exp", "expm1", "floor", "isinf", "isnan", "logical_not",
                 "neg", "reciprocal", "relu", "round", "sigmoid", "sign", "sin", "sinh", "tan", "tanh", "trunc",
                 "asinh", "atan", "bitwise_not"):
        s[f"aten.{name}.default"] = unary
    for name in ("acos", "asin", "atanh"):
        s[f"aten.{name}.default"] = unit
    for name in ("acosh", "log", "log10", "log1p", "log2", "rsqrt", "sqrt"):
        s[f"aten.{name}.default"] = positive
    for name in ("eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor"):
        s[f"aten.{name}.Tensor"] = binary
        s[f"aten.{name}.Scalar"] = scalar
    for name in ("logical_and", "logical_or", "logical_xor"):
        s[f"aten.{name}.default"] = binary
    return s


# ---- the core overloads and their edge names -----------------------------------------------------

def _excluded(name: str, op: Any) -> str | None:
    import torch

    base = name.split(".")[1]
    if "backward" in base:
        return "backward ops"
    # native_dropout stays: with train=False it is deterministic (the identity)
    if torch.Tag.nondeterministic_seeded in op.tags and base != "native_dropout":
        return "random ops"
    if base.startswith("sym_"):
        return "sym_* size queries"
    return None


def core_overloads() -> tuple[list[str], dict[str, list[str]]]:
    """(the core ATen overloads of the table, sorted; the excluded ones by kind). Every registered
    aten schema is looked at (torch.ops.aten's packets are created lazily: dir() lists only those
    already used)."""
    import torch

    kept: list[str] = []
    excluded: dict[str, list[str]] = {k: [] for k in EXCLUDED_KINDS}
    names = {(s.name.split("::", 1)[1], s.overload_name or "default") for s in torch._C._jit_get_all_schemas()
             if s.name.startswith("aten::")}
    for packet, ov in sorted(names):
        op = getattr(getattr(torch.ops.aten, packet), ov)
        if torch.Tag.core not in op.tags:
            continue
        name = f"aten.{packet}.{ov}"
        kind = _excluded(name, op)
        if kind is None:
            kept.append(name)
        else:
            excluded[kind].append(name)
    return sorted(kept), {k: sorted(v) for k, v in excluded.items()}


def overload(name: str) -> Any:
    import torch

    ns, packet, ov = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), packet), ov)


@functools.cache
def _decompositions() -> dict[Any, Any]:
    """to_edge's decomposition table (the core ATen one, less the ops openaccel asks it to keep)."""
    from executorch.exir.tracer import _default_decomposition_table

    from .exporter import preserved_ops

    table = dict(_default_decomposition_table())
    for op in preserved_ops():
        table.pop(op, None)
    return table


def decomposed(name: str) -> bool:
    """Whether to_edge decomposes the overload into others before openaccel sees it."""
    return overload(name) in _decompositions()


def edge_target(name: str) -> tuple[Any, str]:
    """(the op to_edge turns `name` into, a note on the renaming or "")."""
    from executorch.exir.passes.dim_order_ops_registry import DimOrderOpsMap
    from torch._export.passes.replace_view_ops_with_view_copy_ops_pass import get_view_copy_of_view_op

    from .ir import op_name_of

    op = overload(name)
    _, packet, ov = name.split(".")
    if ov == "out":  # torch.export functionalizes out= forms ...
        return overload(f"aten.{packet}.default"), "out= form, functionalized"
    args = op._schema.arguments
    if packet.endswith("_") and args and args[0].alias_info is not None and args[0].alias_info.is_write:
        return overload(f"aten.{packet[:-1]}.{ov}"), "in-place form, functionalized"  # ... and in-place ones
    copy = get_view_copy_of_view_op(op._schema)
    if copy is not None:
        return copy, "view, as its copy"
    for src, dst in DimOrderOpsMap.items():
        if op_name_of(src) == name:
            return dst, "dim-order form"
    return op, ""


# ---- running a rule on a sample ------------------------------------------------------------------

@dataclass
class Row:
    overload: str
    edge: str
    note: str
    status: str                      # "lowered", "refused", "missing"
    ops: list[str]
    dtypes: list[str]
    why: str = ""
    first_only: bool = False         # lowered when the model reads its first output only

    def cell(self) -> str:
        if self.status == "lowered":
            if not self.dtypes:
                return "lowered, but not for this table's sample (see the rule)"
            ops = ", ".join(f"`{o}`" for o in self.ops) if self.ops else "none: a zero-copy alias of its input"
            return ops + (" (the first output only)" if self.first_only else "")
        if self.status == "refused":
            return f"refused: {self.why}"
        return "missing"


def _record_decomposition(name: str, args: Any, kwargs: Any, depth: int = 0) -> list[tuple[str, Any, Any, Any]]:
    """The ATen calls (name, args, kwargs, result) to_edge's decomposition of `name` leaves, each
    decomposed again while the table has it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from .ir import op_name_of

    calls: list[tuple[str, Any, Any, Any]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            result = func(*args, **(kwargs or {}))
            calls.append((op_name_of(func), args, dict(kwargs or {}), result))
            return result

    with Record():
        _decompositions()[overload(name)](*args, **kwargs)
    if depth > 8:
        raise RecursionError(f"coverage: the decomposition of {name} does not end")
    out: list[tuple[str, Any, Any, Any]] = []
    for call in calls:
        out += _record_decomposition(call[0], call[1], call[2], depth + 1) if decomposed(call[0]) else [call]
    return out


def _lower_call(name: str, args: Any, kwargs: Any, result: Any, first_only: bool) -> list[str] | None:
    """The openaccel ops the rule for `name`'s edge op emits for one call (the model reading every
    output, or the first only); None when there is no rule or it refuses the call (an
    OpenAccelError). Any other exception is a bug and propagates."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_map

    from .errors import OpenAccelError
    from .exporter.lower import RULES, LowerCtx
    from .ir import AtenNode, Graph, Value, op_name_of

    target, _ = edge_target(name)
    edge = op_name_of(target)
    if edge not in RULES:
        return None
    values: dict[int, Value] = {}

    def value_of(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        if id(x) not in values:
            values[id(x)] = Value(name=f"in{len(values)}", dtype=x.dtype, shape=tuple(x.shape))
        return values[id(x)]

    vargs, vkwargs = tree_map(value_of, (tuple(args), dict(kwargs)))
    if edge.startswith("dim_order_ops."):
        vkwargs.pop("memory_format", None)
    vkwargs.pop("out", None)
    leaves = tree_flatten(result)[0]
    outs = [Value(name=f"out{i}", dtype=r.dtype, shape=tuple(r.shape)) if isinstance(r, torch.Tensor) else None
            for i, r in enumerate(leaves)]
    read = outs[:1] if first_only else outs
    graph = Graph(name="forward", inputs=list(values.values()), outputs=[o for o in read if o is not None])
    node = AtenNode(target=target, args=tuple(vargs), kwargs=vkwargs, outputs=outs)
    graph.nodes = [node]
    ctx = LowerCtx(graph)
    ctx.node = node
    try:
        RULES[edge](ctx, node)
    except OpenAccelError:
        return None
    return [i.op for i in ctx.instrs]


def _lower_once(name: str, sample: Sample, dtype_name: str, first_only: bool) -> list[str] | None:
    """The openaccel ops emitted for the sample of `name` in `dtype_name` (for an op torch.export
    decomposes, its parts'); None when eager or a rule refuses that dtype."""
    import torch

    args, kwargs = sample(D(getattr(torch, dtype_name)))
    try:
        if decomposed(name):
            calls = _record_decomposition(name, args, kwargs)
        else:
            calls = [(name, args, kwargs, overload(name)(*args, **kwargs))]
    except Exception:
        return None  # eager does not take this dtype
    emitted: list[str] = []
    for k, (call, cargs, ckwargs, result) in enumerate(calls):
        got = _lower_call(call, cargs, ckwargs, result, first_only and k == len(calls) - 1)
        if got is None:
            return None
        emitted += got
    return emitted


def _status(name: str, supported: set[str], refused: dict[str, str]) -> tuple[str, str]:
    """("lowered" | "refused" | "missing", the reason) of one edge-level overload."""
    from .ir import op_name_of

    edge = op_name_of(edge_target(name)[0])
    if edge in supported:
        return "lowered", ""
    if edge in refused or name in refused:
        return "refused", refused.get(edge) or refused[name]
    return "missing", ""


def coverage() -> tuple[list[Row], dict[str, list[str]]]:
    """The table's rows (one per core overload) and the excluded overloads by kind."""
    import torch

    from .exporter.lower import REFUSED, supported_edge_ops
    from .ir import op_name_of

    supported = set(supported_edge_ops())
    samples = _samples()
    names, excluded = core_overloads()
    rows: list[Row] = []
    for name in names:
        target, note = edge_target(name)
        edge = op_name_of(target)
        if decomposed(name):
            if name not in samples:
                raise KeyError(f"coverage: {name} has no sample in openaccel/coverage.py's _samples(): add one")
            args, kwargs = samples[name](D(torch.float32))
            parts = list(dict.fromkeys(c[0] for c in _record_decomposition(name, args, kwargs)))
            edge = ", ".join(op_name_of(edge_target(p)[0]) for p in parts)
            note = "decomposed by to_edge"
            states = [_status(p, supported, REFUSED) for p in parts]
            status = next((st for st in ("missing", "refused") if any(s == st for s, _ in states)), "lowered")
            why = "; ".join(w for s, w in states if s == "refused")
        else:
            status, why = _status(name, supported, REFUSED)
        if status != "lowered":
            rows.append(Row(name, edge, note, status, [], [], why))
            continue
        if name not in samples:
            raise KeyError(f"coverage: {name} has a lowering rule ({edge}) but no sample in "
                           "openaccel/coverage.py's _samples(): add one")
        for first_only in (False, True):
            emitted: list[str] = []
            ok: list[str] = []
            for dt in DTYPES:
                got = _lower_once(name, samples[name], dt, first_only)
                if got is None:
                    continue
                ok.append(dt)
                emitted += [o for o in dict.fromkeys(got) if o not in emitted]
            if ok:
                break
        main = [o for o in emitted if o != "cast"] or emitted
        rows.append(Row(name, edge, note, "lowered", main, ok, first_only=first_only))
    return rows, excluded


# ---- docs/ops.md -----------------------------------------------------------------------------------

def render_coverage() -> str:
    import torch

    rows, excluded = coverage()
    n = {s: sum(r.status == s for r in rows) for s in ("lowered", "refused", "missing")}
    lines = [
        "## Core ATen coverage", "",
        f"Every overload torch {torch.__version__.split('+')[0]} tags `core` (`torch.Tag.core`), generated by "
        "`sdk/openaccel/coverage.py`: the edge op(s) `to_edge` makes of it (a view becomes its `_copy` form; an "
        "op of its decomposition table, the ops the decomposition calls), the openaccel op(s) the lowering rules "
        "emit and the input dtypes they lower (the rules run on a small sample in each dtype the runtime has; "
        "the `cast`s inserted around kernels that compute in another dtype are not listed), the reason it is "
        "refused, or \"missing\".",
        "",
        f"{len(rows)} overloads: {n['lowered']} lowered, {n['refused']} refused, {n['missing']} missing. "
        "Not listed: " + "; ".join(f"{k} ({', '.join(f'`{x}`' for x in v)})" for k, v in excluded.items() if v)
        + ".", "",
        "| core ATen overload | edge op | openaccel | dtypes |", "|---|---|---|---|",
    ]
    for r in rows:
        edge = "same" if r.edge == r.overload else f"`{r.edge}` ({r.note})" if r.note else f"`{r.edge}`"
        cell = r.cell().replace("|", "\\|")
        lines.append(f"| `{r.overload}` | {edge} | {cell} | {', '.join(r.dtypes) or '-'} |")
    lines.append("")
    return "\n".join(lines) + _render_sweep()


def _render_sweep() -> str:
    """The OpInfo sweep's figures (docs/opinfo_sweep.json, written by scripts/opinfo_sweep.py --record)."""
    if not SWEEP_SUMMARY.exists():
        return ""
    s = json.loads(SWEEP_SUMMARY.read_text())
    c = s["counts"]
    lines = [
        "", "## OpInfo sweep", "",
        "PyTorch's own OpInfo samples (`op_db`), float32, the first "
        f"{s['samples']} samples of each op, each wrapped in a module, through `oa.export` / `oa.load` on the "
        f"host and compared with eager at rtol = atol = {s['rtol']:g} (`scripts/opinfo_sweep.py`; a fixed "
        "subset runs in `make test`: `tests/test_opinfo.py`). Last full run "
        f"({s['date']}, torch {s['torch']}):", "",
        "```sh", s["command"], "```", "",
        f"| of {s['ops']} ops | match | refused at export | wrong answer | crash / run-time error |",
        "|---|---|---|---|---|",
        f"| | {c['match']} | {c['refused']} | {c['wrong']} | {c['crash']} |", "",
        f"Left out: {c['export-failed']} ops that `torch.export` (or ExecuTorch's `to_edge`, before any openaccel "
        f"rule) cannot export and {c['skipped']} skipped (complex outputs, uninitialized memory such as `empty`, "
        "no float32 sample).", "",
        "The edge ops that block the most refused OpInfo ops (an OpInfo op can name several):", "",
        "| edge op | OpInfo ops refused | why |", "|---|---|---|",
    ]
    from .exporter.lower import REFUSED, supported_edge_ops

    lowered = set(supported_edge_ops())
    for op, k in list(s["refused_by_op"].items())[:25]:
        reason = s.get("rule_refuses", {}).get(op)
        if op in lowered:
            why = "its rule refuses the form: " + (reason or "?")
        elif reason:
            why = reason
        elif op in REFUSED:
            why = "refused on purpose"
        else:
            why = "no lowering rule"
        lines.append(f"| `{op}` | {k} | {why.replace('|', '/')} |")
    for cat in ("wrong", "crash"):
        if s.get(cat):
            lines += ["", f"{cat}: {', '.join(s[cat])}"]
    lines.append("")
    return "\n".join(lines)
