"""The channels-last layout pass (exporter/layout.py) and the inverted-residual fusion after it
(exporter/fuse.py): which graphs move to NHWC, where the permutes go, which blocks fuse, and that
the results still match PyTorch eager (on the host and the emulated boards, through each file's
bundled tests)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch import nn

import openaccel as oa
from openaccel.errors import ExportError

from helpers import CACHE, check_on_boards


class Block(nn.Module):
    """An inverted residual block (MobileNetV2): 1x1 expand, depthwise 3x3, 1x1 project, + x."""

    def __init__(self, c: int, e: int, stride: int = 1) -> None:
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(c, e, 1), nn.BatchNorm2d(e), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(e, e, 3, stride, 1, groups=e), nn.BatchNorm2d(e), nn.ReLU6())
        self.project = nn.Conv2d(e, c, 1)
        self.residual = stride == 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.dw(self.expand(x)))
        return x + y if self.residual else y


class TinyMobileNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU6())
        self.blocks = nn.Sequential(Block(8, 24), Block(8, 20, stride=2), Block(8, 16))
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class TinyResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        return torch.relu(y + self.b(y))


def _export(model: nn.Module, x: torch.Tensor, name: str, **kw: object) -> tuple[oa.Program, Counter[str]]:
    torch.manual_seed(0)
    prog = oa.export(model.eval(), (x,), **kw)
    path = CACHE / "layout" / f"{name}.oab"
    path.parent.mkdir(parents=True, exist_ok=True)
    prog.save(path)
    return prog, Counter(i.op for i in prog.instructions)


def _check(prog: oa.Program, model: nn.Module, x: torch.Tensor) -> None:
    """every output of the program against the model's, on the host"""
    with torch.no_grad():
        want = model(x)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    got = oa.load(prog)(x)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(torch.as_tensor(g), w, atol=1e-4, rtol=1e-4)


def test_depthwise_network_runs_channels_last() -> None:
    torch.manual_seed(1)
    model, x = TinyMobileNet().eval(), torch.randn(1, 3, 17, 19)
    prog, ops = _export(model, x, "tiny_mobilenet")
    # the stem stays a convolution, each block becomes one fused mbconv_nhwc
    assert ops["conv2d_nhwc"] == 1 and ops["mbconv_nhwc"] == 3 and ops["conv2d"] == 0, ops
    # no permute: the stem reads the NCHW image in place (input_nchw), the residual adds and
    # activations stay inside the stack, the mean over H and W reduces the NHWC map
    assert ops["permute"] == 0, ops
    stem = next(i for i in prog.instructions if i.op == "conv2d_nhwc")
    assert dict(stem.args).get("input_nchw") == 1, stem.args
    _check(prog, model, x)
    check_on_boards(CACHE / "layout" / "tiny_mobilenet.oab", "tiny_mobilenet")
    prog_nchw, ops_nchw = _export(model, x, "tiny_mobilenet_nchw", layout="nchw")
    assert ops_nchw["conv2d_nhwc"] == 0 and ops_nchw["permute"] == 0, ops_nchw
    _check(prog_nchw, model, x)


