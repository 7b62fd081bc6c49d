"""Lowering rules: unary elementwise ops and activations."""

from __future__ import annotations

from ...ir import AtenNode
from . import LowerCtx, rule


@rule("aten.relu.default")
def relu(ctx: LowerCtx, node: AtenNode) -> None:
    a = ctx.bind(node)
    (out,) = node.outputs
    assert out is not None
    ctx.emit("relu", [a["self"]], [out])
