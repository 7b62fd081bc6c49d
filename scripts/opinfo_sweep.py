#!/usr/bin/env python3
"""PyTorch's own OpInfo samples through openaccel (issue 16's acceptance sweep).

For every op of `torch.testing._internal.common_methods_invocations.op_db` that supports float32 on
the CPU, the first samples (3 by default) are each wrapped in a module whose inputs are the sample's
tensors, exported with torch.export, then with `oa.export`, loaded on the host with `oa.load`, run
and compared with eager at rtol = atol = 1e-4 (dtype and shape must match too).

Each op gets one category (the worst of its samples):
  match           every sample that torch.export can export gives eager's answer
  refused         oa.export refused a sample with an OpenAccelError (the op(s) it names are counted)
  export-failed   torch.export (or ExecuTorch's to_edge, before any openaccel rule runs) cannot
                  export any sample (left out of the figures)
  skipped         complex outputs, uninitialized memory (empty, ...) or no samples (left out)
  wrong           a sample ran and gave another answer than eager (a bug)
  crash           anything else: an exception that is not an OpenAccelError, a failure at load /
                  prepare / run, a dead worker or a time-out (a bug)

    PYTHONPATH=$PWD/sdk .venv/bin/python scripts/opinfo_sweep.py --jobs 2 --json build/opinfo.json
    PYTHONPATH=$PWD/sdk .venv/bin/python scripts/opinfo_sweep.py --ops 'add,nn.functional.*pool*' -v

Ops run in worker processes (`--jobs`), one op at a time each, with a per-op time-out; a worker that
dies or hangs is replaced and the op is counted as a crash.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import re
import select
import subprocess
import sys
import time
import traceback
from typing import Any

RTOL = ATOL = 1e-4
SAMPLES = 3
# ops whose result is uninitialized memory: no answer to compare with
UNINITIALIZED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
ORDER = ("crash", "wrong", "refused", "match", "export-failed", "skipped")
# an op an export error names: "  ns.op.overload  (first used at ...)" or "ns.op.overload is not supported: ..."
_OP_NAME = re.compile(r"([A-Za-z_]\w*\.\w+\.\w+)(?=\s+\(first used| is not supported)")


# ---- one op, in a worker ------------------------------------------------------------------------

def _op_db() -> dict[str, Any]:
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    out = {}
    for op in op_db:
        if torch.float32 in op.supported_dtypes("cpu"):
            out[op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")] = op
    return out


def _first_line(e: BaseException, chars: int = 300) -> str:
    text = str(e).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(e).__name__}: {line[:chars]}"


def _refused_ops(msg: str) -> list[str]:
    """The edge ops an export error names (sorted, unique); [] when it names none."""
    return sorted(set(_OP_NAME.findall(msg)))


def run_sample(op: Any, sample: Any) -> dict[str, Any]:
    """One sample: export, load, run, compare. Returns {"status": ..., ...}."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    import openaccel as oa

    leaves, spec = tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    tensors = tuple(leaves[i].detach().clone() for i in slots)
    fn = op.op

    class Sample(torch.nn.Module):
        def forward(self, *ts: torch.Tensor) -> Any:
            vals = list(leaves)
            for i, t in zip(slots, ts):
                vals[i] = t
            inp, args, kwargs = tree_unflatten(vals, spec)
            return fn(inp, *args, **kwargs)

    model = Sample().eval()
    try:
        with torch.no_grad():
            eager = model(*[t.clone() for t in tensors])
    except Exception as e:
        return {"status": "skipped", "why": f"eager failed: {_first_line(e)}"}
    want_leaves, _ = tree_flatten(eager)
    want = [x for x in want_leaves if isinstance(x, torch.Tensor)]
    if any(w.is_complex() for w in want):
        return {"status": "skipped", "why": "complex output"}
    try:
        ep = torch.export.export(model, tuple(t.clone() for t in tensors))
    except Exception as e:
        return {"status": "export-failed", "why": _first_line(e)}
    try:
        prog = oa.export(ep, tuple(t.clone() for t in tensors), bundle_tests=False)
    except oa.OpenAccelError as e:
        msg = str(e)
        if msg.startswith("to_edge failed"):  # ExecuTorch's conversion, before any openaccel rule
            return {"status": "export-failed", "why": _first_line(e, 600)}
        return {"status": "refused", "ops": _refused_ops(msg), "why": _first_line(e, 1500) if "\n" not in msg
                else f"{type(e).__name__}: " + " | ".join(ln.strip() for ln in msg.splitlines()[:4])}
    except Exception as e:
        return {"status": "crash", "where": "export", "why": _first_line(e),
                "trace": traceback.format_exc(limit=-4)}
    try:
        got = oa.load(prog)(*[t.clone() for t in tensors])
    except Exception as e:
        return {"status": "crash", "where": "load/run", "why": _first_line(e, 600), "ops": list(prog.ops)}
    if len(got) != len(want):
        return {"status": "wrong", "why": f"{len(got)} outputs, eager has {len(want)}", "ops": list(prog.ops)}
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype or tuple(g.shape) != tuple(w.shape):
            return {"status": "wrong", "ops": list(prog.ops),
                    "why": f"output {i}: {g.dtype} {tuple(g.shape)}, eager {w.dtype} {tuple(w.shape)}"}
        try:
            torch.testing.assert_close(g, w.contiguous(), rtol=RTOL, atol=ATOL, equal_nan=True)
        except AssertionError as e:
            detail = " ".join(str(e).split())[:400]
            return {"status": "wrong", "ops": list(prog.ops), "why": f"output {i}: {detail}"}
    return {"status": "match", "ops": list(prog.ops)}


