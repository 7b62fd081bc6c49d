"""The benchmark harness (benchmarks/run.py, benchmarks/gemm.py): structure of its table and JSON,
and that openaccel's output matches eager there. Never timings: the machine is shared and noisy."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
_spec = importlib.util.spec_from_file_location("bench_run", BENCH / "run.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _engines() -> list[str]:
    names = ["eager", "openaccel"]
    if importlib.util.find_spec("executorch") is not None:
        names += ["et_portable", "et_xnnpack"]
    if all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx", "onnxscript")):
        names.append("ort")  # installed by `make bench-setup`, not by CI
    return names


def _run(args: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "sdk"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


@pytest.mark.slow
def test_harness_mlp_small(tmp_path: Path) -> None:
    engines = _engines()
    out = tmp_path / "results.json"
    p = _run([str(BENCH / "run.py"), "--models", "mlp", "--small", "--runs", "2", "--warmup", "1",
              "--budget", "1", "--engines", ",".join(engines), "--out", str(tmp_path), "--json", str(out)])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    # the tables
    assert "ms per run (median), 1 thread(s)" in p.stdout
    assert "openaccel / best peer" in p.stdout
    for e in engines:
        assert bench.ENGINES[e].label in p.stdout
    # the JSON, also kept under --out
    doc = json.loads(out.read_text())
    assert json.loads((tmp_path / "latest.json").read_text()) == doc
    assert doc["meta"]["threads"] == 1 and doc["meta"]["small"] is True
    assert doc["meta"]["engines"] == engines and doc["meta"]["models"] == ["mlp"]
    # which machine: figures from different CPUs must never be compared by accident
    from openaccel.hostinfo import host_cpu

    assert doc["meta"]["cpu"] == host_cpu().model
    assert doc["meta"]["vector_extensions"] == list(host_cpu().vector_extensions)
    assert doc["meta"]["kernel_isa"] in ("avx512", "avx2+fma", "neon", "neon+dotprod", "portable C")
    assert f"CPU: {host_cpu().model}" in p.stdout and f"openaccel kernels: {doc['meta']['kernel_isa']}" in p.stdout
    rows = {r["engine"]: r for r in doc["results"]}
    assert set(rows) == {*engines, bench.OA_RUN}
    for e in engines:
        r = rows[e]
        assert r["status"] == "ok", r
        assert r["model"] == "mlp" and r["inputs"] == ["float32[1, 784]"]
        assert 1 <= r["runs"] <= 2 and r["warmup_runs"] == 1
        assert r["median_ms"] > 0 and r["min_ms"] <= r["median_ms"]
        assert r["file_bytes"] > 784 * 512 * 4  # the weights are in every file
        assert r["output_ok"] is True, r
        assert r["peak_rss_delta_bytes"] > 0 and r["rss_method"]
    assert rows["eager"]["max_abs_error"] == 0
    oa = rows["openaccel"]
    assert oa["max_abs_error"] <= 1e-4
    assert oa["arena_bytes"] > 0 and oa["memory"]["arena_bytes"] > 0
    c = rows[bench.OA_RUN]
    assert c["status"] == "ok" and c["median_ms"] > 0 and c["peak_rss_bytes"] > 0
    (s,) = doc["summary"]
    assert s["model"] == "mlp" and s["best_peer"] in engines and s["ratio_to_best_peer"] > 0


# ---- int8 engines ----------------------------------------------------------------------------------
INT8 = ("et_xnnpack_int8", "ort_int8", "openaccel_int8")


@pytest.fixture(scope="module")
def int8_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, list[str], Path]:
    """One small run of every available int8 engine beside its fp32 engine (MLP, two timed runs)."""
    names = [n for e in INT8 for n in (bench.ENGINES[e].fp32_engine, e) if bench.ENGINES[e].unavailable() is None]
    out_dir = tmp_path_factory.mktemp("bench_int8")
    out = out_dir / "results.json"
    p = _run([str(BENCH / "run.py"), "--models", "mlp", "--small", "--runs", "2", "--warmup", "1",
              "--budget", "1", "--engines", ",".join(names), "--no-oa-run", "--out", str(out_dir),
              "--json", str(out)])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads(out.read_text()), p.stdout, names, out_dir


@pytest.mark.slow
@pytest.mark.xdist_group("bench_int8")
@pytest.mark.parametrize("engine", INT8)
def test_harness_int8_engine(engine: str, int8_run: tuple[dict[str, Any], str, list[str], Path]) -> None:
    eng = bench.ENGINES[engine]
    why = eng.unavailable()
    if why:
        pytest.skip(f"{engine} is not available here: {why}")
    doc, stdout, names, _ = int8_run
    assert doc["meta"]["engines"] == names
    rows = {r["engine"]: r for r in doc["results"]}
    r, f32 = rows[engine], rows[eng.fp32_engine]
    assert r["status"] == "ok" and f32["status"] == "ok", (r, f32)
    assert r["int8"] is True and f32["int8"] is False and r["reference"] == "pt2e"
    assert 1 <= r["runs"] <= 2 and r["median_ms"] > 0
    assert r["output_ok"] is True, r
    # against the PT2E reference, and the quantization's own cost against float eager
    assert r["sqnr_db"] >= doc["meta"]["min_sqnr"] and np.isfinite(r["sqnr_vs_fp32_db"]), r
    if engine != "ort_int8":  # these run the PT2E program itself: within about an output step of it
        assert r["sqnr_db"] >= 30, r
    # int8 weights: about a quarter of the fp32 file
    assert r["file_bytes"] < 0.4 * f32["file_bytes"], (r["file_bytes"], f32["file_bytes"])
    assert r["file_bytes"] > 784 * 512  # the weights, one byte each
    assert r["peak_rss_delta_bytes"] > 0 and r["rss_method"]
    (s,) = doc["summary"]
    fam = s["int8_vs_fp32"][eng.fp32_engine]
    assert fam["int8_engine"] == engine and fam["time_ratio"] > 0
    assert fam["file_ratio"] == pytest.approx(r["file_bytes"] / f32["file_bytes"])
    assert doc["meta"]["pt2e"]["mlp"]["calibration_inputs"] == bench.CALIBRATION_COUNT
    if engine == "openaccel_int8":  # every op of the MLP has an int8 instruction
        assert r["float32_instructions"] == 0 and r["int8_instructions"] == 3, r
        assert s["openaccel_int8_ms"] == r["median_ms"]
    # the tables
    assert "int8 vs fp32 per engine family" in stdout and "SQNR vs PT2E" in stdout
    assert "openaccel int8 / best int8 peer" in stdout and eng.label in stdout


@pytest.mark.slow
@pytest.mark.xdist_group("bench_int8")
def test_harness_int8_reuses_the_pt2e_program(int8_run: tuple[dict[str, Any], str, list[str], Path]) -> None:
    """A second run reloads the cached PT2E program and the int8 exports instead of redoing them."""
    doc, _, _, out_dir = int8_run
    assert doc["meta"]["pt2e"]["mlp"]["cached"] is False
    p = _run([str(BENCH / "run.py"), "--models", "mlp", "--small", "--runs", "1", "--warmup", "1",
              "--budget", "1", "--engines", "openaccel_int8", "--no-rss", "--no-oa-run", "--out", str(out_dir),
              "--json", "-"])
    assert p.returncode == 0, p.stderr[-3000:]
    again = json.loads(p.stdout)
    assert again["meta"]["pt2e"]["mlp"]["cached"] is True
    (r,) = again["results"]
    assert r["cached"] is True and r["status"] == "ok" and r["output_ok"] is True
    first = next(x for x in doc["results"] if x["engine"] == "openaccel_int8")
    assert r["sqnr_db"] == first["sqnr_db"]  # same program, same input


def test_calibration_inputs_are_seeded_and_shaped() -> None:
    import torch

    ex = (torch.randn(1, 3, 8, 8), torch.randint(5, 40, (1, 16)))
    a, b = bench.calibration_inputs(ex), bench.calibration_inputs(ex)
    assert len(a) == bench.CALIBRATION_COUNT
    for xa, xb in zip(a, b):
        assert all(torch.equal(u, v) for u, v in zip(xa, xb))  # the same for every engine and run
        assert xa[0].shape == (1, 3, 8, 8) and xa[0].dtype == torch.float32
        assert xa[1].dtype == ex[1].dtype and int(xa[1].min()) >= int(ex[1].min())
        assert int(xa[1].max()) <= int(ex[1].max())
    assert not torch.equal(a[0][0], a[1][0])  # different inputs, not one repeated
    assert not torch.equal(a[0][0], ex[0])


def test_int8_outputs_are_judged_by_sqnr_against_pt2e() -> None:
    rng = np.random.default_rng(0)
    ref_q = [rng.standard_normal((4, 10)).astype(np.float32)]
    ref_fp = [ref_q[0] + np.float32(0.01)]
    assert bench.sqnr_db(ref_q, ref_q) == float("inf")
    assert bench.sqnr_db([ref_q[0] * 1.1], ref_q) == pytest.approx(20.0)  # noise = 0.1 x signal
    good = bench.compare_int8([[ref_q[0].copy()], [ref_q[0] * 1.01]], ref_q, ref_fp, 15.0)
    assert good["output_ok"] is True and good["reference"] == "pt2e"
    assert good["sqnr_db"] == pytest.approx(40.0)  # the worse of the two calls
    assert good["sqnr_vs_fp32_db"] < good["sqnr_db"] + 1e-9
    bad = bench.compare_int8([[ref_q[0] * 1.3]], ref_q, ref_fp, 15.0)
    assert bad["output_ok"] is False and bad["sqnr_db"] < 15
    nan = bench.compare_int8([[np.full((4, 10), np.nan, np.float32)]], ref_q, ref_fp, 15.0)
    assert nan["output_ok"] is False
    assert bench.compare_int8([[np.zeros((10, 4), np.float32)]], ref_q, ref_fp, 15.0)["output_ok"] is False


def test_summary_keeps_int8_and_fp32_apart() -> None:
    def row(engine: str, ms: float, file: int, int8: bool = False, peer: bool = True) -> dict[str, object]:
        return {"model": "m", "engine": engine, "peer": peer, "int8": int8, "status": "ok", "median_ms": ms,
                "output_ok": True, "file_bytes": file, "sqnr_db": 40.0 if int8 else None}

    rows = [row("et_xnnpack", 2.0, 400), row("et_xnnpack_int8", 0.5, 100, int8=True),
            row("ort", 3.0, 400), row("ort_int8", 1.0, 110, int8=True),
            row("openaccel", 2.5, 420, peer=False), row("openaccel_int8", 1.5, 105, int8=True, peer=False)]
    (s,) = bench.summarize(rows, ["m"], {"m": {"sqnr_vs_fp32_db": 30.0}})
    assert s["best_peer"] == "et_xnnpack" and s["ratio_to_best_peer"] == pytest.approx(1.25)  # not the int8 one
    assert s["best_int8_peer"] == "et_xnnpack_int8" and s["int8_ratio_to_best_int8_peer"] == pytest.approx(3.0)
    fam = s["int8_vs_fp32"]
    assert set(fam) == {"et_xnnpack", "ort", "openaccel"}
    assert fam["ort"]["time_ratio"] == pytest.approx(1 / 3) and fam["ort"]["file_ratio"] == pytest.approx(0.275)
    assert fam["openaccel"]["int8_engine"] == "openaccel_int8" and s["pt2e_sqnr_vs_fp32_db"] == 30.0


def test_rounds_merge_into_the_median_of_medians() -> None:
    def cell(med: float, lo: float, hi: float) -> dict[str, object]:
        return {"median_ms": med, "min_ms": lo, "mean_ms": med, "max_ms": hi, "runs": 3, "warmup_runs": 1,
                "capped": False, "outputs": [["first"], ["last"]]}

    merged = bench.merge_rounds([{"a": cell(2.0, 1.5, 3.0)}, {"a": cell(5.0, 4.0, 9.0)}, {"a": cell(3.0, 2.5, 4.0)}])
    a = merged["a"]
    assert a["median_ms"] == 3.0 and a["min_ms"] == 1.5 and a["max_ms"] == 9.0 and a["runs"] == 9
    assert a["round_median_ms"] == [2.0, 5.0, 3.0]


@pytest.mark.slow
def test_harness_reports_unexportable_models(tmp_path: Path) -> None:
    """An engine that cannot export a model is a 'n/a (reason)' cell, and the run goes on."""
    p = _run([str(BENCH / "run.py"), "--models", "mlp,gpt", "--small", "--runs", "1", "--warmup", "1",
              "--budget", "1", "--engines", "eager,openaccel", "--no-rss", "--no-oa-run", "--rounds", "2",
              "--out", str(tmp_path), "--json", "-"])
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)  # with --json - the tables go to stderr
    assert "ms per run" in p.stderr
    rows = {(r["model"], r["engine"]): r for r in doc["results"]}
    assert rows[("mlp", "openaccel")]["status"] == "ok"
    assert rows[("gpt", "eager")]["status"] == "ok"
    assert len(rows[("mlp", "openaccel")]["round_median_ms"]) == 2  # --rounds 2
    mlp = next(s for s in doc["summary"] if s["model"] == "mlp")
    assert len(mlp["round_ratios"]) == 2 and "over 2 rounds" in p.stderr
    gpt = rows[("gpt", "openaccel")]
    if gpt["status"] != "ok":  # until every op of the GPT has a kernel
        assert gpt["reason"].startswith("export failed: UnsupportedOpError") and "aten." in gpt["reason"]
        assert "n/a [" in p.stderr


@pytest.mark.slow
def test_micro_benchmark_small(tmp_path: Path) -> None:
    out = tmp_path / "micro.json"
    p = _run([str(BENCH / "gemm.py"), "--small", "--runs", "2", "--warmup", "1", "--budget", "0.5",
              "--out", str(tmp_path), "--json", str(out)])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "GFLOP/s" in p.stdout and "openaccel kernels:" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["machine"]["model"] and doc["machine"]["kernel_isa"]
    # the roofline: % of the measured FMA peak of the ISA the kernels used
    isa = doc["machine"]["kernel_isa"]
    assert f"% of {isa} peak" in p.stdout and "fp32 FMA peak, 1 core: " in p.stdout
    assert doc["machine"]["fma_peak_gflops"][isa] > 0
    assert all(r["roofline_isa"] == isa and r["roofline_pct"] > 0 for r in doc["micro"])
    kinds = {r["kind"] for r in doc["micro"]}
    assert kinds == {"linear", "matmul", "conv2d"}
    for r in doc["micro"]:
        assert r["flops"] > 0 and r["torch_gflops"] > 0
        assert "reason" not in r, r
        assert r["openaccel_gflops"] > 0 and r["max_rel_error"] < 1e-4


# ---- quick checks of the pieces ----------------------------------------------------------------------
def test_compare_flags_wrong_outputs() -> None:
    ref = [np.ones((2, 3), np.float32)]
    assert bench.compare([[ref[0].copy()]], ref, 1e-3) == {"max_abs_error": 0.0, "output_ok": True}
    bad = bench.compare([[ref[0].copy()], [ref[0] + 0.5]], ref, 1e-3)
    assert bad["output_ok"] is False and bad["max_abs_error"] == pytest.approx(0.5)
    assert bench.compare([[np.ones((3, 2), np.float32)]], ref, 1e-3)["output_ok"] is False
    nan = bench.compare([[np.full((2, 3), np.nan, np.float32)]], ref, 1e-3)
    assert nan["output_ok"] is False


def test_summary_uses_only_correct_peers() -> None:
    def row(engine: str, ms: float, ok: bool = True, peer: bool = True) -> dict[str, object]:
        return {"model": "m", "engine": engine, "peer": peer, "status": "ok", "median_ms": ms, "output_ok": ok}

    rows = [row("eager", 4.0), row("ort", 1.0, ok=False), row("et_xnnpack", 2.0),
            row("openaccel", 3.0, peer=False)]
    (s,) = bench.summarize(rows, ["m"])
    assert s["best_peer"] == "et_xnnpack" and s["ratio_to_best_peer"] == pytest.approx(1.5)
    assert s["ratio_to_eager"] == pytest.approx(0.75)


def test_time_cell_respects_budget() -> None:
    calls = []

    def run() -> list[np.ndarray]:
        calls.append(1)
        return [np.zeros(1)]

    res = bench.time_cell(run, runs=5, warmup=3, budget=10)
    assert res["runs"] == 5 and res["warmup_runs"] == 3 and len(calls) == 8 and not res["capped"]
    res = bench.time_cell(run, runs=1000, warmup=1, budget=0.0)
    assert res["runs"] == 1 and res["capped"]


def test_first_line_lists_unsupported_ops() -> None:
    from openaccel.errors import UnsupportedOpError

    e = UnsupportedOpError("the runtime has no kernel for 2 op(s) in this model:\n"
                           "  aten.add.Tensor  (first used at x.py:1)\n  aten.gelu.default  (first used at x.py:2)\n"
                           "See docs/ops.md for the supported op set.")
    assert bench.first_line(e) == ("UnsupportedOpError: the runtime has no kernel for 2 op(s) in this model: "
                                   "aten.add.Tensor, aten.gelu.default")


@pytest.mark.slow
def test_per_layer_benchmark_mlp_small(tmp_path: Path) -> None:
    out = tmp_path / "layers.json"
    p = _run([str(BENCH / "layers.py"), "--model", "mlp", "--small", "--engines", "eager,openaccel",
              "--runs", "2", "--warmup", "1", "--budget", "0.2", "--json", str(out)])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["layer"] for r in rows] == ["linear 784->512 x1 rows", "linear 512->512 x1 rows",
                                          "linear 512->10 x1 rows"]
    assert all(r["count"] == 1 and set(r["ms"]) == {"eager", "openaccel"} for r in rows)
    assert all(v is not None and v > 0 for r in rows for v in r["ms"].values())
    assert "openaccel / best peer" in p.stdout
    assert [r["flops"] for r in rows] == [2 * 784 * 512, 2 * 512 * 512, 2 * 512 * 10]
    isa = json.loads(out.read_text())["machine"]["kernel_isa"]
    assert f"% of {isa} peak" in p.stdout and all(r["roofline_pct"] > 0 for r in rows)


def test_fma_peak_program_reports_each_isa_of_this_cpu() -> None:
    """benchmarks/peak/fma_peak.c builds warning-free with the host compiler and measures at least the
    scalar peak, plus AVX2+FMA / AVX-512 / NEON where the CPU has them (names as kernel_isa gives)."""
    import platform

    sys.path.insert(0, str(BENCH))
    import peak

    peaks = peak.measure(seconds=0.02)
    assert peaks["portable C"] > 0
    from openaccel.hostinfo import host_cpu

    ext = host_cpu().vector_extensions
    if platform.machine() == "x86_64":
        assert ("avx2+fma" in peaks) == ("avx2" in ext and "fma" in ext)
        assert ("avx512" in peaks) == ("avx512f" in ext)
    assert all(v > 0 for v in peaks.values()), peaks
    assert peak.roofline(45.0, "avx2+fma", {"avx2+fma": 90.0}) == 50.0
    assert peak.roofline(45.0, "avx512", {"avx2+fma": 90.0}) is None
    assert peak.roofline_cell(None, "avx2+fma", {"avx2+fma": 90.0}) == "n/a"
    assert "avx2+fma 90.0 (roofline)" in peak.peak_line({"portable C": 11.0, "avx2+fma": 90.0}, "avx2+fma")


def test_gemm_ceiling_program_measures_the_tile_and_the_whole_gemm() -> None:
    """benchmarks/peak/gemm_ceiling.c builds warning-free against the host runtime and reports the
    four steps (tile in L1, tile with B from L2, 1024^3 with pre-packed and with packed-per-run B)
    for the ISA the kernels use, each a positive GFLOP/s below twice this core's FMA peak."""
    sys.path.insert(0, str(BENCH))
    import peak

    got = peak.measure_ceiling(seconds=0.01, repeats=1)
    assert set(got["gflops"]) == set(peak.CEILING_CASES), got
    peaks = peak.measure(seconds=0.02)
    assert got["peak_isa"] in peaks, (got, peaks)  # an ISA this CPU runs
    assert all(0 < g < 2 * peaks[got["peak_isa"]] for g in got["gflops"].values()), (got, peaks)
    assert got["kc"]["tile_l1"] in (128, 256) and got["kc"]["gemm_linear"] > 0


