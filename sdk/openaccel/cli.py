"""The `openaccel` command line. Exit codes: 0 success, 1 a check failed, 2 bad usage or input.

Only `export` imports torch (about 4 s) and executorch (about 12 s); every other command starts
in well under a second.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .errors import CheckFailed, ExportWarning, OpenAccelError
from .version import __version__

# No markup: names, paths and messages come from files and users ("x[/]" is a valid tensor name),
# so styled output is built from Text pieces (styled()) and nothing is ever parsed as markup.
out = Console(highlight=False, soft_wrap=True, markup=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line from plain pieces and (text, style) pieces, e.g. styled(("PASS", "green"), " name")."""
    return Text.assemble(*parts)


def dim(text: str) -> Text:
    return Text(text, style="dim")


# ---- export ----------------------------------------------------------------------------------
def cmd_export(a: argparse.Namespace) -> int:
    from .targets import get_target

    t0 = time.perf_counter()
    get_target(a.target)  # an unknown target fails here, before 15 s of imports
    from .quantize import CalibrationError

    for flag, given in (("--calibration", a.calibration), ("--per-tensor", a.per_tensor)):
        if given and not a.quantize:
            raise OpenAccelError(f"{flag} applies with --quantize int8 only (without it the model is exported as "
                                 "it is)")
    if a.calibration and not Path(a.calibration).is_dir():  # before 15 s of imports
        what = "no such directory" if not Path(a.calibration).exists() else "not a directory"
        raise CalibrationError(f"--calibration {a.calibration}: {what} (it holds one <set>.npy file, or one "
                               "<set>/ folder of <input name>.npy files, per calibration set)")
    how = "quantizing to int8 and exporting" if a.quantize else "exporting"
    err.print(dim(f"{how} {a.model} for target {a.target} (importing torch and executorch)..."))
    from .exporter import export
    from .exporter.loader import load_model

    model, example = load_model(a.model, allow_pickle=a.allow_pickle, input_shapes=a.input_shape,
                                model_module=a.model_module)

    def progress(step: str, seconds: float) -> None:
        err.print(styled("  ", ("✓", "green"), f" {step} ", (f"({seconds * 1000:.0f} ms)", "dim")))

    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
        if issubclass(category, ExportWarning):  # e.g. ops on the CPU although a device is preferred
            err.print(styled("  ", ("!", "yellow"), f" {message}"))
        else:
            shown(message, category, *rest, **kw)

    prefer = [p.strip() for p in a.prefer.split(",")] if a.prefer else None
    with warnings.catch_warnings():
        warnings.simplefilter("always", ExportWarning)
        warnings.showwarning = show
        kw: dict[str, Any] = dict(target=a.target, bundle_tests=not a.no_bundle, progress=progress,
                                  devices=a.devices, prefer=prefer, winograd_convs=not a.no_winograd,
                                  layout=a.layout, reference=a.reference)
        if a.quantize:
            from .quantize import quantize

            prog = quantize(model, example, a.calibration, per_channel=not a.per_tensor, **kw)
        else:
            prog = export(model, example, **kw)
    dest = Path(a.output) if a.output else Path(a.model).with_suffix(".oab")
    prog.save(dest)
    out.print(prog.summary())
    out.print(f"wrote {dest} ({len(prog.buffer):,} bytes) in {time.perf_counter() - t0:.1f} s")
    return 0


