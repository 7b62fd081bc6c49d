"""Channels-last layout pass: convolution stacks run in NHWC (`conv2d_nhwc`), with `permute`
instructions only where the stack meets the rest of the graph.

Why: in NCHW a 1x1 convolution is W[O, C] x X[C, H*W] with the pixels as the GEMM's columns, so
the activations are packed on every run and a 7 x 7 map fills 49 of 64 columns of 16-wide panels;
a depthwise convolution vectorizes along rows that are 7 or 14 pixels wide. In NHWC the pixels
are the GEMM's rows, the activations and the weights are read in place, and depthwise kernels
vectorize over channels. MobileNet-style networks (1x1 + depthwise blocks) spend almost all their
time there. ResNet-style networks keep NCHW: their 3x3 convolutions run as Winograd convolutions
(exporter/winograd.py), which are planar.

What moves to NHWC:
- conv2d with constant weights, 4-D float32, groups 1 or depthwise (groups = C_in = C_out); the
  weights of groups = 1 are packed here into the GEMM's B panels ([ceil(C_out / 16), kH, kW,
  C_in, 16], pack_weights), depthwise ones stored [kH, kW, 1, C];
- elementwise and binary ops whose tensor inputs are all NHWC with the output's shape (or single
  elements), so residual adds and activations between convolutions stay in the stack;
- mean / sum / amax / amin over H and W of an NHWC value (global pooling at the stack's end):
  they reduce W and H of the NHWC value instead, and with keepdim the [N, C, 1, 1] result is a
  view of the [N, 1, 1, C] one (same bytes), so the feature map is not permuted back (MobileNetV2:
  a 7 x 7 x 1280 permute, 0.15 ms).
A value some other instruction, a graph output or a view needs in NCHW gets one `permute` back,
right after it is computed; a convolution input that exists only in NCHW gets one `permute` in
(shared by every convolution reading it), except for a spatial convolution over a few channels
(the stem reading the RGB image): conv2d_nhwc reads it in NCHW (input_nchw = 1) as it gathers
its strips anyway (MobileNetV2: no 3 x 224 x 224 permute, 0.13 ms). Graph inputs and outputs
keep their layout, so the program's signature does not change.

Grouped convolutions other than depthwise, convolutions with weights computed at run time and
1-D convolutions (which write through a view) stay NCHW.

`mode`: "nchw" (off), "nhwc" (every eligible convolution), "auto" (on when the graph has a
depthwise convolution and the export prefers no device but the CPU: accelerators implement the
NCHW op set, so a stack split between them and the CPU would pay a permute at every crossing).
The pass only sees the CPU's part of the graph (the pipeline's CPU boundary, boundary.py): an
accelerator's convolutions stay conv2d whatever the mode.

Measured on MobileNetV2 (x86_64 AVX2, one thread, `oa_run --bench` alternating the files): NHWC
1.1-1.3x faster than NCHW (the pixel-heavy early layers about even, the 14x14 and 7x7 ones
faster); with the inverted-residual blocks fused (exporter/fuse.py) another 1.15x.
"""

from __future__ import annotations

import torch

from ..errors import ExportError
from ..ir import Graph, Instr, Value
from ..opset import CPU_PANEL_BLOCK, OPS

MODES = ("auto", "nchw", "nhwc")
# output channels per weight panel of a groups = 1 conv2d_nhwc (opset.py: the widest micro-kernel NR)
BLOCK = CPU_PANEL_BLOCK
TO_NHWC = [0, 2, 3, 1]
TO_NCHW = [0, 3, 1, 2]
# a groups = 1 convolution with a kernel larger than 1x1 over at most this many input channels
# reads an NCHW input in place (input_nchw) instead of through a permute
NCHW_INPUT_MAX_CHANNELS = 4


def _nhwc_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, h, w = shape
    return (n, h, w, c)


def _is_depthwise(ins: Instr) -> bool:
    x, w = ins.inputs[0], ins.inputs[1]
    assert x is not None and w is not None
    groups = ins.arg("groups")
    return groups > 1 and groups == x.shape[1] == w.shape[0]