def test_peers_isa_refuses_what_it_cannot_hold() -> None:
    import peer_isa

    with pytest.raises(peer_isa.PeerIsaError, match="ort_int8"):
        peer_isa.check_engines(["openaccel", "ort_int8"])
    with pytest.raises(peer_isa.PeerIsaError, match="avx512"):
        peer_isa.environment("avx512")
    assert peer_isa.environment("avx2")["ATEN_CPU_CAPABILITY"] == "avx2"


def test_peers_isa_checks_the_cpuinfo_layout_before_writing() -> None:
    import peer_isa

    off = peer_isa.cpuinfo_offsets()
    flags = {"pni", "ssse3", "sse4_1", "sse4_2", "avx", "fma", "f16c", "avx2"}
    isa = [0] * 64
    for name in flags:
        isa[off[name]] = 1
    assert peer_isa.layout_errors(isa, flags) == []
    shifted = [0, *isa[:-1]]  # one field more in front: every checked byte moves
    assert peer_isa.layout_errors(shifted, flags)
    assert any("avx512f" in e for e in peer_isa.layout_errors(isa, flags | {"avx512f"}))


@pytest.mark.skipif(importlib.util.find_spec("executorch") is None, reason="ExecuTorch not installed")
def test_peers_isa_clears_executorchs_flags_in_a_fresh_process() -> None:
    """ExecuTorch's cpuinfo in this process: its layout matches this CPU's flags and, after
    restrict_executorch, nothing above AVX2 is left (on an AVX2-only CPU nothing is cleared)"""
    code = (
        "import ctypes, json, peer_isa\n"
        "cleared = peer_isa.restrict_executorch()\n"
        "import importlib.util, pathlib\n"
        "d = pathlib.Path(list(importlib.util.find_spec('executorch').submodule_search_locations)[0])\n"
        "lib = ctypes.CDLL(str(d / 'lib' / 'libexecutorch_threadpool.so'))\n"
        "isa = (ctypes.c_uint8 * 64).from_address(ctypes.addressof(ctypes.c_uint8.in_dll(lib, 'cpuinfo_isa')))\n"
        "print(json.dumps({'cleared': cleared, 'bytes': list(isa)}))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BENCH), str(ROOT / "sdk")]))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    import peer_isa

    off = peer_isa.cpuinfo_offsets()
    assert got["bytes"][off["avx2"]] == 1
    for name in ("avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8", "amx_tile"):
        assert got["bytes"][off[name]] == 0, name
    flags = peer_isa.cpu_flags()
    above = [n for n in off if n in flags and (29 <= off[n] < 56 or n == "avx_vnni")]
    assert sorted(got["cleared"]) == sorted(above)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("executorch") is None, reason="ExecuTorch not installed")
def test_harness_peers_isa_small(tmp_path: Path) -> None:
    """run.py --peers-isa avx2 end to end: it re-executes itself with PyTorch's ISA variables, says
    which flags it cleared, and records the ISA; ONNX Runtime is refused with the reason"""
    out = tmp_path / "results.json"
    p = _run([str(BENCH / "run.py"), "--models", "mlp", "--small", "--runs", "2", "--warmup", "1", "--budget", "1",
              "--engines", "eager,et_xnnpack,openaccel", "--no-rss", "--no-oa-run", "--peers-isa", "avx2",
              "--out", str(tmp_path), "--json", str(out)])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = " ".join(p.stdout.split())
    assert "openaccel kernels: avx2 (--peers-isa)" in text and "held to avx2" in text
    doc = json.loads(out.read_text())
    assert doc["meta"]["peers_isa"] == "avx2"
    assert all(r["status"] == "ok" for r in doc["results"]), doc["results"]
    p = _run([str(BENCH / "run.py"), "--models", "mlp", "--small", "--engines", "openaccel,ort", "--peers-isa", "avx2",
              "--out", str(tmp_path)])
    assert p.returncode != 0 and "ONNX Runtime has no switch" in p.stderr, p.stderr[-2000:]