# ---- inspect ---------------------------------------------------------------------------------
def cmd_inspect(a: argparse.Namespace) -> int:
    from .program import Program

    prog = Program.load(a.file)
    if a.json:
        doc = {
            "file": str(a.file), "bytes": len(prog.buffer), "format": list(prog.format_version),
            "producer": prog.producer, "target": prog.target, "required_features": prog.required_features,
            "inputs": [s.__dict__ for s in prog.inputs], "outputs": [s.__dict__ for s in prog.outputs],
            "ops": prog.ops, "devices": prog.devices, "memory_plan": prog.memory_plan,
            "constant_bytes": prog.constant_bytes,
            "instructions": [{"index": p.index, "op": p.op, "device": p.device, "inputs": list(p.inputs),
                              "outputs": list(p.outputs), "args": {k: v for k, v in p.args},
                              "source": p.source, "events": p.events, "note": p.note} for p in prog.instructions],
            "quantization": [{"tensor": q.tensor, "dtype": q.dtype, "shape": list(q.shape), "scale": list(q.scale),
                              "zero_point": list(q.zero_point), "zero_point_stored": q.zero_point_stored,
                              "axis": q.axis} for q in prog.quant_params()],
            "tests": [{"name": n, "atol": at, "rtol": rt} for n, _, _, at, rt in prog.tests()],
            "float32_in_quantized": [{"index": p.index, "op": p.op, "source": p.source, "reason": p.note}
                                     for p in prog.float32_in_quantized()],
        }
        print(json.dumps(doc, indent=2, default=str))
        return 0
    out.print(prog.summary())
    table = Table(title="instructions", show_lines=False, header_style="bold")
    multi = len(prog.devices) > 1
    cols = ["#", "op", "device", "inputs", "outputs", "args", "source"] + (["events"] if multi else [])
    for col in cols:
        table.add_column(col, overflow="fold")
    for p in prog.instructions:
        args = ", ".join(f"{k}={v}" for k, v in p.args)
        row = [str(p.index), p.op, p.device, ", ".join(p.inputs), ", ".join(p.outputs), args, p.source]
        table.add_row(*(row + ([p.events] if multi else [])))
    out.print(table)
    qps = prog.quant_params()
    if qps:
        qt = Table(title="quantization parameters", show_lines=False, header_style="bold")
        for col in ("tensor", "dtype", "shape", "parameters"):
            qt.add_column(col, overflow="fold")
        for q in qps:
            qt.add_row(q.tensor, q.dtype, str(list(q.shape)), q.describe())
        out.print(qt)
    return 0


# ---- run / test / bench ----------------------------------------------------------------------
class _DeviceRunner:
    """A Runner that passes --device LIB to every oa_run call."""

    def __init__(self, runner: Any, libs: list[str]) -> None:
        self._r = runner
        self._libs = libs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._r, name)

    def run(self, args: list[str], timeout: float | None = None) -> Any:
        extra = [x for lib in self._libs for x in ("--device", lib)]
        return self._r.run([*args, *extra], timeout)

    def test(self, path: Path, timeout: float | None = None) -> Any:
        res = self.run([str(path), "--test"], timeout)
        self._r.check(res, "running bundled tests")
        return res

    def bench(self, path: Path, runs: int, threads: int = 0, timeout: float | None = None) -> Any:
        res = self.run([str(path), "--bench", str(runs), "--threads", str(threads), "--info"], timeout)
        self._r.check(res, "benchmarking")
        return res


@dataclass
class _Where:
    name: str


class _BoardRunner:
    """run/test/bench --board: oa_run on a board through its transport (copying what it needs)."""

    emulated = False

    def __init__(self, a: argparse.Namespace) -> None:
        from .boards import resolve

        self.board = resolve(a.board, target=a.target if a.target != "host" else None)
        self.target = _Where(self.board.name)

    def _go(self, path: Path, args: list[str], extra: list[tuple[Path, str]] | None = None,
            fetch: list[str] | None = None,
            fetch_to: Path | None = None) -> Any:
        from .flash import on_board
        from .runtime.runner import RunResult

        events, how = on_board(path, self.board, args, extra or [], lambda s: err.print(dim(s)), fetch,
                               fetch_to)
        self.target.name = f"{self.board.name} ({how})"
        return RunResult(events, 0, "")

    def check(self, res: Any, what: str) -> None:
        del res, what  # on_board already raised on error events

    def test(self, path: Path, timeout: float | None = None) -> Any:
        return self._go(path, ["--test"])

    def bench(self, path: Path, runs: int, threads: int = 0, timeout: float | None = None) -> Any:
        return self._go(path, ["--bench", str(runs), "--threads", str(threads), "--info"])

    def run(self, args: list[str], timeout: float | None = None) -> Any:
        import re

        from .errors import InputError

        path = Path(args[0])
        rest: list[str] = []
        extra: list[tuple[Path, str]] = []
        fetch: list[str] = []
        out_dir = None
        it = iter(args[1:])
        for x in it:
            if x == "--input":
                spec = next(it)
                name, eq, file = spec.partition("=")
                if not eq:
                    name, file = "", spec
                if not Path(file).is_file():
                    raise InputError(f"--input {spec}: {file} is not a file")
                # each input gets its own name on the board: a/in.npy and b/in.npy must not collide
                stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name or Path(file).stem)[:64]
                remote = f"input_{len(extra)}_{stem}.npy"
                extra.append((Path(file), remote))
                rest += ["--input", f"{name}={remote}" if eq else remote]
            elif x == "--output-dir":
                out_dir = Path(next(it))
                rest += ["--output-dir", "."]
            else:
                rest.append(x)
        from .program import Program

        if out_dir is not None:
            fetch = [f"output_{i}.npy" for i in range(len(Program.load(path).outputs))]
        return self._go(path, rest, extra, fetch, out_dir)


