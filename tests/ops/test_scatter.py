"""The scatter family, advanced indexing, non-constant pads and strided views against PyTorch:
scatter / scatter_add / scatter_reduce (every reduction, include_self both ways), index_put (and
what index_add / index_copy / index_fill / `x[idx] = v` become), slice_scatter, select_scatter,
masked_scatter, aten.index with several index tensors, reflect / replicate / circular padding,
as_strided / diagonal / Tensor.unfold, F.fold / F.unfold; the run-time range checks and files
whose arguments were tampered with.

Each case bundles many variants as outputs of one model (exporting is the slow part). Assigning
scatters (reduce none, index_put without accumulate) are only tested where no target is named
twice: PyTorch leaves those results undefined."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa

from helpers import OpCase, check_rejected, export_case, randint, randn, run_case

INTS = (torch.int32, torch.int64, torch.uint8, torch.int8)
NAN, INF = float("nan"), float("inf")


def uniq(shape: tuple[int, ...], size: int, dim: int, seed: int = 0) -> torch.Tensor:
    """An index of `shape` into a dim of `size`, never naming one target twice along `dim`."""
    g = torch.Generator().manual_seed(seed)
    full = list(shape)
    full[dim] = size
    return torch.rand(*full, generator=g).argsort(dim=dim).narrow(dim, 0, shape[dim])


def special(*shape: int, seed: int = 0) -> torch.Tensor:
    """randn with NaN, +-inf and -0.0 in it."""
    x = randn(*shape, seed=seed).flatten()
    x[:4] = torch.tensor([NAN, INF, -INF, -0.0])
    return x[torch.randperm(x.numel(), generator=torch.Generator().manual_seed(seed))].reshape(shape)


def ints(dtype: torch.dtype, *shape: int, seed: int = 0) -> torch.Tensor:
    lo, hi = (0, 250) if dtype == torch.uint8 else (-120, 120)
    return randint(lo, hi, *shape, seed=seed).to(dtype)


X3, X4, X5 = special(2, 3, 5), randn(1, 2, 5, 6, seed=1), randn(1, 2, 3, 4, 5, seed=2)
REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_all(x: torch.Tensor, i: torch.Tensor, s: torch.Tensor, dim: int,
                        reductions: tuple[str, ...] = REDUCTIONS) -> tuple[torch.Tensor, ...]:
    return tuple(x.scatter_reduce(dim, i, s, r, include_self=inc) for r in reductions for inc in (True, False))


def _scatter_reduce_ints(i: torch.Tensor, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Every reduction of every integer dtype and bool; a mean over 258 elements, whose count wraps in
    uint8 / int8 as PyTorch's does (258 -> 2; include_self false: 257 -> 1)."""
    x4, (i300, u300, s300) = xs[:4], xs[4:]
    out = [o for x in x4 for o in (*_scatter_reduce_all(x, i, x.flip(1), 1), x.scatter_add(1, i, x),
                                   x.scatter(1, i, x, reduce="multiply"))]
    b = x4[0] > 0
    out += [o for r in ("sum", "prod", "amax", "amin")
            for o in (b.scatter_reduce(1, i, b.flip(1), r), b.scatter_reduce(1, i, b, r, include_self=False))]
    out += [t[:2].scatter_reduce(0, i300, t, "mean", include_self=inc) for t in (u300, s300) for inc in (True, False)]
    return tuple(out)


def _setitem(x: torch.Tensor, key: Any, v: Any) -> torch.Tensor:
    y = x.clone()
    y[key] = v
    return y


def _put(x: torch.Tensor, key: tuple[torch.Tensor | None, ...], v: torch.Tensor) -> torch.Tensor:
    """aten.index_put itself (Tensor.index_put takes no None for a whole dim)."""
    return torch.ops.aten.index_put.default(x, list(key), v)


