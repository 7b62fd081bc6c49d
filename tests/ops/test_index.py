"""Indexing ops against PyTorch: embedding, index_select, aten.index (one tensor index), gather,
and the run-time range checks of their indices (several index tensors: tests/ops/test_scatter.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import OpCase, export_case, randint, randn, run_case

W = randn(10, 4, seed=1)
X = randn(3, 5, 4)
XI = randint(-50, 50, 3, 5, 4)
XB = randn(3, 5, 4, seed=2) > 0


class Emb(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(10, 6, padding_idx=0)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.emb(ids)


CASES = [
    # ---- embedding -----------------------------------------------------------------------------
    OpCase("index_embedding_i64", lambda i, w: F.embedding(i, w), (randint(0, 10, 2, 3),), consts=(W,),
           ops=("embedding",)),
    OpCase("index_embedding_i32_0d_weight_input",
           lambda i, w, wi, j: (F.embedding(i, w), F.embedding(j, wi), F.embedding(i, wi)),
           (randint(0, 10, 7, dtype=torch.int32), W, randint(-5, 5, 10, 3, seed=3)), consts=(torch.tensor(9),),
           ops=("embedding",)),
    OpCase("index_embedding_module", lambda i: i, (randint(0, 10, 2, 5),), module=Emb(), ops=("embedding",)),
    # ---- index_select --------------------------------------------------------------------------
    OpCase("index_select",
           lambda x, xi, b, i, j, s: (x.index_select(0, i), x.index_select(1, j), xi.index_select(-1, i),
                                      b.index_select(2, j), x.index_select(1, torch.tensor(3)),
                                      s.index_select(0, torch.tensor([0])), s.index_select(-1, torch.tensor(0))),
           (X, XI, XB, torch.tensor([2, 0, 2, 1]), torch.tensor([3, 0], dtype=torch.int32), torch.tensor(2.5)),
           ops=("index_select",)),
    # ---- aten.index with one tensor index ------------------------------------------------------
    OpCase("index_tensor",
           lambda x, xi, i, i2, c: (x[:, i], x[i2], xi[..., torch.tensor([-1, 0, -4])], x[:, :, c],
                                    x[torch.tensor(1)]),
           (X, XI, torch.tensor([4, -5, 0]), randint(-3, 3, 2, 2, seed=4)),
           consts=(torch.tensor([[0, 3], [-1, 2]]),), ops=("index_select",)),
    # ---- gather --------------------------------------------------------------------------------
    OpCase("index_gather",
           lambda x, xi, b, i0, i1, i2: (x.gather(0, i0), x.gather(1, i1), xi.gather(-1, i2), b.gather(1, i1),
                                         torch.gather(x[0, 0], 0, torch.tensor([3, 3, 0]))),
           (X, XI, XB, randint(0, 3, 2, 5, 4, seed=5), randint(0, 5, 3, 4, 2, seed=6), randint(0, 4, 3, 5, 2)),
           ops=("gather",)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def test_embedding_index_out_of_range() -> None:
    case = OpCase("index_embedding_range", lambda i, w: F.embedding(i, w), (randint(0, 10, 2, 3),), consts=(W,),
                  ops=("embedding",))
    mod = oa.load(export_case(case))
    bad = torch.tensor([[1, 2, 3], [4, 10, 5]])
    with pytest.raises(oa.OpenAccelError, match=r"index 10 at position \[1, 1\]"):
        mod(bad)
    with pytest.raises(oa.OpenAccelError, match=r"index -1 at position \[0, 0\]"):
        mod(torch.tensor([[-1, 2, 3], [4, 1, 5]]))
    torch.testing.assert_close(mod(bad.clamp(max=9))[0], F.embedding(bad.clamp(max=9), W))


def test_index_select_and_gather_out_of_range() -> None:
    case = OpCase("index_range_checks", lambda x, i, g: (x.index_select(1, i), x[:, i], x.gather(2, g)),
                  (X, torch.tensor([0, 4]), randint(0, 4, 3, 5, 1)))
    mod = oa.load(export_case(case))
    # index_select does not wrap negative indices (PyTorch raises), aten.index does
    with pytest.raises(oa.OpenAccelError, match=r"index -1 at position \[1\]"):
        mod(X, torch.tensor([0, -1]), torch.zeros(3, 5, 1, dtype=torch.long))
    with pytest.raises(oa.OpenAccelError, match=r"index 5 at position \[0\]"):
        mod(X, torch.tensor([5, 0]), torch.zeros(3, 5, 1, dtype=torch.long))
    with pytest.raises(oa.OpenAccelError, match=r"index 4 at position \[2, 3, 0\]"):
        g = torch.zeros(3, 5, 1, dtype=torch.long)
        g[2, 3, 0] = 4
        mod(X, torch.tensor([0, 1]), g)


def test_index_bool_mask_unsupported() -> None:
    """x[mask]: the result's size depends on the mask's values (several index tensors, and None
    between them, run as `index`: tests/ops/test_scatter.py)."""
    case = OpCase("index_mask", lambda x, m: x[m], (X, X > 0))
    with pytest.raises(oa.UnsupportedOpError, match=r"aten\.index\.Tensor.*depends on the values"):
        export_case(case)
