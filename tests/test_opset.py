"""Op arguments are named once, in opset.py: Python reads and writes them by name (Instr.arg /
set_arg / become), and no exporter code indexes an instruction's ints or floats."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from openaccel import opset
from openaccel.ir import Instr, Value

ROOT = Path(__file__).resolve().parents[1]


def _conv(ints: list[int], floats: list[float] | None = None) -> Instr:
    x = Value("x", torch.float32, (1, 4, 8, 8))
    y = Value("y", torch.float32, (1, 4, 8, 8))
    return Instr("conv2d", [x, None, None], [y], ints=list(ints), floats=list(floats or []))


def test_named_reads_match_the_layout() -> None:
    ins = _conv([1, 2, 3, 4, 5, 6, 7, 1], [0.5, 6.0])
    assert [ins.arg(n) for n in opset.OPS["conv2d"].ints] == ins.ints
    assert ins.arg("groups") == 7 and ins.arg("act") == 1 and ins.farg("act_max") == 6.0
    short = _conv([1, 1])  # arguments a file omits read as 0, or as the default asked for
    assert short.arg("groups") == 0 and short.arg("act", default=3) == 3 and short.farg("act_min") == 0.0
    red = Instr("mean", [None], [Value("m", torch.float32, (1,))], ints=[1, 2, 3])
    assert red.arg("keepdim") == 1 and red.arg_list("dims") == [2, 3]


def test_named_writes_pad_and_keep_the_rest() -> None:
    ins = _conv([1, 1, 0, 0])
    ins.set_arg("act", 2)
    ins.set_arg("act_max", 6.0)
    assert ins.ints == [1, 1, 0, 0, 0, 0, 0, 2] and ins.floats == [0.0, 6.0]
    red = Instr("sum", [None], [Value("s", torch.float32, (1,))], ints=[0, 2, 3])
    red.set_arg("dims", [1])
    assert red.ints == [0, 1]


def test_become_keeps_the_arguments_both_ops_name() -> None:
    ins = _conv([1, 1, 2, 1, 1, 1, 1, 2], [0.0, 6.0])
    ins.become("conv2d_winograd", tile=4, block=16)
    assert ins.op == "conv2d_winograd" and ins.ints == [4, 2, 1, 2, 16] and ins.floats == [0.0, 6.0]
    lin = Instr("linear", [None, None], [Value("y", torch.float32, (4, 4))])
    lin.become("linear_packed", block=16)   # no act given: 0 before block
    assert lin.ints == [0, 16] and lin.floats == []
    assert opset.encode_args("conv2d_nhwc", groups=3, block=16) == ([0] * 6 + [3, 0, 16], [])


def test_unknown_or_misused_names_are_errors() -> None:
    ins = _conv([1] * 8)
    with pytest.raises(KeyError, match=r"'conv2d' has no argument 'group'.*stride_h, stride_w"):
        ins.arg("group")
    with pytest.raises(KeyError, match=r"'act_min' of 'conv2d' is in floats, not ints"):
        ins.arg("act_min")
    with pytest.raises(KeyError, match=r"'nope' is not an op"):
        opset.arg_slots("nope")


def test_exporter_reads_no_argument_by_position() -> None:
    """`ins.ints[6]` is groups only as long as nobody inserts an argument before it"""
    found = []
    for path in sorted((ROOT / "sdk/openaccel/exporter").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\.(ints|floats)\s*\[", line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "read the argument by name (Instr.arg / farg / arg_list):\n" + "\n".join(found)
