"""conv2d_winograd: the export pass (exporter/winograd.py: 3x3 stride-1 convolutions with
constant weights, weights transformed at export), the residual-add fusion (fuse.py), and the
kernels through exported programs against PyTorch, on the host and the emulated boards.
(The optimized kernels against the reference kernel on many shapes: test_fast_kernels.py.)

Tolerances: atol = rtol = 1e-4, the model tolerance: F(4x4) keeps about 2e-6 of the output's
magnitude per layer (the weight transform's rounding to float32, amplified by the transforms),
F(2x2) less."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import openaccel as oa
from openaccel.exporter import winograd

from helpers import Fn, OpCase, randn, run_case

TOL: dict[str, Any] = {"atol": 1e-4, "rtol": 1e-4}


class Block(nn.Module):
    """A ResNet basic block: conv-bn-relu, conv-bn, + identity (optionally a 1x1 projection), relu."""

    def __init__(self, cin: int, cout: int, project: bool = False) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
        self.proj = nn.Conv2d(cin, cout, 1) if project else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        identity = self.proj(x) if self.proj is not None else x
        return torch.relu(y + identity)


def _block(cin: int, cout: int, project: bool = False, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    m = Block(cin, cout, project).eval()
    for bn in (m.b1, m.b2):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    return m


def conv(name: str, x: tuple[int, ...], w: tuple[int, ...], bias: bool = True, act: str = "", **kw: Any) -> OpCase:
    consts = (randn(*w, seed=1),) + ((randn(w[0], seed=2),) if bias else ())
    acts = {"": lambda t: t, "relu": torch.relu, "relu6": F.relu6}

    def f(inp: torch.Tensor, weight: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return acts[act](F.conv2d(inp, weight, b, **kw))

    return OpCase(name, f, (randn(*x),), consts=consts, ops=("conv2d_winograd",), **TOL)


CASES = [
    conv("wino_16x12x12", (1, 16, 12, 12), (16, 16, 3, 3), padding=1),
    conv("wino_odd_sizes_relu", (1, 9, 13, 11), (12, 9, 3, 3), padding=1, act="relu"),
    conv("wino_no_padding_relu6", (1, 8, 10, 9), (20, 8, 3, 3), padding=0, act="relu6"),
    conv("wino_pad2_nobias", (2, 10, 6, 7), (8, 10, 3, 3), bias=False, padding=2),
    conv("wino_asym_padding", (1, 8, 9, 8), (9, 8, 3, 3), padding=(0, 1)),
    conv("wino_small_image", (1, 24, 7, 7), (32, 24, 3, 3), padding=1),
    # >= 20 F(4x4) tiles: F(4x4) (the cases above: F(2x2))
    conv("wino_f4_20x20_relu", (1, 8, 20, 20), (16, 8, 3, 3), padding=1, act="relu"),
    conv("wino_f4_odd_no_padding", (1, 9, 19, 21), (12, 9, 3, 3), padding=0),
    OpCase("wino_resnet_block", lambda x: x, (randn(1, 16, 14, 14),), ops=("conv2d_winograd",),
           module=_block(16, 16), **TOL),
    OpCase("wino_resnet_block_projection", lambda x: x, (randn(2, 8, 12, 12),), ops=("conv2d_winograd",),
           module=_block(8, 16, project=True, seed=1), **TOL),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def _instrs(prog: oa.Program) -> list[tuple[str, dict[str, Any]]]:
    return [(i.op, dict(i.args)) for i in prog.instructions]


def test_resnet_block_is_two_instructions() -> None:
    """conv -> bn -> relu and conv -> bn -> add -> relu: the second conv takes the residual as its
    addend and the relu as its act"""
    x = randn(1, 16, 14, 14)
    prog = oa.export(_block(16, 16), (x,), bundle_tests=False)
    ins = _instrs(prog)
    assert [op for op, _ in ins] == ["conv2d_winograd", "conv2d_winograd"], ins
    assert [a["act"] for _, a in ins] == [1, 1]
    assert [len(i.inputs) for i in prog.instructions] == [3, 4]
    assert prog.instructions[1].inputs[3] == "x"


def test_disabled_and_small_convs_stay_direct() -> None:
    m = Fn(lambda x, w: F.conv2d(x, w, padding=1), (randn(16, 16, 3, 3, seed=1),))
    x = randn(1, 16, 12, 12)
    assert oa.export(m, (x,), bundle_tests=False, winograd_convs=False).ops == ["conv2d"]
    assert oa.export(m, (x,), bundle_tests=False).ops == ["conv2d_winograd"]
    for fn, shape in [
        (lambda x, w: F.conv2d(x, w, padding=1, stride=2), (16, 16, 3, 3)),   # stride 2
        (lambda x, w: F.conv2d(x, w, padding=2, dilation=2), (16, 16, 3, 3)),  # dilation
        (lambda x, w: F.conv2d(x, w, padding=1, groups=2), (16, 8, 3, 3)),     # groups
        (lambda x, w: F.conv2d(x, w, padding=2), (16, 16, 5, 5)),              # 5x5
        (lambda x, w: F.conv2d(x, w, padding=1), (4, 16, 3, 3)),               # few output channels
    ]:
        prog = oa.export(Fn(fn, (randn(*shape, seed=1),)), (x,), bundle_tests=False)
        assert prog.ops == ["conv2d"], prog.ops


@pytest.mark.parametrize("hw,tile", [(7, 2), (14, 2), (16, 2), (17, 4), (56, 4)])
def test_tile_choice(hw: int, tile: int) -> None:
    """F(4x4) from 20 of its tiles: a 16 x 16 output has 4 x 4, a 17 x 17 one 5 x 5"""
    m = Fn(lambda x, w: F.conv2d(x, w, padding=1), (randn(8, 8, 3, 3, seed=1),))
    prog = oa.export(m, (randn(1, 8, hw, hw),), bundle_tests=False)
    assert [(op, a["tile"]) for op, a in _instrs(prog)] == [("conv2d_winograd", tile)]


def test_runtime_weights_stay_direct() -> None:
    m = Fn(lambda x, w: F.conv2d(x, w, padding=1))
    prog = oa.export(m, (randn(1, 16, 12, 12), randn(16, 16, 3, 3, seed=1)), bundle_tests=False)
    assert prog.ops == ["conv2d"]


def test_add_not_fused_when_conv_output_is_reused_or_broadcast() -> None:
    w = randn(16, 16, 3, 3, seed=1)
    x = randn(1, 16, 12, 12)
    twice = oa.export(Fn(lambda x, w: (lambda y: (y + x) * y)(F.conv2d(x, w, padding=1)), (w,)), (x,))
    assert "add" in twice.ops and "conv2d_winograd" in twice.ops
    bcast = oa.export(Fn(lambda x, w, b: F.conv2d(x, w, padding=1) + b, (w, randn(16, 1, 1, seed=3))), (x,))
    assert "add" in bcast.ops and "conv2d_winograd" in bcast.ops
    for prog, fn in [(twice, lambda: (lambda y: (y + x) * y)(F.conv2d(x, w, padding=1)))]:
        (got,) = oa.load(prog)(x)
        torch.testing.assert_close(got, fn(), **TOL)


@pytest.mark.parametrize("tile", winograd.TILES)
def test_weight_transform_matches_convolution(tile: int) -> None:
    """the Python model of the op (float64) against PyTorch's convolution"""
    x, w = randn(2, 5, 9, 7), randn(20, 5, 3, 3, seed=1)
    u = winograd.transform_weights(w, tile)
    assert tuple(u.shape) == ((tile + 2) ** 2, 2, 5, winograd.BLOCK)
    got = winograd.reference(x, u, tile, (1, 0), 20)
    want = F.conv2d(x.double(), w.double(), padding=(1, 0))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def _tampered(monkeypatch: pytest.MonkeyPatch, ints: dict[int, int] | None = None,
              weight: tuple[int, ...] | None = None) -> oa.Program:
    """A program whose conv2d_winograd instruction (F(2x2): 16 transform positions) was altered
    after the pass (a hostile file)."""
    from openaccel.exporter import winograd as wmod

    base = wmod.rewrite

    def patched(graph: Any, enabled: bool = True) -> int:
        n = base(graph, enabled)
        for ins in graph.instrs:
            if ins.op == "conv2d_winograd":
                for k, v in (ints or {}).items():
                    ins.ints[k] = v
                if weight is not None:
                    w = ins.inputs[1]
                    w.data = torch.zeros(weight)
                    w.shape = weight
        return n

    monkeypatch.setattr(wmod, "rewrite", patched)
    m = Fn(lambda x, w: F.conv2d(x, w, padding=1), (randn(16, 8, 3, 3, seed=1),))
    return oa.export(m, (randn(1, 8, 8, 8),), bundle_tests=False)


