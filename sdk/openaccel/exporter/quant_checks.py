"""Checks of a quantized program before its q/dq patterns are folded (pipeline pass "check int8
patterns", just before "fold int8 patterns"): the quantized programs openaccel cannot run, or
could only run wrongly, are export-time errors naming the node and its model line, instead of a
fold that silently leaves the whole model in float32 or a lowering error about an op name.

Refused (each error class below says why):
- torchao's `quantize_` (`torchao.*_affine` ops): another quantization scheme, not PT2E's q/dq;
- dynamic quantization other than `choose_qparams.tensor -> quantize.tensor -> dequantize.tensor`
  (or its per-token `choose_qparams_per_token_asymmetric -> quantize_per_token ->
  dequantize_per_token`) that the fold turns into linear_dq8 (symmetric choose_qparams, `.tensor2`
  overloads, ...): there is no float32 fallback for a scale that only exists at run time (the
  fold refuses the `.tensor` pattern where it does not feed a linear it can run);
- other quantize / dequantize ops (per-channel activations, ...) on run-time tensors: no int8
  kernel and no float32 fallback;
- another quantizer's conventions: activations quantized to uint8 (X86InductorQuantizer) or to a
  wider integer type; the int8 kernels read int8 activations (XNNPACKQuantizer);
- inconsistent or missing parameters: a dequantize whose input is not the integer type it names
  (e.g. a float tensor, or int32 declared int8), a quantize of an integer tensor, a quantize ->
  dequantize pair whose scale / zero point / range / dtype differ, a range outside its dtype, a
  per-channel dequantize whose scales / zero points are missing, not constants, or of the wrong
  length for its axis.

One rewrite, exact, so that a convolution with padding="same" and an even kernel stays int8:
torch.export writes it as `constant_pad_nd(x, pads, 0.0) -> convolution` (odd kernels become the
convolution's own symmetric padding). With x = dequantize(xq), padding by a real 0 is padding xq
by its zero point (dequantize(zp) is exactly 0), so `dq -> pad(0)` becomes `pad(zp) on int8 -> dq`
and the fold sees its usual `dq -> convolution` pattern.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..errors import UnsupportedOpError
from ..ir import AtenNode, Graph, Value
from .quant import DQ, DQC, DYNAMIC_OPS, Q, QuantParamError, check_scale, check_zero_point

Q_T = ("quantized_decomposed.quantize_per_tensor.tensor", "quantized_decomposed.quantize_per_tensor.tensor2")
DQ_T = ("quantized_decomposed.dequantize_per_tensor.tensor", "quantized_decomposed.dequantize_per_tensor.tensor2")
PAD = "aten.constant_pad_nd.default"

# the integer range of each dtype a q/dq may name
_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int16: (-(2**15), 2**15 - 1),
           torch.int32: (-(2**31), 2**31 - 1)}
MAX_LISTED = 8

GUIDE = ("quantize the float model with oa.quantize(model, example_inputs, calibration) or `openaccel export "
         "--quantize int8 --calibration DIR` (PT2E, XNNPACKQuantizer, get_symmetric_quantization_config: static, "
         "int8 activations, symmetric int8 weights)")


class ForeignQuantizationError(UnsupportedOpError):
    """The program was quantized with conventions the int8 kernels do not implement: torchao's
    `*_affine` ops, or activations of a dtype other than int8 (X86InductorQuantizer's uint8)."""


class DynamicQuantizationError(UnsupportedOpError):
    """Dynamic quantization: scales / zero points computed at run time (choose_qparams)."""


class InconsistentQuantError(QuantParamError):
    """Quantization parameters that are missing or contradict each other or their tensors."""


def _dt(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _where(n: AtenNode) -> str:
    return f"{n.op_name} at {n.source.describe()}"


def listed(nodes: Sequence[AtenNode], why: Any = None) -> str:
    lines = [f"  {_where(n)}" + (f": {why(n)}" if why else "") for n in nodes[:MAX_LISTED]]
    more = f"\n  ... and {len(nodes) - MAX_LISTED} more" if len(nodes) > MAX_LISTED else ""
    return "\n".join(lines) + more


def _is_quantized(graph: Graph) -> bool:
    return any(n.op_name.startswith(("quantized_decomposed.", "torchao.")) for n in graph.nodes)


def check_quantized(graph: Graph) -> int:
    """Refuse what the fold cannot run (see the module docstring), then rewrite padding by zero of
    a dequantized tensor into int8 padding. Returns how many pads were rewritten."""
    if not _is_quantized(graph):
        return 0
    _refuse_torchao(graph)
    _refuse_dynamic(graph)
    _refuse_without_fallback(graph)
    _refuse_foreign_dtypes(graph)
    _check_consistency(graph)
    return _pad_before_dequantize(graph)


def _refuse_torchao(graph: Graph) -> None:
    found = [n for n in graph.nodes if n.op_name.startswith("torchao.")]
    if found:
        raise ForeignQuantizationError(
            f"this model was quantized with torchao's quantize_ ({len(found)} torchao op(s)); openaccel runs PT2E "
            "programs (quantized_decomposed quantize / dequantize around float ops), whose patterns it folds into "
            f"int8 kernels:\n{listed(found)}\nInstead, {GUIDE}")


def _refuse_dynamic(graph: Graph) -> None:
    found = [n for n in graph.nodes if _dynamic(n.op_name) and n.op_name not in DYNAMIC_OPS]
    if found:
        raise DynamicQuantizationError(
            "this model is dynamically quantized in a way openaccel cannot run: the scale and zero point of these "
            "quantize / dequantize ops are computed at run time (there is no float32 fallback for a scale that "
            f"only exists at run time), and the only dynamic patterns with a kernel are choose_qparams.tensor -> "
            f"quantize_per_tensor.tensor -> dequantize_per_tensor.tensor and choose_qparams_per_token_asymmetric -> "
            f"quantize_per_token -> dequantize_per_token of a linear's input (linear_dq8):\n{listed(found)}\n"
            "Use XNNPACKQuantizer's get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True), or "
            f"static quantization: {GUIDE}")


def _dynamic(name: str) -> bool:
    return name.startswith("quantized_decomposed.choose_qparams") or "_per_token" in name or name in Q_T + DQ_T


def _refuse_without_fallback(graph: Graph) -> None:
    """quantized_decomposed ops other than the three the fold and the lowering know, on tensors
    computed at run time (on constants they are evaluated at export, like any constant op)."""
    found = [n for n in graph.nodes if n.op_name.startswith("quantized_decomposed.")
             and n.op_name not in (Q, DQ, DQC) and not _dynamic(n.op_name)
             and not all(v.is_const for v in n.input_values())]
    if found:
        raise UnsupportedOpError(
            "these quantize / dequantize ops have no int8 kernel and no float32 fallback (the runtime has "
            f"quantize_per_tensor and dequantize_per_tensor only, and per-channel dequantize of constant weights):"
            f"\n{listed(found)}\nQuantize activations per tensor: {GUIDE}")


def _refuse_foreign_dtypes(graph: Graph) -> None:
    # activations: a dequantize of a constant is a weight (one that is not int8 stays float32)
    found = [n for n in graph.nodes if n.op_name in (Q, DQ) and len(n.args) >= 6 and n.args[5] != torch.int8
             and not (n.op_name == DQ and isinstance(n.args[0], Value) and n.args[0].is_const)]
    if not found:
        return
    uint8 = any(n.args[5] == torch.uint8 for n in found)
    # the dequantizes carry the model lines (PT2E's quantize of a graph input has none)
    found = [n for n in found if n.op_name == DQ] or found
    who = (" (uint8 activations with a zero point in 0..255 are X86InductorQuantizer's convention)"
           if uint8 else "")
    def params(n: AtenNode) -> str:
        return f"{_dt(n.args[5])} [{n.args[3]}, {n.args[4]}], zero point {n.args[2]}"

    raise ForeignQuantizationError(
        f"this model quantizes activations to a type other than int8{who}; openaccel's int8 kernels read int8 "
        f"activations:\n{listed(found, params)}\nInstead, {GUIDE}")


def _check_consistency(graph: Graph) -> None:
    producer: dict[int, AtenNode] = {}
    for n in graph.nodes:
        for o in n.outputs:
            if o is not None:
                producer[id(o)] = n
    for n in graph.nodes:
        name = n.op_name
        if name not in (Q, DQ, DQC):
            continue
        what = _where(n)
        x = n.args[0] if n.args else None
        if not isinstance(x, Value):
            raise InconsistentQuantError(f"{what}: its input is not a tensor")
        qmin, qmax, dt = (n.args[3], n.args[4], n.args[5]) if name != DQC else (n.args[4], n.args[5], n.args[6])
        if dt not in _RANGES:
            raise InconsistentQuantError(f"{what}: dtype {_dt(dt)} is not an integer type a quantized tensor can have")
        lo, hi = _RANGES[dt]
        if not (lo <= int(qmin) <= int(qmax) <= hi):
            raise InconsistentQuantError(f"{what}: range [{qmin}, {qmax}] is not within {_dt(dt)} [{lo}, {hi}]")
        if name == Q:
            if not x.dtype.is_floating_point:
                raise InconsistentQuantError(f"{what}: quantizes an {_dt(x.dtype)} tensor ('{x.name}'); quantize "
                                             "takes a floating-point tensor (is it quantized twice?)")
            continue
        if x.dtype != dt:
            kind = "a floating-point" if x.dtype.is_floating_point else "an integer"
            raise InconsistentQuantError(
                f"{what}: dequantizes {kind} tensor ('{x.name}', {_dt(x.dtype)}) but names {_dt(dt)}: its input "
                f"must be the {_dt(dt)} output of a quantize, or an {_dt(dt)} graph input or constant")
        if name == DQ:
            q = producer.get(id(x))
            if q is not None and q.op_name == Q:
                for m in (q, n):  # a bad value is the first thing to say (quant.py's message)
                    check_scale(float(m.args[1]), _where(m))
                    check_zero_point(int(m.args[2]), _where(m), *_RANGES[m.args[5]])
                wrote, read = tuple(q.args[1:6]), tuple(n.args[1:6])
                if wrote != read:
                    raise InconsistentQuantError(
                        f"{what} reads '{x.name}' with scale {read[0]!r}, zero point {read[1]}, range [{read[2]}, "
                        f"{read[3]}], {_dt(read[4])}, but {_where(q)} wrote it with scale {wrote[0]!r}, zero "
                        f"point {wrote[1]}, range [{wrote[2]}, {wrote[3]}], {_dt(wrote[4])}: a quantize / dequantize "
                        "pair must use the same parameters")
        else:
            _check_per_channel(n, x, what)


def _check_per_channel(n: AtenNode, x: Value, what: str) -> None:
    scales, zps, axis = n.args[1], n.args[2], int(n.args[3])
    if not -len(x.shape) <= axis < len(x.shape):
        raise InconsistentQuantError(f"{what}: axis {axis} is outside the input's {len(x.shape)} dimensions")
    channels = x.shape[axis]
    for label, v in (("scales", scales), ("zero points", zps)):
        if v is None and label == "zero points":
            continue  # no zero points: all 0 (symmetric)
        if not isinstance(v, Value):
            raise InconsistentQuantError(f"{what}: the per-channel {label} are missing")
        if not v.is_const:
            raise InconsistentQuantError(f"{what}: the per-channel {label} ('{v.name}') are computed at run time; "
                                         "they must be constants")
        if v.numel != channels:
            raise InconsistentQuantError(f"{what}: {v.numel} {label} for {channels} channels (axis {axis} of "
                                         f"'{x.name}' {list(x.shape)})")


def _pad_before_dequantize(graph: Graph) -> int:
    """`dq(xq) -> constant_pad_nd(pads, 0)` -> `constant_pad_nd(xq, pads, zp) -> dq` (exact)."""
    producer: dict[int, AtenNode] = {}
    for n in graph.nodes:
        for o in n.outputs:
            if o is not None:
                producer[id(o)] = n
    out: list[AtenNode] = []
    done = 0
    for n in graph.nodes:
        x = n.args[0] if n.op_name == PAD and n.args else None
        dq = producer.get(id(x)) if isinstance(x, Value) else None
        value = n.args[2] if len(n.args) > 2 else n.kwargs.get("value", 0)
        y = n.outputs[0] if n.outputs else None
        if dq is None or dq.op_name != DQ or float(value or 0) != 0.0 or y is None:
            out.append(n)
            continue
        xq, zp = dq.args[0], int(dq.args[2])
        assert isinstance(xq, Value)
        yq = Value(name=f"{y.name}.q", dtype=xq.dtype, shape=y.shape)
        out.append(AtenNode(target=n.target, args=(xq, n.args[1], float(zp)), kwargs={}, outputs=[yq],
                            source=n.source))
        out.append(AtenNode(target=dq.target, args=(yq, *dq.args[1:]), kwargs=dict(dq.kwargs), outputs=[y],
                            source=n.source))
        done += 1
    graph.nodes = out   # a dequantize left without users goes with the fold's dead code removal
    return done
