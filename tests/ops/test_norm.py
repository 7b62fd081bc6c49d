"""batch_norm (inference and with the batch's statistics) / layer_norm / group_norm against PyTorch.

Tolerances: rtol 1e-4, atol 1e-5. The kernels compute moments in double with two passes while
PyTorch uses float Welford/cascade sums and its own order of the affine terms, so results differ
by float rounding."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import Fn, OpCase, check_rejected, randn, run_case

TOL: dict[str, Any] = {"atol": 1e-5, "rtol": 1e-4}


def bn(name: str, shape: tuple[int, ...], affine: bool = True, eps: float = 1e-5) -> OpCase:
    c = shape[1]
    consts = [randn(c, seed=3), randn(c, seed=4).abs() + 0.1]
    if affine:
        consts += [randn(c, seed=1), randn(c, seed=2)]

    def f(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, *wb: torch.Tensor) -> torch.Tensor:
        w, b = wb if wb else (None, None)
        return F.batch_norm(x, mean, var, w, b, training=False, eps=eps)

    return OpCase(name, f, (randn(*shape) * 3 + 1,), consts=tuple(consts), ops=("batch_norm",), **TOL)


def ln(name: str, shape: tuple[int, ...], ndim: int, affine: bool = True, bias: bool = True) -> OpCase:
    norm_shape = shape[len(shape) - ndim:]
    consts: list[torch.Tensor] = []
    if affine:
        consts.append(randn(*norm_shape, seed=1))
        if bias:
            consts.append(randn(*norm_shape, seed=2))

    def f(x: torch.Tensor, *wb: torch.Tensor) -> torch.Tensor:
        w = wb[0] if wb else None
        b = wb[1] if len(wb) > 1 else None
        return F.layer_norm(x, norm_shape, w, b, eps=1e-5)

    return OpCase(name, f, (randn(*shape) * 2 + 0.5,), consts=tuple(consts), ops=("layer_norm",), **TOL)


def gn(name: str, shape: tuple[int, ...], groups: int, affine: bool = True) -> OpCase:
    c = shape[1]
    consts = (randn(c, seed=1), randn(c, seed=2)) if affine else ()

    def f(x: torch.Tensor, *wb: torch.Tensor) -> torch.Tensor:
        w, b = wb if wb else (None, None)
        return F.group_norm(x, groups, w, b, eps=1e-5)

    return OpCase(name, f, (randn(*shape) * 2 - 1,), consts=consts, ops=("group_norm",), **TOL)


class ConvBN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.bn2 = torch.nn.BatchNorm2d(4)
        for m in (self.bn, self.bn2):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the first BN folds into the conv, the second (after a relu) stays
        return self.bn2(torch.relu(self.bn(self.conv(x))))


def _bn_train(x: torch.Tensor, x3: torch.Tensor, x2: torch.Tensor, x5: torch.Tensor, w: torch.Tensor,
              b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        F.batch_norm(x, None, None, w, b, training=True),                      # no running stats: no_stats
        F.batch_norm(x3, torch.zeros(3), torch.ones(3), training=True, eps=1e-3),  # _functional, stats unread
        *torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),  # save_mean, save_invstd
        *torch.ops.aten._native_batch_norm_legit(x3, None, None, torch.zeros(3), torch.ones(3), True, 0.1, 1e-5)[:3],
        F.batch_norm(x2 + 10, None, None, training=True),
        F.batch_norm(x5.transpose(2, 4), None, None, training=True))


CASES = [
    # batch norm with the batch's statistics (training=True, or no running statistics)
    OpCase("norm_bn_training", _bn_train, (randn(2, 4, 5, 5) * 2 + 1, randn(3, 3, 7, seed=5), randn(6, 4, seed=6),
                                           randn(2, 2, 3, 2, 4, seed=7)),
           consts=(randn(4, seed=1), randn(4, seed=2)), ops=("batch_norm_training",), **TOL),
    OpCase("norm_bn_no_running_stats_module", lambda x: x, (randn(2, 3, 4, 4),),
           module=torch.nn.BatchNorm2d(3, track_running_stats=False), ops=("batch_norm_training",), **TOL),
    bn("norm_bn_4d", (2, 3, 5, 4)),
    bn("norm_bn_4d_no_affine", (1, 4, 3, 3), affine=False),
    bn("norm_bn_2d", (5, 6)),
    bn("norm_bn_3d", (2, 3, 7), eps=1e-3),
    bn("norm_bn_5d", (1, 2, 3, 2, 4)),
    OpCase("norm_bn_after_relu_and_folded", lambda x: x, (randn(1, 3, 6, 6),), module=ConvBN(),
           ops=("conv2d", "batch_norm"), **TOL),
    ln("norm_ln_last_dim", (2, 5, 16), 1),
    ln("norm_ln_last_dim_no_affine", (3, 10), 1, affine=False),
    ln("norm_ln_weight_only", (2, 4, 8), 1, bias=False),
    ln("norm_ln_two_dims", (2, 3, 4, 5), 2),
    ln("norm_ln_two_dims_no_affine", (2, 6, 7), 2, affine=False),
    ln("norm_ln_all_dims", (4, 6), 2),
    ln("norm_ln_1d_input", (12,), 1),
    OpCase("norm_ln_stats_outputs", lambda x, w, b: torch.ops.aten.native_layer_norm(x, [6], w, b, 1e-5),
           (randn(2, 3, 6),), consts=(randn(6, seed=1), randn(6, seed=2)), ops=("layer_norm",), **TOL),
    # a negative eps is legal in PyTorch (OpInfo's layer_norm sample uses -0.5): NaN where var + eps < 0
    # (the constant row), the usual answer elsewhere; it was refused at prepare though exported
    OpCase("norm_ln_gn_negative_eps",
           lambda x: (F.layer_norm(x, (8,), eps=-0.5), F.group_norm(x.reshape(3, 4, 2), 2, eps=-0.5)),
           (torch.cat([randn(2, 8) * 2 + 0.5, torch.full((1, 8), 0.25)]),), ops=("layer_norm", "group_norm"), **TOL),
    gn("norm_gn_2_groups", (2, 4, 5, 5), 2),
    gn("norm_gn_1_group", (1, 6, 3, 4), 1),
    gn("norm_gn_groups_eq_channels", (2, 6, 4, 4), 6),
    gn("norm_gn_no_affine", (1, 8, 3, 3), 4, affine=False),
    gn("norm_gn_3d_input", (2, 6, 10), 3),
    gn("norm_gn_2d_input", (3, 8), 2),
    gn("norm_gn_5d_input", (1, 4, 2, 3, 3), 2),
    OpCase("norm_gn_stats_outputs",
           lambda x, w, b: torch.ops.aten.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5),
           (randn(2, 6, 3, 4),), consts=(randn(6, seed=1), randn(6, seed=2)), ops=("group_norm",), **TOL),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_layer_norm_float64_unsupported() -> None:
    m = Fn(lambda x: F.layer_norm(x, (4,)))
    with pytest.raises(oa.UnsupportedOpError, match=r"native_layer_norm.*float32 only"):
        oa.export(m, (randn(2, 4).double(),))






def test_train_mode_batch_norm_module_refused() -> None:
    """A module exported in train() updates its running statistics (buffer mutations): refused with
    the buffers named, the batch-statistics op itself being supported."""
    ep = torch.export.export(torch.nn.BatchNorm2d(3).train(), (randn(2, 3, 4, 4),))
    with pytest.raises(oa.ExportError, match=r"mutates buffers \(.*running_mean.*\); put it in eval mode"):
        oa.export(ep, (randn(2, 3, 4, 4),))


def test_batch_norm_training_bad_outputs_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten._native_batch_norm_legit.no_stats",
                   lambda t: F.batch_norm(t, None, None, training=True), randn(2, 4, 3),
                   r"batch_norm_training.*eps = nan is out of range", floats=[float("nan")])


def test_layer_norm_bad_ndim_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.native_layer_norm.default", lambda t: F.layer_norm(t, (4,)), randn(2, 4),
                   r"layer_norm.*normalized_ndim = 3 is out of range", {0: 3})


def test_group_norm_bad_groups_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.native_group_norm.default", lambda t: F.group_norm(t, 2), randn(1, 4, 3),
                   r"group_norm.*groups = 3 must be positive and divide the 4 channels", {0: 3})


def test_norm_bad_eps_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    check_rejected(monkeypatch, "aten.native_layer_norm.default", lambda t: F.layer_norm(t, (4,)), randn(2, 4),
                   r"layer_norm.*eps = nan is out of range", floats=[float("nan")])