def test_blocks_fuse_only_when_their_intermediates_are_private() -> None:
    """an expanded tensor another op also reads keeps the expansion out of the block"""

    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = Block(8, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            e = self.block.expand(x)
            return self.block.project(self.block.dw(e)), e.sum((2, 3))

    torch.manual_seed(4)
    model, x = Shared().eval(), torch.randn(1, 8, 10, 10)
    prog, ops = _export(model, x, "layout_shared")
    # expand stays a conv2d_nhwc (its output is also summed); depthwise -> project fuse
    assert ops["mbconv_nhwc"] == 1 and ops["conv2d_nhwc"] == 1, ops
    _check(prog, model, x)


def test_network_without_depthwise_stays_nchw_unless_asked() -> None:
    torch.manual_seed(2)
    model, x = TinyResNet().eval(), torch.randn(2, 3, 9, 9)
    _, ops = _export(model, x, "tiny_resnet", winograd_convs=False)
    assert ops["conv2d"] == 2 and ops["conv2d_nhwc"] == 0, ops
    prog, ops = _export(model, x, "tiny_resnet_nhwc", winograd_convs=False, layout="nhwc")
    # the first conv reads the 3-channel input in NCHW; the result is permuted back
    assert ops["conv2d_nhwc"] == 2 and ops["permute"] == 1, ops
    _check(prog, model, x)


class Mixed(nn.Module):
    """A stack value that a view, a graph output and an NCHW-only op (max_pool2d) all read, a
    channel-broadcast multiply (not position-wise: the stack ends there), and a 1-D conv (views)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 6, 1)
        self.dw = nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.scale = nn.Parameter(torch.randn(1, 6, 1, 1))
        self.c1 = nn.Conv1d(6, 3, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.dw(torch.relu(self.a(x)))
        z = torch.nn.functional.max_pool2d(y, 2) * self.scale
        return y, y.flatten(1), z, self.c1(y.mean(3))


def test_stack_edges_get_permutes_back() -> None:
    torch.manual_seed(3)
    model, x = Mixed().eval(), torch.randn(1, 4, 6, 8)
    prog, ops = _export(model, x, "layout_mixed")
    assert ops["conv2d_nhwc"] == 2, ops
    _check(prog, model, x)
    check_on_boards(CACHE / "layout" / "layout_mixed.oab", "layout_mixed", ["qemu-aarch64"])


class Pooled(nn.Module):
    """Global poolings at the end of a stack: a mean with keepdim that a flatten views (the
    torchvision head), a max without keepdim, a sum with its dims listed W first (a graph output
    kept 4-D), and a mean over H alone (not global: that value is permuted back)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(5, 12, 1)
        self.dw = nn.Conv2d(12, 12, 3, padding=1, groups=12)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.relu(self.dw(self.a(x)))
        return (self.head(y.mean((2, 3), keepdim=True).flatten(1)), y.amax((2, 3)), y.sum((3, 2), keepdim=True),
                y.mean(2))


def test_global_pooling_reads_the_nhwc_map() -> None:
    torch.manual_seed(5)
    model, x = Pooled().eval(), torch.randn(2, 5, 7, 6)
    prog, ops = _export(model, x, "layout_pooled")
    reduce_dims = sorted(tuple(dict(i.args)["dims"]) for i in prog.instructions if i.op in ("mean", "amax", "sum"))
    # three global poolings over W and H of NHWC; the mean over H alone reads NCHW
    assert reduce_dims == [(1, 2), (1, 2), (1, 2), (2,)], reduce_dims
    assert ops["permute"] == 2, ops  # the input in, the map back out for mean(2)
    _check(prog, model, x)
    check_on_boards(CACHE / "layout" / "layout_pooled.oab", "layout_pooled", ["qemu-aarch64"])


def test_bad_layout_names_the_choices() -> None:
    with pytest.raises(ExportError, match="layout 'nchwc' is not one of auto, nchw, nhwc"):
        oa.export(TinyResNet().eval(), (torch.randn(1, 3, 5, 5),), layout="nchwc")


def test_auto_keeps_nchw_when_an_accelerator_is_preferred() -> None:
    """devices implement conv2d (NCHW): with one preferred, auto does not move the stack"""
    from openaccel.exporter import layout
    from openaccel.ir import Graph, Instr, Value

    x = Value("x", torch.float32, (1, 4, 6, 6))
    w = Value("w", torch.float32, (4, 1, 3, 3), data=torch.randn(4, 1, 3, 3))
    y = Value("y", torch.float32, (1, 4, 6, 6))
    g = Graph(name="forward", inputs=[x], outputs=[y])
    g.instrs = [Instr(op="conv2d", inputs=[x, w, None], outputs=[y], ints=[1, 1, 1, 1, 1, 1, 4, 0])]
    assert layout.wanted(g, "auto") and not layout.wanted(g, "auto", accelerators=True)
    assert layout.wanted(g, "nhwc", accelerators=True)
    assert layout.rewrite(g, "auto", accelerators=True) == 0 and g.instrs[0].op == "conv2d"
    assert layout.rewrite(g, "auto") == 1 and [i.op for i in g.instrs] == ["permute", "conv2d_nhwc", "permute"]
