"""`openaccel flash` over ssh to a real OpenSSH server on loopback (a throwaway key; the "board"
runs the aarch64 runner through qemu-aarch64) and to a directory, plus clean failures with no
hang: unreachable host, silent host, refused login, bad paths."""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import openaccel as oa
from openaccel import zoo

pytestmark = [pytest.mark.slow, pytest.mark.qemu]
SSHD = "/usr/sbin/sshd"


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openaccel", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    prog = oa.export(zoo.MLP((32, 16, 8)).eval(), (torch.randn(1, 32),))
    path = tmp_path_factory.mktemp("flash") / "model.oab"
    prog.save(path)
    return path


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    if not os.path.exists(SSHD) or shutil.which("ssh") is None:
        pytest.skip("openssh-server / openssh-client not installed (apt-get install -y openssh-server)")
    if os.geteuid() != 0:
        pytest.skip("sshd on loopback needs root here")
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "user_key", "other_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    cfg = d / "sshd_config"
    cfg.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
                   f"AuthorizedKeysFile {d / 'authorized_keys'}\nPasswordAuthentication no\n"
                   "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin yes\n"
                   f"PidFile {d / 'sshd.pid'}\n")
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-f", str(cfg), "-E", str(d / "sshd.log")])
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("sshd did not start: " + (d / "sshd.log").read_text())
    yield {"port": port, "dir": d}
    proc.terminate()
    proc.wait(timeout=10)


TEST_LINE = ('{"event": "test", "index": 0, "name": "example_inputs", "passed": true, "max_abs_error": 0, '
             '"max_rel_error": 0, "atol": 1e-05, "rtol": 1e-05, "ms": 0.1}')
SUMMARY = '{"event": "summary", "passed": 1, "failed": 0}'


