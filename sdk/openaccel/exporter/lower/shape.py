"""Lowering rules: shape ops (see opset.py for the openaccel side).

Views that keep the bytes contiguous become zero-copy aliases (`ctx.alias`): reshapes,
squeeze/unsqueeze, contiguous clones, permutes that only move size-1 dims, and slices / selects /
splits along the outermost non-size-1 dim with step 1. Everything else is a copy instruction.
Dims, slice bounds and indices are normalized here so kernels get canonical arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import AtenNode, Value, dtype_size
from . import LowerCtx, rule

CAT_MAX_INPUTS = 64
INT64_MAX = 2**63 - 1


# ---- helpers --------------------------------------------------------------------------------


def _norm_dim(ctx: LowerCtx, dim: int, ndim: int, what: str = "dim") -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise ctx.unsupported(f"{what} = {dim} is out of range for a {ndim}-dim tensor")
    return dim + n if dim < 0 else dim


def _prod(shape: Sequence[int]) -> int:
    p = 1
    for s in shape:
        p *= s
    return p


def _leading_ones(shape: Sequence[int], dim: int) -> bool:
    """True when every dim before `dim` has size 1: a contiguous range along `dim` is then a
    contiguous byte range of the tensor."""
    return _prod(shape[:dim]) == 1


def _inner_bytes(v: Value, dim: int) -> int:
    return _prod(v.shape[dim + 1:]) * dtype_size(v.dtype)


def _alias(ctx: LowerCtx, out: Value, src: Value, byte_offset: int = 0) -> None:
    if out.dtype != src.dtype:
        raise ctx.unsupported(f"a view changing dtype {src.dtype} -> {out.dtype}")
    ctx.alias(out, src, byte_offset)


# ---- zero-copy reinterpretations --------------------------------------------------------------

@rule("aten.view_copy.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.view.default",
      "aten.unsqueeze_copy.default", "aten.squeeze_copy.dims", "aten.squeeze_copy.dim",
      "aten.squeeze_copy.default", "aten.alias_copy.default", "aten.detach_copy.default",
      "aten.lift_fresh_copy.default", "aten.clone.default", "dim_order_ops._clone_dim_order.default")
def reinterpret(ctx: LowerCtx, node: AtenNode) -> None:
    # Tensors are dense row-major in openaccel: a clone (whatever memory format / dim order it asks
    # for) has the same logical values, and nothing writes in place into a live buffer.
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    if x.numel != out.numel:
        raise ctx.unsupported(f"a view from {list(x.shape)} to {list(out.shape)} changes the element count")
    _alias(ctx, out, x)


# ---- permutations --------------------------------------------------------------------------------

def _permute(ctx: LowerCtx, x: Value, out: Value, dims: Sequence[int]) -> None:
    nd = len(x.shape)
    perm = [_norm_dim(ctx, int(d), nd, "dims") for d in dims]
    if sorted(perm) != list(range(nd)):
        raise ctx.unsupported(f"dims {list(dims)} is not a permutation of the {nd} dims")
    moved = [d for d in perm if x.shape[d] != 1]
    if moved == sorted(moved):
        _alias(ctx, out, x)  # only size-1 dims move: the bytes are in the same order
        return
    ctx.emit("permute", [x], [out], ints=perm)


@rule("aten.permute_copy.default", "aten.permute.default")
def permute(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    _permute(ctx, ctx.tensor_arg(a), ctx.output(node), list(a["dims"]))


@rule("aten.transpose_copy.int", "aten.transpose.int")
def transpose(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = ctx.tensor_arg(a)
    nd = len(x.shape)
    d0, d1 = _norm_dim(ctx, int(a["dim0"]), nd, "dim0"), _norm_dim(ctx, int(a["dim1"]), nd, "dim1")
    perm = list(range(nd))
    if nd:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    _permute(ctx, x, ctx.output(node), perm)


@rule("aten.t_copy.default", "aten.t.default")
def t(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = ctx.tensor_arg(a)
    _permute(ctx, x, ctx.output(node), [1, 0] if len(x.shape) == 2 else list(range(len(x.shape))))


# ---- broadcasting and tiling ----------------------------------------------------------------------

@rule("aten.expand_copy.default", "aten.expand.default")
def expand(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    if len(out.shape) < len(x.shape):
        raise ctx.unsupported(f"expand from {list(x.shape)} to fewer dims {list(out.shape)}")
    if out.numel == x.numel:
        _alias(ctx, out, x)  # nothing is broadcast (only leading size-1 dims are added)
        return
    ctx.emit("expand", [x], [out])


@rule("aten.repeat.default")
def repeat(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    reps = [int(r) for r in a["repeats"]]
    if len(reps) < len(x.shape):
        raise ctx.unsupported(f"repeats {reps} has fewer entries than the input has dims ({len(x.shape)})")
    if any(r < 0 for r in reps):
        raise ctx.unsupported(f"negative repeats {reps}")
    if out.numel == x.numel:
        _alias(ctx, out, x)  # every repeat is 1 (or the tensor is empty)
        return
    ctx.emit("repeat", [x], [out])


# ---- slicing ----------------------------------------------------------------------------------

def _slice_bounds(size: int, start: int | None, end: int | None, step: int) -> tuple[int, int, int]:
    """PyTorch's slice normalization: negative bounds count from the end, then clamp."""
    s = 0 if start is None else int(start)
    e = INT64_MAX if end is None else int(end)
    if s < 0:
        s += size
    if e < 0:
        e += size
    s = min(max(s, 0), size)
    e = min(max(e, s), size)
    length = 0 if e == s else (e - s - 1) // step + 1
    return s, e, length


