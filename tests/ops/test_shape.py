"""Shape / data-movement ops against PyTorch: views (zero-copy aliases), permute, expand, slice,
select, cat, split, pad, flip, repeat, copy."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa
from openaccel.exporter import lower

from helpers import OpCase, export_case, randint, randn, run_case


def rbool(*shape: int, seed: int = 0) -> torch.Tensor:
    return randn(*shape, seed=seed) > 0


X = randn(2, 3, 4)
XI = randint(-50, 50, 2, 3, 4)

XI4 = randint(-9, 9, 2, 3, 4, 5, seed=1)
XB = rbool(2, 3, 4)
I32 = randint(-9, 9, 3, 5, dtype=torch.int32)

# Cases bundle several variants (dtypes, dims, bounds) as outputs of one model: exporting is the
# slow part of a test, running is instant.
CASES = [
    # ---- zero-copy views: graph outputs viewing an input or a parameter, views feeding ops -----
    OpCase("shape_views_of_input_and_param",
           lambda x, xi, w: (x.view(6, 4), xi.flatten(), xi[1], xi.unsqueeze(0), w.view(2, 6), x.view(-1)),
           (X, XI), consts=(randn(3, 4, seed=1),)),
    OpCase("shape_views_feed_ops",
           lambda x, b: (torch.relu(x.reshape(4, 6)).unsqueeze(1).squeeze(), x.view(6, 4).t().unsqueeze(0),
                         x.transpose(0, 1).contiguous().clone().detach(), b[:1, :, :1].squeeze()),
           (X, XB), ops=("relu", "permute")),
    # ---- permute -------------------------------------------------------------------------------
    OpCase("shape_permute",
           lambda x, xi, b, i: (x.permute(2, 0, 1), xi.permute(0, -1, 1, -2), b.transpose(-1, 0), i.t()),
           (X, XI4, XB, I32), ops=("permute",)),
    # ---- expand / repeat -----------------------------------------------------------------------
    OpCase("shape_expand",
           lambda x, xi, b: (x.expand(2, 3, 4), xi.expand(5, -1), b.expand(2, 3, 4)),
           (randn(3, 1), randint(0, 9, 1, 4), rbool(2, 1, 4)), ops=("expand",)),
    OpCase("shape_expand_const", lambda x, c: torch.cat([x, c.expand(60, 8)]), (randn(4, 8),),
           consts=(randn(1, 8, seed=2),), ops=("expand", "cat")),
    OpCase("shape_repeat", lambda x, xi, b: (x.repeat(2, 1, 3), xi.repeat(2, 2, 1, 1), b.tile(3)),
           (X, XI, rbool(2, 3)), ops=("repeat",)),
    # ---- slice / select ------------------------------------------------------------------------
    OpCase("shape_slice",
           lambda x, x7, xi, b: (x[:, 1:, ::2], xi[..., -3:-1],
                                 x[-100:2, 1:100, 2:1000], x7[:, -5::3], b[:, :, 1::2], x.narrow(-1, 1, 2),
                                 x[:, 3:1], x7[:, 6:]),
           (X, randn(2, 7), XI, XB), ops=("slice",)),
    OpCase("shape_select", lambda x, xi, b: (x[:, -1], xi[..., 2], b.select(1, 0), xi[:, :, -4]),
           (X, XI, XB), ops=("select",)),
    # ---- cat -----------------------------------------------------------------------------------
    OpCase("shape_cat",
           lambda x, y, z, xi, yi, b, c, e: (torch.cat([x, y, x]), torch.cat([x, x[:, :0], z], 1),
                                             torch.cat([xi, yi], 2), torch.cat([c, b], -2),
                                             torch.cat([e, x, e, x]), torch.stack([x, x], 1)),
           (X, randn(1, 3, 4, seed=1), randn(2, 5, 4, seed=2), XI, randint(0, 9, 2, 3, 1), XB,
            rbool(2, 2, 4, seed=1)), consts=(torch.empty(0),), ops=("cat",)),
    OpCase("shape_cat_70_inputs", lambda x: torch.cat([x] * 70, 1), (randn(2, 3),), ops=("cat",)),
    OpCase("shape_cat_param_view", lambda x, w: torch.cat([x, w.view(1, -1)[:, 1:]], 0), (randn(1, 9),),
           consts=(randn(2, 5, seed=3),), ops=("cat",)),
    # ---- split ---------------------------------------------------------------------------------
    OpCase("shape_split",
           lambda x, xi, b: (*torch.split(x, [1, 3, 1], dim=1), *torch.split(xi, 2, dim=-1),
                             *torch.chunk(b, 2, 2), *torch.unbind(x, 2)),
           (randn(2, 5, 3), randint(0, 9, 2, 3, 5), XB), ops=("split", "slice")),
    OpCase("shape_copy_variants",  # *_copy overloads that torch.export keeps when called directly
           lambda x: (*torch.ops.aten.unbind_copy.int(x, 1), *torch.ops.aten.unbind_copy.int(x, 0),
                      *torch.ops.aten.split_copy.Tensor(x, 2, 1), torch.ops.aten.t_copy(x),
                      torch.ops.aten.transpose_copy.int(x, 0, -1), torch.ops.aten.narrow_copy(x, 1, 1, 2)),
           (randn(2, 3),), ops=("split", "permute", "slice")),
    # ---- pad -----------------------------------------------------------------------------------
    OpCase("shape_pad",
           lambda x, x1, xi, b: (F.pad(x, (1, 2)), F.pad(x, (1, -1, 2, 0), value=1.5), F.pad(x, (-1, -1, -1, 0)),
                                 F.pad(xi, (1, 1, 0, 2, 1, 0), value=7), torch.constant_pad_nd(b, (1, 1), 1),
                                 F.pad(x1, (2, 3), value=float("-inf")), F.pad(x, (0, 0, -3, 0))),
           (X, randn(5), randint(0, 9, 2, 2, 3, 3), XB), ops=("pad",)),
    # ---- flip ----------------------------------------------------------------------------------
    OpCase("shape_flip", lambda x, xi, b: (x.flip(-1), xi.flip(0, 2), b.flip(1), x.flip(0, 1, 2)),
           (X, XI, XB), ops=("flip",)),
    # ---- empty tensors whose other dims describe more bytes than the tensors hold: the file format
    # bounds their dims by their pool, so the memory plan sizes the pool for them (OpInfo's fliplr
    # sample was refused at load)
    OpCase("shape_empty_tensor_pool",
           lambda e, x: (e.flip(0), e.permute(2, 0, 1) * 2, e.sum(1), x + 1),
           (torch.zeros(5, 0, 10), randn(2)), ops=("sum",)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def _no(prog: oa.Program, *ops: str) -> None:
    found = [op for op in ops if op in prog.ops]
    assert not found, f"expected zero-copy aliases, the program has {found} ({prog.ops})"


def test_split_dim0_is_alias() -> None:
    prog = run_case(OpCase("shape_split_dim0_alias", lambda x: torch.split(x, [1, 3], 0), (randn(4, 3),)))
    _no(prog, "split", "copy")


def test_outer_slices_are_aliases() -> None:
    case = OpCase("shape_outer_views_alias",
                  lambda x: (x[1:3], x[0][1:], x.select(0, -1), x[-1:].permute(1, 0, 2), torch.relu(x[1])),
                  (X.reshape(4, 3, 2),), ops=("relu",))
    _no(run_case(case), "slice", "select", "permute", "copy")


def test_size1_permute_expand_repeat_flip_are_aliases() -> None:
    case = OpCase("shape_noop_moves_alias",
                  lambda x: (x.permute(2, 0, 1, 3), x.expand(1, 3, 1, 4), x.repeat(1, 1, 1, 1), x.flip(0, 2),
                             F.pad(x, (0, 0))),
                  (randn(1, 3, 1, 4),))
    _no(run_case(case), "permute", "expand", "repeat", "flip", "pad", "copy")


def test_copy_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `copy` kernel (used where a view cannot alias): force clones through it."""
    lower.supported_edge_ops()  # load the rules

    def clone_as_copy(ctx: lower.LowerCtx, node: Any) -> None:
        x = ctx.bind(node)["self"]
        out = node.outputs[0]
        ctx.emit("copy", [x], [out])

    monkeypatch.setitem(lower.RULES, "dim_order_ops._clone_dim_order.default", clone_as_copy)
    run_case(OpCase("shape_copy", lambda a, b, c, d: (a.clone().view(-1), b.clone(), c.clone(), d.clone()),
                    (X, XI, XB, XI.to(torch.int8)), ops=("copy",)))


def test_views_of_input_run_twice() -> None:
    """Aliases of graph inputs stay correct across calls with new data."""
    case = OpCase("shape_views_rerun", lambda x: (x[2:], x.view(-1, 2)[1:3]), (randn(4, 3),))
    prog = export_case(case)
    mod = oa.load(prog)
    for seed in (5, 6):
        x = randn(4, 3, seed=seed)
        got = mod(x)
        torch.testing.assert_close(got[0], x[2:])
        torch.testing.assert_close(got[1], x.view(-1, 2)[1:3])
