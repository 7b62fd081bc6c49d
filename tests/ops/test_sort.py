"""sort, topk, kthvalue, median / nanmedian, mode and nonzero_static against PyTorch eager; the
refusal of the ops whose output size depends on the input's values (nonzero, masked_select,
unique).

Results are exact (values are copied, indices are integers). The kernels sort stably; where
PyTorch leaves the order of equal elements open (sort without stable=True on long rows, topk,
kthvalue, median, mode's index on rows longer than 16) the inputs have distinct values or the
model returns the values only.
"""

from __future__ import annotations

import pytest
import torch

import openaccel as oa

from helpers import Fn, OpCase, check_rejected, randint, randn, run_case

NAN = float("nan")
INF = float("inf")


def C(name: str, fn: object, inputs: tuple[torch.Tensor, ...], ops: tuple[str, ...]) -> OpCase:
    return OpCase("sort_" + name, fn, inputs, ops=ops)  # type: ignore[arg-type]


def distinct(rows: int, n: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """rows x n distinct values (no ties along either dim) in random order."""
    g = torch.Generator().manual_seed(seed)
    r = torch.randperm(rows * n, generator=g).reshape(rows, n)
    if dtype == torch.float32:
        return (r.float() - rows * n / 2) * 0.37
    return r.to(dtype) if dtype == torch.uint8 else (r - rows * n // 2).to(dtype)


# float rows with special values: NaN (two per row: ties), +-inf, -0.0 next to 0.0, repeated values
SPECIAL = torch.tensor([
    [0.5, NAN, -INF, 0.0, -0.0, 2.0, NAN, INF, -1.5],
    [1.0, 1.0, -2.0, 1.0, 3.0, -2.0, 0.0, 1.0, -0.0],
    [-0.0, 0.0, -0.0, 0.0, NAN, -3.0, 7.0, -INF, INF],
    [4.0, -1.0, 2.5, 0.25, -8.0, 3.5, -0.5, 6.0, 1.0],
])
X3 = randn(3, 5, 17, seed=1)                                   # no ties: the default (unstable) sort agrees
I32 = randint(-4, 4, 3, 20, seed=2, dtype=torch.int32)          # many ties
I64 = torch.tensor([[2**62, -(2**63), 5, 2**63 - 1, -1, 5, 0], [3, 3, -3, 0, 2**40, -(2**40), 3]])
BOOL = randint(0, 2, 4, 11, seed=3).bool()
U8 = torch.tensor([[0, 255, 7, 128, 7, 1], [9, 9, 0, 200, 255, 3]], dtype=torch.uint8)
I8 = torch.tensor([[-128, 127, 0, -1, 5, -128], [3, -7, 3, 100, -100, 0]], dtype=torch.int8)

def _topk_unsorted(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = torch.topk(x, 4, sorted=False)
    ordered, order = values.sort(1)
    return ordered, indices.gather(1, order)


MODE_F = torch.tensor([[0.0, -0.0, 1.0, -0.0, 2.0, 2.0], [3.0, 1.0, 1.0, 3.0, -INF, -INF],
                       [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]])
NZ_F = torch.tensor([[0.0, NAN, -0.0, 2.0], [0.0, 0.0, -1.0, INF], [0.0, 0.0, 0.0, 0.0]])

CASES = [
    # ---- sort -------------------------------------------------------------------------------------
    C("float", lambda s, x: (
        *torch.sort(s, dim=1, stable=True), *torch.sort(s, dim=0, descending=True, stable=True),
        *torch.sort(s, dim=-1, descending=True, stable=True), torch.argsort(x, 2), *torch.sort(x, 1, descending=True),
        *torch.sort(x.transpose(1, 2)[:, 3:, ::2], 1), *torch.sort(x, 0)),
      (SPECIAL, X3), ("sort",)),
    C("ints_bool", lambda i, lg, b, u, i8: (
        *torch.sort(i, stable=True), *torch.sort(i, dim=0, descending=True, stable=True),
        *torch.sort(lg, stable=True), *torch.sort(lg, descending=True, stable=True),
        *torch.sort(b, dim=1, stable=True), *torch.sort(b, dim=0, descending=True, stable=True),
        *torch.sort(u, stable=True), *torch.sort(i8, descending=True, stable=True), torch.argsort(i8, stable=True)),
      (I32, I64, BOOL, U8, I8), ("sort",)),
    C("edges", lambda x, e: (
        *torch.sort(x[1, 2, 3]), *torch.sort(x[:, :1], 1), *torch.sort(e, 0), *torch.sort(e, 1, descending=True),
        *torch.topk(x[0, 0], 1), *torch.kthvalue(x[2, 1], 1, 0, keepdim=True), *torch.median(x[0, 3], 0),
        *torch.mode(x[:, :1, :2], 1), e.median(), e.nanmedian()),
      (X3, torch.zeros(0, 4)), ("sort", "topk", "kthvalue", "median", "mode", "full")),
    # ---- topk (distinct values: PyTorch's order of ties is unspecified) ---------------------------
    C("topk", lambda x, n, i, lg, u, i8: (
        *torch.topk(x, 3), *torch.topk(x, 2, dim=0, largest=False), *torch.topk(x.t(), 4, dim=0),
        *torch.topk(x, 12), *torch.topk(x, 0), *torch.topk(n, 3), *torch.topk(n, 2, largest=False),
        *torch.topk(i, 5), *torch.topk(lg, 3, largest=False), *torch.topk(u, 2), *torch.topk(i8, 4, largest=False)),
      (distinct(5, 12, 4), torch.tensor([[1.0, NAN, -2.0, 4.0, 0.5], [3.0, -1.0, 2.0, -INF, NAN]]),
       distinct(3, 9, 5, torch.int32), distinct(4, 6, 6, torch.int64), distinct(2, 10, 7, torch.uint8),
       distinct(3, 8, 8, torch.int8)), ("topk",)),
    # sorted=False: PyTorch returns the k elements in an order of its own; compare them sorted
    C("topk_unsorted", _topk_unsorted, (distinct(4, 30, 9),), ("topk", "sort")),
    # ---- kthvalue / median / nanmedian ------------------------------------------------------------
    C("kthvalue_median", lambda x, odd, n, nn, i, lg, u, i8: (
        *torch.kthvalue(x, 3, 1), *torch.kthvalue(x, 1, 0, keepdim=True), *torch.kthvalue(x.t(), 5, 0),
        *torch.median(x, 1), *torch.median(odd, 0, keepdim=True), x.median(), odd.median(),
        *torch.kthvalue(n, 5, 1), *torch.median(n, 1), *torch.nanmedian(nn, 1), torch.nanmedian(nn),
        torch.median(n), *torch.kthvalue(i, 2, 1), *torch.median(lg, 0), *torch.median(u, 1),
        *torch.nanmedian(i8, 1)),
      (distinct(4, 8, 10), distinct(7, 3, 11).t().contiguous(),
       torch.tensor([[1.0, NAN, -2.0, 4.0, 0.5], [3.0, -1.0, 2.0, -INF, 6.0]]),
       torch.tensor([[1.0, NAN, -2.0, NAN, 0.5, 9.0], [NAN, -1.0, NAN, INF, NAN, 2.0]]),
       distinct(3, 7, 12, torch.int32), distinct(5, 4, 13, torch.int64), distinct(2, 9, 14, torch.uint8),
       distinct(3, 6, 15, torch.int8)), ("kthvalue", "median")),
    C("nanmedian_all_nan_values", lambda x: (torch.nanmedian(x, 1).values, torch.median(x, 1).values),
      (torch.tensor([[NAN, NAN, NAN], [NAN, 1.0, NAN]]),), ("median",)),
    # ---- mode (rows of at most 16: PyTorch's index is the last occurrence; longer: values only) ----
    C("mode", lambda f, i, b, u, i8, long: (
        *torch.mode(f, 1), *torch.mode(f, 0, keepdim=True), *torch.mode(i, 1), *torch.mode(b, 1),
        *torch.mode(u, 1), *torch.mode(i8, 0), torch.mode(long, 1).values),
      (MODE_F, randint(0, 4, 3, 16, seed=16, dtype=torch.int32), BOOL, U8, I8, randint(-3, 3, 2, 40, seed=17)),
      ("mode",)),
    # ---- nonzero_static ---------------------------------------------------------------------------
    C("nonzero_static", lambda f, b, i: (
        torch.nonzero_static(f, size=3), torch.nonzero_static(f, size=12),
        torch.nonzero_static(b, size=30, fill_value=7),
        torch.nonzero_static(i, size=4, fill_value=-2), torch.nonzero_static(f[1, 2], size=2),
        torch.nonzero_static(f.t(), size=5)),
      (NZ_F, BOOL[:2, :5].reshape(2, 5, 1),
       torch.tensor([0, 3, 0, -1, 0, 0], dtype=torch.int32)), ("nonzero_static",)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


@pytest.mark.parametrize("edge_op,fn,ints,match", [
    ("aten.sort.default", lambda t: torch.sort(t, 1), {1: 2}, r"sort.*descending = 2: expected 0 or 1"),
    ("aten.sort.default", lambda t: torch.sort(t, 1), {0: 2}, r"sort.*dim = 2: expected 0 <= dim < 2"),
    ("aten.topk.default", lambda t: torch.topk(t, 2), {1: 3}, r"topk.*largest = 3: expected 0 or 1"),
    ("aten.kthvalue.default", lambda t: torch.kthvalue(t, 2), {0: 6}, r"kthvalue.*k = 6 is out of range \(expected 1"),
    ("aten.median.dim", lambda t: torch.median(t, 0), {2: 4}, r"median.*ignore_nan = 4: expected 0 or 1"),
    ("aten.mode.default", lambda t: torch.mode(t, 1), {1: 1}, r"mode.*output 0 \(values\).*expected shape \[3, 1\]"),
])
def test_bad_arguments_rejected(monkeypatch: pytest.MonkeyPatch, edge_op: str, fn: object, ints: dict[int, int],
                                match: str) -> None:
    check_rejected(monkeypatch, edge_op, fn, randn(3, 5), match, ints)  # type: ignore[arg-type]


@pytest.mark.parametrize("fn,op,hint", [
    (lambda x: torch.nonzero(x), "aten.nonzero.default", "torch.nonzero_static"),
    (lambda x: torch.masked_select(x, x > 0), "aten.masked_select.default", "torch.where(mask, x, fill)"),
    (lambda x: torch.unique(x), "aten._unique2.default", "torch.sort keeps the shape"),
    (lambda x: torch.unique(x, dim=0), "aten.unique_dim.default", "torch.sort keeps the shape"),
], ids=["nonzero", "masked_select", "unique", "unique_dim"])
def test_data_dependent_sizes_refused(fn: object, op: str, hint: str) -> None:
    """Their output size depends on the input's values: refused at export, naming the op, why, and
    the fixed-size form to use instead (tests/test_bad_input.py checks the model line)."""
    with pytest.raises(oa.UnsupportedOpError) as e:
        oa.export(Fn(fn), (randn(3, 4),))  # type: ignore[arg-type]
    msg = str(e.value)
    assert op in msg and "first used at" in msg, msg
    assert "refused, the" in msg and "known only at run time" in msg and hint in msg, msg