@pytest.mark.parametrize("ints,weight,match", [
    ({0: 3}, None, r"tile = 3 is not supported"),
    ({4: 0}, None, r"block = 0 is out of range"),
    ({0: 4}, None, r"input 1 \(weight\).*expected shape \[36, 1, 8, 16\], received \[16, 1, 8, 16\]"),
    ({4: 8}, None, r"input 1 \(weight\).*expected shape \[16, 2, 8, 8\]"),
    ({1: 2}, None, r"output 0 .*expected shape \[1, 16, 10, 8\]"),
    ({3: 7}, None, r"act = 7 is not a known activation"),
    ({}, (16, 1, 7, 16), r"input 1 \(weight\).*expected shape \[16, 1, 8, 16\]"),
    ({}, (16, 1, 8), r"input 1 \(weight\).*expected 4 dims"),
])
def test_bad_args_rejected(monkeypatch: pytest.MonkeyPatch, ints: dict[int, int], weight: tuple[int, ...] | None,
                           match: str) -> None:
    prog = _tampered(monkeypatch, ints, weight)
    with pytest.raises(oa.RuntimeFailure, match=r"conv2d_winograd.*" + match):
        oa.load(prog)(randn(1, 8, 8, 8))


def test_bad_pad_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    prog = _tampered(monkeypatch, {1: 3, 2: 3})
    with pytest.raises(oa.RuntimeFailure,
                       match=r"conv2d_winograd.*pad_h = 3, pad_w = 3 are out of range \(expected 0 to 2\)"):
        oa.load(prog)(randn(1, 8, 8, 8))