def run_op(name: str, ops: dict[str, Any], samples: int = SAMPLES) -> dict[str, Any]:
    """Every sample of one op, and the op's category (the worst sample)."""
    import torch

    t0 = time.perf_counter()
    op = ops[name]
    res: dict[str, Any] = {"op": name, "samples": []}
    if name in UNINITIALIZED:
        res.update(status="skipped", why="uninitialized memory")
        return res
    try:
        torch.manual_seed(0)
        picked = []
        for s in op.sample_inputs("cpu", torch.float32, requires_grad=False):
            picked.append(s)
            if len(picked) == samples:
                break
    except Exception as e:
        res.update(status="skipped", why=f"sample_inputs failed: {_first_line(e)}")
        return res
    for s in picked:
        torch.manual_seed(0)
        res["samples"].append(run_sample(op, s))
    res.update(_category(res["samples"]))
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def _category(samples: list[dict[str, Any]]) -> dict[str, Any]:
    if not samples:
        return {"status": "skipped", "why": "no samples"}
    for status in ORDER:
        hit = [s for s in samples if s["status"] == status]
        if hit:
            out = {"status": status, "why": hit[0].get("why", "")}
            if status == "refused":
                out["ops"] = sorted({o for s in hit for o in s.get("ops", [])})
            return out
    raise AssertionError(samples)


def worker() -> None:
    """Read op names on stdin, write one JSON result per line to the original stdout; everything
    else that writes to stdout (torch, the C runtime) goes to stderr."""
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    ops = _op_db()
    proto.write(json.dumps({"ready": True}) + "\n")
    proto.flush()
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        try:
            res = run_op(name, ops)
        except Exception as e:
            res = {"op": name, "status": "crash", "why": f"sweep: {_first_line(e)}", "samples": []}
        proto.write(json.dumps(res) + "\n")
        proto.flush()


# ---- the parent: workers, time-outs, the report -------------------------------------------------