def _conv_eligible(ins: Instr) -> bool:
    if ins.op != "conv2d" or ins.kind != "op" or len(ins.inputs) < 2:
        return False
    x, w, out = ins.inputs[0], ins.inputs[1], ins.outputs[0]
    if x is None or w is None or w.data is None or out.alias_of is not None:
        return False
    if len(x.shape) != 4 or x.dtype != torch.float32 or out.dtype != torch.float32:
        return False
    return ins.arg("groups") == 1 or _is_depthwise(ins)


def _elementwise_eligible(ins: Instr, nhwc: set[Value]) -> bool:
    """an elementwise / binary op over NHWC stack values (broadcast only of single elements)"""
    if ins.kind != "op" or ins.op not in OPS or OPS[ins.op].family not in ("elementwise", "binary"):
        return False
    if len(ins.outputs) != 1:
        return False
    out = ins.outputs[0]
    if len(out.shape) != 4 or out.alias_of is not None:
        return False
    found = False
    for v in ins.inputs:
        if v is None:
            continue
        if v in nhwc and v.shape == out.shape:
            found = True
        elif v.numel != 1:
            return False
    return found


SPATIAL_REDUCTIONS = ("mean", "sum", "amax", "amin")


def _spatial_reduction(ins: Instr, nhwc: set[Value]) -> bool:
    """a reduction over exactly H and W (dims 2, 3) of an NHWC stack value"""
    if ins.kind != "op" or ins.op not in SPATIAL_REDUCTIONS or len(ins.inputs) != 1 or len(ins.outputs) != 1:
        return False
    x, out = ins.inputs[0], ins.outputs[0]
    return (x is not None and x in nhwc and len(x.shape) == 4 and out.alias_of is None
            and x.dtype == out.dtype and sorted(ins.arg_list("dims")) == [2, 3])