def _slice(ctx: LowerCtx, x: Value, out: Value, dim: int, start: int | None, end: int | None,
           step: int) -> None:
    if not x.shape:
        raise ctx.unsupported("slicing a 0-dim tensor")
    dim = _norm_dim(ctx, dim, len(x.shape))
    if step < 1:
        raise ctx.unsupported(f"step = {step} (must be positive)")
    s, e, length = _slice_bounds(x.shape[dim], start, end, step)
    want = list(x.shape)
    want[dim] = length
    if tuple(want) != out.shape:
        raise ctx.unsupported(f"slice of {list(x.shape)} gives {want}, the graph expects {list(out.shape)}")
    if out.numel == 0 or out.shape == x.shape:
        _alias(ctx, out, x)
        return
    if _leading_ones(x.shape, dim) and (step == 1 or length == 1):
        _alias(ctx, out, x, s * _inner_bytes(x, dim))
        return
    ctx.emit("slice", [x], [out], ints=[dim, s, e, step])


@rule("aten.slice_copy.Tensor", "aten.slice.Tensor")
def slice_(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    _slice(ctx, ctx.tensor_arg(a), ctx.output(node), int(a["dim"]), a["start"], a["end"], int(a["step"]))


@rule("aten.narrow_copy.default", "aten.narrow.default")
def narrow(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x = ctx.tensor_arg(a)
    if not x.shape:
        raise ctx.unsupported("narrowing a 0-dim tensor")
    dim = _norm_dim(ctx, int(a["dim"]), len(x.shape))
    start, length = int(a["start"]), int(a["length"])
    if start < 0:
        start += x.shape[dim]
    if start < 0 or length < 0 or start + length > x.shape[dim]:
        raise ctx.unsupported(f"start {start}, length {length} out of range for dim {dim} of {list(x.shape)}")
    _slice(ctx, x, ctx.output(node), dim, start, start + length, 1)


def _select(ctx: LowerCtx, x: Value, out: Value, dim: int, index: int) -> None:
    if not x.shape:
        raise ctx.unsupported("select on a 0-dim tensor")
    dim = _norm_dim(ctx, dim, len(x.shape))
    size = x.shape[dim]
    if not -size <= index < size:
        raise ctx.unsupported(f"index {index} is out of range for dim {dim} of size {size}")
    if index < 0:
        index += size
    if out.numel == 0:
        _alias(ctx, out, x)
    elif _leading_ones(x.shape, dim):
        _alias(ctx, out, x, index * _inner_bytes(x, dim))
    else:
        ctx.emit("select", [x], [out], ints=[dim, index])


@rule("aten.select_copy.int", "aten.select.int")
def select(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    _select(ctx, ctx.tensor_arg(a), ctx.output(node), int(a["dim"]), int(a["index"]))


# ---- cat / split ------------------------------------------------------------------------------

@rule("aten.cat.default", "aten.concat.default")
def cat(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    out = ctx.output(node)
    tensors = a["tensors"]
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(v, Value) for v in tensors):
        raise ctx.unsupported("tensors must be a list of tensors")
    if not out.shape:
        raise ctx.unsupported("cat producing a 0-dim tensor")
    dim = _norm_dim(ctx, int(a["dim"]), len(out.shape))
    # empty inputs contribute nothing (PyTorch also skips legacy 1-D empty tensors)
    parts = [ctx.cast(v, out.dtype) for v in tensors if v.numel > 0]
    if not parts:
        if out.numel:
            raise ctx.unsupported("cat of empty tensors with a non-empty result")
        ctx.alias(out, tensors[0])  # zero bytes: nothing to write
        return
    if len(parts) == 1:
        _alias(ctx, out, parts[0])
        return
    while len(parts) > CAT_MAX_INPUTS:  # the kernel takes up to 64 inputs: cat in groups first
        grouped: list[Value] = []
        for i in range(0, len(parts), CAT_MAX_INPUTS):
            group = parts[i:i + CAT_MAX_INPUTS]
            if len(group) == 1:
                grouped.append(group[0])
                continue
            shape = list(group[0].shape)
            shape[dim] = sum(v.shape[dim] for v in group)
            tmp = ctx.temp(out.dtype, shape, hint="cat")
            ctx.emit("cat", group, [tmp], ints=[dim])
            grouped.append(tmp)
        parts = grouped
    ctx.emit("cat", parts, [out], ints=[dim])


def _split(ctx: LowerCtx, x: Value, outs: Sequence[Value | None], dim: int, keepdim: bool) -> None:
    """Split `x` along `dim` into `outs` (sizes from the outputs). keepdim False = unbind: each
    output drops `dim` and has size 1 there."""
    if not x.shape:
        raise ctx.unsupported("splitting a 0-dim tensor")
    dim = _norm_dim(ctx, dim, len(x.shape))
    pieces: list[Value] = []
    for i, o in enumerate(outs):
        if o is None:
            raise ctx.unsupported(f"output {i} is not a tensor")
        if keepdim:
            pieces.append(o)
            continue
        shape = list(x.shape)
        shape[dim] = 1
        piece = ctx.temp(x.dtype, shape, hint="unbind")
        pieces.append(piece)
    sizes = [p.shape[dim] for p in pieces]
    if sum(sizes) != x.shape[dim]:
        raise ctx.unsupported(f"split sizes {sizes} do not add up to {x.shape[dim]}")
    if _leading_ones(x.shape, dim):
        off = 0
        for p in pieces:
            _alias(ctx, p, x, off)
            off += p.nbytes
    else:
        ctx.emit("split", [x], pieces, ints=[dim])
    if not keepdim:
        for o, p in zip(outs, pieces):
            assert o is not None
            _alias(ctx, o, p)


@rule("aten.split_with_sizes_copy.default", "aten.split_copy.Tensor", "aten.split_with_sizes.default",
      "aten.split.Tensor")
def split(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    _split(ctx, ctx.tensor_arg(a), node.outputs, int(a["dim"]), keepdim=True)


@rule("aten.unbind_copy.int", "aten.unbind.int")
def unbind(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    _split(ctx, ctx.tensor_arg(a), node.outputs, int(a["dim"]), keepdim=False)


# ---- pad / flip ---------------------------------------------------------------------------------

@rule("aten.constant_pad_nd.default")
def constant_pad_nd(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    pads = [int(p) for p in a["pad"]]
    value = a["value"]
    nd = len(x.shape)
    if len(pads) % 2 or len(pads) // 2 > nd:
        raise ctx.unsupported(f"pad {pads} must have an even length of at most 2 * {nd}")
    want = list(x.shape)
    for k, p in enumerate(pads):
        want[nd - 1 - k // 2] += p
    if tuple(want) != out.shape:
        raise ctx.unsupported(f"padding {list(x.shape)} by {pads} gives {want}, the graph expects {list(out.shape)}")
    if not any(pads):
        _alias(ctx, out, x)
        return
    v = float(value if value is not None else 0)
    if isinstance(value, int) and abs(value) > 2**53:
        raise ctx.unsupported(f"pad value {value} is not exactly representable (at most 2**53 in magnitude)")
    ctx.emit("pad", [x], [out], ints=pads, floats=[v])


@rule("aten.flip.default")
def flip(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    nd = len(x.shape)
    dims = [_norm_dim(ctx, int(d), nd, "dims") for d in a["dims"]]
    if len(set(dims)) != len(dims):
        raise ctx.unsupported(f"dims {list(a['dims'])} has duplicates")
    dims = sorted(d for d in dims if nd and x.shape[d] > 1)  # flipping a size-1 dim changes nothing
    if not dims or x.numel == 0:
        _alias(ctx, out, x)
        return
    ctx.emit("flip", [x], [out], ints=dims)


# ---- non-constant pads (the exporter keeps these ops whole: exporter/__init__.py) --------------

_PAD_MODES = {"reflection": 1, "replication": 2, "circular": 3}


def _pad_mode(ctx: LowerCtx, node: AtenNode, mode: str) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    pads = [int(p) for p in a["padding" if "padding" in a else "pad"]]
    nd = len(x.shape)
    if len(pads) % 2 or not pads or len(pads) // 2 > nd:
        raise ctx.unsupported(f"padding {pads} must have an even length of 2 to 2 * {nd}")
    want = list(x.shape)
    for k, p in enumerate(pads):
        want[nd - 1 - k // 2] += p
    if tuple(want) != out.shape:
        raise ctx.unsupported(f"{mode} padding {list(x.shape)} by {pads} gives {want}, the graph expects "
                              f"{list(out.shape)}")
    if not any(pads) or out.numel == 0:
        _alias(ctx, out, x)
        return
    ctx.emit("pad_mode", [x], [out], ints=[_PAD_MODES[mode], *pads])


@rule("aten.reflection_pad1d.default", "aten.reflection_pad2d.default", "aten.reflection_pad3d.default")
def reflection_pad(ctx: LowerCtx, node: AtenNode) -> None:
    _pad_mode(ctx, node, "reflection")


@rule("aten.replication_pad1d.default", "aten.replication_pad2d.default", "aten.replication_pad3d.default")
def replication_pad(ctx: LowerCtx, node: AtenNode) -> None:
    _pad_mode(ctx, node, "replication")


@rule("aten._pad_circular.default")
def circular_pad(ctx: LowerCtx, node: AtenNode) -> None:
    _pad_mode(ctx, node, "circular")


# ---- strided views read as copies: as_strided, diagonal, unfold ---------------------------------

def _strides(shape: Sequence[int]) -> list[int]:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return out[::-1]


def _as_strided(ctx: LowerCtx, x: Value, out: Value, strides: Sequence[int], offset: int) -> None:
    """out[i...] = x.flat[offset + sum(i * strides)]: a zero-copy alias when that is a contiguous
    range of x, else an as_strided copy."""
    if len(strides) != len(out.shape):
        raise ctx.unsupported(f"{len(strides)} strides for a {len(out.shape)}-dim result")
    if offset < 0 or any(s < 0 for s in strides):
        raise ctx.unsupported(f"negative storage offset or stride ({offset}, {list(strides)})")
    if out.numel:
        last = offset + sum((n - 1) * s for n, s in zip(out.shape, strides))
        if last >= max(x.numel, 1) or not x.numel:
            raise ctx.unsupported(f"the view {list(out.shape)} with strides {list(strides)} and offset {offset} "
                                  f"reads element {last} of a tensor of {x.numel}")
    if out.numel == 0:
        _alias(ctx, out, x)
        return
    if all(s == c for n, s, c in zip(out.shape, strides, _strides(out.shape)) if n > 1):
        _alias(ctx, out, x, offset * dtype_size(x.dtype))  # a contiguous range of x
        return
    ctx.emit("as_strided", [x], [out], ints=[offset, *strides])


# Views whose result has the bytes of their input (a reshape of a tensor with its own storage does too).
_SAME_BYTES = {"aten.view_copy.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.view.default",
               "aten.unsqueeze_copy.default", "aten.squeeze_copy.dims", "aten.squeeze_copy.dim",
               "aten.squeeze_copy.default", "aten.alias_copy.default", "aten.detach_copy.default"}
# Views that may start elsewhere in their input's storage or reorder it (unless they select all of it).
_VIEW_PREFIXES = ("aten.permute", "aten.transpose", "aten.t_copy", "aten.t.", "aten.slice", "aten.select",
                  "aten.expand", "aten.diagonal", "aten.as_strided", "aten.unfold", "aten.narrow", "aten.split",
                  "aten.unbind")


def _view_of(ctx: LowerCtx, x: Value) -> AtenNode | None:
    """The view op `x` came from in eager when eager's `x` is not a tensor with its own contiguous
    storage: to_edge turns every view into a copy, but as_strided reads the storage under its input
    (with its offset), so the copy would give other elements than eager does."""
    v = x
    while True:
        node = next((n for n in ctx.graph.nodes if any(o is v for o in n.outputs)), None)
        if node is None:
            return None  # a program input or a constant: its own storage
        ins = node.input_values()
        name = node.op_name
        if name in _SAME_BYTES and ins:
            v = ins[0]
            continue
        if name.startswith(_VIEW_PREFIXES):
            if not ins:
                return node
            src = ins[0]
            if name.startswith(("aten.permute", "aten.transpose", "aten.t")):
                a = ctx.bind(node)
                nd = len(src.shape)
                perm = list(range(nd))
                if "permute" in name:
                    perm = [int(d) % max(nd, 1) for d in a["dims"]]
                elif "transpose" in name and nd:
                    d0, d1 = int(a["dim0"]) % nd, int(a["dim1"]) % nd
                    perm[d0], perm[d1] = perm[d1], perm[d0]
                elif nd == 2:
                    perm = [1, 0]
                moved = [d for d in perm if src.shape[d] != 1]
                if moved != sorted(moved):
                    return node
            elif name.startswith(("aten.as_strided", "aten.diagonal", "aten.unfold")) or src.numel != v.numel:
                return node
            v = src  # the same bytes: a full slice, an expand or permute of size-1 dims, ...
            continue
        return None  # computed: its own storage


@rule("aten.as_strided_copy.default", "aten.as_strided.default")
def as_strided(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    view = _view_of(ctx, x)
    if view is not None:
        raise ctx.unsupported(f"as_strided of a view ({view.op_name} at {view.source.describe()}): PyTorch reads "
                              "the storage under the view, which the exported program does not keep; make the "
                              "input contiguous (.contiguous() / .clone()) before as_strided")
    size, strides = [int(s) for s in a["size"]], [int(s) for s in a["stride"]]
    if tuple(size) != out.shape:
        raise ctx.unsupported(f"size {size} but the graph expects {list(out.shape)}")
    _as_strided(ctx, x, out, strides, int(a["storage_offset"] or 0))


@rule("aten.diagonal_copy.default", "aten.diagonal.default")
def diagonal(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    nd = len(x.shape)
    if nd < 2:
        raise ctx.unsupported(f"diagonal of a {nd}-dim tensor (at least 2 dims)")
    d1, d2 = _norm_dim(ctx, int(a["dim1"]), nd, "dim1"), _norm_dim(ctx, int(a["dim2"]), nd, "dim2")
    if d1 == d2:
        raise ctx.unsupported(f"dim1 and dim2 are both {d1}")
    offset = int(a["offset"])
    xs = _strides(x.shape)
    n1, n2 = x.shape[d1], x.shape[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    rest = [d for d in range(nd) if d not in (d1, d2)]
    want = (*(x.shape[d] for d in rest), length)
    if want != out.shape:
        raise ctx.unsupported(f"the diagonal of {list(x.shape)} is {list(want)}, the graph expects {list(out.shape)}")
    start = (offset * xs[d2] if offset >= 0 else -offset * xs[d1]) if length else 0
    _as_strided(ctx, x, out, [*(xs[d] for d in rest), xs[d1] + xs[d2]], start)


@rule("aten.unfold_copy.default", "aten.unfold.default")
def unfold(ctx: LowerCtx, node: AtenNode) -> None:
    """Tensor.unfold(dim, size, step): windows of `size` along dim, `step` apart, in a new last dim."""
    a = ctx.bind(node)
    x, out = ctx.tensor_arg(a), ctx.output(node)
    shape = list(x.shape) or [1]
    dim = _norm_dim(ctx, int(a["dimension"]), len(x.shape))
    size, step = int(a["size"]), int(a["step"])
    if step < 1 or not 0 <= size <= shape[dim]:
        raise ctx.unsupported(f"size {size}, step {step} for dim {dim} of size {shape[dim]}")
    xs = _strides(shape)
    want, strides = list(shape), list(xs)
    want[dim] = (shape[dim] - size) // step + 1
    strides[dim] = xs[dim] * step
    if not x.shape:
        want, strides = [], []
    want.append(size)
    strides.append(xs[dim])
    if tuple(want) != out.shape:
        raise ctx.unsupported(f"unfolding {list(x.shape)} gives {want}, the graph expects {list(out.shape)}")
    _as_strided(ctx, x, out, strides, 0)
