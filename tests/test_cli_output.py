"""CLI output never parses names, paths or messages as rich markup: a tensor named `x[/]` (a
file may name its tensors anything) or a path with `[/]` in it printed a MarkupError traceback,
and `[cpu]` or `[zz]` in text vanished."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

import openaccel as oa


class Named(torch.nn.Module):
    def forward(self, xqqq: torch.Tensor) -> torch.Tensor:
        return torch.relu(xqqq) * 2


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True, timeout=300)


def test_bracketed_names_and_paths_print_as_they_are(tmp_path: Path) -> None:
    prog = oa.export(Named(), (torch.randn(2, 3),))
    buf = prog.buffer
    assert buf.count(b"xqqq") >= 1
    folder = tmp_path / "card["
    folder.mkdir()
    path = folder / "]model.oab"  # the path reads ".../card[/]model.oab"
    path.write_bytes(buf.replace(b"xqqq", b"x[/]"))   # same length: the flatbuffer stays valid
    assert "[/]" in str(path)
    for args in (("inspect", str(path)), ("test", str(path)), ("run", str(path)), ("bench", str(path), "--runs", "2")):
        r = cli(*args)
        assert r.returncode == 0, f"{args}: {r.stderr[-2000:]}"
        assert "Traceback" not in r.stderr and "MarkupError" not in r.stderr, r.stderr
    assert "x[/]" in cli("inspect", str(path)).stdout
    assert "[/]model.oab" in cli("bench", str(path), "--runs", "2").stdout
    # an error naming a bracketed path keeps every character of it
    missing = tmp_path / "no[such]" / "a[/]b.oab"
    r = cli("inspect", str(missing))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "no[such]/a[/]b.oab" in " ".join(r.stderr.split()), r.stderr
