"""`openaccel flash`: copy the runtime and a model to a board and run the bundled tests there.

Transports: ssh://user@host[:port]/dir (the system's ssh, key-based, BatchMode so nothing
ever waits for a password) and dir:/path (a mounted SD card or NFS share). Every remote step has
a time-out, and the usual failures (unreachable, refused login, bad path, full disk) become
BoardError messages that say what to check.

What a board run reports is checked, not assumed: the runner's exit status (and the signal that
killed it) must agree with its JSON events, and a run that crashed or ended without a result is a
BoardError, never "0 passed". Copies are two-phase: every file is written beside its final name
(NAME.part, synced) and only when all are complete are they renamed over the previous ones, so a
copy that fails half-way (a full card) leaves the previous good files in place.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .boards import Board, BoardError, parse_dir, parse_ssh
from .errors import ToolchainError
from .program import Program
from .runtime.build import build_runtime
from .targets import get_target

Log = Callable[[str], None]
Upload = tuple[Path, str]  # (file here, its name in the board directory)
RUNNER = "oa_run"


class NotRunHere(BoardError):
    """The files were copied to a dir: board, but this machine cannot run the board's binaries."""


@dataclass
class FlashResult:
    board: str
    destination: str
    tests: list[dict[str, Any]]
    ran_on: str
    ran: bool = True  # False: copied, but the tests could not be run (ran_on says why)

    @property
    def passed(self) -> int:
        return sum(bool(t.get("passed")) for t in self.tests)

    @property
    def failed(self) -> int:
        return len(self.tests) - self.passed


