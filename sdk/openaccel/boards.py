"""Boards: one TOML file per board under toolchains/boards/ (or a directory listed in
$OPENACCEL_BOARDS) naming its build target and its transport; or an ad-hoc transport URL.

Every field of a board file and every part of a transport URL is checked when it is read, so a
bad value is a BoardError naming the file, the field, what was expected and what was found, never
a traceback; and one broken file does not hide the other boards (it is reported, by name and with
its problem, only when it is used or when the known boards are listed).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import OpenAccelError
from .paths import toolchains_dir

SSH_FORM = "ssh://user@host[:port]/dir"
DIR_FORM = "dir:/path"
DEFAULT_TIMEOUT = 120.0


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
    timeout: float = DEFAULT_TIMEOUT     # seconds for each remote step
    path: Path | None = field(default=None, compare=False)


# ---- transport URLs ----------------------------------------------------------------------------
# A user or host name goes to ssh as one argument: it must not start with '-' (ssh would read it as
# an option, e.g. -oProxyCommand=...) and holds only the characters such names are made of.
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_HOST = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62}))*\.?")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]+")


@dataclass(frozen=True)
class SshAddress:
    user: str | None
    host: str
    port: int
    dir: str

    @property
    def login(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


def parse_ssh(url: str) -> SshAddress:
    """ssh://[user@]host[:port]/dir, every part checked (BoardError naming the part otherwise)."""
    def bad(what: str) -> BoardError:
        return BoardError(f"board address '{url}': {what} (expected {SSH_FORM})")

    if not url.startswith("ssh://"):
        raise bad("not an ssh:// address")
    rest = url[len("ssh://"):]
    netloc, slash, path = rest.partition("/")
    if not slash or not path.strip("/"):
        raise bad("no directory on the board after the host")
    userinfo, at, hostport = netloc.rpartition("@")
    user: str | None = None
    if at:
        if not _USER.fullmatch(userinfo):
            raise bad(f"user name '{userinfo}' is not a user name (letters, digits, '_', '.', '-', "
                      "not starting with '-')")
        user = userinfo
    if hostport.startswith("["):
        host, close, tail = hostport[1:].partition("]")
        if not close or not _IPV6.fullmatch(host) or ":" not in host:
            raise bad(f"'{hostport}' is not a bracketed IPv6 address")
        if tail and not tail.startswith(":"):
            raise bad(f"unexpected '{tail}' after the host")
        port_text = tail[1:] if tail else None
    else:
        host, colon, port_text_ = hostport.partition(":")
        port_text = port_text_ if colon else None
        if not host:
            raise bad("no host name")
        if not _HOST.fullmatch(host) or len(host) > 253:
            raise bad(f"host '{host}' is not a host name or address (letters, digits, '-', '.', "
                      "not starting with '-')")
    port = 22
    if port_text is not None:
        if not port_text.isascii() or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise bad(f"port '{port_text}' is not a number from 1 to 65535")
        port = int(port_text)
    directory = "/" + path
    if any(ord(c) < 32 or c == "\x7f" for c in directory):
        raise bad("the directory contains control characters")
    return SshAddress(user, host, port, directory)


def parse_dir(spec: str) -> Path:
    """dir:/path -> the directory (~ expanded)."""
    path = spec.removeprefix("dir:")
    if not spec.startswith("dir:") or not path.strip():
        raise BoardError(f"board address '{spec}': no directory (expected {DIR_FORM})")
    if "\x00" in path:
        raise BoardError(f"board address '{spec}': the path contains a NUL character")
    return Path(path).expanduser()


def check_transport(spec: str) -> None:
    if spec.startswith("ssh://"):
        parse_ssh(spec)
    elif spec.startswith("dir:"):
        parse_dir(spec)
    else:
        raise BoardError(f"unknown transport '{spec}' (expected {SSH_FORM} or {DIR_FORM})")


# ---- board files -------------------------------------------------------------------------------
def board_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("OPENACCEL_BOARDS", "").split(os.pathsep) if p]
    return [*dirs, toolchains_dir() / "boards"]