def pack_weights(w: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """[O, C, kH, kW] conv2d weights -> conv2d_nhwc's [ceil(O / block), kH, kW, C, block] panels
    (output channels past O are zero)."""
    o, c, kh, kw = w.shape
    ob = -(-o // block)
    hwio = torch.zeros(kh, kw, c, ob * block, dtype=w.dtype)
    hwio[..., :o] = w.permute(2, 3, 1, 0)
    return hwio.reshape(kh, kw, c, ob, block).permute(3, 0, 1, 2, 4).contiguous()


def _viewed(graph: Graph) -> set[Value]:
    """values whose bytes some view (alias) reads: they must exist in NCHW"""
    seen: set[Value] = set()
    for ins in graph.instrs:
        for v in [*ins.inputs, *ins.outputs]:
            while v is not None and v.alias_of is not None:
                seen.add(v.alias_of)
                v = v.alias_of
    for v in graph.outputs:
        while v.alias_of is not None:
            seen.add(v.alias_of)
            v = v.alias_of
    return seen


def wanted(graph: Graph, mode: str, accelerators: bool = False) -> bool:
    """Whether to run the pass. `accelerators`: the export prefers a device other than the CPU
    ("auto" then keeps NCHW)."""
    if mode not in MODES:
        raise ExportError(f"layout {mode!r} is not one of {', '.join(MODES)}")
    if mode == "nchw" or (mode == "auto" and accelerators):
        return False
    if mode == "nhwc":
        return True
    return any(_conv_eligible(i) and _is_depthwise(i) for i in graph.instrs)


def rewrite(graph: Graph, mode: str = "auto", accelerators: bool = False) -> int:
    """Move convolution stacks to NHWC; returns how many convolutions moved."""
    if not wanted(graph, mode, accelerators):
        return 0
    # pass 1: which instructions run in NHWC (in execution order: an op joins when its inputs did)
    moved: set[int] = set()
    nhwc: set[Value] = set()   # NCHW values computed in NHWC instead
    reductions: set[int] = set()  # moved, reading NHWC; their outputs keep their layout
    for ins in graph.instrs:
        if _conv_eligible(ins) or _elementwise_eligible(ins, nhwc):
            moved.add(id(ins))
            nhwc.add(ins.outputs[0])
        elif _spatial_reduction(ins, nhwc):
            moved.add(id(ins))
            reductions.add(id(ins))
    if not moved:
        return 0
    # values still needed in NCHW: read by an instruction that stays, a graph output, a view
    need_nchw = _viewed(graph) | set(graph.outputs)
    for ins in graph.instrs:
        if id(ins) not in moved:
            need_nchw.update(v for v in ins.inputs if v is not None)
    # pass 2: rewrite
    form: dict[Value, Value] = {}       # NCHW value -> its NHWC twin
    weights: dict[int, Value] = {}
    out_instrs: list[Instr] = []
    convs = 0

    def permute(src: Value, dst: Value, dims: list[int], like: Instr) -> Instr:
        return Instr(op="permute", inputs=[src], outputs=[dst], ints=list(dims), source=like.source,
                     device=like.device)

    def twin(v: Value) -> Value:
        t = Value(name=f"{v.name}.nhwc", dtype=v.dtype, shape=_nhwc_shape(v.shape))
        form[v] = t
        return t

    def reads_nchw(ins: Instr, j: int, v: Value) -> bool:
        """the convolution's input v (only in NCHW so far) is read in place: input_nchw"""
        w = ins.inputs[1]
        return (ins.op == "conv2d" and j == 0 and ins.arg("groups") == 1 and w is not None
                and v.shape[1] <= NCHW_INPUT_MAX_CHANNELS and tuple(w.shape[2:]) != (1, 1))

    for ins in graph.instrs:
        if id(ins) not in moved:
            out_instrs.append(ins)
            continue
        if id(ins) in reductions:
            x, out = ins.inputs[0], ins.outputs[0]
            assert x is not None
            ins.inputs = [form[x]]
            ins.set_arg("dims", [1, 2])
            if ins.arg("keepdim"):  # [N, 1, 1, C], which [N, C, 1, 1] views
                n, c = out.shape[0], out.shape[1]
                res = Value(name=f"{out.name}.nhwc", dtype=out.dtype, shape=(n, 1, 1, c))
                out.alias_of, out.alias_offset = res, 0
                ins.outputs = [res]
            out_instrs.append(ins)
            continue
        new_inputs: list[Value | None] = []
        for j, v in enumerate(ins.inputs):
            if v is None or (j > 0 and ins.op == "conv2d") or (v.numel == 1 and v not in form):
                new_inputs.append(v)
            elif v in form:
                new_inputs.append(form[v])
            elif reads_nchw(ins, j, v):
                new_inputs.append(v)
            else:  # a convolution input that exists only in NCHW: one permute in, shared
                t = twin(v)
                out_instrs.append(permute(v, t, TO_NHWC, ins))
                new_inputs.append(t)
        if ins.op == "conv2d":
            w = ins.inputs[1]
            assert w is not None and w.data is not None
            depthwise = ins.arg("groups") > 1
            if id(w) not in weights:
                data = w.data.permute(2, 3, 1, 0).contiguous() if depthwise else pack_weights(w.data)
                weights[id(w)] = Value(name=f"{w.name}.{'hwio' if depthwise else 'packed'}", dtype=w.dtype,
                                       shape=tuple(data.shape), data=data)
            new_inputs[1] = weights[id(w)]
            in_place = {"input_nchw": 1} if new_inputs[0] is ins.inputs[0] else {}
            ins.become("conv2d_nhwc", block=0 if depthwise else BLOCK, **in_place)
            convs += 1
        out = ins.outputs[0]
        ins.inputs = new_inputs
        ins.outputs = [twin(out)]
        out_instrs.append(ins)
        if out in need_nchw:
            out_instrs.append(permute(form[out], out, TO_NCHW, ins))
    graph.instrs = out_instrs
    return convs
