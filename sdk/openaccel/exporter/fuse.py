"""Fusion on openaccel instructions, saving passes over tensors:
- an activation that only consumes a convolution's or a linear layer's output moves into that
  op's epilogue (`act` argument): relu -> act 1; hardtanh / clamp with both bounds (relu6) ->
  act 2 with [min, max];
- a residual `add` of a Winograd convolution's output and another tensor of the same shape becomes
  the convolution's `addend` input (ResNet blocks: conv -> add -> relu is then one instruction);
- channels-last [1x1 expand ->] depthwise -> 1x1 project chains (MobileNet's inverted-residual
  blocks) become one `mbconv_nhwc`, which never writes the expanded tensors out."""

from __future__ import annotations

from ..ir import Graph, Instr, Value
from .memory_plan import root_of

# ops whose epilogue applies an activation: arguments act (0 none, 1 relu, 2 clamp), act_min, act_max
_FUSABLE = ("conv2d", "linear", "conv2d_winograd")


def _activation(ins: Instr) -> tuple[int, float, float] | None:
    if ins.op == "relu":
        return 1, 0.0, 0.0
    if ins.op == "hardtanh":
        return 2, ins.farg("min_val"), ins.farg("max_val")
    if ins.op == "clamp" and ins.arg("has_min") and ins.arg("has_max"):
        return 2, ins.farg("min"), ins.farg("max")
    return None


def _dataflow(graph: Graph) -> tuple[dict[Value, int], set[Value], dict[Value, Instr]]:
    """Readers per buffer (by the root of views), the graph outputs' buffers, each value's producer."""
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
    return uses, outputs, producer


def fuse_activations(graph: Graph) -> int:
    """Returns how many activations were fused."""
    uses, outputs, producer = _dataflow(graph)
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
        if prod.arg("act") != 0:
            continue
        prod.set_arg("act", act[0])
        if act[0] == 2:
            prod.set_arg("act_min", act[1])
            prod.set_arg("act_max", act[2])
        prod.outputs = [ins.outputs[0]]
        removed.add(id(ins))
        fused += 1
    graph.instrs = [i for i in graph.instrs if id(i) not in removed]
    return fused


def fuse_residual_adds(graph: Graph) -> int:
    """add(conv2d_winograd output, other) -> conv2d_winograd with addend `other`, placed where the
    add was (the convolution's inputs exist earlier, `other` exists there). The convolution must
    not have an activation or an addend yet, its output must have no other reader, and `other`
    must not share the convolution input's buffer. Returns how many adds were fused."""
    uses, outputs, producer = _dataflow(graph)
    replaced: dict[int, Instr] = {}
    removed: set[int] = set()
    for add in graph.instrs:
        if add.op != "add" or add.kind != "op" or len(add.inputs) != 2 or any(v is None for v in add.inputs):
            continue
        if add.farg("alpha", default=1.0) != 1.0:
            continue
        out = add.outputs[0]
        for j in (0, 1):
            src, other = add.inputs[j], add.inputs[1 - j]
            assert src is not None and other is not None
            conv = producer.get(src)
            if conv is None or conv.op != "conv2d_winograd" or id(conv) in removed or id(conv) in replaced:
                continue
            if src.alias_of is not None or uses.get(src, 0) != 1 or src in outputs or conv.device != add.device:
                continue
            if (len(conv.inputs) > 3 and conv.inputs[3] is not None) or conv.arg("act"):
                continue
            if not (src.dtype == other.dtype == out.dtype) or not (src.shape == other.shape == out.shape):
                continue
            # the output may overwrite the addend (opset: inplace), which must then not be (a view
            # of) the convolution's input: the kernels read input rows after writing earlier outputs
            x0 = conv.inputs[0]
            if x0 is None or root_of(other)[0] is root_of(x0)[0]:
                continue
            conv.inputs = [*(list(conv.inputs) + [None] * 3)[:3], other]
            conv.outputs = [out]
            removed.add(id(conv))
            replaced[id(add)] = conv
            break
    graph.instrs = [replaced.get(id(i), i) for i in graph.instrs if id(i) not in removed]
    return len(replaced)


def _conv_nhwc_kind(ins: Instr) -> str:
    """'pointwise' (1x1, stride 1, no padding, groups 1), 'depthwise', or '' for a conv2d_nhwc"""
    if ins.op != "conv2d_nhwc" or ins.kind != "op" or ins.arg("input_nchw"):
        return ""  # (input_nchw: the blocks read channels-last inputs)
    groups = ins.arg("groups")
    w = ins.inputs[1]
    if groups == 1 and w is not None and len(w.shape) == 5 and w.shape[1] == w.shape[2] == 1 and \
            [ins.arg(a) for a in ("stride_h", "stride_w", "pad_h", "pad_w")] == [1, 1, 0, 0]:
        return "pointwise"
    return "depthwise" if groups > 1 and ins.arg("block") == 0 else ""


def _act_bounds(ins: Instr) -> tuple[float, float]:
    return (ins.farg("act_min"), ins.farg("act_max")) if ins.arg("act") == 2 else (0.0, 0.0)


def fuse_mbconv(graph: Graph) -> int:
    """[1x1 expand ->] depthwise -> 1x1 project (channels-last, after the layout pass) -> one
    mbconv_nhwc, placed where the projection was, when each intermediate has no other reader and
    is neither a graph output nor viewed. Returns how many blocks were fused."""
    uses, outputs, producer = _dataflow(graph)

    def private(v: Value | None, ins: Instr) -> bool:
        """v is only ins's product, read once"""
        return v is not None and v.alias_of is None and uses.get(v, 0) == 1 and v not in outputs and \
            producer.get(v) is ins

    removed: set[int] = set()
    fused = 0
    for proj in graph.instrs:
        if _conv_nhwc_kind(proj) != "pointwise":
            continue
        d = proj.inputs[0]
        dw = producer.get(d) if d is not None else None
        if dw is None or _conv_nhwc_kind(dw) != "depthwise" or not private(d, dw) or dw.device != proj.device:
            continue
        x = dw.inputs[0]
        exp = producer.get(x) if x is not None else None
        if exp is not None and (_conv_nhwc_kind(exp) != "pointwise" or not private(x, exp) or exp.device != dw.device
                                or exp.arg("block") != proj.arg("block")):
            exp = None
        ins_e = (list(exp.inputs) + [None] * 3)[:3] if exp is not None else [dw.inputs[0], None, None]
        bias = (list(dw.inputs) + [None] * 3)[2], (list(proj.inputs) + [None] * 3)[2]
        proj.inputs = [ins_e[0], ins_e[1], ins_e[2], dw.inputs[1], bias[0], proj.inputs[1], bias[1]]
        e_min, e_max = _act_bounds(exp) if exp is not None else (0.0, 0.0)
        d_min, d_max = _act_bounds(dw)
        p_min, p_max = _act_bounds(proj)
        window = {a: dw.arg(a) for a in ("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w")}
        proj.become("mbconv_nhwc", **window, expand_act=exp.arg("act") if exp is not None else 0,
                    dw_act=dw.arg("act"), project_act=proj.arg("act"), block=proj.arg("block"),
                    expand_min=e_min, expand_max=e_max, dw_min=d_min, dw_max=d_max, project_min=p_min,
                    project_max=p_max)
        removed.add(id(dw))
        if exp is not None:
            removed.add(id(exp))
        fused += 1
    graph.instrs = [i for i in graph.instrs if id(i) not in removed]
    return fused
