"""Bad input gets a clear error (what, where, expected vs received), exit code 2, and no
traceback: damaged files, wrong inputs, unsupported ops, unreadable or unsafe model files."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.fileformat import SegmentWriter, pack, unpack


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True, timeout=600)


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


class _Rfft(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # complex intermediate: to_edge's verifier refuses the abs
        return torch.fft.rfft(x).abs()


class _Inv(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # decomposes to linalg_inv_ex, outside core ATen
        return torch.linalg.inv(x)


class _Nonzero(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # output size depends on the values
        return torch.nonzero(x)


@pytest.mark.parametrize(("model", "example", "op", "code"), [
    (_Rfft, (2, 8), "aten._fft_r2c.default", "torch.fft.rfft(x).abs()"),
    (_Inv, (3, 3), "aten.linalg_inv_ex.default", "torch.linalg.inv(x)"),
    (_Nonzero, (4,), "aten.nonzero.default", "torch.nonzero(x)"),
], ids=["rfft", "linalg_inv", "nonzero"])
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
