"""linear / matmul / addmm (and addmv / addbmm / baddbmm, lowered to them) against PyTorch on several
shapes.

The kernels accumulate in double; tolerances are rtol/atol 1e-4 for K up to a few hundred (eager
accumulates in float32 with its own blocking). Matmul's broadcast batch dims (which torch.export
turns into expand + bmm) and invalid calls are tested on hand-built programs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import openaccel as oa
from openaccel.exporter.memory_plan import plan_memory
from openaccel.exporter.serialize import serialize
from openaccel.ir import Graph, Instr, Value
from openaccel.program import Program

from helpers import OpCase, randn, run_case

TOL = {"atol": 1e-4, "rtol": 1e-4}
NAN = float("nan")


def C(name: str, fn: Callable[..., Any], inputs: Sequence[torch.Tensor], ops: Sequence[str],
      consts: Sequence[torch.Tensor] = (), tags: Sequence[str] = (), **kw: float) -> OpCase:
    return OpCase(name, fn, tuple(inputs), ops=tuple(ops), consts=tuple(consts), tags=tuple(tags), **(TOL | kw))


CASES = [
    OpCase("linear_1x784x512", lambda x, w, b: F.linear(x, w, b), (randn(1, 784),),
           consts=(randn(512, 784, seed=1), randn(512, seed=2)), ops=("linear",), atol=1e-4, rtol=1e-4),
    OpCase("linear_3d_nobias", lambda x, w: F.linear(x, w), (randn(2, 3, 17),), consts=(randn(5, 17, seed=1),),
           ops=("linear",), atol=1e-5, rtol=1e-5),
    C("linear_2d_bias_mm_const", lambda x, w, b, m: (F.linear(x, w, b), torch.mm(x, m)), [randn(6, 33, seed=3)],
      ["linear"], consts=[randn(7, 33, seed=4), randn(7, seed=5), randn(33, 4, seed=6)]),
    C("linear_bias_1xn", lambda x, w, b: torch.addmm(b, x, w), [randn(3, 20, seed=7)], ["linear"],
      consts=[randn(20, 9, seed=8), randn(1, 9, seed=9)]),
    C("matmul_mm_bmm", lambda a, b, p, q: (torch.mm(a, b), torch.bmm(p, q)),
      [randn(5, 7, seed=10), randn(7, 3, seed=11), randn(3, 4, 5, seed=12), randn(3, 5, 6, seed=13)],
      ["matmul"]),
    C("matmul_bmm_k300", lambda p, q: torch.bmm(p, q), [randn(2, 3, 300, seed=14), randn(2, 300, 4, seed=15)],
      ["matmul"]),
    C("matmul_bmm_const_other", lambda p, q: torch.bmm(p, q), [randn(2, 4, 6, seed=16)], ["matmul"],
      consts=[randn(2, 6, 3, seed=17)]),
    C("matmul_mm_vectors", lambda a, b: (torch.mm(a, b), torch.mm(b, a)), [randn(1, 8, seed=18),
                                                                              randn(8, 1, seed=19)], ["matmul"]),
    C("matmul_4d_broadcast", lambda a, b: torch.matmul(a, b), [randn(2, 3, 4, 5, seed=20), randn(3, 5, 6, seed=21)],
      ["matmul"]),
    C("addmm_variants", lambda bn, bmn, bm1, a, m: (
        torch.addmm(bn, a, m, beta=0.5, alpha=2.0), torch.addmm(bmn, a, m), torch.addmm(bm1, a, m, alpha=-1.0),
        torch.addmm(bn, a, m)),
      [randn(5, seed=22), randn(4, 5, seed=23), randn(4, 1, seed=24), randn(4, 6, seed=25), randn(6, 5, seed=26)],
      ["addmm"]),
    C("addmm_beta0_nan_bias", lambda b, a, m: torch.addmm(b, a, m, beta=0.0),
      [torch.full((3, 2), NAN), randn(3, 4, seed=27), randn(4, 2, seed=28)], ["addmm"]),
    C("addmm_const_scaled", lambda a, w, b: torch.addmm(b, a, w, alpha=3.0, beta=-1.0), [randn(3, 6, seed=29)],
      ["addmm"], consts=[randn(6, 4, seed=30), randn(4, seed=31)]),
    C("addmm_scalar_bias", lambda a, m: torch.addmm(torch.tensor(1.5), a, m, beta=0.5),
      [randn(3, 4, seed=32), randn(4, 5, seed=33)], ["addmm"]),
    # addmv / addbmm: addmm on a [K, 1] vector / on the batch folded into K; baddbmm: bmm, mul, add
    C("addmv_addbmm_baddbmm", lambda a, m, v, c, b1, b2, c3, w, nan: (
        torch.addmv(a, m, v), torch.addmv(a[:1], m, v, beta=0.5, alpha=2.0), torch.addmv(a[0], m.t()[:3], v[:4]),
        torch.addmv(nan, m, v, beta=0.0), torch.addbmm(c, b1, b2), torch.addbmm(c[0], b1, b2, beta=0.3, alpha=-1.5),
        torch.addbmm(c, b1.transpose(1, 2).transpose(1, 2), b2[:, :, :], alpha=2.0), torch.addbmm(c, w, b2),
        torch.baddbmm(c3, b1, b2), torch.baddbmm(c3, b1, b2, beta=0.5, alpha=-2.0)),
      [randn(4, seed=34), randn(4, 6, seed=35), randn(6, seed=36), randn(3, 5, seed=37), randn(2, 3, 7, seed=38),
       randn(2, 7, 5, seed=39), randn(2, 3, 5, seed=40)], ["addmm", "matmul"],
      consts=[randn(2, 3, 7, seed=41), torch.full((4,), NAN)]),
]




@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(case: OpCase) -> None:
    run_case(case)


# ---- hand-built programs --------------------------------------------------------------------------

def _v(name: str, shape: Sequence[int], dtype: torch.dtype = torch.float32) -> Value:
    return Value(name=name, dtype=dtype, shape=tuple(shape))


def direct(op: str, inputs: Sequence[torch.Tensor], out_shape: Sequence[int], ints: Sequence[int] = (),
           floats: Sequence[float] = ()) -> torch.Tensor:
    """Run one instruction on a hand-built program (no torch.export, no lowering)."""
    ins = [_v(f"in{i}", t.shape, t.dtype) for i, t in enumerate(inputs)]
    out = _v("out", out_shape)
    g = Graph(name="forward", inputs=ins, outputs=[out])
    g.instrs = [Instr(op=op, inputs=list(ins), outputs=[out], ints=list(ints), floats=list(floats))]
    buf = serialize(g, plan_memory(g), [], target="host", required_features=[])
    (got,) = oa.load(Program(buf))(*inputs)
    return got


@pytest.mark.parametrize("sa,sb", [
    ((2, 1, 3, 4), (5, 4, 2)),
    ((3, 4), (2, 4, 5)),
    ((2, 3, 4), (4, 6)),
    ((1, 2, 1, 3, 2), (1, 4, 2, 5)),
    ((2, 0), (0, 3)),
    ((2, 3, 0, 4), (3, 4, 2)),
])
def test_matmul_broadcast_batch(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a, b = randn(*sa, seed=40), randn(*sb, seed=41)
    want = torch.matmul(a, b)
    got = direct("matmul", [a, b], want.shape)
    torch.testing.assert_close(got, want, **TOL)


def test_linear_clamp_act() -> None:
    x, w, b = randn(3, 5, seed=42), randn(4, 5, seed=43), randn(4, seed=44)
    got = direct("linear", [x, w, b], (3, 4), ints=[2], floats=[-0.5, 0.25])
    torch.testing.assert_close(got, F.linear(x, w, b).clamp(-0.5, 0.25), **TOL)
    got = direct("linear", [x, w, b], (3, 4), ints=[1])
    torch.testing.assert_close(got, F.linear(x, w, b).relu(), **TOL)


@pytest.mark.parametrize("op,shapes,out,ints,floats,match", [
    ("matmul", [(2, 3), (4, 5)], (2, 5), [], [], "expected 3 rows"),
    ("matmul", [(2, 2, 3), (3, 3, 5)], (3, 2, 5), [], [], "batch dims do not broadcast"),
    ("matmul", [(2, 2, 3), (2, 3, 5)], (2, 2, 4), [], [], "expected shape"),
    ("matmul", [(3,), (3, 5)], (5,), [], [], "expected 2 to 8 dims"),
    ("addmm", [(5,), (2, 3), (3, 5)], (2, 5), [], [1.0], "at least 2 float arguments"),
    ("addmm", [(3,), (2, 3), (3, 5)], (2, 5), [], [1.0, 1.0], "does not broadcast"),
    ("addmm", [(5,), (2, 3), (4, 5)], (2, 5), [], [1.0, 1.0], "expected 3 rows"),
    ("linear", [(2, 3), (4, 3)], (2, 4), [2], [1.0, -1.0], "act_min <= act_max"),
    ("linear", [(2, 3), (4, 3)], (2, 4), [7], [], "act = 7"),
    ("linear", [(2, 3), (4, 2)], (2, 4), [], [], "does not match the weight's in_features"),
    ("linear", [(2, 3), (4, 3), (3,)], (2, 4), [], [], "input 2 \\(bias\\)"),
])
def test_invalid_calls_rejected(op: str, shapes: list[tuple[int, ...]], out: tuple[int, ...], ints: list[int],
                                floats: list[float], match: str) -> None:
    with pytest.raises(oa.OpenAccelError, match=match):
        direct(op, [randn(*s) for s in shapes], out, ints, floats)


# ---- exporter errors ------------------------------------------------------------------------------

class _Mm(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)


def test_integer_mm_unsupported() -> None:
    a = torch.ones(2, 3, dtype=torch.int64)
    with pytest.raises(oa.UnsupportedOpError, match=r"aten\.mm\.default.*float32 only"):
        oa.export(_Mm(), (a, a.t().contiguous()))
