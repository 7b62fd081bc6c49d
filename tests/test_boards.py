"""Boards and transports without a model or a board: board files and transport URLs are checked
(clear BoardErrors, no tracebacks, one broken file does not hide the others), ssh never gets an
option where a destination belongs, a dir: board is never created out of nothing, copies to it are
atomic, a crashed runner is a failure, and build-runtime -o ships the stripped binary."""

from __future__ import annotations

import ipaddress
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from openaccel import flash as flash_mod
from openaccel.boards import Board, BoardError, parse_ssh, resolve, scan_boards
from openaccel.flash import DirTransport, SshTransport
from openaccel.paths import toolchains_dir


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd)


GOOD = 'name = "{name}"\ntarget = "qemu-aarch64"\ntransport = "dir:/tmp/{name}"\n'


# ---- board files ---------------------------------------------------------------------------------
@pytest.mark.parametrize("body, expect", [
    ('timeout = "soon"', "'timeout': expected a number of seconds greater than 0, got 'soon' (a string)"),
    ("timeout = 0", "'timeout': expected a number of seconds greater than 0, got 0"),
    ("ssh_options = 5", "'ssh_options' must be a list of strings, got 5 (an integer)"),
    ('remote_prefix = ["qemu-aarch64", 1]', "'remote_prefix' must be a list of strings"),
    ('target = "qemu-foo"', "unknown target 'qemu-foo'; known targets:"),
    ('transport = "ssh://root@127.0.0.1:99999/x"', "port '99999' is not a number from 1 to 65535"),
    ('transport = "ftp://x/y"', "unknown transport 'ftp://x/y'"),
    ("tiemout = 5", "unknown field(s) tiemout"),
    ("name = ", "not valid TOML"),
])
def test_broken_board_file_is_a_clear_error(tmp_path: Path, body: str, expect: str) -> None:
    fields = {"name": 'name = "bad"', "target": 'target = "qemu-aarch64"', "transport": 'transport = "dir:/tmp/x"'}
    key = body.split("=")[0].strip()
    fields[key] = body
    (tmp_path / "bad.toml").write_text("\n".join(fields.values()) + "\n")
    env = {"OPENACCEL_BOARDS": str(tmp_path)}
    r = cli("flash", str(tmp_path / "model.oab"), "--board", "bad", env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    msg = " ".join(r.stderr.split())
    assert str(tmp_path / "bad.toml") in msg and expect in msg, msg


def test_one_broken_board_file_does_not_hide_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "good.toml").write_text(GOOD.format(name="good"))
    (tmp_path / "broken.toml").write_text('name = "broken"\ntarget = "qemu-aarch64"\ntransport = "dir:/x"\n'
                                          'timeout = "soon"\n')
    (tmp_path / "garbled.toml").write_text("name = [unterminated\n")
    monkeypatch.setenv("OPENACCEL_BOARDS", str(tmp_path))
    assert resolve("good").transport == "dir:/tmp/good"
    assert resolve("rpi4").target == "qemu-aarch64"  # the built-in boards too
    with pytest.raises(BoardError, match=r"broken\.toml: 'timeout': expected a number"):
        resolve("broken")
    with pytest.raises(BoardError, match=r"garbled\.toml: not valid TOML"):
        resolve("garbled")  # no readable name: known by its file name
    with pytest.raises(BoardError) as e:
        resolve("nope")
    listing = str(e.value)
    assert "known boards: good, rpi-zero2-armv7, rpi4" in listing
    assert "not usable: broken: " in listing and "garbled: " in listing
    good, broken = scan_boards()
    assert "good" in good and set(broken) == {"broken", "garbled"}


def test_a_board_file_overrides_a_built_in_one_even_when_broken(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rpi4.toml").write_text('name = "rpi4"\ntarget = "qemu-aarch64"\ntransport = "dir:/x"\n'
                                        "ssh_options = 5\n")
    monkeypatch.setenv("OPENACCEL_BOARDS", str(tmp_path))
    with pytest.raises(BoardError, match="ssh_options"):
        resolve("rpi4")  # the user's file, not silently the built-in one it was meant to replace