def _runner(a: argparse.Namespace) -> Any:
    if getattr(a, "board", None):
        return _BoardRunner(a)
    from .runtime.runner import Runner

    runner = Runner(a.target, echo_stderr=True)
    libs = getattr(a, "device", None) or []
    return _DeviceRunner(runner, libs) if libs else runner


def cmd_run(a: argparse.Namespace) -> int:
    from .program import Program

    Program.load(a.file)  # clear error for a bad file before building anything
    runner = _runner(a)
    args = [str(a.file)]
    for spec in a.input or []:
        args += ["--input", spec]
    if a.output_dir:
        Path(a.output_dir).mkdir(parents=True, exist_ok=True)
        args += ["--output-dir", a.output_dir]
    res = runner.run(args)
    runner.check(res, "running the program")
    if a.json:
        for e in res.events:
            print(json.dumps(e))
        return 0
    for e in res.of("run"):
        label = " (emulated)" if runner.emulated else ""
        out.print(f"ran on {runner.target.name} in {e['ms']:.3f} ms{label}")
    for e in res.of("output"):
        out.print(f"output {e['index']} '{e['name']}': {e['dtype']}{e['shape']}"
                  + (f" -> {a.output_dir}/output_{e['index']}.npy" if a.output_dir else ""))
    return 0


def cmd_test(a: argparse.Namespace) -> int:
    from .program import Program

    Program.load(a.file)
    runner = _runner(a)
    res = runner.test(Path(a.file))
    passed = failed = 0
    for e in res.of("test"):
        if a.json:
            print(json.dumps(e))
        if "error" in e:
            failed += 1
            out.print(styled(("FAIL", "red"), f" test {e['index']}: {e['error']}"))
            continue
        ok = e["passed"]
        passed += ok
        failed += not ok
        if not a.json:
            tag = ("PASS", "green") if ok else ("FAIL", "red")
            extra = "" if ok else (f", {e['mismatches']} elements outside tolerance (first at index "
                                   f"{e['first_mismatch']} of output {e['output']})")
            emu = " emulated" if runner.emulated else ""
            out.print(styled(tag, f" {e['name']} on {runner.target.name}: max abs error {e['max_abs_error']:.3g}, "
                             f"max rel error {e['max_rel_error']:.3g} (atol {e['atol']:g}, rtol {e['rtol']:g}), "
                             f"{e['ms']:.3f} ms{emu}{extra}"))
    if not res.of("test"):
        out.print(Text("the file has no bundled tests (exported with --no-bundle?)", style="yellow"))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


def cmd_bench(a: argparse.Namespace) -> int:
    from .program import Program

    Program.load(a.file)
    runner = _runner(a)
    res = runner.bench(Path(a.file), a.runs, a.threads)
    (b,) = res.of("bench")
    mem = res.of("memory")
    if a.json:
        doc = {**b, "target": runner.target.name, "emulated": runner.emulated}
        if mem:
            doc.update({k: v for k, v in mem[0].items() if k != "event"})
        print(json.dumps(doc))
        return 0
    note = (" (emulated time under QEMU: not a performance figure)", "yellow") if runner.emulated else ""
    out.print(styled(f"{a.file} on {runner.target.name}, {b['runs']} runs, {a.threads or 1} thread(s): median "
                     f"{b['median_ms']:.3f} ms, min {b['min_ms']:.3f} ms, mean {b['mean_ms']:.3f} ms", note))
    if mem:
        m = mem[0]
        out.print(f"memory: arena {m['arena_bytes']:,} + scratch {m['scratch_bytes']:,} + state "
                  f"{m['state_bytes']:,} = {m['total_bytes']:,} bytes; file {m['file_bytes']:,} bytes")
    return 0


