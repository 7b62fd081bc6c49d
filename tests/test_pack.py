"""The linear-weight packing pass (exporter/pack.py): which linears become `linear_packed`, and
that the results still match PyTorch eager on the host and on the emulated boards."""

from __future__ import annotations

from collections import Counter

import torch
from torch import nn

import openaccel as oa
from openaccel.exporter import pack
from openaccel.ir import Graph, Instr, Value

from helpers import CACHE, check_on_boards


class TokenMLP(nn.Module):
    """Two linears over a sequence (GPT's feed-forward), the second without bias, and a batch-1 head."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(24, 40)
        self.down = nn.Linear(40, 24, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def test_packed_weight_layout() -> None:
    w = torch.arange(20 * 3, dtype=torch.float32).reshape(20, 3)
    p = pack.pack_linear_weight(w)
    assert p.shape == (2, 3, 16)
    assert torch.equal(p[1, 2, 3], w[16 + 3, 2]) and torch.equal(p[0, 1, 15], w[15, 1])
    assert torch.count_nonzero(p[1, :, 4:]) == 0  # zero past N


def test_many_row_linears_are_packed_and_match_eager() -> None:
    torch.manual_seed(3)
    model, x = TokenMLP().eval(), torch.randn(2, 37, 24)  # 74 rows: the GEMM path
    prog = oa.export(model, (x,))
    ops = Counter(i.op for i in prog.instructions)
    assert ops["linear_packed"] == 2 and ops["linear"] == 0, ops
    with torch.no_grad():
        want = model(x)
    (got,) = oa.load(prog)(x)
    torch.testing.assert_close(torch.as_tensor(got), want, atol=1e-4, rtol=1e-4)
    path = CACHE / "pack" / "token_mlp.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    prog.save(path)
    check_on_boards(path, "token_mlp")


def test_few_row_linears_stay_unpacked() -> None:
    """up to 32 rows the GEMV kernel reads W in place: nothing to gain"""
    model, x = TokenMLP().eval(), torch.randn(1, 32, 24)
    ops = Counter(i.op for i in oa.export(model, (x,)).instructions)
    assert ops["linear"] == 2 and ops["linear_packed"] == 0, ops


def test_only_the_cpus_linears_are_packed() -> None:
    """accelerators implement `linear` on [N, K] weights: the pass sees the CPU's part of the graph
    only (the pipeline's CPU boundary), so a linear an accelerator was given stays `linear` there"""
    from openaccel.exporter.pipeline import PIPELINE, ExportContext

    x = Value("x", torch.float32, (64, 8))
    w = Value("w", torch.float32, (5, 8), data=torch.randn(5, 8))
    y, z = Value("y", torch.float32, (64, 5)), Value("z", torch.float32, (64, 5))
    g = Graph(name="forward", inputs=[x], outputs=[y, z])
    g.instrs = [Instr(op="linear", inputs=[x, w], outputs=[y], ints=[1], device=1),
                Instr(op="linear", inputs=[x, w], outputs=[z], ints=[1])]
    ctx = ExportContext(target="host", device_kinds=["cpu", "npu"], assigned=True)
    (p,) = [p for p in PIPELINE if p.name == "pack linear weights"]
    p.run(g, ctx)
    assert [(i.op, i.device) for i in g.instrs] == [("linear", 1), ("linear_packed", 0)]
    assert g.instrs[0].inputs[1] is w and g.instrs[1].ints == [1, pack.BLOCK]
    packed_w = g.instrs[1].inputs[1]
    assert packed_w is not None and packed_w.shape == (1, 8, 16)


def test_wrong_panel_count_is_a_clear_error() -> None:
    """the reference kernel validates the packed layout at load: what, where, expected vs received"""
    import pytest

    from openaccel.errors import OpenAccelError
    from openaccel.exporter.memory_plan import plan_memory
    from openaccel.exporter.serialize import serialize
    from openaccel.runtime.host import HostSession

    x = Value("x", torch.float32, (40, 8))
    w = Value("w", torch.float32, (1, 8, 16), data=torch.randn(1, 8, 16))  # 20 features need 2 panels
    y = Value("y", torch.float32, (40, 20))
    g = Graph(name="forward", inputs=[x], outputs=[y])
    g.instrs = [Instr(op="linear_packed", inputs=[x, w], outputs=[y], ints=[0, 16])]
    buf = serialize(g, plan_memory(g), [], target="host", required_features=[])
    with pytest.raises(OpenAccelError, match=r"linear_packed.*'w'.*1 panels of 16 for 20 output features, expected 2"):
        HostSession(buf)