def _events(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(ev, dict):
                out.append(ev)
    return out


def _signal_name(n: int) -> str:
    try:
        return f"{signal.Signals(n).name}, signal {n}"
    except ValueError:
        return f"signal {n}"


def _tail(text: str, lines: int = 6) -> str:
    s = text.strip().splitlines()[-lines:]
    return " | ".join(s)[-600:]


def _verify(events: list[dict[str, Any]], returncode: int, killed_by: int | None, stderr: str, test: bool,
            where: str) -> None:
    """Raise BoardError unless oa_run's run ended normally with a result that matches its exit
    status (0: all passed / ran, 1: some tests failed)."""
    said = f"; its stderr: {_tail(stderr)}" if stderr.strip() else ""
    if killed_by is not None:
        raise BoardError(f"oa_run crashed {where} ({_signal_name(killed_by)}) before reporting a complete "
                         f"result: the check failed{said}")
    for e in events:
        if e.get("event") == "error":
            raise BoardError(f"oa_run {where}: {e.get('status')}: {e.get('message')}")
    if test:
        summaries = [e for e in events if e.get("event") == "summary"]
        if not summaries:
            raise BoardError(f"oa_run {where} ended (exit status {returncode}) without a test result{said}")
        tests = [e for e in events if e.get("event") == "test"]
        failed = sum(not t.get("passed") for t in tests)
        s = summaries[-1]
        if (s.get("passed"), s.get("failed")) != (len(tests) - failed, failed) or returncode != (1 if failed else 0):
            raise BoardError(f"oa_run {where} reported {s.get('passed')} passed, {s.get('failed')} failed over "
                             f"{len(tests)} test lines and exit status {returncode}: an inconsistent result{said}")
    elif returncode != 0 or not events:
        raise BoardError(f"oa_run {where} ended (exit status {returncode}) without a result{said}")


class SshTransport:
    def __init__(self, board: Board) -> None:
        addr = parse_ssh(board.transport)
        self.board = board
        self.host = addr.host
        self.user = addr.user
        self.port = addr.port
        self.dir = addr.dir
        self.login = addr.login
        connect = max(3, min(int(board.timeout), 20))
        self.opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect}",
                     "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", *board.ssh_options]

    def describe(self) -> str:
        return f"{self.login}:{self.port}{self.dir}"

    def _ssh(self, remote_cmd: str) -> list[str]:
        # `--` ends ssh's options: the destination (validated in parse_ssh as well) is never one
        return ["ssh", *self.opts, "-p", str(self.port), "--", self.login, remote_cmd]

    def _run(self, cmd: list[str], what: str, stdin: Path | None = None,
             raw: list[bytes] | None = None) -> subprocess.CompletedProcess[str]:
        """Run an ssh command with the board's time-out; `raw` receives stdout as bytes."""
        try:
            with stdin.open("rb") if stdin is not None else open(os.devnull, "rb") as f:
                p = subprocess.run(cmd, stdin=f, capture_output=True, timeout=self.board.timeout)
            if raw is not None:
                raw.append(p.stdout)
            r = subprocess.CompletedProcess(cmd, p.returncode, p.stdout.decode(errors="replace"),
                                            p.stderr.decode(errors="replace"))
        except subprocess.TimeoutExpired:
            raise BoardError(f"{what}: no answer from {self.host}:{self.port} within {self.board.timeout:.0f} s "
                             "(is the board on and reachable?)") from None
        except FileNotFoundError:
            raise BoardError(f"{what}: {cmd[0]} is not installed (apt-get install -y openssh-client)") from None
        if r.returncode == 255:
            raise BoardError(f"{what}: {self._explain(r.stderr)}")
        return r

    def _explain(self, stderr: str) -> str:
        s = stderr.strip().splitlines()
        last = s[-1] if s else "ssh failed"
        where = f"{self.host}:{self.port}"
        low = stderr.lower()
        if "connection refused" in low:
            return f"cannot reach the board at {where}: connection refused (is sshd running on that port?)"
        if "timed out" in low or "no route to host" in low or "network is unreachable" in low:
            return f"cannot reach the board at {where}: {last}"
        if "could not resolve" in low or "name or service not known" in low:
            return f"cannot resolve the board's host name '{self.host}'"
        if "permission denied" in low:
            return (f"login to {self.login} at {where} refused ({last}); openaccel uses key-based ssh: "
                    "install your public key on the board or set ssh_options in the board file")
        if "no space left" in low:
            return f"the board has no space left for the files in {self.dir}"
        return f"{last} ({where})"

    def prepare(self) -> None:
        d = shlex.quote(self.dir)
        r = self._run(self._ssh(f"mkdir -p {d} && test -w {d}"), "creating the directory on the board")
        if r.returncode != 0:
            raise BoardError(f"cannot create or write {self.dir} on {self.login}: "
                             f"{r.stderr.strip() or 'permission denied'}")

    def copy(self, files: list[Upload]) -> None:
        # Stream each file through `cat` rather than scp: works with any sshd that has a shell
        # (sftp-less OpenSSH, dropbear), and the size check catches a full disk. Every file goes to
        # NAME.part first; the renames over the previous files happen once all parts are complete.
        parts = [shlex.quote(f"{self.dir}/{name}.part") for _, name in files]
        try:
            for (src, name), part in zip(files, parts, strict=True):
                mode = "755" if name == RUNNER else "644"
                cmd = f"cat > {part} && test $(wc -c < {part}) -eq {src.stat().st_size} && chmod {mode} {part}"
                r = self._run(self._ssh(cmd), f"copying {name} to the board", stdin=src)
                if r.returncode != 0:
                    raise BoardError(f"copying {name} to the board: {self._explain(r.stderr or 'incomplete copy')}; "
                                     "the previous files there are unchanged")
            moves = " && ".join(f"mv -f {part} {shlex.quote(f'{self.dir}/{name}')}"
                                for (_, name), part in zip(files, parts, strict=True))
            r = self._run(self._ssh(f"sync && {moves}"), "replacing the files on the board")
            if r.returncode != 0:
                raise BoardError(f"replacing the files in {self.dir} on the board: {self._explain(r.stderr)}")
        except BoardError:
            try:
                self._run(self._ssh("rm -f " + " ".join(parts)), "removing partial copies")
            except BoardError:
                pass
            raise

    def exec(self, args: list[str], what: str) -> tuple[list[dict[str, Any]], str]:
        """Run oa_run ARGS --json in the board directory; returns its JSON events, checked."""
        prefix = " ".join(shlex.quote(p) for p in self.board.remote_prefix)
        quoted = " ".join(shlex.quote(a) for a in args)
        # `; exit $?` keeps the shell waiting for oa_run (no exec of the last command), so a runner
        # killed by a signal comes back as the shell's 128+N rather than as an ssh failure
        cmd = f"cd {shlex.quote(self.dir)} || exit 125; {prefix} ./{RUNNER} {quoted} --json; exit $?"
        r = self._run(self._ssh(cmd), what)
        where = f"on {self.board.name} ({self.login}:{self.port}{self.dir})"
        if r.returncode == 125:
            raise BoardError(f"{what}: cannot enter {self.dir} on {self.login}: {_tail(r.stderr)}")
        if r.returncode in (126, 127):
            raise BoardError(f"{what}: the board could not start {' '.join(self.board.remote_prefix) or './' + RUNNER}"
                             f" (exit status {r.returncode}): {_tail(r.stderr)}")
        killed_by = r.returncode - 128 if r.returncode > 128 else None
        events = _events(r.stdout)
        _verify(events, r.returncode, killed_by, r.stderr, "--test" in args, where)
        return events, f"{self.board.name} via ssh"

    def run_tests(self, model: str) -> tuple[list[dict[str, Any]], str]:
        return self.exec([model, "--test"], "running the tests on the board")

    def fetch(self, name: str, dest: Path) -> None:
        raw: list[bytes] = []
        path = shlex.quote(f"{self.dir}/{name}")
        r = self._run(self._ssh(f"cat {path}"), f"reading {name} from the board", raw=raw)
        if r.returncode != 0:
            raise BoardError(f"reading {name} from the board: {r.stderr.strip()}")
        dest.write_bytes(raw[0])


