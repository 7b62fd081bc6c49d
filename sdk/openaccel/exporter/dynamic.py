"""Shapes an .oab program cannot have yet: dynamic input dimensions (torch.export.Dim) and
data-dependent sizes (nonzero, masked_select, item). Every tensor of a program has a shape fixed
at export time, so both are export-time errors that name the dimension or the op, instead of a
shape silently fixed to the example's size that fails at run time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ExportError, UnsupportedOpError
from ..ir import Source, op_name_of
from .fx_import import source_of
from .lower import REFUSED, supported_edge_ops


@dataclass(frozen=True)
class DynamicDim:
    input: str
    index: int
    symbol: str           # the graph's symbol for it, e.g. 's77', or an expression 's77*2'
    name: str | None      # the Dim's own name when the program still knows it ('batch')
    low: int | None
    high: int | None      # None: unbounded

    def describe(self) -> str:
        if self.name:
            dim = f"dynamic (torch.export.Dim '{self.name}', symbol {self.symbol})"
        else:
            dim = f"dynamic (symbol {self.symbol}; the program keeps no Dim name, as after torch.export.load)"
        low = "?" if self.low is None else str(self.low)
        high = "unbounded" if self.high is None else str(self.high)
        return f"dimension {self.index} of input '{self.input}' is {dim}, range {low}..{high}"


def _bound(v: Any) -> int | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f in (float("inf"), float("-inf")) else int(f)


def _debug_name(d: torch.SymInt) -> str | None:
    """The torch.export.Dim name of a symbolic size, while the program's ShapeEnv remembers it."""
    try:
        node = d.node
        env = node.shape_env
        names = env.source_name_to_debug_name
        for sym in node.expr.free_symbols:
            for src in env.var_to_sources.get(sym, []):
                key = src.name() if callable(src.name) else src.name  # a method in older torch
                if key in names:
                    return str(names[key])
    except Exception:  # a ShapeEnv without these tables (another torch): no name, still an error
        return None
    return None


def dynamic_input_dims(ep: torch.export.ExportedProgram) -> list[DynamicDim]:
    user = set(ep.graph_signature.user_inputs)
    ranges = ep.range_constraints
    out: list[DynamicDim] = []
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for i, d in enumerate(val.shape):
            if not isinstance(d, torch.SymInt):
                continue
            expr = d.node.expr
            if getattr(expr, "is_number", False):
                continue
            rng = ranges.get(expr)
            if rng is None and len(expr.free_symbols) == 1:
                rng = ranges.get(next(iter(expr.free_symbols)))
            out.append(DynamicDim(node.name, i, str(expr), _debug_name(d),
                                  _bound(rng.lower) if rng is not None else None,
                                  _bound(rng.upper) if rng is not None else None))
    return out


def check_static_inputs(ep: torch.export.ExportedProgram) -> None:
    """An ExportError naming every dynamic input dimension, if there is one."""
    dims = dynamic_input_dims(ep)
    if dims:
        lines = "\n".join(f"  {d.describe()}" for d in dims)
        raise ExportError(
            "the program has dynamic shapes, which openaccel does not support yet (every tensor of an "
            f".oab program has a fixed shape):\n{lines}\nExport with static shapes (torch.export.export "
            "without dynamic_shapes), one file per input size you need")


def data_dependent_ops(ep: torch.export.ExportedProgram) -> list[tuple[str, Source, str]]:
    """(op, where, why) for each op whose output size depends on its input's values: the first
    node where each such (unbacked) size appears."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    supported_edge_ops()  # loads the rules and the refusals
    seen: set[Any] = set()
    found: list[tuple[str, Source, str]] = []
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        syms = free_unbacked_symbols(node.meta.get("val"))
        new = syms - seen
        seen |= syms
        if new:
            name = op_name_of(node.target)
            if name in REFUSED:  # Tensor.item(): a value read out of a tensor, not a size
                found.append((name, source_of(node), f"refused, {REFUSED[name]}"))
                continue
            sizes = ", ".join(sorted(str(s) for s in new))
            found.append((name, source_of(node),
                          f"its output's size depends on the values of its input (size {sizes})"))
    return found


def check_data_independent(ep: torch.export.ExportedProgram) -> None:
    from .lower import refusal

    found = data_dependent_ops(ep)
    if found:
        lines = "\n".join(f"  {op}  (first used at {src.describe()}): {why}"
                          + (f"; refused, {refusal(op)}" if refusal(op) else "") for op, src, why in found)
        raise UnsupportedOpError(
            f"openaccel cannot export {len(found)} op(s) in this model, whose outputs depend on the values of "
            f"their inputs (a size, or a Python number read from a tensor):\n{lines}\nEvery tensor of an .oab "
            "program has a shape fixed at export time; see docs/ops.md for the supported op set.")
