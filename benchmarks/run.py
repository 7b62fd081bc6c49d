#!/usr/bin/env python3
"""Benchmark openaccel against PyTorch eager, ExecuTorch (portable, XNNPACK) and ONNX Runtime.

    python benchmarks/run.py                         # the four zoo models, 1 thread
    python benchmarks/run.py --models mlp --small --runs 5 --threads 2 --json -
    python benchmarks/run.py --micro                 # plus the GEMM / conv micro-benchmark

All engines run in this one process on the same inputs with the same thread count, their timed
runs interleaved (engine 1, engine 2, ..., engine 1, ...: every engine sees the same phases of a
shared machine); each cell is warmed up, then timed (median) until --runs or the --budget seconds
are used.
Peak RSS is measured separately, in a fresh process per cell (see benchmarks/README.md).
Timings on a shared machine are noisy: never use them in pass/fail tests.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import peer_isa  # noqa: E402
from engines import (  # noqa: E402
    CALIBRATION_COUNT,
    DEFAULT_ENGINES,
    ENGINES,
    Engine,
    Int8Source,
    OpenAccel,
    calibration_inputs,
    first_line,
    pt2e_quantize,
)

from openaccel.errors import OpenAccelError  # noqa: E402
from openaccel.hostinfo import machine_summary, summary_line  # noqa: E402

PEERS = ("eager", "et_portable", "et_xnnpack", "ort")
INT8_PEERS = ("et_xnnpack_int8", "ort_int8")
CELL_MARK = "BENCH_CELL "
OA_RUN = "openaccel_c"  # the extra row: the same .oab timed by oa_run (C only, separate process)


class BenchError(OpenAccelError):
    """Bad benchmark arguments or a broken benchmark environment."""


# ---- small helpers ----------------------------------------------------------------------------------
def quiet_libraries() -> None:
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def fmt_ms(ms: float) -> str:
    return f"{ms:.3f}" if ms < 10 else f"{ms:.1f}" if ms < 1000 else f"{ms:.0f}"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("torch", "executorch", "torchao", "onnx", "onnxscript", "onnxruntime", "numpy"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def tree_hash(root: Path, pattern: str = "*.py") -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob(pattern)):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


# ---- peak RSS -----------------------------------------------------------------------------------------
def _status_kb(key: str) -> int | None:
    with contextlib.suppress(OSError):
        m = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
        if m:
            return int(m.group(1))
    return None


def rss_reset() -> tuple[int, str]:
    """Reset the peak-RSS mark (Linux: write 5 to /proc/self/clear_refs); returns (baseline bytes, method)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        method = "VmHWM after a clear_refs reset, minus VmRSS at the reset"
        base = _status_kb("VmRSS")
    except OSError:
        method = "VmHWM growth (the peak mark could not be reset: an underestimate)"
        base = _status_kb("VmHWM")
    if base is None:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "ru_maxrss growth (no /proc)"
    return base * 1024, method


def rss_peak() -> int:
    kb = _status_kb("VmHWM")
    if kb is None:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb * 1024


# ---- artifacts --------------------------------------------------------------------------------------
def artifact_key(engine: Engine, model: str, small: bool, vers: dict[str, str], pt2e_key: str = "") -> str:
    parts = [engine.name, model, str(small), vers["torch"], (ROOT / "sdk/openaccel/zoo.py").read_text(),
             (HERE / "engines.py").read_text()]
    if engine.name.startswith("et_"):
        parts.append(vers["executorch"])
    if engine.name.startswith("ort"):
        parts += [vers["onnx"], vers["onnxscript"]]
    if engine.int8:  # the PT2E program (or, for ORT, its calibration set) and ORT's quantizer
        parts += [pt2e_key, vers["onnxruntime"]]
    if engine.name.startswith("openaccel"):
        import openaccel

        parts.append(tree_hash(Path(openaccel.__file__).parent))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def get_artifact(engine: Engine, model_name: str, model: Any, example: tuple[Any, ...], adir: Path,
                 small: bool, vers: dict[str, str], fresh: bool, pt2e_key: str = "") -> tuple[Path, dict[str, Any]]:
    """Export (or reuse an export made by the same versions of everything that shapes it)."""
    path = adir / f"{engine.name}{engine.suffix}"
    meta_path = adir / f"{engine.name}.meta.json"
    key = artifact_key(engine, model_name, small, vers, pt2e_key)
    if not fresh and meta_path.exists() and all(f.exists() for f in engine.files(path)):
        meta = json.loads(meta_path.read_text())
        if meta.get("key") == key:
            meta["cached"] = True
            return path, meta
    meta_path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    meta = engine.export(model, example, path)
    meta["export_s"] = round(time.perf_counter() - t0, 2)
    meta["key"] = key
    meta_path.write_text(json.dumps(meta))
    meta["cached"] = False
    return path, meta