def _kind(v: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a table"}
    return next((n for t, n in names.items() if type(v) is t), type(v).__name__)


def _known_targets() -> list[str]:
    from .targets import all_targets

    return list(all_targets())


def check_target(target: str, where: str) -> None:
    known = _known_targets()
    if target not in known:
        raise BoardError(f"{where}: unknown target '{target}'; known targets: {', '.join(known)}")


def check_timeout(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise BoardError(f"{where}: expected a number of seconds greater than 0, got {value!r} ({_kind(value)})")
    return float(value)


_FIELDS = ("name", "description", "target", "transport", "remote_prefix", "ssh_options", "timeout")


def _load(path: Path) -> Board:
    try:
        with path.open("rb") as f:
            d: dict[str, Any] = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise BoardError(f"board file {path}: not valid TOML ({e})") from None
    except OSError as e:
        raise BoardError(f"board file {path}: cannot read it ({e.strerror})") from None

    def text(key: str, required: bool = True) -> str:
        if key not in d:
            if required:
                raise BoardError(f"board file {path}: missing '{key}' (a string)")
            return ""
        v = d[key]
        if not isinstance(v, str) or (required and not v.strip()):
            raise BoardError(f"board file {path}: '{key}' must be a non-empty string, got {v!r} ({_kind(v)})")
        return v

    def strings(key: str) -> tuple[str, ...]:
        v = d.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise BoardError(f"board file {path}: '{key}' must be a list of strings, got {v!r} ({_kind(v)})")
        return tuple(v)

    unknown = sorted(set(d) - set(_FIELDS))
    if unknown:
        raise BoardError(f"board file {path}: unknown field(s) {', '.join(unknown)}; a board file has "
                         f"{', '.join(_FIELDS)}")
    name, target, transport = text("name"), text("target"), text("transport")
    check_target(target, f"board file {path}: 'target'")
    try:
        check_transport(transport)
    except BoardError as e:
        raise BoardError(f"board file {path}: 'transport': {e}") from None
    timeout = check_timeout(d.get("timeout", DEFAULT_TIMEOUT), f"board file {path}: 'timeout'")
    return Board(name=name, description=text("description", required=False), target=target,
                 transport=transport, remote_prefix=strings("remote_prefix"),
                 ssh_options=tuple(os.path.expanduser(o) for o in strings("ssh_options")),
                 timeout=timeout, path=path)


def scan_boards() -> tuple[dict[str, Board], dict[str, BoardError]]:
    """(usable boards by name, broken board files by name). A file in an earlier directory of
    $OPENACCEL_BOARDS overrides a board of the same name further on, broken or not; a broken file's
    name is its `name` if that can be read, else its file name without .toml."""
    good: dict[str, Board] = {}
    broken: dict[str, BoardError] = {}
    for d in board_dirs():
        for p in sorted(d.glob("*.toml")):
            try:
                b = _load(p)
            except BoardError as e:
                name = _declared_name(p) or p.stem
                if name not in good:
                    broken.setdefault(name, e)
                continue
            if b.name not in good and b.name not in broken:
                good[b.name] = b
    return good, broken


def _declared_name(path: Path) -> str | None:
    try:
        v = tomllib.loads(path.read_text()).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return v if isinstance(v, str) and v.strip() else None


def all_boards() -> dict[str, Board]:
    """The usable boards by name (broken files left out: see scan_boards)."""
    return scan_boards()[0]


def resolve(spec: str, target: str | None = None, timeout: float | None = None) -> Board:
    """A board by name, or an ad-hoc one from `ssh://...` / `dir:...`, which needs `target`: a
    board's binaries are built for its CPU, and guessing this machine's would put an x86-64 binary
    on an Arm card without a word."""
    if target is not None:
        check_target(target, "--target")
    if timeout is not None:
        timeout = check_timeout(timeout, "--timeout")
    if spec.startswith(("ssh://", "dir:")):
        check_transport(spec)
        if target is None:
            known = [t for t in _known_targets() if t != "host"]
            raise BoardError(f"--board {spec}: give --target, the board's build target (one of "
                             f"{', '.join(known)}), or use a board file from toolchains/boards/ that names it")
        return Board(name=spec, description="ad-hoc", target=target, transport=spec,
                     timeout=timeout or DEFAULT_TIMEOUT)
    good, broken = scan_boards()
    if spec in broken:
        raise broken[spec]
    if spec not in good:
        msg = (f"unknown board '{spec}'; known boards: {', '.join(sorted(good)) or 'none'} "
               f"(or give {SSH_FORM} or {DIR_FORM})")
        if broken:
            msg += "; board files not usable: " + "; ".join(f"{n}: {e}" for n, e in sorted(broken.items()))
        raise BoardError(msg)
    b = good[spec]
    if target:
        b = replace(b, target=target)
    if timeout:
        b = replace(b, timeout=timeout)
    return b