def test_no_board_file_names_an_ip_address_outside_loopback() -> None:
    files = sorted((toolchains_dir() / "boards").glob("*.toml"))
    assert files
    for path in files:
        text = path.read_text()
        board = tomllib.loads(text)
        if board["transport"].startswith("ssh://"):
            host = parse_ssh(board["transport"]).host
            try:
                addr = ipaddress.ip_address(host)
            except ValueError:
                assert host.endswith((".local", ".invalid", ".example")), f"{path}: {host}"
            else:
                assert addr.is_loopback, f"{path}: {host}"
        for found in re.findall(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])", text):
            assert ipaddress.ip_address(found).is_loopback, f"{path} names {found}"


# ---- transport URLs ------------------------------------------------------------------------------
@pytest.mark.parametrize("url, expect", [
    ("ssh://root@127.0.0.1:99999/x", "port '99999' is not a number from 1 to 65535"),
    ("ssh://host:port/x", "port 'port' is not a number from 1 to 65535"),
    ("ssh://root@127.0.0.1:0/x", "port '0' is not a number"),
    ("ssh://root@/x", "no host name"),
    ("ssh://root@host", "no directory on the board"),
    ("ssh://-oProxyCommand=x/y", "host '-oProxyCommand=x' is not a host name"),
    ("ssh://a b@host/x", "user name 'a b' is not a user name"),
    ("ssh://[zz]/x", "not a bracketed IPv6 address"),
    ("dir:", "no directory"),
])
def test_bad_board_address_is_a_clear_error(url: str, expect: str) -> None:
    r = cli("flash", "model.oab", "--board", url, "--target", "qemu-aarch64")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert expect in " ".join(r.stderr.split()), r.stderr


def test_good_board_addresses_parse() -> None:
    a = parse_ssh("ssh://pi@raspberrypi.local:2222/home/pi/oa")
    assert (a.user, a.host, a.port, a.dir, a.login) == ("pi", "raspberrypi.local", 2222, "/home/pi/oa",
                                                        "pi@raspberrypi.local")
    b = parse_ssh("ssh://[::1]/opt/oa")
    assert (b.user, b.host, b.port, b.dir) == (None, "::1", 22, "/opt/oa")


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the ssh client")
def test_ssh_gets_the_destination_after_double_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Second line of defence: even a destination that got past the checks goes after `--`."""
    t = SshTransport(Board("b", "", "qemu-aarch64", "ssh://root@127.0.0.1:1/x", timeout=10))
    cmd = t._ssh("true")
    assert cmd[cmd.index("--") + 1] == "root@127.0.0.1"
    t.login = "-oProxyCommand=touch MARK"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BoardError):
        t._run(t._ssh("true"), "probing")  # without `--`, ssh would run the ProxyCommand, then "connect" to 'true'
    assert list(tmp_path.iterdir()) == []


def test_adhoc_board_needs_a_target(tmp_path: Path) -> None:
    """A dir: or ssh: board has no file naming its CPU: without --target it is an error listing
    the targets, never a silent x86-64 build."""
    for spec in (f"dir:{tmp_path}", "ssh://pi@raspberrypi.local/home/pi/oa"):
        with pytest.raises(BoardError, match=r"give --target, the board's build target .*qemu-aarch64"):
            resolve(spec)
        assert resolve(spec, target="qemu-armv7").target == "qemu-armv7"
    r = cli("flash", "model.oab", "--board", f"dir:{tmp_path}")
    assert r.returncode == 2 and "give --target" in r.stderr and "x86_64-linux" in r.stderr, r.stderr
    with pytest.raises(BoardError, match="--target: unknown target 'qemu-foo'; known targets"):
        resolve(f"dir:{tmp_path}", target="qemu-foo")
    with pytest.raises(BoardError, match="--timeout: expected a number of seconds greater than 0"):
        resolve(f"dir:{tmp_path}", target="qemu-aarch64", timeout=float("nan"))
    assert resolve("sdcard").target == "qemu-aarch64"  # a board file names it


# ---- dir: boards ---------------------------------------------------------------------------------
def dir_board(path: Path, target: str = "qemu-aarch64") -> Board:
    return Board(name=f"dir:{path}", description="", target=target, transport=f"dir:{path}", timeout=30)


def test_dir_board_is_not_created_out_of_nothing(tmp_path: Path) -> None:
    """An SD card that is not mounted: its mount point is an empty directory here. Flashing to
    dir:/media/sdcard/opt/openaccel must not create opt/openaccel on this machine's disk."""
    mount_point = tmp_path / "media" / "sdcard"
    mount_point.mkdir(parents=True)
    dest = mount_point / "opt" / "openaccel"
    with pytest.raises(BoardError, match=r"does not exist\. openaccel creates no directories .* not mounted"):
        DirTransport(dir_board(dest)).prepare()
    assert list(mount_point.iterdir()) == []
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(BoardError, match="is not a directory"):
        DirTransport(dir_board(blocker)).prepare()
    dest.mkdir(parents=True)
    DirTransport(dir_board(dest)).prepare()  # an existing directory is fine