def pt2e_key(model: str, small: bool, vers: dict[str, str]) -> str:
    parts = ["pt2e", model, str(small), vers["torch"], vers["executorch"], vers["torchao"],
             (ROOT / "sdk/openaccel/zoo.py").read_text(), (HERE / "engines.py").read_text()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def get_pt2e(model_name: str, model: Any, example: tuple[Any, ...], adir: Path, small: bool,
             vers: dict[str, str], fresh: bool) -> tuple[Int8Source, dict[str, Any]]:
    """The model's shared calibration set and its PT2E-converted program (cached as pt2e.pt2, keyed
    like the exports: a second run reloads it instead of calibrating again)."""
    import torch

    calib = calibration_inputs(example)
    path, meta_path = adir / "pt2e.pt2", adir / "pt2e.meta.json"
    key = pt2e_key(model_name, small, vers)
    if not fresh and path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("key") == key:
            # torch registers the quantized_decomposed ops the .pt2 refers to only on this import;
            # without it the load fails ("check the warnings above")
            import torch.ao.quantization.fx._decomposed

            with contextlib.suppress(Exception):  # unreadable: quantize again below
                ep = torch.export.load(path)
                meta["cached"] = True
                return Int8Source(model, calib, ep), meta
    meta_path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    ep = pt2e_quantize(model, example, calib)
    meta = {"key": key, "export_s": round(time.perf_counter() - t0, 2), "calibration_inputs": len(calib)}
    torch.export.save(ep, path)
    meta_path.write_text(json.dumps(meta))
    meta["cached"] = False
    return Int8Source(model, calib, ep), meta


# ---- timing -----------------------------------------------------------------------------------------
# the clock of the timed calls (--clock): wall time, or the calling thread's CPU time (with one
# thread every engine computes on the calling thread; on a machine shared with other jobs that
# time is not inflated by waiting for a core). Budgets and warm-up limits stay in wall time.
CLOCK = time.perf_counter


def time_cell(run: Any, runs: int, warmup: int, budget: float) -> dict[str, Any]:
    """Warm up (at least once, at most `warmup` times or a quarter of the budget), then time up to
    `runs` calls, stopping early (after at least one) once `budget` seconds of timed runs are used."""
    gc.collect()
    gc_was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        first = run()
        warm = 1
        while warm < warmup and time.perf_counter() - t0 < budget / 4:
            run()
            warm += 1
        times: list[float] = []
        last = first
        start = time.perf_counter()
        while len(times) < runs:
            t = CLOCK()
            last = run()
            times.append(CLOCK() - t)
            if time.perf_counter() - start > budget:
                break
    finally:
        if gc_was:
            gc.enable()
    ms = [t * 1e3 for t in times]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "mean_ms": statistics.fmean(ms),
            "max_ms": max(ms), "runs": len(ms), "warmup_runs": warm, "capped": len(ms) < runs,
            "outputs": [first, last]}


def time_cells(runs_by_name: dict[str, Any], runs: int, warmup: int, budget: float) -> dict[str, dict[str, Any]]:
    """time_cell for several engines at once, their timed calls interleaved round-robin. On this
    class of shared VM the speed of the whole machine changes by 1.5x for seconds at a time;
    timed one after the other, an engine that drew a slow phase looked 1.5x slower than its peers
    (MobileNetV2 timed alone: 12.0 and 17.8 ms in two runs a minute apart). Each engine is warmed
    up first; timing stops once every engine has `runs` calls or the budget (per engine) is used."""
    gc.collect()
    gc_was = gc.isenabled()
    gc.disable()
    names = list(runs_by_name)
    first: dict[str, Any] = {}
    warm: dict[str, int] = {}
    times: dict[str, list[float]] = {n: [] for n in names}
    last: dict[str, Any] = {}
    try:
        for n in names:
            run = runs_by_name[n]
            t0 = time.perf_counter()
            first[n] = last[n] = run()
            warm[n] = 1
            while warm[n] < warmup and time.perf_counter() - t0 < budget / 4:
                run()
                warm[n] += 1
        start = time.perf_counter()
        while any(len(times[n]) < runs for n in names):
            for n in names:
                if len(times[n]) < runs:
                    t = CLOCK()
                    last[n] = runs_by_name[n]()
                    times[n].append(CLOCK() - t)
            if time.perf_counter() - start > budget * len(names):
                break
    finally:
        if gc_was:
            gc.enable()
    out = {}
    for n in names:
        ms = [t * 1e3 for t in times[n]]
        out[n] = {"median_ms": statistics.median(ms), "min_ms": min(ms), "mean_ms": statistics.fmean(ms),
                  "max_ms": max(ms), "runs": len(ms), "warmup_runs": warm[n], "capped": len(ms) < runs,
                  "outputs": [first[n], last[n]]}
    return out


