"""Small reference models the tests, the demo and the benchmarks build with random weights.

They mirror the architectures users bring (an MLP, MobileNetV2, ResNet-18, a GPT-style decoder)
without torchvision, which cannot be installed beside the pinned torch here.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """784-512-512-10 classifier head, as in the benchmark table."""

    def __init__(self, sizes: tuple[int, ...] = (784, 512, 512, 10)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class _ConvBNReLU6(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1):
        super().__init__(
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU6(inplace=False),
        )


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = round(cin * expand)
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_ConvBNReLU6(cin, hidden, kernel=1))
        layers += [
            _ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, 1, 0, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018), same layer plan as torchvision's."""

    def __init__(self, num_classes: int = 1000, width: float = 1.0) -> None:
        super().__init__()
        settings = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                    [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
        cin = _make_divisible(32 * width)
        self.last = _make_divisible(1280 * max(1.0, width))
        feats: list[nn.Module] = [_ConvBNReLU6(3, cin, stride=2)]
        for t, c, n, s in settings:
            cout = _make_divisible(c * width)
            for i in range(n):
                feats.append(_InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        feats.append(_ConvBNReLU6(cin, self.last, kernel=1))
        self.features = nn.Sequential(*feats)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        return self.classifier(x)


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.down is None else self.down(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + idt)


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016), same layer plan as torchvision's."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(3, 2, 1)
        blocks: list[nn.Module] = []
        cin = 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [_BasicBlock(cin, cout, stride), _BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class _Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """GPT-style decoder: token + position embeddings, pre-LN blocks, causal SDPA, LM head."""

    def __init__(self, vocab: int = 512, d: int = 256, layers: int = 4, heads: int = 4,
                 max_seq: int = 128) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_seq, d)
        self.blocks = nn.Sequential(*[_Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        return self.head(self.ln(self.blocks(x)))


def build(name: str, seed: int = 0, small: bool = False) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Return (model in eval mode with seeded random weights, example inputs).

    small=True gives reduced input sizes that keep tests under emulation quick.
    """
    torch.manual_seed(seed)
    if name == "mlp":
        m: nn.Module = MLP()
        ex: tuple[torch.Tensor, ...] = (torch.randn(1, 784),)
    elif name == "mobilenet_v2":
        m = MobileNetV2()
        side = 64 if small else 224
        ex = (torch.randn(1, 3, side, side),)
    elif name == "resnet18":
        m = ResNet18()
        side = 64 if small else 224
        ex = (torch.randn(1, 3, side, side),)
    elif name == "gpt":
        m = GPT()
        seq = 32 if small else 128
        ex = (torch.randint(0, 512, (1, seq)),)
    else:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(NAMES)}")
    _randomize_norm_stats(m)
    return m.eval(), ex


NAMES = ("mlp", "mobilenet_v2", "resnet18", "gpt")


def _randomize_norm_stats(m: nn.Module) -> None:
    """Give batch-norm layers non-trivial statistics so folding them is actually tested."""
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            assert mod.running_mean is not None and mod.running_var is not None
            with torch.no_grad():
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
