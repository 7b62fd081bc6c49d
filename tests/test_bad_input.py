"""Bad input gets a clear error (what, where, expected vs received), exit code 2, and no
traceback: damaged files, wrong inputs, unsupported ops, unreadable or unsafe model files."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import craft
import numpy as np
import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.fileformat import SegmentWriter, pack, unpack


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True, timeout=timeout)


def assert_user_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    text = " ".join((r.stdout + r.stderr).split())
    for n in needles:
        assert n in text, f"{n!r} not in {text!r}"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Program, Path]:
    torch.manual_seed(0)
    prog = oa.export(zoo.MLP((32, 16, 8)).eval(), (torch.randn(1, 32),))
    path = tmp_path_factory.mktemp("bad") / "good.oab"
    prog.save(path)
    return prog, path


@pytest.mark.parametrize("command", ["test", "inspect", "run"])
def test_truncated_file(program: tuple[oa.Program, Path], tmp_path: Path, command: str) -> None:
    prog, _ = program
    bad = tmp_path / "truncated.oab"
    bad.write_bytes(prog.buffer[: len(prog.buffer) // 2])
    assert_user_error(cli(command, str(bad)), "truncated")


def test_wrong_magic(program: tuple[oa.Program, Path], tmp_path: Path) -> None:
    prog, _ = program
    bad = tmp_path / "magic.oab"
    bad.write_bytes(prog.buffer[:4] + b"XXXX" + prog.buffer[8:])
    assert_user_error(cli("test", str(bad)), "not an .oab file", "bytes 4..8")


def test_newer_version(program: tuple[oa.Program, Path], tmp_path: Path) -> None:
    prog, _ = program
    fb, _ = unpack(prog.buffer)
    fb.formatMajor, fb.formatMinor = 7, 0
    bad = tmp_path / "newer.oab"
    bad.write_bytes(pack(fb, SegmentWriter()))
    assert_user_error(cli("test", str(bad)), "format 7.0 is newer")


def test_corrupted_header_field(program: tuple[oa.Program, Path], tmp_path: Path) -> None:
    prog, _ = program
    buf = bytearray(prog.buffer)
    struct.pack_into("<Q", buf, 16, len(buf) * 4)  # flatbuffer size beyond the file
    bad = tmp_path / "hdr.oab"
    bad.write_bytes(bytes(buf))
    assert_user_error(cli("test", str(bad)), "byte offset 16")


def test_corrupted_flatbuffer(program: tuple[oa.Program, Path], tmp_path: Path) -> None:
    """A damaged table offset is refused with the offset named (the C verifier's deeper checks
    are exercised by tests/test_c_runtime.py: every truncation and thousands of byte flips)."""
    prog, _ = program
    buf = bytearray(prog.buffer)
    (root,) = struct.unpack_from("<I", buf, 0)
    struct.pack_into("<i", buf, root, -(1 << 30))  # the root table's vtable offset
    bad = tmp_path / "vtable.oab"
    bad.write_bytes(bytes(buf))
    assert_user_error(cli("test", str(bad)), "malformed flatbuffer", "offset 1073741888")


def test_missing_program_file(tmp_path: Path) -> None:
    assert_user_error(cli("test", str(tmp_path / "nope.oab")), "no such file")


def test_wrong_input_count_shape_dtype(program: tuple[oa.Program, Path]) -> None:
    prog, _ = program
    mod = oa.load(prog)
    with pytest.raises(oa.InputError, match="takes 1 inputs"):
        mod(torch.randn(1, 32), torch.randn(1, 32))
    with pytest.raises(oa.InputError, match=r"input 0 \('x'\): expected float32\[1, 32\], received float32\[2, 32\]"):
        mod(torch.randn(2, 32))
    with pytest.raises(oa.InputError, match=r"expected float32\[1, 32\], received float64\[1, 32\]"):
        mod(np.zeros((1, 32)))


def test_wrong_npy_input_on_the_cli(program: tuple[oa.Program, Path], tmp_path: Path) -> None:
    _, path = program
    np.save(tmp_path / "x.npy", np.zeros((1, 31), dtype=np.float32))
    assert_user_error(cli("run", str(path), "--input", f"x={tmp_path / 'x.npy'}"),
                      "expected float32 [1, 32], received float32 [1, 31]")
    np.save(tmp_path / "y.npy", np.zeros((1, 32), dtype=np.float32))
    assert_user_error(cli("run", str(path), "--input", f"y={tmp_path / 'y.npy'}"), "no input named 'y'")


class _Unsupported(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.histc(x, 4)  # no openaccel kernel for histc


def test_unsupported_op_names_op_and_source_line() -> None:
    with pytest.raises(oa.UnsupportedOpError) as e:
        oa.export(_Unsupported(), (torch.randn(3, 8),))
    msg = str(e.value)
    assert "aten.histc.default" in msg
    assert "test_bad_input.py:" in msg and "torch.histc(x, 4)" in msg


class _Angle(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # angle of a complex tensor: the rule takes real inputs only
        return torch.fft.rfft(x).angle()


class _Inv(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # decomposes to linalg_inv_ex, outside core ATen
        return torch.linalg.inv(x)


class _Nonzero(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # output size depends on the values
        return torch.nonzero(x)


@pytest.mark.parametrize(("model", "example", "op", "code"), [
    (_Angle, (2, 8), "aten.angle.default", "torch.fft.rfft(x).angle()"),
    (_Inv, (3, 3), "aten.linalg_inv_ex.default", "torch.linalg.inv(x)"),
    (_Nonzero, (4,), "aten.nonzero.default", "torch.nonzero(x)"),
], ids=["complex_angle", "linalg_inv", "nonzero"])
def test_every_unsupported_op_names_op_and_model_line(model: type[torch.nn.Module], example: tuple[int, ...],
                                                      op: str, code: str) -> None:
    """Whichever step refuses the op (to_edge's verifier, a decomposition outside core ATen, a
    data-dependent size), the error is an UnsupportedOpError naming the op and its model line."""
    with pytest.raises(oa.UnsupportedOpError) as e:
        oa.export(model(), (torch.randn(example),))
    msg = str(e.value)
    assert op in msg
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if f"return {code}" in text)
    assert f"test_bad_input.py:{line}: `return {code}`" in msg, msg
    assert "dynamic_shapes" not in msg  # nonzero: the model has no dynamic inputs


class _Random(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand(3)


def test_refused_op_says_why() -> None:
    """An op refused on purpose (lower.REFUSED) gives its reason beside the op and the model line."""
    with pytest.raises(oa.UnsupportedOpError) as e:
        oa.export(_Random(), (torch.randn(3),))
    msg = str(e.value)
    assert "aten.rand.default" in msg and "torch.rand(3)" in msg
    assert "refused, random numbers" in msg and "as an input tensor" in msg


class _RandomGenerator(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn(3, generator=torch.Generator().manual_seed(0))


def test_refused_random_op_with_a_generator() -> None:
    """The generator= overloads of the random ops are refused with the same reason."""
    with pytest.raises(oa.UnsupportedOpError) as e:
        oa.export(_RandomGenerator(), (torch.randn(3),))
    msg = str(e.value)
    assert "aten.randn.generator" in msg and "refused, random numbers" in msg


def test_unsupported_op_on_the_cli(tmp_path: Path) -> None:
    archive = tmp_path / "histc.pt2"
    torch.export.save(torch.export.export(_Unsupported(), (torch.randn(3, 8),)), str(archive))
    assert_user_error(cli("export", str(archive)), "aten.histc.default", "test_bad_input.py:")


def test_unreadable_model_files(tmp_path: Path) -> None:
    assert_user_error(cli("export", str(tmp_path / "missing.pt2")), "no such file")
    (tmp_path / "garbage.pt2").write_bytes(b"\x00not a model" * 10)
    assert_user_error(cli("export", str(tmp_path / "garbage.pt2")), "not a torch.export archive")
    assert_user_error(cli("export", str(tmp_path)), "not a regular file")


def test_pickle_needs_opt_in(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = zoo.MLP((32, 16, 8)).eval()
    path = tmp_path / "pickled.pt"
    torch.save(model, str(path))
    assert_user_error(cli("export", str(path)), "--allow-pickle", "runs arbitrary code")
    assert_user_error(cli("export", str(path), "--allow-pickle"), "--input-shape")
    r = cli("export", str(path), "--allow-pickle", "--input-shape", "x=1x32", "-o", str(tmp_path / "p.oab"))
    assert r.returncode == 0, r.stderr
    r = cli("test", str(tmp_path / "p.oab"))
    assert r.returncode == 0 and r.stdout.strip().endswith("1 passed, 0 failed")


def test_bad_usage_exits_2() -> None:
    r = cli("export")
    assert r.returncode == 2
    r = cli("frobnicate")
    assert r.returncode == 2


# ---- the semantic verifier: files that are well-formed flatbuffers but break a rule ----------------
# Each crafted file below loaded, and then crashed, hung or read out of bounds before the rule it
# breaks was checked (issue 12); the C loader must now refuse it, naming the rule and the place.

def _save(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / f"{name}.oab"
    path.write_bytes(data)
    return path


def _oa_run(*args: Any, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The host oa_run itself (not through the CLI: a time-out must stop the runner, not only its parent)."""
    from openaccel.runtime.build import build_runtime

    return subprocess.run([str(build_runtime("host").oa_run), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("case,needles", [
    (craft.index_select_over_its_indices, ("instruction 0 (index_select): output 0 ('y', bytes [256, +4096) of "
                                           "pool 0) overlaps input 1 ('idx', bytes [256, +512))",
                                           "index_select never runs in place")),
    (craft.select_over_its_input, ("instruction 0 (select): output 0 ('y'", "overlaps input 0 ('x'",
                                   "select never runs in place")),
    (craft.cat_over_its_inputs, ("instruction 0 (cat): output 0 ('y', bytes [128, +512) of pool 0) overlaps "
                                 "input 0", "cat never runs in place")),
], ids=["index_select", "select", "cat"])
def test_output_planned_over_its_input_is_refused(tmp_path: Path, case: Any, needles: tuple[str, ...]) -> None:
    path = _save(tmp_path, case.__name__, case())
    assert_user_error(cli("test", str(path)), "INVALID_PROGRAM", *needles)


def test_in_place_rules(tmp_path: Path) -> None:
    """Output 0 may be exactly the bytes of the op's in-place input (opset `inplace`), and of
    inputs identical to it for elementwise ops; any other overlap is refused."""
    for name in ("relu_in_place", "add_in_place", "add_x_x_in_place"):
        r = cli("test", str(_save(tmp_path, name, craft.accepted()[name])))
        assert r.returncode == 0 and r.stdout.strip().endswith("1 passed, 0 failed"), (name, r.stdout, r.stderr)
    assert_user_error(cli("test", str(_save(tmp_path, "relu_shifted", craft.unary("relu", 4)))),
                      "instruction 0 (relu): output 0 ('y', bytes [4, +128) of pool 0) overlaps input 0 ('x', bytes "
                      "[0, +128)); relu runs in place only on input 0: output 0 may be exactly its bytes")
    assert_user_error(cli("test", str(_save(tmp_path, "add_over_other", craft.add(0, 128, 128)))),
                      "instruction 0 (add): output 0 ('out', bytes [128, +128) of pool 0) overlaps input 1 ('y'",
                      "add runs in place only on input 0")
    # two outputs of one instruction over each other
    assert_user_error(cli("test", str(_save(tmp_path, "outputs_overlap", craft.layer_norm_outputs_overlap()))),
                      "instruction 0 (layer_norm): outputs 0 ('out', bytes [64, +64) of pool 0) and 1 ('mean', bytes "
                      "[64, +8)) overlap")


def test_zero_size_tensors_bound_their_other_dims(tmp_path: Path) -> None:
    """A tensor with a zero dim has no bytes, but kernels loop over its other dims: sdpa with head
    dim 0 and a batch of 2^40 in a 1 KB file kept oa_run busy for hours."""
    data = craft.sdpa_zero_head_dim()
    assert len(data) < 2048
    r = _oa_run(_save(tmp_path, "sdpa_zero", data), timeout=60)  # (hours before)
    assert r.returncode == 2 and "tensor 0 ('q'): shape [1099511627776, 1, 1, 0] has no elements, but with its zero " \
        "dims counted as 1 it describes 4398046511104 bytes, more than pool 0 holds (4096 bytes)" in r.stderr, r.stderr


@pytest.mark.parametrize("op", ["batch_norm", "group_norm", "permute"])
def test_products_of_dims_fit_in_int64(tmp_path: Path, op: str) -> None:
    """Kernels multiply a tensor's dims in int64: [0, 1, 2^40, 2^40] has no elements, but the
    product of its dims overflowed (UBSan) in batch_norm, group_norm and the fast permute."""
    assert_user_error(cli("run", str(_save(tmp_path, op, craft.dims_overflow(op)))),
                      "tensor 0 ('x'): shape [0, 1, 1099511627776, 1099511627776]: the product of its non-zero dims "
                      "exceeds 2^50 elements")


def test_shared_tables_load_in_linear_time(tmp_path: Path) -> None:
    """N offsets to one Method whose tensors vector holds N offsets to one Tensor: 8N bytes that
    expand to N^2 (oa_run took 29 s on a 131 KB file, Program.load 46 s and 480 MB on 8.5 KB)."""
    big = _save(tmp_path, "shared", craft.shared_tables(16000))
    assert big.stat().st_size < 140_000
    _oa_run("--devices")  # (built)
    t0 = time.monotonic()
    r = _oa_run(big, "--test", timeout=60)
    assert time.monotonic() - t0 < 5, "the C loader is not linear in the file size"
    assert r.returncode == 2, r.stdout + r.stderr
    assert "(a Tensor table): the tables and vectors reachable from the root add up to more than the flatbuffer's" \
        in r.stderr and "referenced from more than one place" in r.stderr, r.stderr
    t0 = time.monotonic()
    with pytest.raises(oa.ProgramError, match=r"a Tensor table\): the tables and vectors reachable from the root"):
        oa.Program(craft.shared_tables(1000))
    assert time.monotonic() - t0 < 2, "the Python reader is not linear in the file size"
    assert_user_error(cli("inspect", str(big)), "referenced from more than one place")


def test_tree_walks_agree_with_the_schema() -> None:
    """The Python reader's tree walk is the C loader's (generated from the schema)."""
    import importlib.util

    from openaccel import fileformat

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("gen_schema_h", root / "runtime_c" / "tools" / "gen_schema_h.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    tree = gen.tree((root / "runtime_c" / "schema" / "oab.fbs").read_text())
    assert {k: tuple(v) for k, v in tree.items()} == fileformat._TREE


def test_in_place_rules_agree_with_the_opset() -> None:
    """runtime_c/src/program/op_rules.c lists exactly the opset's in-place ops (elementwise ops: inputs
    identical to the in-place one may share its bytes too)."""
    from openaccel.opset import OPS

    text = (Path(__file__).resolve().parents[1] / "runtime_c" / "src" / "program" / "op_rules.c").read_text()
    table = {m[0]: (int(m[1]), bool(int(m[2]))) for m in re.findall(r'\{"(\w+)", (\d+), (\d)\}', text)}
    want = {name: (d.inplace, d.family in ("elementwise", "binary", "math")) for name, d in OPS.items()
            if d.inplace is not None}
    assert table == want


def test_test_vector_of_the_wrong_size(program: tuple[oa.Program, Path], tmp_path: Path) -> None:
    """`inspect --json` used to fail in NumPy (`cannot reshape array of size 39 into shape (5,8)`)."""
    prog, _ = program
    fb, _ = unpack(prog.buffer)
    fb.methods[0].tests[0].inputs[0].nbytes -= 4
    bad = _save(tmp_path, "short_vector", pack(fb, craft.segments_of(prog.buffer)))
    assert_user_error(cli("inspect", "--json", str(bad)),
                      "test 0 ('", "input 0 ('x'): float32[1, 32] is 128 bytes, the file gives 124")
    with pytest.raises(oa.ProgramError, match=r"input 0 \('x'\): float32\[1, 32\] is 128 bytes, the file gives 124"):
        oa.Program(bad.read_bytes()).tests()


@pytest.mark.parametrize("name", ["winograd_without_input_channels", "mbconv_empty_batch"])
def test_empty_convolutions(tmp_path: Path, name: str) -> None:
    """Found by the structured fuzzer: conv2d_winograd of an input with no channels (the output is
    the bias) and mbconv_nhwc of a batch of 0 divided by zero in the fast kernels' prepare (SIGFPE)."""
    r = cli("test", str(_save(tmp_path, name, craft.accepted()[name])))
    assert r.returncode == 0 and r.stdout.strip().endswith("1 passed, 0 failed"), r.stdout + r.stderr


# ---- oa_run / openaccel run: inputs and outputs ------------------------------------------------------


def test_every_input_is_given_exactly_once(tmp_path: Path) -> None:
    """`--input x=a.npy --input x=b.npy` on a program taking x and y passed the count check, never
    wrote y and ran on whatever the arena held."""
    path = _save(tmp_path, "two_inputs", craft.two_inputs())
    a, c = tmp_path / "a.npy", tmp_path / "c.npy"
    np.save(a, np.ones((4, 8), np.float32))
    np.save(c, np.full((4, 8), 5, np.float32))
    assert_user_error(cli("run", str(path), "--input", f"x={a}", "--input", f"x={c}"),
                      f"input 0 ('x') is given twice (--input x={a} and --input x={c}); give each input once")
    assert_user_error(cli("run", str(path), "--input", f"0={a}", "--input", f"x={c}"), "input 0 ('x') is given twice")
    assert_user_error(cli("run", str(path), "--input", f"x={a}"),
                      "input 1 ('y') is not given (the program takes 2 inputs: 'x', 'y'); give each once with --input")
    r = cli("run", str(path), "--input", f"y={c}", "--input", f"x={a}", "--output-dir", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output_0.npy"), np.full((4, 8), 6, np.float32))
    # without --input the bundled test's inputs are used; a file without tests has none to use
    r = cli("run", str(path), "--output-dir", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output_0.npy"), np.full((4, 8), 3, np.float32))
    assert_user_error(cli("run", str(_save(tmp_path, "no_tests", craft.two_inputs(bundled=False)))),
                      "input 0 ('x') is not given", "the file has no bundled test to take them from")
    with pytest.raises(oa.InputError, match=r"takes 2 inputs \(x, y\), 1 were given"):
        oa.load(path)(np.ones((4, 8), np.float32))


def test_structured_npy_is_refused(program: tuple[oa.Program, Path], tmp_path: Path) -> None:
    """A record-dtype .npy whose first field is named '<f4' was read as float32."""
    prog, path = program
    rec = np.zeros((1, 32), dtype=[("<f4", "<i4")])
    np.save(tmp_path / "rec.npy", rec)
    assert_user_error(cli("run", str(path), "--input", f"x={tmp_path / 'rec.npy'}"),
                      "a structured (record) dtype is not supported")
    with pytest.raises(oa.InputError, match=r"input 0 \('x'\): expected float32\[1, 32\]"):
        oa.load(prog)(rec)


def test_long_output_directory(program: tuple[oa.Program, Path], tmp_path: Path) -> None:
    """An --output-dir of about 1,000 characters was cut to 1,023 bytes (`.../output_0.n`)."""
    prog, path = program
    out = tmp_path.joinpath(*[c * 200 for c in "abcde"])
    assert len(str(out)) > 1000
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32)
    np.save(tmp_path / "x.npy", x)
    r = cli("run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert [p.name for p in out.iterdir()] == ["output_0.npy"]
    np.testing.assert_allclose(np.load(out / "output_0.npy"), oa.load(prog)(x)[0].numpy(), rtol=1e-6, atol=1e-6)
