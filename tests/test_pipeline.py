"""The exporter as a pipeline of one pass type (exporter/pipeline.py): the graph is verified after
every pass (exporter/verify.py) and a pass that breaks it is named; the README's listing of the
passes is the pipeline's."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa
from openaccel.exporter import pipeline
from openaccel.exporter.placement import DeviceProfile
from openaccel.exporter.verify import Placement, problems
from openaccel.ir import Graph, Instr, Value

ROOT = Path(__file__).resolve().parents[1]


def _v(name: str, *shape: int, data: torch.Tensor | None = None) -> Value:
    return Value(name, torch.float32, tuple(shape), data=data)


def _graph() -> Graph:
    """x -> relu -> t -> add(t, c) -> y"""
    x, t, y = _v("x", 2, 3), _v("t", 2, 3), _v("y", 2, 3)
    c = _v("c", 2, 3, data=torch.ones(2, 3))
    return Graph("forward", [x], [y], instrs=[Instr("relu", [x], [t]), Instr("add", [t, c], [y], floats=[1.0])])


def test_a_well_formed_graph_has_no_problems() -> None:
    g = _graph()
    assert problems(g, lowered=True) == []


@pytest.mark.parametrize("breakage,message", [
    (lambda g: g.instrs.reverse(), r"input 0 't' is read before any instruction writes it"),
    (lambda g: g.instrs.pop(), r"graph output 0 'y' is never written"),
    (lambda g: setattr(g.instrs[0], "op", "relu7"), r"'relu7' is not an op of the op set"),
    (lambda g: setattr(g.instrs[1], "floats", [1.0, 2.0]), r"2 float arguments, the op has 1 \(alpha\)"),
    (lambda g: setattr(g.instrs[0], "ints", [1]), r"1 integer arguments, the op has 0"),
    (lambda g: g.instrs[1].inputs.pop(), r"1 inputs, expected 2 \(self, other\)"),
    (lambda g: g.instrs[1].inputs.__setitem__(0, None), r"input 0 \(self\) is missing"),
    (lambda g: setattr(g.instrs[0], "outputs", []), r"0 outputs, expected 1"),
    (lambda g: setattr(g.instrs[0], "device", 1), r"device slot 1, the program has 1 \(cpu\)"),
    (lambda g: setattr(g.instrs[0].outputs[0], "shape", (2, -3)), r"value 't' has no static shape"),
    (lambda g: setattr(g.instrs[1].inputs[1], "shape", (3, 2, 1)),
     r"constant 'c' is recorded as float32\[3, 2, 1\] but its data is float32\[2, 3\]"),
    (lambda g: g.instrs[0].outputs.__setitem__(0, g.instrs[1].inputs[1]), r"writes a constant"),
    (lambda g: g.instrs.append(Instr("relu", [g.inputs[0]], [g.outputs[0]])),
     r"'y' was already written by instruction 1"),
    (lambda g: setattr(g.outputs[0], "alias_of", _v("small", 1)),
     r"view 'y' \(24 bytes at offset 0\) runs past 'small'"),
])
def test_each_kind_of_breakage_is_found(breakage: Callable[[Graph], object], message: str) -> None:
    g = _graph()
    breakage(g)
    found = problems(g, lowered=True)
    assert any(re.search(message, p) for p in found), found


def test_placement_must_match_the_profiles() -> None:
    g = _graph()
    sim = DeviceProfile("vendor.sim", {"relu": {"float32"}})
    for ins in g.instrs:
        ins.device = 1
    found = problems(g, lowered=True, where=Placement(["cpu", "vendor.sim"], {"vendor.sim": sim}))
    assert found == ["instruction 1 (add): placed on vendor.sim, whose profile has no add (float32)"], found
    # once transfers are placed every instruction works on its own device's memory
    g = _graph()
    g.instrs[0].device = 1
    g.homes = {g.instrs[0].outputs[0]: 1}
    found = problems(g, lowered=True, where=Placement(["cpu", "vendor.sim"], {"vendor.sim": sim}, True))
    assert "instruction 0 (relu) on device 1: input 0 'x' lives on device 0" in found
    assert "instruction 1 (add) on device 0: input 0 't' lives on device 1" in found


class Convs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(F.relu(self.a(x)))


def test_a_broken_pass_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """a pass that drops an instruction whose output is still read fails the export at once, naming it"""
    def drop_first_conv(graph: Graph, ctx: pipeline.ExportContext) -> None:
        assert graph.instrs[0].op == "conv2d"
        del graph.instrs[0]

    passes = list(pipeline.PIPELINE)
    k = [p.name for p in passes].index("fuse activations")
    passes.insert(k + 1, pipeline.GraphPass("drop a convolution", drop_first_conv))
    monkeypatch.setattr(pipeline, "PIPELINE", passes)
    seen: list[str] = []
    with pytest.raises(oa.ExportError, match=r"graph is broken after the pass 'drop a convolution':\n"
                                             r"  instruction 0 \(conv2d, from .*test_pipeline.py:\d+ .*\): input 0 "
                                             r"'\w+' is read before any instruction writes it"):
        oa.export(Convs().eval(), (torch.randn(1, 3, 8, 8),), progress=lambda name, _s: seen.append(name))
    assert seen[-1] == "drop a convolution" and "plan memory" not in seen


def test_every_pass_reports_its_time_under_its_name() -> None:
    seen: list[str] = []
    oa.export(Convs().eval(), (torch.randn(1, 3, 8, 8),), progress=lambda name, _s: seen.append(name))
    assert seen == ["torch.export", "import executorch", "to_edge (core ATen)", "import graph",
                    *[p.name for p in pipeline.PIPELINE]]


def test_readme_lists_the_pipeline() -> None:
    """the `openaccel export` listing in README.md is the pipeline's names, in order"""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("$ openaccel export resnet18.pt2"):]
    block = block[:block.index("```")]
    listed = re.findall(r"✓ (.+?) \(\d+ ms\)", block)
    assert listed == ["import executorch", "to_edge (core ATen)", "import graph", *[p.name for p in pipeline.PIPELINE]]