def _addat(x: torch.Tensor, key: tuple[torch.Tensor | None, ...], v: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.index_put.default(x, list(key), v, True)


CASES = [
    # ---- reflect / replicate / circular padding (pad_mode) -------------------------------------
    OpCase("scatter_pad_modes",
           lambda x3, x4, x5: (
               F.pad(x3, (2, 4), mode="reflect"), F.pad(x4, (5, 0, 1, 4), mode="reflect"),
               F.pad(x5, (1, 2, 2, 0, 1, 1), mode="reflect"), F.pad(x3[0], (1, 1), mode="reflect"),
               F.pad(x3, (3, -2), mode="reflect"), F.pad(x4.transpose(2, 3), (1, 2, 0, 3), mode="reflect"),
               F.pad(x3, (7, 1), mode="replicate"), F.pad(x4, (2, 3, 0, 6), mode="replicate"),
               F.pad(x5, (0, 2, 1, 1, 3, 0), mode="replicate"), F.pad(x3, (-2, 3), mode="replicate"),
               F.pad(x3, (2, 5), mode="circular"), F.pad(x4, (6, 0, 1, 5), mode="circular"),
               F.pad(x5, (1, 1, 0, 2, 3, 1), mode="circular"), F.pad(x3, (2, -1), mode="circular"),
               F.pad(x4, (-1, 2, 2, -2), mode="circular"), F.pad(x3, (3, -6), mode="reflect"),
               F.pad(x3, (-6, 3), mode="reflect"), F.pad(x3, (4, -7), mode="replicate")),
           (X3, X4, X5), ops=("pad_mode",)),
    OpCase("scatter_pad_modes_ints",
           lambda a, b, c, d: (
               *(o for t in (a, b, c, d)
                 for o in (F.pad(t, (2, 1), mode="reflect"), F.pad(t, (0, 3, 1, 1), mode="reflect"),
                           F.pad(t, (3, 1), mode="replicate"), F.pad(t, (1, 2, 1, 0), mode="circular"))),
               F.pad(a > 0, (1, 2), mode="circular")),
           tuple(ints(dt, 2, 3, 4, seed=k) for k, dt in enumerate(INTS)), ops=("pad_mode",)),
    # ---- scatter (assign): src, value, int32 index, dims, a transposed src -----------------------
    OpCase("scatter_assign",
           lambda x, s, i0, i1, i2, xi, b: (
               x.scatter(1, i1, s), x.scatter(0, i0, s), x.scatter(2, i2, -1.5), x.scatter(-1, i2, s.transpose(1, 2)),
               xi.scatter(1, i1, 7), b.scatter(2, i2, True), x.scatter(1, i1[:, :0], s), xi.scatter(0, i0, xi[:1] * 3),
               b.scatter(1, i1, b.flip(2))),
           (X3, randn(2, 5, 5, seed=3), uniq((1, 3, 5), 2, 0, seed=4), uniq((2, 3, 4), 3, 1, seed=5),
            uniq((2, 3, 2), 5, 2, seed=6).to(torch.int32), ints(torch.int64, 2, 3, 5), randn(2, 3, 5) > 0),
           ops=("scatter",)),
    # ---- scatter_add, scatter(reduce=), scatter_reduce with repeated targets ----------------------
    OpCase("scatter_reduce_float",
           lambda x, i, s, j, t: (x.scatter_add(1, i, s), x.scatter(1, i, s, reduce="add"),
                                  x.scatter(1, i, s, reduce="multiply"), x.scatter(2, j, 2.0, reduce="multiply"),
                                  x.scatter(2, j, -1.0, reduce="add"), *_scatter_reduce_all(x, i, s, 1),
                                  *_scatter_reduce_all(x, j, t, 2, ("sum", "mean", "amax"))),
           (special(2, 3, 5), randint(0, 3, 2, 4, 5, seed=1), special(2, 4, 6, seed=2), randint(0, 5, 2, 3, 7, seed=3),
            randn(2, 3, 7, seed=4)), ops=("scatter",)),
    OpCase("scatter_reduce_ints", _scatter_reduce_ints,
           (randint(0, 3, 3, 6, 2, seed=7), *(ints(dt, 3, 6, 2, seed=8 + k) for k, dt in enumerate(INTS)),
            (torch.arange(300) % 7 == 0).long(), torch.arange(300).to(torch.uint8), torch.arange(300).to(torch.int8)),
           ops=("scatter",)),
    # ---- index_reduce (outside core ATen, kept by to_edge): a scatter with the index expanded along dim;
    # repeated targets, NaN, include_self both ways, integer mean (floor), an empty index
    OpCase("scatter_index_reduce",
           lambda x, i, s, xi, si, u: (
               *(t for r in ("prod", "mean", "amax", "amin") for inc in (True, False)
                 for t in (x.index_reduce(1, i, s, r, include_self=inc),
                           xi.index_reduce(0, i[:2], si, r, include_self=inc))),
               u.index_reduce(-1, i, u[:, :4].flip(1), "mean"), x.index_reduce(1, i[:0], s[:, :0], "amax"),
               x[0, 0, 0].index_reduce(0, i[1:2], s[1, 1, 1], "prod"),  # 0-dim self and source, index [0]
               x[0, 0, 0].index_reduce(0, i[1:2], s[1, 1, 1], "amin", include_self=False)),
           (randn(3, 5, 2), torch.tensor([4, 0, 4, 1]), special(3, 4, 2, seed=1), ints(torch.int64, 5, 3, seed=2),
            ints(torch.int64, 2, 3, seed=3), torch.arange(12).to(torch.uint8).reshape(2, 6) * 20),
           ops=("scatter", "expand")),
    # ---- index_put: one or several index tensors, None, broadcasting, negative indices --------
    OpCase("scatter_index_put",
           lambda x, v, i, j, k: (
               _put(x, (i,), v[:2, :5][:, None]), _put(x, (None, j), v[:3, :5][None]),
               _put(x, (i, None, k), v[:2, :1].expand(2, 3)), _put(x, (i[:, None], j[None, :2]), v[0, 0]),
               _put(x, (i, j[:2], k), v[0, :2]), _setitem(x, (Ellipsis, k), v[:2, 0]),
               _setitem(x, (slice(None), j[2:], k[:1]), v[0, :1]),
               _addat(x, (i.flip(0).repeat(3),), v[:6, :1, None].expand(6, 3, 5)),
               _addat(x, (None, j.repeat(2), k.repeat(3)), v[1, :6]), _put(x, (i[:0],), v[:0, :1, None]),
               _put(x, (j[:0], k[:1]), v[0, 0])),
           (X3.nan_to_num(0.0), randn(6, 8, seed=3), torch.tensor([1, -2]), torch.tensor([0, -2, 2], dtype=torch.int32),
            torch.tensor([4, 0])), ops=("index_put",)),
    OpCase("scatter_index_put_mask_and_ops",
           lambda x, v, m, r, i: (
               _setitem(x, m, 7.0), _setitem(x, x < 0, v.view(-1)[:1]), _setitem(x, (slice(None), r), v[0, 0, :5]),
               _addat(x, (m,), v[0, 0, 0]), _setitem(x, (Ellipsis, m[0, 0]), -x[..., :1]),
               x.index_add(1, i, v[:, :3, :5]), x.index_add(2, i, v[:, :3, :3].flip(2), alpha=-2),
               x.index_copy(1, i.flip(0)[:2], v[:, :2, :5]), x.index_fill(2, i, -3.0)),
           (randn(2, 3, 5), randn(2, 4, 6, seed=1), randn(2, 3, 5, seed=2) > 0, randn(3, seed=3) > 0,
            torch.tensor([2, 0, 2])), ops=("index_put",)),
    OpCase("scatter_index_put_dtypes",
           lambda i, u, mk, *xs: tuple(
               o for x in xs for o in (_put(x, (None, u), x[:, :2].flip(0)), _addat(x, (i,), x[:3]),
                                       _setitem(x, mk, x[-1, -1]), _addat(x, (mk,), x.flatten()[-1]))),
           (torch.tensor([2, 0, 2]), torch.tensor([2, 0]), randn(4, 3, seed=9) > 0,
            *(ints(dt, 4, 3, seed=k) for k, dt in enumerate(INTS)), randn(4, 3) > 0),
           ops=("index_put",)),
    # ---- aten.index with several index tensors (index) ------------------------------------------
    OpCase("scatter_index_multi",
           lambda x, xi, b, i, j, k: (
               x[i, j[:2]], x[:, j, k[:1]], x[i, :, k], x[i[:, None], j[None, :], 0], x[..., i, k[:1]],
               x.transpose(0, 2)[k[:, None], j[None, :]], xi[i, 1:, k], b[i, j[:2]], x[j[:0], 0],
               x[i[:, None, None], :, k[None, :]], xi[torch.tensor([-1, 0]), :, i]),
           (X3, ints(torch.int8, 2, 3, 5), randn(2, 3, 5) > 0, torch.tensor([1, -2]),
            torch.tensor([0, 2, -1, 1], dtype=torch.int32), torch.tensor([4, -5])), ops=("index",)),
    # ---- slice_scatter, select_scatter, masked_scatter ------------------------------------------
    OpCase("scatter_slice_select_masked",
           lambda x, s, m, xi, bm: (
               torch.slice_scatter(x, s[:, :3, :3], 2, 0, 5, 2), torch.slice_scatter(x, s[:, :1], 1, -1),
               torch.slice_scatter(x, s[:1, :3], 0, 1, None),
               torch.slice_scatter(x.transpose(1, 2), s.transpose(1, 2)[:, :, 1:3], 2, 1, 3),
               torch.select_scatter(x, s[:, 0], 1, -2), x.masked_scatter(m, s), x.masked_scatter(m[0, :, :1], s * 2),
               xi.masked_scatter(bm, xi.flip(0)), torch.slice_scatter(xi, xi[:, 1:2], 1, 2, 3)),
           (special(2, 3, 5), randn(2, 4, 5, seed=1), randn(2, 3, 5, seed=2) > 0, ints(torch.uint8, 3, 4),
            randn(3, 4, seed=3) > 0), ops=("slice_scatter", "masked_scatter")),
    # ---- strided views: diagonal, Tensor.unfold, as_strided --------------------------------------
    OpCase("scatter_strided_views",
           lambda x, xi, b: (
               torch.diagonal(x), torch.diagonal(x, 2, 0, 2), torch.diagonal(x, -1, 2, 1), torch.diagonal(x, 7),
               torch.diag(x[0]), torch.diagonal(xi, 1, -1, 0), x.unfold(2, 2, 1), x.unfold(1, 3, 2),
               xi.unfold(-1, 5, 5), b.unfold(0, 1, 1), torch.as_strided(x * 2, (3, 4), (2, 3), 1),
               torch.as_strided(xi.reshape(30), (4, 2), (0, 5), 3), torch.as_strided(b, (2, 2, 2), (15, 1, 5))),
           (X3, ints(torch.int32, 2, 3, 5), randn(2, 3, 5) > 0), ops=("as_strided",)),
    # ---- F.fold (col2im) and F.unfold (im2col), which to_edge writes with index_put / index -----
    OpCase("scatter_fold_unfold",
           lambda c, x: (F.fold(c, (5, 6), (2, 3), padding=1, stride=2),
                         F.fold(c[:, :6, :6], (4, 5), (3, 2), dilation=(1, 2)),
                         F.unfold(x, (2, 3), padding=1, stride=(2, 1)), F.unfold(x, 2, dilation=2)),
           (randn(2, 12, 9), randn(1, 2, 5, 6, seed=1)), ops=("index_put", "index")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


def _own_src(x: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y, z = x * 2, x + 1
    return y.scatter_add(1, i, y), _addat(z, (j,), z[:2]), (x - 1).scatter(1, i, 5.0)


def test_scatter_in_place_over_its_own_src() -> None:
    """scatter / index_put whose src is self (an intermediate that dies there): the planner must not
    run them in place (the loader would refuse the file); the last one does run in place."""
    run_case(OpCase("scatter_own_src", _own_src, (randn(3, 4), randint(0, 4, 3, 4), torch.tensor([2, 2])),
                    ops=("scatter", "index_put")))


# ---- run-time range checks: nothing out of range is read or written -------------------------------

def _fails(mod: Any, match: str, *inputs: torch.Tensor) -> None:
    with pytest.raises(oa.OpenAccelError, match=match):
        mod(*inputs)


def test_indices_out_of_range() -> None:
    x, s = randn(3, 5), randn(3, 5, seed=1)
    case = OpCase("scatter_ranges",
                  lambda x, s, i, j, k: (x.scatter_reduce(1, i, s, "amax"), _put(x, (j, k), s[0, :2]), x[j, k],
                                         _addat(x, (None, k), s[:, :2])),
                  (x, s, torch.zeros(3, 5, dtype=torch.long), torch.tensor([0, 2]), torch.tensor([4, -5])))
    mod = oa.load(export_case(case))
    ok = (torch.zeros(3, 5, dtype=torch.long), torch.tensor([0, 2]), torch.tensor([4, -5]))
    bad_i = ok[0].clone()
    bad_i[2, 3] = 5
    _fails(mod, r"scatter.*input 1 \(index\).*index 5 at position \[2, 3\] is out of range for dim 1 .* size 5 "
           r"\(expected 0 to 4\)", x, s, bad_i, *ok[1:])
    bad_i[2, 3] = -1  # scatter does not count from the end
    _fails(mod, r"index -1 at position \[2, 3\]", x, s, bad_i, *ok[1:])
    _fails(mod, r"index_put.*input 2 \(indices\[0\]\).*index -4 at position \[1\] is out of range for dim 0 .* size 3 "
           r"\(expected -3 to 2\)", x, s, ok[0], torch.tensor([0, -4]), ok[2])
    _fails(mod, r"input 3 \(indices\[1\]\).*index 5 at position \[0\] .*dim 1", x, s, ok[0], ok[1],
           torch.tensor([5, 0]))
    got = mod(x, s, *ok)
    want = case.fn(x, s, *ok)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_mask_counts_checked() -> None:
    """masked_scatter with too few source elements, index_put with values for another count of true
    mask elements: run-time errors naming both tensors."""
    case = OpCase("scatter_mask_counts", lambda x, m, s, v: (x.masked_scatter(m, s), _setitem(x, m, v)),
                  (randn(3, 4), torch.eye(3, 4, dtype=torch.bool), randn(3, seed=1), randn(3, seed=2)))
    mod = oa.load(export_case(case))
    x, s, v = case.inputs[0], case.inputs[2], case.inputs[3]
    more = torch.eye(3, 4, dtype=torch.bool)
    more[0, 3] = True
    _fails(mod, r"masked_scatter.*input 2 \(source\).*has 3 elements, input 1 \(mask\).*selects 4", x, more, s, v)
    fewer = torch.zeros(3, 4, dtype=torch.bool)
    fewer[1, 1] = True
    _fails(mod, r"index_put.*input 1 \(values\).*gives 3 values along dim 0, input 2 \(indices\[0\]\).*selects 1",
           x, fewer, s, v)


def test_as_strided_of_a_view_refused() -> None:
    """as_strided reads the storage under its input: to_edge's copies of views would change what it
    reads, so the export refuses (eager gives other elements than the copy would)."""
    for fn in (lambda x: torch.as_strided(x.t(), (3, 3), (1, 2), 1), lambda x: torch.as_strided(x[1:], (2, 2), (1, 2))):
        with pytest.raises(oa.UnsupportedOpError, match=r"as_strided of a view \(aten\.(permute|slice)_copy"):
            export_case(OpCase("scatter_as_strided_view", fn, (randn(4, 5),)))


@pytest.mark.parametrize("edge_op, fn, ints, match", [
    ("aten.reflection_pad1d.default", lambda t: F.pad(t, (2, 1), mode="reflect"), {1: 5},
     r"reflect padding \(5, 1\) of dim 1 .* expected each pad smaller than the dim's size 5"),
    ("aten.reflection_pad1d.default", lambda t: F.pad(t, (2, 1), mode="reflect"), {0: 4},
     r"argument mode = 4: expected 1 \(reflect\), 2 \(replicate\) or 3 \(circular\)"),
    ("aten.as_strided_copy.default", lambda t: torch.as_strided(t * 1, (3, 3), (2, 1), 1), {1: 7},
     r"reads element 17 of input 0 \(self\) .* which has 15"),
    ("aten.scatter_reduce.two", lambda t: t.scatter_reduce(1, torch.zeros(3, 2, dtype=torch.long), t, "sum"),
     {1: 9}, r"argument reduce = 9"),
    ("aten.index.Tensor", lambda t: t[torch.tensor([0, 1]), torch.tensor([1, 2])], {1: 0},
     r"argument dims\[1\] = 0: expected increasing dims"),
    ("aten.slice_scatter.default", lambda t: torch.slice_scatter(t, t[:, :2] * 2, 1, 0, 2), {2: 4},
     r"input 1 \(src\).*expected|shape"),
])
def test_tampered_arguments_refused(monkeypatch: pytest.MonkeyPatch, edge_op: str, fn: Any, ints: dict[int, int],
                                    match: str) -> None:
    check_rejected(monkeypatch, edge_op, fn, randn(3, 5), match, ints=ints)