def _write_part(src: Path, part: Path) -> None:
    """Copy src to part and make it durable (fsync) before anyone renames it into place."""
    with src.open("rb") as fi, part.open("wb") as fo:
        shutil.copyfileobj(fi, fo, 1 << 20)
        fo.flush()
        os.fsync(fo.fileno())
    try:
        shutil.copymode(src, part)
    except OSError:
        pass  # a FAT card has no modes; the copy itself is what matters


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class DirTransport:
    def __init__(self, board: Board) -> None:
        self.board = board
        self.dir = parse_dir(board.transport)

    def describe(self) -> str:
        return str(self.dir)

    def prepare(self) -> None:
        # The directory itself must exist: creating it (or any parent) is how an SD card that is
        # not mounted gets "flashed" into this machine's root file system under its mount point.
        if not self.dir.exists():
            raise BoardError(
                f"{self.board.transport}: {self.dir} does not exist. openaccel creates no directories for "
                "a dir: board, so that a card or share that is not mounted is never filled in its place on "
                f"this machine's disk: mount it, or create the directory once (mkdir -p {shlex.quote(str(self.dir))})")
        if not self.dir.is_dir():
            raise BoardError(f"{self.board.transport}: {self.dir} is not a directory")
        if not os.access(self.dir, os.W_OK | os.X_OK):
            raise BoardError(f"{self.board.transport}: {self.dir} is not writable (mounted read-only?)")

    def copy(self, files: list[Upload]) -> None:
        models = [name for _, name in files if name.endswith(".oab")]
        script = ("#!/bin/sh\n# run on the board: the model's bundled tests\ncd \"$(dirname \"$0\")\"\n"
                  + "".join(f"./{RUNNER} {shlex.quote(m)} --test\n" for m in models))
        for src, _ in files:
            if not src.is_file():
                raise BoardError(f"{src}: no such file to copy to {self.dir}")
        parts: list[tuple[Path, Path]] = []
        name = ""
        try:
            for src, name in files:
                part, dest = self.dir / f"{name}.part", self.dir / name
                parts.append((part, dest))
                _write_part(src, part)
                if part.stat().st_size != src.stat().st_size:
                    raise BoardError(f"{dest} is incomplete after copying (disk full?); the previous files "
                                     f"in {self.dir} are unchanged")
            name = "run_tests.sh"
            part = self.dir / "run_tests.sh.part"
            parts.append((part, self.dir / name))
            with part.open("w") as fo:
                fo.write(script)
                fo.flush()
                os.fsync(fo.fileno())
            part.chmod(0o755)
            _fsync_dir(self.dir)
            for part, dest in parts:
                os.replace(part, dest)
            _fsync_dir(self.dir)
        except OSError as e:
            for part, _ in parts:
                try:
                    part.unlink()
                except OSError:
                    pass
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise BoardError(f"no space left on {self.dir} for {name}; the previous files there are "
                                 "unchanged") from None
            raise BoardError(f"cannot write {self.dir / name}: {e.strerror or e}; the previous files in "
                             f"{self.dir} are unchanged") from None
        except BoardError:
            for part, _ in parts:
                part.unlink(missing_ok=True)
            raise

    def exec(self, args: list[str], what: str) -> tuple[list[dict[str, Any]], str]:
        """The board itself is not reachable: run the copied files here (under QEMU for another
        architecture) so a bad copy is caught before the card goes back into the board."""
        target = get_target(self.board.target)
        try:
            prefix = target.run_prefix()
        except ToolchainError as e:
            raise NotRunHere(f"this machine cannot run {target.name} binaries ({e}); run run_tests.sh on the "
                             "board") from None
        if prefix and shutil.which(prefix[0]) is None:
            raise NotRunHere(f"{prefix[0]} is not installed here to run the copy ({target.install_hint()}); "
                             "run run_tests.sh on the board")
        runner = self.dir / RUNNER
        try:
            r = subprocess.run([*prefix, str(runner), *args, "--json"], capture_output=True, text=True,
                               errors="replace", timeout=self.board.timeout, cwd=self.dir)
        except subprocess.TimeoutExpired:
            raise BoardError(f"{what}: the copied runner did not finish within {self.board.timeout:.0f} s") from None
        except OSError as e:
            raise BoardError(f"{what}: cannot start {runner}: {e.strerror} (is the card mounted noexec?)") from None
        how = f"from the copy in {self.dir} ({'under ' + prefix[0] if prefix else 'natively'})"
        events = _events(r.stdout)
        killed_by = -r.returncode if r.returncode < 0 else None
        _verify(events, r.returncode, killed_by, r.stderr, "--test" in args, f"from the copy in {self.dir}")
        return events, how

    def run_tests(self, model: str) -> tuple[list[dict[str, Any]], str]:
        return self.exec([model, "--test"], "running the tests from the copy")

    def fetch(self, name: str, dest: Path) -> None:
        try:
            shutil.copyfile(self.dir / name, dest)
        except OSError as e:
            raise BoardError(f"reading {name} from {self.dir}: {e.strerror}") from None