def board_file(dirpath: Path, name: str, transport: str, key: Path,
               remote_prefix: list[str] | None = None) -> dict[str, str]:
    boards = dirpath / "boards"
    boards.mkdir(exist_ok=True)
    opts = ["-i", str(key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    prefix = remote_prefix if remote_prefix is not None else ["qemu-aarch64", "-cpu", "cortex-a72"]
    (boards / f"{name}.toml").write_text(
        f'name = "{name}"\ndescription = "loopback test board"\ntarget = "qemu-aarch64"\n'
        f'transport = "{transport}"\nremote_prefix = {json.dumps(prefix)}\n'
        f"ssh_options = {json.dumps(opts)}\ntimeout = 60\n")
    return {"OPENACCEL_BOARDS": str(boards)}


def test_flash_over_ssh_runs_the_tests_on_the_board(sshd: dict[str, object], model: Path) -> None:
    d = sshd["dir"]
    assert isinstance(d, Path)
    remote = d / "board-root"
    env = board_file(d, "loopback", f"ssh://root@127.0.0.1:{sshd['port']}{remote}", d / "user_key")
    r = cli("flash", str(model), "--board", "loopback", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"
    assert "PASS example_inputs on loopback (loopback via ssh)" in r.stdout
    assert (remote / "oa_run").exists() and (remote / "model.oab").exists()


def test_flash_refused_login(sshd: dict[str, object], model: Path) -> None:
    d = sshd["dir"]
    assert isinstance(d, Path)
    env = board_file(d, "wrongkey", f"ssh://root@127.0.0.1:{sshd['port']}{d / 'x'}", d / "other_key")
    t0 = time.time()
    r = cli("flash", str(model), "--board", "wrongkey", env=env)
    assert r.returncode == 2 and "refused" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert time.time() - t0 < 120


def test_flash_bad_remote_path(sshd: dict[str, object], model: Path) -> None:
    d = sshd["dir"]
    assert isinstance(d, Path)
    env = board_file(d, "badpath", f"ssh://root@127.0.0.1:{sshd['port']}/proc/self/status/x", d / "user_key")
    r = cli("flash", str(model), "--board", "badpath", env=env)
    assert r.returncode == 2 and "cannot create or write /proc/self/status/x" in r.stderr, r.stderr


def test_flash_unreachable_host_fails_fast(model: Path) -> None:
    t0 = time.time()
    r = cli("flash", str(model), "--board", f"ssh://root@127.0.0.1:{free_port()}/tmp/x", "--target", "qemu-aarch64",
            "--timeout", "10")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "connection refused" in r.stderr and "Traceback" not in r.stderr
    assert time.time() - t0 < 60


def test_flash_silent_host_times_out(model: Path) -> None:
    """A host that accepts the connection but never speaks must not hang the command."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.5)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        t0 = time.time()
        r = cli("flash", str(model), "--board", f"ssh://root@127.0.0.1:{port}/tmp/x", "--target", "qemu-aarch64",
                "--timeout", "5")
        assert r.returncode == 2, r.stdout + r.stderr
        assert "Traceback" not in r.stderr and ("timed out" in r.stderr or "no answer" in r.stderr), r.stderr
        assert time.time() - t0 < 90
    finally:
        stop.set()
        th.join()
        srv.close()
        for c in conns:
            c.close()


def test_flash_to_directory(model: Path, tmp_path: Path) -> None:
    dest = tmp_path / "sdcard" / "opt" / "openaccel"
    dest.mkdir(parents=True)
    r = cli("flash", str(model), "--board", f"dir:{dest}", "--target", "qemu-aarch64")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"
    for f in ("oa_run", "model.oab", "run_tests.sh"):
        assert (dest / f).exists()
    assert "./oa_run model.oab --test" in (dest / "run_tests.sh").read_text()


def test_flash_to_bad_directory(model: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = cli("flash", str(model), "--board", f"dir:{blocker}", "--target", "qemu-aarch64")
    assert r.returncode == 2 and "is not a directory" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_flash_to_unmounted_card_creates_nothing(model: Path, tmp_path: Path) -> None:
    """The card is not mounted: its mount point is an empty directory on this machine's disk.
    Flashing must not create the path under it (and fill the root file system)."""
    mount_point = tmp_path / "media" / "sdcard"
    mount_point.mkdir(parents=True)
    r = cli("flash", str(model), "--board", f"dir:{mount_point}/opt/openaccel", "--target", "qemu-aarch64")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "does not exist" in r.stderr and "mkdir -p" in r.stderr, r.stderr
    assert list(mount_point.iterdir()) == []


def test_flash_adhoc_board_without_target_is_refused(model: Path, tmp_path: Path) -> None:
    """No silent x86-64 build for a card whose CPU nobody named."""
    r = cli("flash", str(model), "--board", f"dir:{tmp_path}")
    assert r.returncode == 2 and "give --target" in r.stderr and "qemu-aarch64" in r.stderr, r.stdout + r.stderr
    assert list(tmp_path.iterdir()) == []


def test_flash_ssh_user_part_is_never_an_ssh_option(model: Path, tmp_path: Path) -> None:
    """ssh before 9.6 runs a ProxyCommand given in place of the user name: the address is refused
    before ssh runs, and no marker file appears."""
    r = subprocess.run([sys.executable, "-m", "openaccel", "flash", str(model), "--board",
                        "ssh://-oProxyCommand=touch${IFS}MARK@127.0.0.1/x", "--target", "qemu-aarch64"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 2 and "is not a user name" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_flash_model_without_tests_is_not_a_success(tmp_path: Path) -> None:
    torch.manual_seed(0)
    path = tmp_path / "nobundle.oab"
    oa.export(zoo.MLP((8, 4)).eval(), (torch.randn(1, 8),), bundle_tests=False).save(path)
    card = tmp_path / "card"
    card.mkdir()
    r = cli("flash", str(path), "--board", f"dir:{card}", "--target", "qemu-aarch64")
    assert r.returncode == 1 and "nothing was checked" in r.stdout, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "0 passed, 0 failed"


def crashing_runtime(tmp_path: Path, body: str) -> Any:
    from openaccel.runtime.build import RuntimeBuild

    runner = tmp_path / "fake-build" / "oa_run"
    runner.parent.mkdir()
    runner.write_text(f"#!/bin/sh\n{body}\n")
    runner.chmod(0o755)
    return lambda *_a, **_k: RuntimeBuild("x86_64-linux", runner.parent, runner, runner, None, runner.parent)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the fake runner stands in for an x86_64-linux build")
@pytest.mark.parametrize("body", ["kill -SEGV $$", f"echo '{TEST_LINE}'\necho '{SUMMARY}'\nkill -SEGV $$"])
def test_flash_dir_runner_crash_is_a_failure(model: Path, tmp_path: Path, body: str,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The copied runner segfaults (its buffered output lost, or after printing a pass): flash
    must say so and fail, not print '0 passed, 0 failed' and exit 0."""
    from openaccel import cli as cli_mod
    from openaccel import flash as flash_mod

    monkeypatch.setattr(flash_mod, "build_runtime", crashing_runtime(tmp_path, body))
    card = tmp_path / "card"
    card.mkdir()
    rc = cli_mod.main(["flash", str(model), "--board", f"dir:{card}", "--target", "x86_64-linux"])
    cap = capsys.readouterr()
    assert rc == 2, cap.out + cap.err
    assert "crashed" in cap.err and "SIGSEGV" in cap.err and "passed" not in cap.out, cap.out + cap.err


def test_flash_over_ssh_runner_crash_is_a_failure(sshd: dict[str, object], model: Path) -> None:
    """The board's runner prints a passing test and then segfaults: the exit status wins. (The
    crash is one shell down, as on a board whose login shell waits for its last command instead of
    exec'ing it: ssh then exits 139, not 255.)"""
    d = sshd["dir"]
    assert isinstance(d, Path)
    runner = f"echo '{TEST_LINE}'; echo '{SUMMARY}'; kill -SEGV $$"
    env = board_file(d, "crashy", f"ssh://root@127.0.0.1:{sshd['port']}{d / 'board-crash'}", d / "user_key",
                     remote_prefix=["sh", "-c", 'sh -c "$1"; exit $?', "sh", runner])
    r = cli("flash", str(model), "--board", "crashy", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "crashed" in r.stderr and "SIGSEGV" in r.stderr and "passed" not in r.stdout, r.stdout + r.stderr


def test_run_on_dir_board_inputs_with_the_same_base_name(tmp_path: Path) -> None:
    """x=a/in.npy y=b/in.npy: each input keeps its own file on the board."""
    import numpy as np

    class TwoInputs(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x * 2 + y

    path = tmp_path / "two.oab"
    oa.export(TwoInputs(), (torch.randn(1, 4), torch.randn(1, 4))).save(path)
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    y = np.full((1, 4), 100, dtype=np.float32)
    for sub, arr in (("a", x), ("b", y)):
        (tmp_path / sub).mkdir()
        np.save(tmp_path / sub / "in.npy", arr)
    card = tmp_path / "card"
    card.mkdir()
    r = cli("run", str(path), "--board", f"dir:{card}", "--target", "qemu-aarch64", "--input",
            f"x={tmp_path / 'a' / 'in.npy'}", "--input", f"y={tmp_path / 'b' / 'in.npy'}", "--output-dir",
            str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output_0.npy"), x * 2 + y)
    r = cli("run", str(path), "--board", f"dir:{card}", "--target", "qemu-aarch64", "--input",
            f"x={tmp_path / 'missing.npy'}", "--input", f"y={tmp_path / 'b' / 'in.npy'}")
    assert r.returncode == 2 and "missing.npy is not a file" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_unknown_board_lists_known_ones(model: Path) -> None:
    r = cli("flash", str(model), "--board", "no-such-board")
    assert r.returncode == 2 and "rpi4" in r.stderr and "visionfive2" in r.stderr


def test_test_and_run_with_board_over_ssh(sshd: dict[str, object], model: Path, tmp_path: Path) -> None:
    """`openaccel test/run --board B` run on the board (copying inputs there, outputs back)."""
    import numpy as np

    d = sshd["dir"]
    assert isinstance(d, Path)
    env = board_file(d, "loopback2", f"ssh://root@127.0.0.1:{sshd['port']}{d / 'board2'}", d / "user_key")
    r = cli("test", str(model), "--board", "loopback2", env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("1 passed, 0 failed"), r.stdout + r.stderr
    x = np.random.default_rng(3).standard_normal((1, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = cli("run", str(model), "--board", "loopback2", "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
            str(tmp_path / "out"), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    (want,) = oa.load(model)(x)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "output_0.npy"), want.numpy(), rtol=1e-5, atol=1e-6)
