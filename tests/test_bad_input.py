"""Bad input gets a clear error (what, where, expected vs received), exit code 2, and no
traceback: damaged files, wrong inputs, unsupported ops, unreadable or unsafe model files."""

from __future__ import annotations

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
    fb.formatMajor = 7
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
        return torch.topk(x, 2).values  # no openaccel kernel for topk


def test_unsupported_op_names_op_and_source_line() -> None:
    with pytest.raises(oa.UnsupportedOpError) as e:
        oa.export(_Unsupported(), (torch.randn(3, 8),))
    msg = str(e.value)
    assert "aten.topk.default" in msg
    assert "test_bad_input.py:" in msg and "torch.topk(x, 2)" in msg


def test_unsupported_op_on_the_cli(tmp_path: Path) -> None:
    archive = tmp_path / "topk.pt2"
    torch.export.save(torch.export.export(_Unsupported(), (torch.randn(3, 8),)), str(archive))
    assert_user_error(cli("export", str(archive)), "aten.topk.default", "test_bad_input.py:")


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


def test_zero_size_tensors_bound_their_other_dims(tmp_path: Path) -> None:
    """A tensor with a zero dim has no bytes, but kernels loop over its other dims: sdpa with head
    dim 0 and a batch of 2^40 in a 1 KB file kept oa_run busy for hours."""
    b = craft.Builder()
    q = b.tensor("q", (1 << 40, 1, 1, 0))
    k = b.tensor("k", (1, 1, 1, 0))
    v = b.tensor("v", (1, 1, 1, 0))
    o = b.tensor("o", (1 << 40, 1, 1, 0), offset=64)
    b.instr("sdpa", [q, k, v], [o], ints=[0, 1])
    b.inputs, b.outputs = [q], [o]
    data = b.build()
    assert len(data) < 2048
    r = _oa_run(_save(tmp_path, "sdpa_zero", data), timeout=60)  # (hours before)
    assert r.returncode == 2 and "tensor 0 ('q'): shape [1099511627776, 1, 1, 0] has no elements, but with its zero " \
        "dims counted as 1 it describes 4398046511104 bytes, more than pool 0 holds (4096 bytes)" in r.stderr, r.stderr


@pytest.mark.parametrize("op", ["batch_norm", "group_norm", "permute"])
def test_products_of_dims_fit_in_int64(tmp_path: Path, op: str) -> None:
    """Kernels multiply a tensor's dims in int64: [0, 1, 2^40, 2^40] has no elements, but the
    product of its dims overflowed (UBSan) in batch_norm, group_norm and the fast permute."""
    g = 1 << 40
    b = craft.Builder()
    x = b.tensor("x", (0, 1, g, g))
    if op == "batch_norm":
        c = b.tensor("c", (1,), data=np.ones(1, np.float32))
        y = b.tensor("y", (0, 1, g, g))
        b.instr(op, [x, c, c, c, c], [y], floats=[1e-5])
    elif op == "group_norm":
        y = b.tensor("y", (0, 1, g, g))
        b.instr(op, [x, -1, -1], [y], ints=[1], floats=[1e-5])
    else:
        y = b.tensor("y", (0, g, 1, g))
        b.instr(op, [x], [y], ints=[0, 2, 1, 3])
    b.inputs, b.outputs = [x], [y]
    assert_user_error(cli("run", str(_save(tmp_path, op, b.build()))),
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
