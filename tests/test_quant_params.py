"""Quantization parameters in the file (issue 15, item 1): every int8 tensor of an exported
quantized program carries Tensor.quant (per tensor, or the per-channel weight scales along axis 0),
consistent with the int8 instructions' arguments; `openaccel inspect` (and --json) shows them; the
loader refuses a hostile QuantParams naming the tensor and the field; a file without them (older
exporters) still loads and gives the same bytes."""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest
from craft import segments_of

import openaccel as oa
from openaccel.errors import ProgramError
from openaccel.fileformat import pack, unpack
from openaccel.oab.QuantParams import QuantParamsT
from openaccel.opset import arg_names
from openaccel.runtime.host import HostSession

pytestmark = pytest.mark.xdist_group("quant_model")

F32 = np.float32


@pytest.fixture(scope="module")
def exported() -> oa.Program:
    from test_quant_model import _quantized

    _, ep, ex = _quantized()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return oa.export(ep, ex)


def _tables(prog: oa.Program) -> Any:
    fb, _ = unpack(prog.buffer)
    return fb, fb.methods[0]


def test_every_int8_tensor_carries_its_parameters(exported: oa.Program) -> None:
    fb, m = _tables(exported)
    names = [t.name.decode() for t in m.tensors]
    # the requantization shifts are int8 integers (format 1.2), not quantized reals
    int8 = [t for t in m.tensors if t.dtype == 1 and not t.name.decode().endswith(".shift")]
    assert int8 and all(t.quant is not None for t in int8), [n for n, t in zip(names, m.tensors)
                                                             if t.dtype == 1 and t.quant is None]
    assert all(t.quant is None for t in m.tensors if t.name.decode().endswith(".shift"))
    assert all(t.quant is None for t in m.tensors if t.dtype not in (0, 1))   # int32 biases, float32 I/O
    ops = [o.name.decode() for o in fb.operators]
    qp = {n: s for n, s in ((q.tensor, q) for q in exported.quant_params())}
    weights = 0
    for ins in m.instructions:
        op = ops[ins.op]
        args: dict[str, Any] = dict(arg_names(op, list(ins.ints), list(ins.floats)))
        t_in, t_out = names[ins.inputs[0]], names[ins.outputs[0]]
        if op == "quantize":
            q = qp[t_out]
            assert (q.axis, q.zero_point) == (-1, (args["zero_point"],))
            assert q.scale == (F32(args["scale"]),)
        elif op == "dequantize":
            q = qp[t_in]
            assert (q.axis, q.zero_point, q.scale) == (-1, (args["zero_point"],), (F32(args["scale"]),))
        elif op in ("conv2d_q8", "linear_q8"):
            # the activations' parameters are the ones the arguments encode
            assert qp[t_in].zero_point == (args["input_zp"],) and qp[t_in].scale == (F32(args["input_scale"]),)
            assert qp[t_out].zero_point == (args["output_zp"],) and qp[t_out].scale == (F32(args["output_scale"]),)
            # per-channel weights: one scale per output channel along axis 0, symmetric
            w = qp[names[ins.inputs[1]]]
            cout = m.tensors[ins.inputs[1]].shape[0]
            assert w.axis == 0 and len(w.scale) == cout and w.zero_point == (0,) * cout
            assert all(s > 0 for s in w.scale) and len(set(w.scale)) > 1
            # and their product over the output scale is the multiplier / 2^shift of each channel
            mult = np.frombuffer(_const(exported, m, ins.inputs[3]), np.int32)
            shift = np.frombuffer(_const(exported, m, ins.inputs[4]), np.int8)
            real = args["input_scale"] * np.asarray(w.scale, np.float64) / args["output_scale"]
            np.testing.assert_allclose(mult / 2.0 ** shift, real, rtol=1e-6)
            weights += 1
    assert weights == 5


def _const(prog: oa.Program, m: Any, index: int) -> bytes:
    from openaccel.fileformat import segment_bytes

    fb, header = unpack(prog.buffer)
    t = m.tensors[index]
    return segment_bytes(prog.buffer, fb, header, int(t.segment), int(t.offset), int(t.nbytes))


