"""What a failing bundled test reports: `first_mismatch` is a flat index into the output
`worst_output` names, so "first at flat index 3 of output 0" points at the element that failed,
even when a later output has a larger error that is still within its tolerance."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from openaccel.runtime.host import HostSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime_c" / "tests" / "fixtures"))
import gen_fixtures as gf


def _two_outputs(err0: float, err1: float) -> bytes:
    """relu(x) and x + y (y near 1000, so rtol 1e-5 allows 0.01 there); the expected outputs are
    off by err0 at element 3 of output 0 and by err1 at element 5 of output 1."""
    p = gf.Program()
    x, y = p.input((2, 8)), p.input((2, 8))
    out0 = p.op("relu", [x], (2, 8))
    out1 = p.op("add", [x, y], (2, 8))
    a, b = gf.dyadic(1, (2, 8), 8), gf.dyadic(2, (2, 8), 8) + 1000.0
    want0, want1 = gf.relu(a), a + b
    want0.flat[3] += err0
    want1.flat[5] += err1
    p.tests.append(([a, b], [want0, want1]))
    return p.build([out0, out1])


def test_first_mismatch_names_its_output() -> None:
    (r,) = HostSession(_two_outputs(1e-3, 5e-3)).run_tests()
    assert not r.passed and r.mismatches == 1
    assert (r.output, r.first_mismatch) == (0, 3), r
    assert np.isclose(r.max_abs_error, 5e-3, rtol=0.1)  # the larger, tolerated error of output 1


def test_no_mismatch_names_the_worst_output() -> None:
    (r,) = HostSession(_two_outputs(0.0, 5e-3)).run_tests()
    assert r.passed and r.first_mismatch == -1 and r.output == 1