@pytest.mark.parametrize("shape", [(1, 16, 8, 7), (1, 8, 8, 8), (16, 8, 8)])
def test_addend_shape_mismatch_rejected(monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...]) -> None:
    """an addend not shaped exactly like the output (no broadcasting) is refused"""
    from openaccel.exporter import fuse
    from openaccel.ir import Value

    base = fuse.fuse_residual_adds

    def patched(graph: Any) -> int:
        n = base(graph)
        for ins in graph.instrs:
            if ins.op == "conv2d_winograd":
                bad = Value(name="bad_addend", dtype=torch.float32, shape=shape, data=torch.zeros(shape))
                ins.inputs = [*(list(ins.inputs) + [None] * 3)[:3], bad]
        return n

    monkeypatch.setattr(fuse, "fuse_residual_adds", patched)
    m = Fn(lambda x, w: F.conv2d(x, w, padding=1), (randn(16, 8, 3, 3, seed=1),))
    prog = oa.export(m, (randn(1, 8, 8, 8),), bundle_tests=False)
    with pytest.raises(oa.RuntimeFailure,
                       match=r"conv2d_winograd.*input 3 \(addend\).*expected shape \[1, 16, 8, 8\]"):
        oa.load(prog)(randn(1, 8, 8, 8))


def test_addend_sharing_the_input_is_not_fused() -> None:
    """conv(r) + r with r dying there: the output could overwrite the addend in place, which is
    the convolution's own input, so the add stays separate (and the result is right)"""
    w = randn(8, 8, 3, 3, seed=1)
    m = Fn(lambda x, w: (lambda r: F.conv2d(r, w, padding=1) + r)(torch.relu(x)), (w,))
    x = randn(1, 8, 10, 10)
    prog = oa.export(m, (x,))
    assert "add" in prog.ops and "conv2d_winograd" in prog.ops
    (got,) = oa.load(prog)(x)
    torch.testing.assert_close(got, m(x), **TOL)


def test_bands_give_the_same_bytes_on_any_thread_count() -> None:
    """A layer whose transformed weights are small runs in bands of half the L2 (several here,
    one where the L2 is small): every output is computed by the same operations whatever the
    band and thread split, so 1, 2 and 3 threads give the same bytes. Two images: a thread's share
    of the tile rows (32 rows on 3 threads: 10, 11, 11) crosses from one image into the next."""
    import numpy as np

    from openaccel.runtime.host import HostSession

    w, x = randn(32, 32, 3, 3, seed=1), randn(2, 32, 64, 64)
    prog = oa.export(Fn(lambda x, w: torch.relu(F.conv2d(x, w, padding=1)), (w,)), (x,), bundle_tests=False)
    assert [(op, a["tile"]) for op, a in _instrs(prog)] == [("conv2d_winograd", 4)]
    runs = [HostSession(prog.buffer, threads=t).run([x.numpy()])[0] for t in (1, 2, 3)]
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])
    # transformed weights past half the L2 but within PER_THREAD_U_MAX (winograd.c): each thread
    # takes an equal share of the tiles (7 x 7 tiles: 24 + 25, 16 + 16 + 17), mid tile row
    w2, x2 = randn(256, 256, 3, 3, seed=2), randn(1, 256, 14, 14)
    prog2 = oa.export(Fn(lambda x, w: F.conv2d(x, w, padding=1), (w2,)), (x2,), bundle_tests=False)
    assert [op for op, _ in _instrs(prog2)] == ["conv2d_winograd"]
    runs2 = [HostSession(prog2.buffer, threads=t).run([x2.numpy()])[0] for t in (1, 2, 3)]
    assert np.array_equal(runs2[0], runs2[1]) and np.array_equal(runs2[0], runs2[2])
    want2 = F.conv2d(x2, w2, padding=1)
    torch.testing.assert_close(torch.from_numpy(runs2[0]), want2, atol=2e-5 * float(want2.abs().max()), rtol=1e-4)
    want = torch.relu(F.conv2d(x, w, padding=1))
    # F(4x4) rounding: about 3e-6 of the layer's largest output (exporter/winograd.py)
    torch.testing.assert_close(torch.from_numpy(runs[0]), want, atol=2e-5 * float(want.abs().max()), rtol=1e-4)