def test_inspect_shows_them(exported: oa.Program, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from openaccel.cli import main

    f = tmp_path / "q.oab"
    exported.save(f)
    assert main(["inspect", str(f), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    per_channel = [q for q in doc["quantization"] if q["axis"] == 0]
    assert len(per_channel) == 5 and all(len(q["scale"]) == q["shape"][0] for q in per_channel)
    assert all(q["dtype"] == "int8" for q in doc["quantization"])
    assert "quantization parameters: 14 tensors (9 per tensor, 5 per channel)" in exported.summary()
    assert main(["inspect", str(f)]) == 0
    out = capsys.readouterr().out
    assert "quantization parameters" in out and "per channel" in out and "_frozen_param0" in out


def _tamper(prog: oa.Program, pick: str, **fields: Any) -> bytes:
    """The program with tensor `pick`'s QuantParams replaced by `fields` (scale, zeroPoint, axis),
    or, with dtype=..., its dtype changed."""
    fb, _ = unpack(prog.buffer)
    (t,) = [t for t in fb.methods[0].tensors if t.name.decode() == pick]
    q = QuantParamsT()
    old = t.quant if t.quant is not None else QuantParamsT()
    q.scale, q.zeroPoint, q.axis = old.scale, old.zeroPoint, old.axis
    for k, v in fields.items():
        setattr(q, k, v)
    t.quant = q
    return pack(fb, segments_of(prog.buffer))


ACT = "quantized_decomposed_quantize_per_tensor_default_1"   # a conv's int8 output, per tensor
WEIGHT = "_frozen_param0"                                    # conv weight [8, 3, 3, 3], per channel


@pytest.mark.parametrize("pick, fields, match", [
    (ACT, dict(scale=[float("nan")]), r"quant\.scale\[0\] = nan: expected a finite number > 0"),
    (ACT, dict(scale=[0.0]), r"quant\.scale\[0\] = 0: expected a finite number > 0"),
    (ACT, dict(scale=[-0.5]), r"quant\.scale\[0\] = -0\.5: expected"),
    (ACT, dict(scale=[float("inf")]), r"quant\.scale\[0\] = inf: expected"),
    (ACT, dict(zeroPoint=[128]), r"quant\.zero_point\[0\] = 128: expected -128 to 127 \(int8\)"),
    (ACT, dict(zeroPoint=[0, 0]), r"quant\.zero_point has 2 values, expected 1"),
    (ACT, dict(scale=[]), r"quant\.scale has 0 values, expected 1"),
    (ACT, dict(axis=4), r"quant\.axis = 4: expected -1 \(per tensor\) or a dim of its 4"),
    (ACT, dict(axis=-2), r"quant\.axis = -2"),
    (WEIGHT, dict(scale=[0.01] * 7), r"quant\.scale has 7 values, expected 8 \(dim 0 of shape \[8, 3, 3, 3\]\)"),
    (WEIGHT, dict(axis=1), r"quant\.scale has 8 values, expected 3 \(dim 1"),
    (WEIGHT, dict(zeroPoint=[0] * 7 + [-129]), r"quant\.zero_point\[7\] = -129"),
    # empty means all zero (format 1.2); a non-empty vector must still have one value per scale
    (WEIGHT, dict(zeroPoint=[0] * 7), r"quant\.zero_point has 7 values, expected 8 \(dim 0 of shape \[8, 3, 3, 3\]\)"),
    (WEIGHT, dict(zeroPoint=[0]), r"quant\.zero_point has 1 values, expected 8"),
    (WEIGHT, dict(zeroPoint=[], scale=[]), r"quant\.scale has 0 values, expected 8"),
    ("x", dict(scale=[0.1], zeroPoint=[0], axis=-1), r"quant: quantization parameters on a float32 tensor"),
])
def test_hostile_parameters_are_refused(exported: oa.Program, pick: str, fields: dict[str, Any], match: str) -> None:
    bad = _tamper(exported, pick, **fields)
    with pytest.raises(ProgramError, match=rf"tensor \d+ \('{pick}'\): " + match):
        HostSession(bad)
    # the Python reader shows such a file without failing (inspect is how one looks at it)
    assert oa.Program(bad).quant_params()


def test_all_zero_zero_points_are_not_stored(exported: oa.Program, tmp_path: Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """format 1.2 (issue 15: int8 files <= 0.27x): all-zero zero points (the per-channel ones of
    symmetric weights) are not stored; the readers hand out `count` zeros for them; a file that
    stores them (as format 1.1 did) still loads and gives the same bytes"""
    from openaccel.cli import main

    fb, m = _tables(exported)
    assert (fb.formatMajor, fb.formatMinor) == (1, 4)
    stored = {t.name.decode(): t.quant.zeroPoint for t in m.tensors if t.quant is not None}
    assert stored[WEIGHT] is None or len(stored[WEIGHT]) == 0
    assert all(zp is None or (len(zp) and any(zp)) for zp in stored.values())   # none stored all zero
    assert any(zp is not None and len(zp) for zp in stored.values())             # activations keep theirs
    qp = {q.tensor: q for q in exported.quant_params()}
    assert qp[WEIGHT].zero_point == (0,) * 8 and not qp[WEIGHT].zero_point_stored
    assert "zero point 0 (not stored: all 0)" in qp[WEIGHT].describe()
    f = tmp_path / "q.oab"
    exported.save(f)
    assert main(["inspect", str(f), "--json"]) == 0
    doc = {q["tensor"]: q for q in json.loads(capsys.readouterr().out)["quantization"]}
    assert doc[WEIGHT]["zero_point"] == [0] * 8 and doc[WEIGHT]["zero_point_stored"] is False
    assert doc[ACT]["zero_point_stored"] is True
    # the 1.1 way: every zero point written out
    for t in m.tensors:
        if t.quant is not None and not (t.quant.zeroPoint is not None and len(t.quant.zeroPoint)):
            t.quant.zeroPoint = [0] * len(t.quant.scale)
    old = pack(fb, segments_of(exported.buffer))
    assert len(old) > len(exported.buffer)
    assert [q.zero_point for q in oa.Program(old).quant_params()] == [q.zero_point for q in exported.quant_params()]
    x = np.random.default_rng(5).standard_normal((2, 1, 3, 16, 16)).astype(F32)
    a, b = HostSession(exported.buffer), HostSession(old)
    for xi in x:
        np.testing.assert_array_equal(a.run([xi])[0], b.run([xi])[0])


def test_files_without_parameters_stay_valid(exported: oa.Program) -> None:
    """an older exporter wrote no Tensor.quant: the kernels read their arguments, the bytes are
    the same"""
    fb, _ = unpack(exported.buffer)
    for t in fb.methods[0].tensors:
        t.quant = None
    old = pack(fb, segments_of(exported.buffer))
    assert not oa.Program(old).quant_params()
    x = np.random.default_rng(3).standard_normal((2, 1, 3, 16, 16)).astype(F32)
    a, b = HostSession(exported.buffer), HostSession(old)
    for xi in x:
        np.testing.assert_array_equal(a.run([xi])[0], b.run([xi])[0])



def test_files_before_the_bias_rule_are_refused(exported: oa.Program) -> None:
    """format 1.3 moved conv2d_q8 / linear_q8's bias to output steps after the multiply: the
    integers of a 1.2 file would run under the new rule and give other outputs, so it is refused
    at load with what changed and what to do"""
    fb, _ = _tables(exported)
    fb.formatMinor = 2
    old = pack(fb, segments_of(exported.buffer))
    with pytest.raises(ProgramError, match=r"operator \d+ \(conv2d_q8\): its meaning changed in file format 1\.3 "
                       r"and this file is format 1\.2 \(the bias is now in output steps \(float32\).*\); export the "
                       r"model again"):
        HostSession(old)