# ---- runtime builds, targets, devices ------------------------------------------------------------
def cmd_build_runtime(a: argparse.Namespace) -> int:
    from .paths import cache_dir
    from .program import Program
    from .runtime.build import build_runtime, runtime_code_size, selective_kernels_def, stripped_binary
    from .targets import get_target

    target = get_target(a.target)

    def log(s: str) -> None:
        err.print(dim(s))

    full = build_runtime(target, log=log)
    chosen = full
    stripped = stripped_binary(full, target)
    sizes = {"full": stripped.stat().st_size}
    code = {"full": runtime_code_size(full)}
    if a.for_file:
        prog = Program.load(a.for_file)
        kdef = selective_kernels_def(prog.ops, cache_dir() / "selective")
        chosen = build_runtime(target, kernels_def=kdef, log=log)
        stripped = stripped_binary(chosen, target)
        sizes["selective"] = stripped.stat().st_size
        code["selective"] = runtime_code_size(chosen)
    if a.output:
        dest = Path(a.output)
        (dest / "bin").mkdir(parents=True, exist_ok=True)
        (dest / "lib").mkdir(parents=True, exist_ok=True)
        shutil.copy2(stripped, dest / "bin" / chosen.oa_run.name)  # the stripped binary whose size is reported
        shutil.copy2(chosen.static_lib, dest / "lib" / chosen.static_lib.name)
        shutil.copytree(chosen.include_dir, dest / "include", dirs_exist_ok=True)
        where = f"{dest}: bin/oa_run, lib/libopenaccel.a, include/openaccel/"
    else:
        where = f"{chosen.directory}"
    if a.json:
        print(json.dumps({"target": target.name, "directory": str(chosen.directory), "output": a.output,
                          "oa_run_stripped_bytes": sizes, "runtime_code_bytes": code}))
        return 0
    out.print(f"runtime for {target.name} in {where}")
    out.print(f"full build: oa_run {sizes['full']:,} bytes stripped (static={target.static}), of which the "
              f"openaccel runtime is {code['full']:,} bytes")
    if a.for_file:
        out.print(f"selective build for {a.for_file} ({len(prog.ops)} ops): oa_run {sizes['selective']:,} bytes, "
                  f"openaccel runtime {code['selective']:,} bytes")
    return 0


def cmd_targets(a: argparse.Namespace) -> int:
    from .targets import list_targets

    targets = list_targets()
    if a.json:
        print(json.dumps([{"name": t.name, "description": t.description, "arch": t.arch,
                           "cpu_features": list(t.cpu_features), "ready": t.ready,
                           "missing": t.missing(), "install": t.install_hint() if t.missing() else ""}
                          for t in targets], indent=2))
        return 0
    table = Table(header_style="bold")
    for col in ("target", "description", "CPU features", "status"):
        table.add_column(col, overflow="fold")
    for t in targets:
        miss = t.missing()
        status = Text("ready", style="green") if not miss else styled((f"missing {', '.join(miss)}", "yellow"),
                                                                      f": {t.install_hint()}")
        table.add_row(t.name, t.description, " ".join(t.cpu_features) or "-", status)
    out.print(table)
    return 0


def cmd_devices(a: argparse.Namespace) -> int:
    from .runtime.module import devices

    devs = devices(a.target, a.device)
    if a.json:
        print(json.dumps(devs, indent=2))
        return 0
    for d in devs:
        out.print(f"device {d['index']}: {d['name']} [{d['kind']}], vendor {d['vendor']}, alignment {d['alignment']}")
        if "cpu" in d:
            c = d["cpu"]
            out.print(f"  CPU: {c['model']}; vector extensions: {' '.join(c['vector_extensions']) or 'none'}; "
                      f"openaccel kernels: {c['kernel_isa']}")
        for k, v in d.get("queries", {}).items():
            out.print(f"  {k} = {v}")
    return 0