def merge_rounds(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """One result per engine from several rounds of time_cells: the median of the rounds' medians
    (a thin margin is judged on more than one phase of the machine), every round's median kept."""
    out = {}
    for n in rounds[0]:
        rs = [r[n] for r in rounds]
        out[n] = {"median_ms": statistics.median(r["median_ms"] for r in rs), "min_ms": min(r["min_ms"] for r in rs),
                  "mean_ms": statistics.fmean(r["mean_ms"] for r in rs), "max_ms": max(r["max_ms"] for r in rs),
                  "runs": sum(r["runs"] for r in rs), "warmup_runs": rs[0]["warmup_runs"],
                  "capped": any(r["capped"] for r in rs), "round_median_ms": [r["median_ms"] for r in rs],
                  "outputs": [rs[0]["outputs"][0], rs[-1]["outputs"][-1]]}
    return out


def compare(outs: list[list[np.ndarray]], ref: list[np.ndarray], tol: float) -> dict[str, Any]:
    """Max abs error against eager over the first and the last timed call's outputs."""
    worst = 0.0
    ok = True
    for got in outs:
        if len(got) != len(ref):
            return {"max_abs_error": None, "output_ok": False,
                    "output_error": f"{len(got)} outputs, eager has {len(ref)}"}
        for g, r in zip(got, ref):
            g = np.asarray(g)
            if g.shape != r.shape:
                return {"max_abs_error": None, "output_ok": False,
                        "output_error": f"output shape {list(g.shape)}, eager has {list(r.shape)}"}
            if r.size:
                diff = np.abs(g.astype(np.float64) - r.astype(np.float64))
                err = float(np.nanmax(diff)) if not np.isnan(diff).all() else float("nan")
                if np.isnan(diff).any() and not np.array_equal(np.isnan(g), np.isnan(r)):
                    err = float("nan")
                worst = max(worst, err) if not np.isnan(err) else float("nan")
                ok = ok and bool(np.allclose(g, r, rtol=tol, atol=tol, equal_nan=True))
    return {"max_abs_error": worst, "output_ok": ok}


def sqnr_db(got: list[np.ndarray], ref: list[np.ndarray]) -> float:
    """Signal-to-quantization-noise ratio of all outputs together, in dB (inf if identical)."""
    sig = sum(float(np.sum(np.asarray(r, np.float64) ** 2)) for r in ref)
    noise = sum(float(np.sum((np.asarray(g, np.float64) - np.asarray(r, np.float64)) ** 2)) for g, r in zip(got, ref))
    if noise == 0:
        return float("inf")
    if not np.isfinite(noise):
        return float("nan")
    return float(10 * np.log10(sig / noise)) if sig > 0 else float("-inf")


def compare_int8(outs: list[list[np.ndarray]], ref_q: list[np.ndarray], ref_fp: list[np.ndarray],
                 min_sqnr: float) -> dict[str, Any]:
    """An int8 engine against the PT2E reference (the convert_pt2e graph in eager, the defined answer
    of the quantized model): max abs error and SQNR (the worse of the first and the last timed
    call), ok if SQNR >= min_sqnr. The SQNR against float eager is kept too (the quantization's own
    cost), but not judged."""
    res = compare(outs, ref_q, tol=0.0)  # output_ok is decided by the SQNR below
    res["reference"] = "pt2e"
    if res["max_abs_error"] is None:
        return res
    s = min(sqnr_db(o, ref_q) for o in outs)
    res["sqnr_db"] = s
    res["sqnr_vs_fp32_db"] = min(sqnr_db(o, ref_fp) for o in outs)
    res["output_ok"] = bool(s >= min_sqnr)  # nan compares False
    return res


# ---- cells in fresh processes (peak RSS) and oa_run ---------------------------------------------------
def cell_main(spec_path: str) -> int:
    """In a fresh process: import the engine, reset the peak-RSS mark, load the model, run it."""
    quiet_libraries()
    spec = json.loads(Path(spec_path).read_text())
    if peer_isa.requested():
        peer_isa.restrict_executorch()
    engine = ENGINES[spec["engine"]]
    threads = int(spec["threads"])
    engine.setup(threads)
    inputs = [np.load(p) for p in spec["inputs"]]
    gc.collect()
    base, method = rss_reset()
    t0 = time.perf_counter()
    loaded = engine.load(Path(spec["path"]), inputs, threads)
    load_s = time.perf_counter() - t0
    for _ in range(int(spec["runs"])):
        loaded.run()
    peak = rss_peak()
    print(CELL_MARK + json.dumps({"peak_rss_delta_bytes": max(0, peak - base), "peak_rss_bytes": peak,
                                  "baseline_rss_bytes": base, "rss_method": method, "load_s": load_s}))
    return 0


def run_cell_process(engine: str, path: Path, inputs: list[Path], threads: int, runs: int,
                     timeout: float, workdir: Path) -> dict[str, Any]:
    spec = workdir / f"cell-{engine}.json"
    spec.write_text(json.dumps({"engine": engine, "path": str(path), "inputs": [str(p) for p in inputs],
                                "threads": threads, "runs": runs}))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", str(spec)]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"rss_error": f"the memory cell did not finish within {timeout:.0f} s"}
    for line in p.stdout.splitlines():
        if line.startswith(CELL_MARK):
            return dict(json.loads(line[len(CELL_MARK):]))
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return {"rss_error": f"memory cell exited {p.returncode}: {tail[:200]}"}


def sample_peak_rss(proc: subprocess.Popen[str], timeout: float) -> int | None:
    """Wait for proc, sampling VmHWM from /proc/PID/status every millisecond; return the last sample.

    (ru_maxrss from wait4 would be wrong here: on exec, Linux folds the forking parent's peak, this
    Python process with torch loaded, into the child's.) The peak mark only grows, so the last
    sample is exact unless the peak came in the final millisecond; oa_run reaches it at its first
    run, and the harness runs it for a while."""
    status = Path(f"/proc/{proc.pid}/status")
    peak: int | None = None
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        with contextlib.suppress(OSError):
            m = re.search(r"^VmHWM:\s+(\d+) kB", status.read_text(), re.M)
            if m:
                peak = int(m.group(1)) * 1024
        if time.monotonic() > deadline:
            break
        time.sleep(0.001)
    return peak


def run_oa_run(path: Path, inputs: list[Path], threads: int, runs: int, warmup: int,
               timeout: float) -> dict[str, Any]:
    """Time the same .oab with the C tool `oa_run --bench` (no Python in the process) and take that
    process's peak RSS."""
    import tempfile

    from openaccel.runtime.runner import Runner

    runner = Runner("host")
    args = [str(path)]
    for i, p in enumerate(inputs):
        args += ["--input", f"{i}={p}"]
    args += ["--bench", str(runs), "--warmup", str(warmup), "--threads", str(threads), "--info", "--json"]
    if peer_isa.requested():
        args += ["--isa", str(peer_isa.requested())]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(runner.command(args), stdout=out, stderr=err, text=True)
        peak = sample_peak_rss(proc, timeout)
        if proc.returncode is None:
            proc.kill()
            proc.wait()
            return {"status": "n/a", "reason": f"oa_run did not finish within {timeout:.0f} s"}
        code = proc.returncode
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    events = []
    for ln in stdout.splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            if ln.startswith("{"):
                events.append(json.loads(ln))
    bench = [e for e in events if e.get("event") == "bench"]
    if code not in (0, 1) or not bench:
        errs = [e for e in events if e.get("event") == "error"]
        why = errs[0].get("message", "") if errs else (stderr.strip().splitlines() or [f"exit {code}"])[-1]
        return {"status": "n/a", "reason": f"oa_run failed: {why[:200]}"}
    b = bench[0]
    res: dict[str, Any] = {"status": "ok", "median_ms": b["median_ms"], "min_ms": b["min_ms"],
                           "mean_ms": b["mean_ms"], "max_ms": b["max_ms"], "runs": b["runs"],
                           "warmup_runs": warmup, "capped": b["runs"] < runs,
                           "peak_rss_bytes": peak,
                           "rss_method": "whole oa_run process: its VmHWM, sampled every ms while it runs"}
    mem = [e for e in events if e.get("event") == "memory"]
    if mem:
        res["memory"] = {k: v for k, v in mem[0].items() if k != "event"}
    return res


# ---- the benchmark ----------------------------------------------------------------------------------
def bench_model(name: str, args: argparse.Namespace, engines: list[Engine], vers: dict[str, str],
                out_dir: Path, log: Any, pt2e_info: dict[str, Any]) -> list[dict[str, Any]]:
    """Every engine's row for one model; `pt2e_info` receives the PT2E program's facts (if built)."""
    import torch

    from openaccel import zoo

    model, example = zoo.build(name, small=args.small)
    inputs = [t.detach().numpy().copy() for t in example]
    with torch.inference_mode():
        ref_out = model(*example)
    ref = [o.detach().numpy().copy() for o in (ref_out if isinstance(ref_out, (list, tuple)) else [ref_out])]
    adir = out_dir / "artifacts" / (name + ("-small" if args.small else ""))
    adir.mkdir(parents=True, exist_ok=True)
    input_files = []
    for i, a in enumerate(inputs):
        f = adir / f"input_{i}.npy"
        np.save(f, a)
        input_files.append(f)
    base = {"model": name, "small": args.small, "threads": args.threads,
            "inputs": [f"{a.dtype}{list(a.shape)}" for a in inputs]}

    # int8 engines: one calibration set and one PT2E program, shared; the PT2E graph in eager is
    # their reference
    src: Int8Source | None = None
    ref_q: list[np.ndarray] = []
    pt2e_why = ""
    pkey = pt2e_key(name, args.small, vers)
    if any(e.int8 and e.unavailable() is None for e in engines):
        log(f"{name}: PT2E quantization ({CALIBRATION_COUNT} calibration inputs)")
        try:
            src, pmeta = get_pt2e(name, model, example, adir, args.small, vers, args.fresh)
            with torch.no_grad():
                q_out = src.converted.module()(*example)
            ref_q = [o.detach().numpy().copy() for o in (q_out if isinstance(q_out, (list, tuple)) else [q_out])]
            pt2e_info.update(pmeta, sqnr_vs_fp32_db=sqnr_db(ref_q, ref))
        except Exception as e:
            pt2e_why = f"PT2E quantization failed: {first_line(e)}"

    rows: list[dict[str, Any]] = []
    arts: dict[str, tuple[Path, dict[str, Any]]] = {}
    for eng in engines:
        row = {**base, "engine": eng.name, "label": eng.label, "peer": eng.peer, "int8": eng.int8}
        rows.append(row)
        why = eng.unavailable() or (pt2e_why if eng.int8 else None)
        if why:
            row.update(status="n/a", reason=why)
            continue
        log(f"{name}: exporting for {eng.label}")
        try:
            path, meta = get_artifact(eng, name, src if eng.int8 else model, example, adir, args.small, vers,
                                      args.fresh, pkey if eng.int8 else "")
        except Exception as e:
            row.update(status="n/a", reason=f"export failed: {first_line(e)}")
            continue
        arts[eng.name] = (path, meta)
        row.update(file_bytes=sum(f.stat().st_size for f in eng.files(path)), arena_bytes=meta.get("arena_bytes"),
                   notes=list(meta.get("notes", [])), export_s=meta.get("export_s"), cached=meta.get("cached"))
        for k in ("memory", "float32_instructions", "float32_ops", "int8_instructions"):
            if k in meta:
                row[k] = meta[k]

    loaded: dict[str, Any] = {}
    for row in rows:
        if row["engine"] not in arts:
            continue
        eng = ENGINES[row["engine"]]
        try:
            loaded[eng.name] = eng.load(arts[eng.name][0], inputs, args.threads)
        except Exception as e:
            row.update(status="n/a", reason=f"run failed: {first_line(e)}")
    log(f"{name}: timing {', '.join(ENGINES[n].label for n in loaded)} (runs interleaved"
        + (f", {args.rounds} rounds)" if args.rounds > 1 else ")"))
    try:
        rounds = []
        for rnd in range(args.rounds):
            if args.rounds > 1:
                log(f"{name}: round {rnd + 1} of {args.rounds}")
            rounds.append(time_cells({n: ld.run for n, ld in loaded.items()}, args.runs, args.warmup, args.budget))
        results = merge_rounds(rounds)
    except Exception as e:
        results = {}
        for row in rows:
            if row["engine"] in loaded:
                row.update(status="n/a", reason=f"run failed: {first_line(e)}")
    for row in rows:
        if row["engine"] not in results:
            continue
        res = results[row["engine"]]
        info = loaded[row["engine"]].info
        outs = res.pop("outputs")
        check = compare_int8(outs, ref_q, ref, args.min_sqnr) if row["int8"] else compare(outs, ref, args.tol)
        row.update(status="ok", **res, **check)
        if "requirements" in info:  # openaccel: what the runtime asks for on this device
            req = info["requirements"]
            row["memory"] = {**row.get("memory", {}), **req}
            row["arena_bytes"] = req["arena_bytes"] + req["scratch_bytes"]
    loaded.clear()
    gc.collect()

    if not args.no_rss:
        for row in rows:
            if row.get("status") != "ok":
                continue
            log(f"{name}: peak RSS of {row['label']} (fresh process)")
            cell_runs = 1 if row["median_ms"] * 1e-3 > args.budget / 2 else 2
            row.update(run_cell_process(row["engine"], arts[row["engine"]][0], input_files, args.threads,
                                        cell_runs, timeout=120 + 4 * args.budget + 3 * row["median_ms"] * 1e-3,
                                        workdir=adir))

    oa = next((r for r in rows if r["engine"] == "openaccel"), None)
    if oa is not None and oa.get("status") == "ok" and not args.no_oa_run:
        log(f"{name}: timing the same .oab with oa_run (C only)")
        per_run = oa["median_ms"] * 1e-3
        n = max(1, min(args.runs, int(args.budget / max(per_run, 1e-6))))
        n = max(n, min(1000, int(0.2 / max(per_run, 1e-6))))  # live >= 0.2 s so the RSS sampler sees the peak
        row = {**base, "engine": OA_RUN, "label": "openaccel (oa_run, C only)", "peer": False,
               "file_bytes": oa["file_bytes"], "arena_bytes": oa["arena_bytes"],
               "notes": []}
        row.update(run_oa_run(arts["openaccel"][0], input_files, args.threads, n, max(1, min(args.warmup, n)),
                              timeout=120 + 4 * args.budget + 3 * per_run * (n + args.warmup)))
        rows.append(row)
    return rows


def _ok(r: dict[str, Any] | None) -> bool:
    return r is not None and r.get("status") == "ok"


def summarize(rows: list[dict[str, Any]], models: list[str],
              pt2e: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per model: openaccel against the best fp32 peer (and each peer); with int8 engines also
    openaccel_int8 against the best int8 peer and, per engine family (ExecuTorch + XNNPACK, ONNX
    Runtime, openaccel), int8 against fp32: time, file size, SQNR."""
    out = []
    for m in models:
        mine = [r for r in rows if r["model"] == m]
        peers = [r for r in mine if r["peer"] and not r.get("int8") and r.get("status") == "ok" and r.get("output_ok")]
        best = min(peers, key=lambda r: r["median_ms"]) if peers else None
        oa = next((r for r in mine if r["engine"] == "openaccel"), None)
        s: dict[str, Any] = {"model": m, "best_peer": best["engine"] if best else None,
                             "best_peer_ms": best["median_ms"] if best else None,
                             "openaccel_ms": oa["median_ms"] if oa and oa.get("status") == "ok" else None}
        s["ratio_to_best_peer"] = (s["openaccel_ms"] / s["best_peer_ms"]
                                   if s["openaccel_ms"] is not None and s["best_peer_ms"] else None)
        for r in mine:
            if r["engine"] in PEERS and r.get("status") == "ok" and oa and oa.get("status") == "ok":
                s[f"ratio_to_{r['engine']}"] = oa["median_ms"] / r["median_ms"]
        if best and oa and len(oa.get("round_median_ms", [])) > 1:
            # per round: openaccel against the best peer of that round
            per_round = [o / min(r["round_median_ms"][k] for r in peers)
                         for k, o in enumerate(oa["round_median_ms"])]
            s["round_ratios"] = per_round
        by = {r["engine"]: r for r in mine}
        if any(r.get("int8") for r in mine):
            if pt2e and pt2e.get(m):
                s["pt2e_sqnr_vs_fp32_db"] = pt2e[m].get("sqnr_vs_fp32_db")
            peers8 = [r for r in mine if r["peer"] and r.get("int8") and _ok(r) and r.get("output_ok")]
            best8 = min(peers8, key=lambda r: r["median_ms"]) if peers8 else None
            oa8 = by.get("openaccel_int8")
            s["best_int8_peer"] = best8["engine"] if best8 else None
            s["best_int8_peer_ms"] = best8["median_ms"] if best8 else None
            s["openaccel_int8_ms"] = oa8["median_ms"] if oa8 is not None and _ok(oa8) else None
            s["int8_ratio_to_best_int8_peer"] = (s["openaccel_int8_ms"] / s["best_int8_peer_ms"]
                                                 if s["openaccel_int8_ms"] is not None and best8 else None)
            families: dict[str, Any] = {}
            for r in mine:
                e = ENGINES.get(r["engine"])  # (the oa_run row is no engine)
                f32 = by.get(e.fp32_engine) if e is not None and e.int8 else None
                if f32 is None:
                    continue
                assert e is not None
                fam: dict[str, Any] = {"int8_engine": e.name, "fp32_engine": e.fp32_engine,
                                       "int8_status": r.get("status"), "fp32_status": f32.get("status"),
                                       "int8_file_bytes": r.get("file_bytes"), "fp32_file_bytes": f32.get("file_bytes")}
                if r.get("file_bytes") and f32.get("file_bytes"):
                    fam["file_ratio"] = r["file_bytes"] / f32["file_bytes"]
                if _ok(r) and _ok(f32):
                    fam.update(int8_ms=r["median_ms"], fp32_ms=f32["median_ms"],
                               time_ratio=r["median_ms"] / f32["median_ms"])
                if _ok(r):
                    fam.update(sqnr_db=r.get("sqnr_db"), sqnr_vs_fp32_db=r.get("sqnr_vs_fp32_db"))
                families.setdefault(e.fp32_engine, fam)  # the first int8 engine of an fp32 one (openaccel_int8)
            s["int8_vs_fp32"] = families
        out.append(s)
    return out


def ratio_cell(ratio: float) -> str:
    colour = "green" if ratio <= 1 else "yellow" if ratio <= 1.5 else "red"
    return f"[{colour}]{ratio:.2f}x[/]"


def db_cell(db: float | None, ok: bool | None = True) -> str:
    if db is None:
        return "-"
    c = "inf dB" if db == float("inf") else f"{db:.1f} dB"
    return c if ok else f"[red]{c} (wrong)[/]"


def print_int8_table(summary: list[dict[str, Any]], console: Any, na: Any,
                     rows: dict[tuple[str, str], dict[str, Any]]) -> None:
    """int8 against fp32 per engine family: time, file size, SQNR."""
    from rich.table import Table

    t = Table(title="int8 vs fp32 per engine family (int8 / fp32: time and file size)")
    for c, j in (("model", "left"), ("family", "left"), ("fp32 ms", "right"), ("int8 ms", "right"),
                 ("int8 / fp32 time", "right"), ("fp32 file", "right"), ("int8 file", "right"),
                 ("int8 / fp32 file", "right"), ("SQNR vs PT2E", "right"), ("SQNR vs fp32 eager", "right")):
        t.add_column(c, justify=j)  # type: ignore[arg-type]
    for s in summary:
        for fam in s.get("int8_vs_fp32", {}).values():
            r8, r32 = rows[(s["model"], fam["int8_engine"])], rows[(s["model"], fam["fp32_engine"])]
            fr = fam.get("file_ratio")
            t.add_row(s["model"], ENGINES[fam["fp32_engine"]].label,
                      fmt_ms(r32["median_ms"]) if _ok(r32) else na(r32),
                      fmt_ms(r8["median_ms"]) if _ok(r8) else na(r8),
                      f"{fam['time_ratio']:.2f}x" if "time_ratio" in fam else "n/a",
                      human_bytes(fam.get("fp32_file_bytes")), human_bytes(fam.get("int8_file_bytes")),
                      f"{fr:.2f}x" if fr else "n/a",
                      db_cell(fam.get("sqnr_db"), r8.get("output_ok")) if _ok(r8) else "",
                      db_cell(fam.get("sqnr_vs_fp32_db")) if _ok(r8) else "")
        if s.get("pt2e_sqnr_vs_fp32_db") is not None:
            t.add_row(s["model"], "[dim]PT2E reference (eager)[/]", "", "", "", "", "", "", "",
                      db_cell(s["pt2e_sqnr_vs_fp32_db"]))
    console.print(t)


def print_tables(doc: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    rows, summary, meta = doc["results"], doc["summary"], doc["meta"]
    engines = [e for e in doc["meta"]["engines"]]
    notes: list[str] = []

    def na(r: dict[str, Any]) -> str:
        note = f"{r['label']} on {r['model']}: {r.get('reason', '?')}"
        if note not in notes:
            notes.append(note)
        return f"[dim]n/a [{notes.index(note) + 1}][/]"

    has8 = any(ENGINES[e].int8 for e in engines)
    title = (f"ms per run (median), {meta['threads']} thread(s), {'fp32 and int8' if has8 else 'fp32'}, batch 1"
             + (", small inputs" if meta["small"] else ""))
    t = Table(title=title)
    t.add_column("model")
    for e in engines:
        t.add_column(ENGINES[e].label, justify="right")
    t.add_column("openaccel / best peer", justify="right")
    if has8:
        t.add_column("openaccel int8 / best int8 peer", justify="right")
    for s in summary:
        cells = []
        for e in engines:
            r = next((r for r in rows if r["model"] == s["model"] and r["engine"] == e), None)
            if r is None:
                cells.append("")
            elif r.get("status") != "ok":
                cells.append(na(r))
            else:
                c = fmt_ms(r["median_ms"]) + ("*" if r.get("capped") else "")
                if not r.get("output_ok"):
                    c = f"[red]{c} (wrong)[/]"
                cells.append(c)
        ratio = s.get("ratio_to_best_peer")
        if ratio is None:
            rc = "n/a"
        else:
            rc = f"{ratio_cell(ratio)} vs {ENGINES[s['best_peer']].label}"
            if s.get("round_ratios"):
                rr = s["round_ratios"]
                rc += f" ({min(rr):.2f}-{max(rr):.2f}x over {len(rr)} rounds)"
        extra = []
        if has8:
            r8 = s.get("int8_ratio_to_best_int8_peer")
            extra.append("n/a" if r8 is None else f"{ratio_cell(r8)} vs {ENGINES[s['best_int8_peer']].label}")
        t.add_row(s["model"], *cells, rc, *extra)
    console.print(t)
    la, lb = meta.get("loadavg_start"), meta.get("loadavg_end")
    if la and lb:
        console.print(f"[dim]{meta['cpu']}, {meta['cores']} cores; load average {la[0]:.1f} at the start, "
                      f"{lb[0]:.1f} at the end (timings on a loaded machine are noisy)[/]")
    if "kernel_isa" in meta:
        console.print(summary_line({"model": meta["cpu"], "vector_extensions": meta.get("vector_extensions"),
                                    "kernel_isa": meta["kernel_isa"]}), markup=False)

    d = Table(title="per engine (file, planned arena, peak RSS: see benchmarks/README.md)")
    cols = [("model", "left"), ("engine", "left"), ("median ms", "right"), ("min ms", "right"),
            ("runs", "right"), ("max abs err", "right")]
    if has8:
        cols.append(("SQNR vs PT2E", "right"))
    cols += [("file", "right"), ("arena", "right"), ("peak RSS", "right"), ("notes", "left")]
    for c, j in cols:
        d.add_column(c, justify=j)  # type: ignore[arg-type]
    for r in rows:
        if r.get("status") != "ok":
            d.add_row(r["model"], r["label"], na(r), "", "", "", *([""] if has8 else []),
                      human_bytes(r.get("file_bytes")), human_bytes(r.get("arena_bytes")), "", "")
            continue
        err = r.get("max_abs_error")
        if "max_abs_error" not in r:
            ec = "-"
        elif err is None or not r.get("output_ok"):
            ec = f"[red]{r.get('output_error') or (f'{err:.2g}' if err is not None else '?')} (wrong)[/]"
        else:
            ec = f"{err:.2g}"
        sq = []
        if has8:
            sq = [db_cell(r["sqnr_db"], r.get("output_ok")) if "sqnr_db" in r else ""]
        rss = r.get("peak_rss_delta_bytes", r.get("peak_rss_bytes"))
        rss_c = (human_bytes(rss) + (" (whole process)" if r["engine"] == OA_RUN else "")) if rss is not None \
            else ("[dim]" + r["rss_error"] + "[/]" if "rss_error" in r else "-")
        d.add_row(r["model"], r["label"], fmt_ms(r["median_ms"]), fmt_ms(r["min_ms"]),
                  f"{r['runs']}{'*' if r.get('capped') else ''}", ec, *sq, human_bytes(r.get("file_bytes")),
                  human_bytes(r.get("arena_bytes")), rss_c, "; ".join(r.get("notes", [])))
    console.print(d)
    if has8:
        print_int8_table(summary, console, na, {(r["model"], r["engine"]): r for r in rows})
        console.print(f"[dim]int8 engines are checked against the PT2E reference (the convert_pt2e graph in eager, "
                      f"{CALIBRATION_COUNT} seeded calibration inputs shared by every int8 engine), flagged wrong "
                      f"below {meta.get('min_sqnr', '?')} dB; their max abs err is against it too[/]")
    if any(r.get("capped") for r in rows):
        console.print("* fewer runs than --runs: the cell's time budget (--budget) ran out")
    for i, n in enumerate(notes, 1):
        console.print(f"[dim][{i}] {n}[/]")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from openaccel import zoo

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(zoo.NAMES),
                    help=f"comma-separated zoo models (default: all of {', '.join(zoo.NAMES)})")
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                    help=f"comma-separated engines (default: {', '.join(DEFAULT_ENGINES)}; also: "
                    f"{', '.join(e for e in ENGINES if e not in DEFAULT_ENGINES)})")
    ap.add_argument("--threads", type=int, default=1, help="threads for every engine (default 1)")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per cell, at most (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up runs per cell, at most (default 3)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat each model's interleaved timing this many times; the table shows the median "
                         "of the rounds' medians and the range of openaccel / best peer (default 1)")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="time each call in wall time (default) or in the calling thread's CPU time ('thread', "
                         "with --threads 1 only: every engine computes on the calling thread; use it on a machine "
                         "shared with other jobs)")
    ap.add_argument("--budget", type=float, default=10.0,
                    help="seconds of timed runs per cell before stopping early (default 10)")
    ap.add_argument("--small", action="store_true", help="the zoo's reduced input sizes (quick runs)")
    ap.add_argument("--tol", type=float, default=1e-3,
                    help="atol = rtol for flagging an engine's output as wrong against eager (default 1e-3)")
    ap.add_argument("--min-sqnr", type=float, default=15.0,
                    help="an int8 engine's outputs are flagged wrong below this SQNR (dB) against the PT2E "
                         "reference (default 15)")
    ap.add_argument("--json", nargs="?", const="-", metavar="PATH",
                    help="write the results as JSON to PATH ('-' or no value: stdout; the tables go to stderr)")
    ap.add_argument("--out", default=str(ROOT / "bench-results"),
                    help="results and exported files go here (default bench-results/)")
    ap.add_argument("--fresh", action="store_true", help="re-export everything (ignore cached exports)")
    ap.add_argument("--no-rss", action="store_true", help="skip the peak-RSS cells (fresh processes)")
    ap.add_argument("--no-oa-run", action="store_true", help="skip timing the .oab with oa_run (C only)")
    ap.add_argument("--micro", action="store_true", help="also run the GEMM / conv micro-benchmark (gemm.py)")
    ap.add_argument("--peers-isa", choices=("avx2",),
                    help="hold every engine to this ISA, as on an AVX2-only CPU (benchmarks/peer_isa.py: "
                         "openaccel's kernels, XNNPACK through ExecuTorch's cpuinfo, PyTorch through its "
                         "environment; ONNX Runtime refused)")
    ap.add_argument("--cell", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.cell:
        return a
    a.model_list = [m.strip() for m in a.models.split(",") if m.strip()]
    a.engine_list = [e.strip() for e in a.engines.split(",") if e.strip()]
    bad = [m for m in a.model_list if m not in zoo.NAMES]
    if bad:
        raise BenchError(f"unknown model(s) {', '.join(bad)}; known: {', '.join(zoo.NAMES)}")
    bad = [e for e in a.engine_list if e not in ENGINES]
    if bad:
        raise BenchError(f"unknown engine(s) {', '.join(bad)}; known: {', '.join(ENGINES)}")
    if a.threads < 1 or a.runs < 1 or a.warmup < 1 or a.rounds < 1 or a.budget <= 0:
        raise BenchError("--threads, --runs, --warmup and --rounds must be >= 1 and --budget > 0")
    if a.clock == "thread" and a.threads != 1:
        raise BenchError("--clock thread needs --threads 1 (other threads' CPU time would not be counted)")
    if a.peers_isa:
        peer_isa.check_engines(a.engine_list)
    return a


def main(argv: list[str] | None = None) -> int:
    quiet_libraries()
    args = parse_args(argv)
    if args.cell:
        return cell_main(args.cell)
    if args.peers_isa and peer_isa.requested() != args.peers_isa:
        # PyTorch reads its ISA limits when it loads (already imported here): start again with them
        cmd = [sys.executable, str(Path(__file__).resolve()), *(sys.argv[1:] if argv is None else argv)]
        os.execve(sys.executable, cmd, {**os.environ, **peer_isa.environment(args.peers_isa)})
    cleared = peer_isa.restrict_executorch() if args.peers_isa else []
    global CLOCK
    CLOCK = time.thread_time if args.clock == "thread" else time.perf_counter
    from rich.console import Console

    to_stdout = args.json == "-"
    console = Console(stderr=to_stdout)
    if not console.is_terminal:
        console = Console(stderr=to_stdout, width=200)

    def log(msg: str) -> None:
        console.print(f"[dim]{time.strftime('%H:%M:%S')} {msg}[/]")

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    engines = [ENGINES[e] for e in args.engine_list]
    for e in engines:
        if e.unavailable() is None:
            e.setup(args.threads)
    vers = versions()
    machine = machine_summary("host")
    if args.peers_isa:
        machine["kernel_isa"] = f"{args.peers_isa} (--peers-isa)"
    log(summary_line(machine))
    if args.peers_isa:
        log(f"--peers-isa {args.peers_isa}: openaccel's kernels, PyTorch ({', '.join(peer_isa.TORCH_ENV)}) and "
            f"XNNPACK (cpuinfo flags cleared: {', '.join(cleared) or 'none'}) held to {args.peers_isa}")
    load0 = os.getloadavg() if hasattr(os, "getloadavg") else None
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    pt2e: dict[str, dict[str, Any]] = {}
    for m in args.model_list:
        pt2e[m] = {}
        rows += bench_model(m, args, engines, vers, out_dir, log, pt2e[m])
    micro: list[dict[str, Any]] = []
    peaks: dict[str, float] = {}
    if args.micro:
        import gemm

        # with the openaccel_avx2 engine, the micro-benchmark times those ISAs too (same loop)
        avx2 = ENGINES["openaccel_avx2"]
        ab = avx2.isas if isinstance(avx2, OpenAccel) and "openaccel_avx2" in args.engine_list else None
        micro = gemm.run_micro(threads=args.threads, small=args.small, runs=args.runs, warmup=args.warmup,
                               budget=args.budget, log=log, cache=out_dir / "artifacts" / "micro", ab_isas=ab)
        from peak import measure

        peaks = measure()
        machine["fma_peak_gflops"] = peaks
        gemm.add_roofline(micro, str(machine.get("kernel_isa")), peaks, args.threads)
    doc = {
        "meta": {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(time.time() - t0, 1),
                 "command": " ".join(["benchmarks/run.py", *(sys.argv[1:] if argv is None else argv)]),
                 "host": platform.node(), "machine": platform.machine(), "cpu": machine["model"],
                 "vector_extensions": machine["vector_extensions"], "kernel_isa": machine["kernel_isa"],
                 "cores": os.cpu_count(), "threads": args.threads, "small": args.small, "runs": args.runs,
                 "warmup": args.warmup, "budget_s": args.budget, "clock": args.clock, "tol": args.tol,
                 "min_sqnr": args.min_sqnr, "versions": vers, "pt2e": pt2e,
                 "loadavg_start": load0, "loadavg_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
                 "engines": args.engine_list, "models": args.model_list, "peers_isa": args.peers_isa},
        "results": rows,
        "summary": summarize(rows, args.model_list, pt2e),
        "micro": micro,
    }
    print_tables(doc, console)
    if micro:
        import gemm

        gemm.print_table(micro, console, args.threads, machine, peaks)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = json.dumps(doc, indent=2, default=float)
    (out_dir / f"bench-{stamp}.json").write_text(text)
    (out_dir / "latest.json").write_text(text)
    log(f"results: {out_dir / f'bench-{stamp}.json'}")
    if args.json == "-":
        sys.stdout.write(text + "\n")
    elif args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OpenAccelError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
