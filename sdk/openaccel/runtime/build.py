"""Building the C runtime for a target with CMake, cached by target, options and source hash."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolchainError
from ..paths import cache_dir, runtime_dir
from ..targets import Target, get_target

Log = Callable[[str], None]


@dataclass(frozen=True)
class RuntimeBuild:
    target: str
    directory: Path
    oa_run: Path
    static_lib: Path
    shared_lib: Path | None
    include_dir: Path


def source_hash(extra: str = "") -> str:
    """Hash of every runtime source file: a rebuild happens exactly when one changes."""
    h = hashlib.sha256(extra.encode())
    root = runtime_dir()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".c", ".h", ".inc", ".def", ".txt", ".cmake", ".in", ".fbs"):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _run(cmd: list[str], cwd: Path, what: str, log_path: Path) -> None:
    with log_path.open("a") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-25:]
        raise ToolchainError(f"{what} failed (exit {r.returncode}); last lines of {log_path}:\n"
                             + "\n".join(tail))


def _configured_sources_exist(bdir: Path) -> bool:
    """The source directory a cached build was configured from still exists: the binaries of a
    build made in a checkout deleted since are fine, but `cmake --install` copies the headers
    from that directory (a clean clone reusing such a cache failed to install)."""
    try:
        text = (bdir / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return Path(line.split("=", 1)[1]).is_dir()
    return False


def build_runtime(target: str | Target = "host", *, kernels_def: Path | None = None,
                  sanitize: bool = False, shared: bool | None = None, log: Log | None = None,
                  build_type: str = "Release", extra_cmake: tuple[str, ...] = ()) -> RuntimeBuild:
    """Configure and build the runtime for `target` (cached). Raises ToolchainError naming what
    to install when a compiler or emulator is missing."""
    t = target if isinstance(target, Target) else get_target(target)
    say = log or _stderr_log
    missing = [m for m in t.missing() if m != t.emulator]
    if missing:
        raise ToolchainError(f"target {t.name} needs {', '.join(missing)}, not found on PATH; "
                             f"install with: {t.install_hint()}")
    if shared is None:
        shared = t.name == "host"
    selective = kernels_def.read_text() if kernels_def else ""
    toolchain = t.toolchain_file.read_text() if t.toolchain_file and t.toolchain_file.is_file() else ""
    key_parts = [t.name, t.c_flags, str(t.static), build_type, str(sanitize), str(shared), selective,
                 t.compiler, toolchain, *extra_cmake]
    key = source_hash("\n".join(key_parts))
    suffix = "-sel" if kernels_def else ""
    suffix += "-asan" if sanitize else ""
    bdir = cache_dir() / "runtime" / f"{t.name}{suffix}-{key}"
    bdir.mkdir(parents=True, exist_ok=True)
    ext = ".exe" if os.name == "nt" else ""
    result = RuntimeBuild(
        target=t.name, directory=bdir, oa_run=bdir / f"oa_run{ext}", static_lib=bdir / "libopenaccel.a",
        shared_lib=(bdir / "libopenaccel.so") if shared else None, include_dir=runtime_dir() / "include")
    with (bdir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers build once
        if (bdir / ".done").exists() and _configured_sources_exist(bdir):
            return result
        # A build without .done was interrupted, perhaps in another checkout of the same sources
        # (or finished in a checkout deleted since): CMake refuses a cache made for another
        # source directory, so start it afresh.
        for stale in ("CMakeCache.txt", "CMakeFiles"):
            path = bdir / stale
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        say(f"building the openaccel runtime for {t.name} ({'selective, ' if kernels_def else ''}"
            f"{build_type}) in {bdir} ...")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        cmd = ["cmake", "-S", str(runtime_dir()), "-B", str(bdir), *generator,
               f"-DCMAKE_BUILD_TYPE={build_type}", f"-DCMAKE_C_FLAGS={t.c_flags}",
               f"-DOA_BUILD_SHARED={'ON' if shared else 'OFF'}",
               f"-DOA_STATIC_TOOLS={'ON' if t.static else 'OFF'}",
               f"-DOA_SANITIZE={'ON' if sanitize else 'OFF'}", *extra_cmake]
        if t.toolchain_file:
            cmd.append(f"-DCMAKE_TOOLCHAIN_FILE={t.toolchain_file}")
        if kernels_def:
            cmd.append(f"-DOA_KERNELS_DEF={kernels_def.resolve()}")
        log_path = bdir / "build.log"
        log_path.write_text("")
        _run(cmd, bdir, f"configuring the runtime for {t.name}", log_path)
        jobs = str(os.cpu_count() or 2)
        _run(["cmake", "--build", str(bdir), "-j", jobs], bdir, f"building the runtime for {t.name}", log_path)
        (bdir / ".done").write_text(key)
        say(f"built {result.oa_run}")
    return result


def kernel_entries() -> list[tuple[str, str]]:
    """(op, OA_KERNEL line) for every kernel of the full build, in table order: one "ref" line per
    op and, for the ops that have one, one "opt" line (its prepare picks the ISA at run time)."""
    import re

    entries: list[tuple[str, str]] = []
    for line in (runtime_dir() / "src" / "cpu" / "kernels" / "kernels.def").read_text().splitlines():
        m = re.match(r'\s*OA_KERNEL\("([^"]+)"', line)
        if m:
            entries.append((m.group(1), line.strip()))
        elif re.match(r"\s*#", line):
            raise ToolchainError(f"kernels.def: preprocessor lines are not kept by selective builds: {line.strip()}")
    return entries


def selective_kernels_def(ops: list[str], directory: Path) -> Path:
    """A kernels.def with only the kernels of `ops` (for `build-runtime --for model.oab`)."""
    entries = kernel_entries()
    known = {op for op, _ in entries}
    missing = sorted(set(ops) - known)
    if missing:
        raise ToolchainError(f"the runtime has no kernels for {', '.join(missing)}")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"kernels-{hashlib.sha256(','.join(sorted(ops)).encode()).hexdigest()[:12]}.def"
    lines = ["/* Selective build: generated by openaccel build-runtime --for. */"]
    wanted = set(ops)
    lines += [line for op, line in entries if op in wanted]
    path.write_text("\n".join(lines) + "\n")
    return path


def stripped_binary(build: RuntimeBuild, target: Target) -> Path:
    """oa_run with its symbols stripped (what ships to a board), beside the build's oa_run.
    Stripped with the target's binutils (`{triple}-strip`), this machine's `strip` for native
    builds; written under a temporary name and renamed, so concurrent callers never see half a file."""
    strip = f"{target.triple}-strip" if target.cmake_toolchain else "strip"
    if shutil.which(strip) is None:
        if target.cmake_toolchain:
            raise ToolchainError(f"target {target.name} needs {strip} to strip oa_run, not found on PATH; "
                                 f"install with: {target.install_hint()}")
        strip = "strip"
    out = build.directory / "oa_run.stripped"
    tmp = build.directory / f"oa_run.stripped.{os.getpid()}.tmp"
    shutil.copy2(build.oa_run, tmp)
    r = subprocess.run([strip, str(tmp)], capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ToolchainError(f"{strip} {build.oa_run} failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
    os.replace(tmp, out)
    return out


def stripped_size(build: RuntimeBuild, target: Target) -> int:
    """Size in bytes of oa_run after stripping symbols (what ships to a board)."""
    return stripped_binary(build, target).stat().st_size


def runtime_code_size(build: RuntimeBuild) -> int:
    """Bytes of code and data that libopenaccel contributes to oa_run (from the GNU ld link map,
    after --gc-sections): the runtime's own footprint, without libc."""
    import re

    mp = build.directory / "oa_run.map"
    if not mp.exists():
        return 0
    text = mp.read_text(errors="replace")
    start = text.find("Linker script and memory map")
    if start < 0:
        return 0
    pat = re.compile(r"^\s*(\.\S+)?\s*0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S*libopenaccel\.a\(\S+\))\s*$")
    total = 0
    for line in text[start:].splitlines():
        m = pat.match(line)
        if m and not (m.group(1) or "").startswith((".debug", ".comment", ".note")):
            total += int(m.group(2), 16)
    return total