class Worker:
    def __init__(self, log: Any) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        self.op: str | None = None
        self.started = 0.0
        self.ready = False
        self.buf = ""

    def send(self, op: str) -> None:
        assert self.proc.stdin is not None
        self.op, self.started = op, time.monotonic()
        self.proc.stdin.write(op + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def sweep(names: list[str], jobs: int, timeout: float, verbose: bool = False,
          log_path: str | None = None) -> list[dict[str, Any]]:
    """Run `names` in `jobs` workers; results in the order given."""
    log = open(log_path or os.devnull, "a")  # closed below
    todo = collections.deque(names)
    results: dict[str, dict[str, Any]] = {}
    workers = [Worker(log) for _ in range(max(1, min(jobs, len(names))))]
    t0 = time.monotonic()
    try:
        while len(results) < len(names):
            for w in workers:
                if w.ready and w.op is None and todo:
                    w.send(todo.popleft())
            fds = {w.proc.stdout.fileno(): w for w in workers if w.proc.stdout is not None}
            ready, _, _ = select.select(list(fds), [], [], 1.0)
            for fd in ready:
                w = fds[fd]
                chunk = os.read(fd, 1 << 16).decode()
                if chunk:
                    w.buf += chunk
                    while "\n" in w.buf:
                        line, w.buf = w.buf.split("\n", 1)
                        msg = json.loads(line)
                        if msg.get("ready"):
                            w.ready = True
                            continue
                        results[msg["op"]] = msg
                        _progress(msg, len(results), len(names), t0, verbose)
                        w.op = None
                    continue
                # EOF: the worker died (a crash in the runtime, or killed)
                code = w.proc.wait()
                if w.op is not None:
                    msg = {"op": w.op, "status": "crash", "why": f"the worker died (exit status {code})",
                           "samples": []}
                    results[w.op] = msg
                    _progress(msg, len(results), len(names), t0, verbose)
                elif not w.ready:
                    raise RuntimeError(f"a sweep worker failed to start (exit status {code}); see --log")
                workers[workers.index(w)] = Worker(log)
            for i, w in enumerate(workers):
                if w.op is not None and time.monotonic() - w.started > timeout:
                    w.kill()
                    msg = {"op": w.op, "status": "crash", "why": f"time-out after {timeout:g} s", "samples": []}
                    results[w.op] = msg
                    _progress(msg, len(results), len(names), t0, verbose)
                    workers[i] = Worker(log)
    finally:
        for w in workers:
            if w.proc.poll() is None:
                if w.proc.stdin is not None:
                    w.proc.stdin.close()
                w.kill()
        log.close()
    return [results[n] for n in names]


def _progress(res: dict[str, Any], done: int, total: int, t0: float, verbose: bool) -> None:
    status = res["status"]
    extra = ""
    if status == "refused":
        extra = ", ".join(res.get("ops") or []) or res.get("why", "")[:160]
    elif status != "match" and (verbose or status in ("wrong", "crash")):
        extra = res.get("why", "")[:300]
    print(f"[{done}/{total} {time.monotonic() - t0:5.0f}s] {res['op']}: {status}"
          + (f" ({extra})" if extra else ""), flush=True)


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    counts = collections.Counter(r["status"] for r in results)
    causes: collections.Counter[str] = collections.Counter()
    for r in results:
        if r["status"] == "refused":
            named = r.get("ops") or _refused_ops(r.get("why", "").replace(" | ", "\n"))
            for o in named or ["(" + r.get("why", "")[:80] + ")"]:
                causes[o] += 1
    # where a rule exists but refuses the form: its reason ("aten.x is not supported: <why> (from ...)")
    partial: dict[str, str] = {}
    for r in results:
        for smp in r.get("samples", []):
            m = re.search(r"(\w+\.\w+\.\w+) is not supported: (.*?) \(from ", smp.get("why", ""))
            if smp["status"] == "refused" and m:
                partial.setdefault(m.group(1), m.group(2)[:160])
            elif smp["status"] == "refused" and "depend on the values of their inputs" in smp.get("why", ""):
                for o in smp.get("ops", []):  # refused before lowering (exporter/dynamic.py)
                    partial.setdefault(o, "its outputs depend on the values of its inputs (a size known only at "
                                          "run time, or a Python number read from a tensor)")
    considered = sum(counts[s] for s in ("match", "refused", "wrong", "crash"))
    return {"ops": considered, "total": len(results), "counts": {s: counts.get(s, 0) for s in ORDER},
            "refused_by_op": dict(causes.most_common()), "rule_refuses": partial,
            "wrong": [r["op"] for r in results if r["status"] == "wrong"],
            "crash": [r["op"] for r in results if r["status"] == "crash"]}


def select_ops(patterns: str | None, known: list[str]) -> list[str]:
    if not patterns:
        return known
    out: list[str] = []
    for p in (p.strip() for p in patterns.split(",")):
        hit = [n for n in known if fnmatch.fnmatchcase(n, p)]
        if not hit:
            raise SystemExit(f"--ops: no OpInfo op matches {p!r}")
        out += [n for n in hit if n not in out]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", help="comma-separated OpInfo names or globs (default: every float32 op)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per op before it counts as a crash")
    ap.add_argument("--json", metavar="OUT", help="write every result (per sample) and the summary here")
    ap.add_argument("--record", action="store_true",
                    help="write the figures to docs/opinfo_sweep.json (docs/ops.md shows them: run make docs)")
    ap.add_argument("--from-json", metavar="FILE", help="summarize (and --record) the results of an earlier --json")
    ap.add_argument("--log", metavar="FILE", help="workers' stderr (default: discarded)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the reason of every non-match")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.record and args.ops:
        ap.error("--record is for a full sweep (without --ops)")
    if args.from_json and args.ops:
        ap.error("--from-json takes the ops of the file")
    if args.worker:
        worker()
        return
    import warnings

    warnings.filterwarnings("ignore")
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)["results"]
    else:
        names = select_ops(args.ops, sorted(_op_db()))
        print(f"{len(names)} OpInfo ops, {args.jobs} job(s), {SAMPLES} samples each", flush=True)
        results = sweep(names, args.jobs, args.timeout, args.verbose, args.log)
    summary = summarize(results)
    c = summary["counts"]
    print(f"\n{summary['ops']} ops considered (of {summary['total']}): {c['match']} match, {c['refused']} refused "
          f"at export, {c['wrong']} wrong, {c['crash']} crash; left out: {c['export-failed']} torch.export / "
          f"to_edge failed, {c['skipped']} skipped (complex / uninitialized / no samples)")
    if summary["refused_by_op"]:
        print("refused ops (by number of OpInfo ops they block):")
        for o, n in list(summary["refused_by_op"].items())[:25]:
            print(f"  {n:4d}  {o}")
    for cat in ("wrong", "crash"):
        if summary[cat]:
            print(f"{cat}: {', '.join(summary[cat])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "results": results}, f, indent=1)
    if args.record:
        record(summary)
    sys.exit(1 if summary["wrong"] or summary["crash"] else 0)


def record(summary: dict[str, Any]) -> None:
    import datetime

    import torch

    from openaccel.coverage import SWEEP_SUMMARY

    out = {"date": datetime.date.today().isoformat(), "torch": torch.__version__.split("+")[0],
           "command": "PYTHONPATH=$PWD/sdk .venv/bin/python scripts/opinfo_sweep.py --jobs 2 --record",
           "samples": SAMPLES, "rtol": RTOL, "atol": ATOL, **summary}
    SWEEP_SUMMARY.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {SWEEP_SUMMARY}; regenerate docs/ops.md (make docs)")


if __name__ == "__main__":
    main()