def transport_for(board: Board) -> SshTransport | DirTransport:
    if board.transport.startswith("ssh://"):
        return SshTransport(board)
    if board.transport.startswith("dir:"):
        return DirTransport(board)
    raise BoardError(f"unknown transport '{board.transport}' (ssh://user@host[:port]/dir or dir:/path)")


def _check_names(program_path: Path, uploads: list[Upload]) -> None:
    names = [RUNNER, program_path.name, *(n for _, n in uploads)]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BoardError(f"two files would have the same name on the board: {', '.join(dup)} "
                         f"(the runner is {RUNNER}; rename the model)")


def on_board(program_path: Path, board: Board, args: list[str], extra_files: list[Upload], log: Log,
             fetch: list[str] | None = None, fetch_to: Path | None = None) -> tuple[list[dict[str, Any]], str]:
    """Copy the runtime, the program and `extra_files` ((file, name on the board) pairs) to the
    board, run `oa_run PROGRAM ARGS` there and (optionally) bring files back. For
    `openaccel run/test --board`."""
    Program.load(program_path)
    _check_names(program_path, extra_files)
    target = get_target(board.target)
    transport = transport_for(board)
    log(f"board {board.name}: target {target.name}, {transport.describe()}")
    build = build_runtime(target, log=log)
    transport.prepare()
    transport.copy([(build.oa_run, RUNNER), (program_path, program_path.name), *extra_files])
    events, how = transport.exec([program_path.name, *args], "running oa_run on the board")
    for name in fetch or []:
        assert fetch_to is not None
        transport.fetch(name, fetch_to / name)
    return events, how


def flash(program_path: Path, board: Board, log: Log) -> FlashResult:
    prog = Program.load(program_path)
    _check_names(program_path, [])
    target = get_target(board.target)
    transport = transport_for(board)
    log(f"board {board.name}: target {target.name}, {transport.describe()}")
    build = build_runtime(target, log=log)
    log(f"runtime: {build.oa_run} ({build.oa_run.stat().st_size:,} bytes, static={target.static})")
    transport.prepare()
    log(f"copying {RUNNER} and {program_path.name} ({len(prog.buffer):,} bytes) ...")
    transport.copy([(build.oa_run, RUNNER), (program_path, program_path.name)])
    log("running the bundled tests ...")
    try:
        events, ran_on = transport.run_tests(program_path.name)
    except NotRunHere as e:
        return FlashResult(board.name, transport.describe(), [], str(e), ran=False)
    tests = [e for e in events if e.get("event") == "test"]
    return FlashResult(board.name, transport.describe(), tests, ran_on)