def cmd_flash(a: argparse.Namespace) -> int:
    from .boards import resolve
    from .flash import flash

    board = resolve(a.board, target=a.target, timeout=a.timeout)
    res = flash(Path(a.file), board, lambda s: err.print(dim(s)))
    if not res.tests:
        # nothing was checked: not a success (the copy is in place, the tests were not run or absent)
        why = res.ran_on if not res.ran else "the file has no bundled tests (exported with --no-bundle?)"
        out.print(Text(f"copied to {res.destination}, but nothing was checked: {why}", style="yellow"))
        print("0 passed, 0 failed")
        return 1
    for t in res.tests:
        if "error" in t:
            out.print(styled(("FAIL", "red"), f" test {t.get('index')}: {t['error']}"))
            continue
        tag = ("PASS", "green") if t.get("passed") else ("FAIL", "red")
        out.print(styled(tag, f" {t.get('name')} on {res.board} ({res.ran_on}): max abs error "
                         f"{t.get('max_abs_error', 0):.3g} (atol {t.get('atol')}, rtol {t.get('rtol')}), "
                         f"{t.get('ms', 0):.3f} ms"))
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


def cmd_conformance(a: argparse.Namespace) -> int:
    from .conformance import run_conformance

    def log(s: str) -> None:
        err.print(dim(s))

    rep = run_conformance(a.device, target=a.target, seed=a.seed, filter=a.filter, log=log)
    if a.json:
        for d in rep.devices:
            print(json.dumps(d))
        for c in rep.checks:
            print(json.dumps({"event": "check", "device": c.device, "name": c.name, "result": c.result,
                              "detail": c.detail}))
        print(json.dumps({"event": "summary", "target": rep.target, "emulated": rep.emulated, "passed": rep.passed,
                          "failed": rep.failed, "skipped": rep.skipped}))
        return 1 if rep.failed else 0
    colours = {"PASS": "green", "FAIL": "red", "SKIP": "yellow"}
    for d in rep.devices:
        emu = (" (emulated)", "yellow") if rep.emulated else ""
        out.print(styled((f"device {d['index']}", "bold"), f": {d['name']} [{d['kind']}] by {d['vendor']} on "
                         f"{rep.target}, seed {d['seed']}", emu))
        for c in rep.checks:
            if c.device == d["index"]:
                out.print(styled(f"{c.name:<34} ", (c.result, colours[c.result]), f"  {c.detail}"))
    print(f"{rep.skipped} skipped")
    print(f"{rep.passed} passed, {rep.failed} failed")
    return 1 if rep.failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="openaccel", description="openaccel: PyTorch -> .oab bytecode -> edge boards")
    p.add_argument("--version", action="version", version=f"openaccel {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    e = sub.add_parser("export", help="export a torch.export archive (or a pickled module) to .oab")
    e.add_argument("model")
    e.add_argument("-o", "--output")
    e.add_argument("--target", default="host")
    e.add_argument("--input-shape", action="append", metavar="NAME=DxD[:dtype]")
    e.add_argument("--allow-pickle", action="store_true",
                   help="load a torch.save pickle, or an archive member stored as one (runs code from the file)")
    e.add_argument("--model-module", metavar="FILE.py",
                   help="with --allow-pickle: a file defining the classes the pickle refers to (those of the "
                        "script that saved it, pickled as __main__.Name); imported, not run as __main__")
    e.add_argument("--no-bundle", action="store_true", help="do not bundle test vectors")
    e.add_argument("--no-winograd", action="store_true",
                   help="keep 3x3 convolutions direct: smaller file (Winograd weights take 1.8-4x the "
                        "bytes), slower on big feature maps")
    e.add_argument("--layout", choices=["auto", "nchw", "nhwc"], default="auto",
                   help="activation layout of convolution stacks: nhwc (channels-last) pays on "
                        "MobileNet-style networks; auto picks it when the model has depthwise convolutions")
    e.add_argument("--reference", choices=["float32", "float64"], default="float32",
                   help="how the bundled tests' expected outputs are computed: float32 eager (default) or a "
                        "float64 copy of the model (the defined answer where float32 eager differs by CPU: "
                        "special values, overflow)")
    e.add_argument("--quantize", choices=["int8"],
                   help="quantize a float model first (PT2E, XNNPACKQuantizer: int8 activations, symmetric "
                        "per-channel int8 weights) so its convs / linears / adds run on int8 kernels; give "
                        "--calibration, else the example inputs alone set the activation ranges (a warning)")
    e.add_argument("--calibration", metavar="DIR",
                   help="with --quantize: calibration input sets, read in sorted name order: one <set>.npy per set "
                        "(one-input models), or one <set>/ folder per set holding <input name>.npy for each "
                        "input; each array of the model's input shape and dtype (docs/quantization.md)")
    e.add_argument("--per-tensor", action="store_true",
                   help="with --quantize: one weight scale per tensor instead of one per output channel")
    e.add_argument("--devices", metavar="PROFILE.json", help="device profile from `openaccel devices --json`")
    e.add_argument("--prefer", metavar="KIND,KIND", help="device kinds in order of preference, e.g. vendor.sim,cpu")
    e.set_defaults(fn=cmd_export)

    i = sub.add_parser("inspect", help="show a program's ops, devices, tensors, memory plan and sizes")
    i.add_argument("file")
    i.add_argument("--json", action="store_true")
    i.set_defaults(fn=cmd_inspect)

    r = sub.add_parser("run", help="run a program once (bundled inputs, or --input .npy files)")
    r.add_argument("file")
    r.add_argument("--target", default="host")
    r.add_argument("--device", action="append", metavar="LIB.so", help="a vendor device library")
    r.add_argument("--board")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    r.add_argument("--output-dir")
    r.add_argument("--json", action="store_true")
    r.set_defaults(fn=cmd_run)

    t = sub.add_parser("test", help="run the bundled test vectors; ends with 'N passed, N failed'")
    t.add_argument("file")
    t.add_argument("--target", default="host")
    t.add_argument("--device", action="append", metavar="LIB.so", help="a vendor device library")
    t.add_argument("--board")
    t.add_argument("--json", action="store_true")
    t.set_defaults(fn=cmd_test)

    b = sub.add_parser("bench", help="measure latency on a target")
    b.add_argument("file")
    b.add_argument("--target", default="host")
    b.add_argument("--device", action="append", metavar="LIB.so", help="a vendor device library")
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--runs", type=int, default=20)
    b.add_argument("--json", action="store_true")
    b.set_defaults(fn=cmd_bench)

    br = sub.add_parser("build-runtime", help="build oa_run and libopenaccel for a target")
    br.add_argument("--target", required=True)
    br.add_argument("-o", "--output")
    br.add_argument("--for", dest="for_file", metavar="FILE.oab", help="selective build: only this model's kernels")
    br.add_argument("--json", action="store_true")
    br.set_defaults(fn=cmd_build_runtime)

    tg = sub.add_parser("targets", help="list targets and what each needs on this machine")
    tg.add_argument("--json", action="store_true")
    tg.set_defaults(fn=cmd_targets)

    f = sub.add_parser("flash", help="copy the runtime and a model to a board and run its bundled tests there")
    f.add_argument("file")
    f.add_argument("--board", required=True,
                   help="a name in toolchains/boards/, ssh://user@host[:port]/dir or dir:/path")
    f.add_argument("--target", help="build target (default: the board's)")
    f.add_argument("--timeout", type=float, help="seconds for each remote step (default: the board's, 120)")
    f.set_defaults(fn=cmd_flash)

    d = sub.add_parser("devices", help="list the runtime's devices and their capabilities")
    d.add_argument("--target", default="host")
    d.add_argument("--device", action="append", metavar="LIB.so", help="also load a vendor device library")
    d.add_argument("--json", action="store_true")
    d.set_defaults(fn=cmd_devices)

    c = sub.add_parser("conformance", help="check a device against the standard device interface; ends with "
                       "'N passed, N failed'")
    c.add_argument("--device", metavar="LIB",
                   help="a vendor device library (.so exporting oa_device_factory), or 'sim' / 'skeleton' for "
                   "the examples/vendor_device simulator / skeleton; default: the built-in CPU device")
    c.add_argument("--target", default="host", help="runtime build to check (qemu-* runs under emulation)")
    c.add_argument("--seed", type=int, default=1, help="seed of the random op inputs")
    c.add_argument("--filter", metavar="TEXT", help="run only the checks whose name contains TEXT")
    c.add_argument("--json", action="store_true")
    c.set_defaults(fn=cmd_conformance)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        return int(a.fn(a) or 0)
    except CheckFailed as e:
        if str(e):
            err.print(styled(("openaccel: check failed:", "red"), f" {e}"))
        return 1
    except OpenAccelError as e:
        err.print(styled(("openaccel: error:", "red"), f" {e}"))
        return e.exit_code
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