NPU = [{"kind": "npu.x", "ops": {"conv2d": ["float32"], "relu": ["float32"]}}]  # a profile: no library needed


def test_a_pass_moving_an_op_to_another_device_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def back_to_the_cpu(graph: Graph, ctx: pipeline.ExportContext) -> None:
        for ins in graph.instrs:
            ins.device = 0

    passes = list(pipeline.PIPELINE)
    passes.insert([p.name for p in passes].index("fuse activations"), pipeline.GraphPass("greedy", back_to_the_cpu))
    monkeypatch.setattr(pipeline, "PIPELINE", passes)
    with pytest.raises(oa.ExportError, match=r"the pass 'greedy' moved instruction 0 \(conv2d, from .*\) "
                                             r"from npu.x to cpu"):
        oa.export(Convs().eval(), (torch.randn(1, 3, 8, 8),), devices=NPU, prefer=["npu.x", "cpu"])


def test_cpu_passes_only_see_the_cpus_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[tuple[str, int]]] = {}

    def spy(p: pipeline.GraphPass) -> pipeline.GraphPass:
        def run(g: Graph, c: pipeline.ExportContext) -> object:
            seen[p.name] = [(i.op, i.device) for i in g.instrs]
            return p.fn(g, c)
        return pipeline.GraphPass(p.name, run, p.cpu_only)

    monkeypatch.setattr(pipeline, "PIPELINE", [spy(p) if isinstance(p, pipeline.GraphPass) and p.cpu_only else p
                                               for p in pipeline.PIPELINE])
    relu_only = [{"kind": "npu.x", "ops": {"relu": ["float32"]}}]
    prog = oa.export(Convs().eval(), (torch.randn(1, 3, 8, 8),), devices=relu_only, prefer=["npu.x", "cpu"],
                     bundle_tests=False)
    assert ("relu", "npu.x") in [(p.op, p.device) for p in prog.instructions]
    assert set(seen) == {"Winograd convolutions", "pack linear weights", "channels-last layout",
                         "fuse inverted-residual blocks"}
    assert seen["Winograd convolutions"] == [("conv2d", 0), ("conv2d", 0)], seen


def test_the_cpus_rewrites_merge_back_between_the_other_devices_ops() -> None:
    """CPU a -> device b -> CPU c; a CPU pass adds a copy after a (read by b) and one before c (of
    b's output): each lands after what it reads and before what reads it"""
    from openaccel.exporter.boundary import cpu_part

    x, t, u, y = _v("x", 4), _v("t", 4), _v("u", 4), _v("y", 4)
    a, b, c = Instr("relu", [x], [t]), Instr("relu", [t], [u], device=1), Instr("neg", [u], [y])
    g = Graph("forward", [x], [y], instrs=[a, b, c])
    with cpu_part(g, "test") as part:
        assert part.instrs == [a, c] and part.inputs == [x, u] and part.outputs == [y, t]
        t2, u2 = _v("t2", 4), _v("u2", 4)
        a.outputs = [t2]
        c.inputs = [u2]
        back, into = Instr("copy", [t2], [t]), Instr("copy", [u], [u2])
        part.instrs = [a, back, into, c]
    assert g.instrs == [a, back, b, into, c]
    sim = DeviceProfile("npu.x", {"relu": {"float32"}})
    assert problems(g, lowered=True, where=Placement(["cpu", "npu.x"], {"npu.x": sim})) == []
