"""Boards: one TOML file per board under toolchains/boards/ (or a directory listed in
$OPENACCEL_BOARDS) naming its build target and its transport; or an ad-hoc transport URL."""

from __future__ import annotations

import os
import platform
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import OpenAccelError
from .paths import toolchains_dir


class BoardError(OpenAccelError):
    """A board is unknown, unreachable, refuses the login, or cannot take the files."""


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    target: str
    transport: str                       # ssh://user@host[:port]/dir or dir:/path
    remote_prefix: tuple[str, ...] = ()  # command prefix on the board (an emulator for test boards)
    ssh_options: tuple[str, ...] = ()
    timeout: float = 120.0               # seconds for each remote step
    path: Path | None = field(default=None, compare=False)


def board_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("OPENACCEL_BOARDS", "").split(os.pathsep) if p]
    return [*dirs, toolchains_dir() / "boards"]


def _load(path: Path) -> Board:
    try:
        with path.open("rb") as f:
            d = tomllib.load(f)
        return Board(name=d["name"], description=d.get("description", ""), target=d["target"],
                     transport=d["transport"], remote_prefix=tuple(d.get("remote_prefix", [])),
                     ssh_options=tuple(os.path.expanduser(o) for o in d.get("ssh_options", [])),
                     timeout=float(d.get("timeout", 120)), path=path)
    except (KeyError, tomllib.TOMLDecodeError) as e:
        raise BoardError(f"{path}: invalid board description ({e})") from None


def all_boards() -> dict[str, Board]:
    out: dict[str, Board] = {}
    for d in reversed(board_dirs()):
        for p in sorted(d.glob("*.toml")):
            b = _load(p)
            out[b.name] = b
    return out


def resolve(spec: str, target: str | None = None, timeout: float | None = None) -> Board:
    """A board by name, or an ad-hoc one from `ssh://...` / `dir:...` (target defaults to this
    machine's architecture)."""
    if spec.startswith(("ssh://", "dir:")):
        if target is None:
            machine = platform.machine()
            target = {"x86_64": "x86_64-linux"}.get(machine)
            if target is None:
                raise BoardError(f"--board {spec}: give --target (the board's build target)")
        return Board(name=spec, description="ad-hoc", target=target, transport=spec,
                     timeout=timeout or 120.0)
    boards = all_boards()
    if spec not in boards:
        raise BoardError(f"unknown board '{spec}'; known boards: {', '.join(sorted(boards))} "
                         "(or give ssh://user@host[:port]/dir or dir:/path)")
    b = boards[spec]
    if target or timeout:
        b = Board(b.name, b.description, target or b.target, b.transport, b.remote_prefix, b.ssh_options,
                  timeout or b.timeout, b.path)
    return b