def old_and_new(tmp_path: Path) -> tuple[Path, dict[str, bytes], list[tuple[Path, str]]]:
    card = tmp_path / "card"
    card.mkdir()
    old = {"oa_run": b"old runner " * 100, "model.oab": b"old model " * 100}
    for name, data in old.items():
        (card / name).write_bytes(data)
    src = tmp_path / "new"
    src.mkdir()
    (src / "oa_run").write_bytes(b"R" * 10_000)
    (src / "model.oab").write_bytes(b"M" * 300_000)
    return card, old, [(src / "oa_run", "oa_run"), (src / "model.oab", "model.oab")]


def test_dir_copy_that_runs_out_of_space_keeps_the_previous_files(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    card, old, files = old_and_new(tmp_path)
    real = shutil.copyfileobj

    def copy_until_full(fsrc, fdst, length=0):  # type: ignore[no-untyped-def]
        if fsrc.name.endswith("model.oab"):  # the runner is complete, the model hits a full card
            fdst.write(fsrc.read(4096))
            raise OSError(28, "No space left on device")
        real(fsrc, fdst)

    monkeypatch.setattr(flash_mod.shutil, "copyfileobj", copy_until_full)
    with pytest.raises(BoardError, match=r"no space left on .* for model\.oab; the previous files there are unchanged"):
        DirTransport(dir_board(card)).copy(files)
    assert {p.name: p.read_bytes() for p in card.iterdir()} == old  # no .part left, nothing replaced


def test_dir_copy_cut_off_by_the_file_system_keeps_the_previous_files(tmp_path: Path) -> None:
    """The same with a real short write: a file-size limit (RLIMIT_FSIZE) makes the kernel stop
    the model's copy after 64 KiB, as a full card does."""
    card, old, files = old_and_new(tmp_path)
    script = textwrap.dedent(f"""
        import resource, signal, sys
        from pathlib import Path
        from openaccel.boards import Board, BoardError
        from openaccel.flash import DirTransport
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))
        b = Board("card", "", "qemu-aarch64", "dir:{card}")
        try:
            DirTransport(b).copy([(Path(p), n) for p, n in {[(str(p), n) for p, n in files]!r}])
        except BoardError as e:
            print("BoardError:", e)
            sys.exit(3)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "cannot write" in r.stdout and "unchanged" in r.stdout, r.stdout + r.stderr
    assert {p.name: p.read_bytes() for p in card.iterdir()} == old


def test_dir_copy_replaces_the_files_when_complete(tmp_path: Path) -> None:
    card, _, files = old_and_new(tmp_path)
    DirTransport(dir_board(card)).copy(files)
    assert sorted(p.name for p in card.iterdir()) == ["model.oab", "oa_run", "run_tests.sh"]
    assert (card / "model.oab").read_bytes() == files[1][0].read_bytes()
    assert "./oa_run model.oab --test" in (card / "run_tests.sh").read_text()


FAKE_TEST_LINE = ('{"event": "test", "index": 0, "name": "example_inputs", "passed": true, "max_abs_error": 0, '
                  '"max_rel_error": 0, "atol": 1e-05, "rtol": 1e-05, "ms": 0.1}')


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the fake runner stands in for an x86_64-linux build")
@pytest.mark.parametrize("body, expect", [
    ("kill -SEGV $$", r"oa_run crashed from the copy in .* \(SIGSEGV, signal 11\)"),
    (f"echo '{FAKE_TEST_LINE}'\necho '{{\"event\": \"summary\", \"passed\": 1, \"failed\": 0}}'\nkill -ABRT $$",
     r"oa_run crashed .* \(SIGABRT, signal 6\)"),
    ("exit 0", "ended \\(exit status 0\\) without a test result"),
    (f"echo '{FAKE_TEST_LINE}'\nexit 0", "ended \\(exit status 0\\) without a test result"),
    (f"echo '{FAKE_TEST_LINE}'\necho '{{\"event\": \"summary\", \"passed\": 1, \"failed\": 0}}'\nexit 3",
     "an inconsistent result"),
])
def test_dir_runner_crash_or_no_result_is_a_failure(tmp_path: Path, body: str, expect: str) -> None:
    runner = tmp_path / "oa_run"  # the card holds a runner that crashes or reports nothing
    runner.write_text(f"#!/bin/sh\n{body}\n")
    runner.chmod(0o755)
    with pytest.raises(BoardError, match=expect):
        DirTransport(dir_board(tmp_path, target="x86_64-linux")).run_tests("model.oab")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the fake runner stands in for an x86_64-linux build")
def test_dir_runner_with_a_normal_result_passes(tmp_path: Path) -> None:
    runner = tmp_path / "oa_run"
    runner.write_text(f"#!/bin/sh\necho '{FAKE_TEST_LINE}'\n"
                      "echo '{\"event\": \"summary\", \"passed\": 1, \"failed\": 0}'\n")
    runner.chmod(0o755)
    events, how = DirTransport(dir_board(tmp_path, target="x86_64-linux")).run_tests("model.oab")
    assert [e["event"] for e in events] == ["test", "summary"] and "natively" in how


def test_dir_board_this_machine_cannot_run_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from openaccel.targets import get_target

    target = get_target("qemu-riscv64")
    monkeypatch.setattr(flash_mod, "get_target", lambda _name: type(target)(
        **{**target.__dict__, "emulator": "no-such-qemu-here"}))
    with pytest.raises(flash_mod.NotRunHere, match=r"no-such-qemu-here is not installed .* run run_tests.sh"):
        DirTransport(dir_board(tmp_path, target="qemu-riscv64")).run_tests("model.oab")


# ---- build-runtime -o ----------------------------------------------------------------------------
@pytest.mark.slow
def test_build_runtime_output_is_the_stripped_binary(tmp_path: Path) -> None:
    if shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("aarch64-linux-gnu-strip") is None:
        pytest.skip("needs gcc-aarch64-linux-gnu")
    r = cli("build-runtime", "--target", "qemu-aarch64", "-o", str(tmp_path / "out"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    shipped = tmp_path / "out" / "bin" / "oa_run"
    unstripped = Path(doc["directory"]) / "oa_run"
    assert shipped.stat().st_size == doc["oa_run_stripped_bytes"]["full"] < unstripped.stat().st_size
    assert os.access(shipped, os.X_OK)
    syms = subprocess.run(["aarch64-linux-gnu-nm", str(shipped)], capture_output=True, text=True)
    assert "no symbols" in syms.stderr, syms.stdout[:200]
